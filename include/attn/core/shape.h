// attn/core/shape.h — shapes, strides and dimension arithmetic.
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

// A list of sizes or strides: std::vector's interface, with room for six
// entries inside the object. Every tensor has two of these, and an op makes a
// few tensors, so keeping them off the heap removes most of the allocations
// of small ops (decoding makes hundreds of them per token).
class Shape {
 public:
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = std::int64_t&;
  using const_reference = const std::int64_t&;
  using pointer = std::int64_t*;
  using const_pointer = const std::int64_t*;
  using iterator = std::int64_t*;
  using const_iterator = const std::int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  static constexpr std::size_t kInline = 6;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> v) { assign(v.begin(), v.end()); }
  explicit Shape(std::size_t n, std::int64_t value = 0) { assign(n, value); }
  template <std::input_iterator It>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<std::int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  Shape(const Shape& o) { assign(o.begin(), o.end()); }
  Shape(Shape&& o) noexcept { take(o); }
  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<std::int64_t> v) {
    assign(v.begin(), v.end());
    return *this;
  }
  ~Shape() { release(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t capacity() const { return cap_; }
  std::int64_t* data() { return data_; }
  const std::int64_t* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return data_; }
  const_iterator cend() const { return data_ + size_; }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }
  std::int64_t& operator[](std::size_t i) { return data_[i]; }
  const std::int64_t& operator[](std::size_t i) const { return data_[i]; }
  std::int64_t& front() { return data_[0]; }
  const std::int64_t& front() const { return data_[0]; }
  std::int64_t& back() { return data_[size_ - 1]; }
  const std::int64_t& back() const { return data_[size_ - 1]; }

  void reserve(std::size_t n) {
    if (n <= cap_) return;
    std::int64_t* p = new std::int64_t[n];
    std::copy(data_, data_ + size_, p);
    release();
    data_ = p;
    cap_ = n;
  }
  void clear() { size_ = 0; }
  void resize(std::size_t n, std::int64_t value = 0) {
    if (n > cap_) reserve(std::max(n, 2 * cap_));
    for (std::size_t i = size_; i < n; ++i) data_[i] = value;
    size_ = n;
  }
  void assign(std::size_t n, std::int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    size_ = 0;
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  void push_back(std::int64_t v) {
    if (size_ == cap_) reserve(2 * cap_);
    data_[size_++] = v;
  }
  std::int64_t& emplace_back(std::int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }
  iterator insert(const_iterator pos, std::int64_t v) { return insert(pos, std::size_t{1}, v); }
  iterator insert(const_iterator pos, std::size_t n, std::int64_t v) {
    const std::size_t at = static_cast<std::size_t>(pos - data_);
    resize(size_ + n);
    std::copy_backward(data_ + at, data_ + size_ - n, data_ + size_);
    std::fill(data_ + at, data_ + at + n, v);
    return data_ + at;
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const std::size_t at = static_cast<std::size_t>(pos - data_);
    const std::size_t n = static_cast<std::size_t>(std::distance(first, last));
    std::vector<std::int64_t> tmp(first, last);  // first..last may point into *this
    resize(size_ + n);
    std::copy_backward(data_ + at, data_ + size_ - n, data_ + size_);
    std::copy(tmp.begin(), tmp.end(), data_ + at);
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<std::int64_t> v) {
    return insert(pos, v.begin(), v.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const std::size_t at = static_cast<std::size_t>(first - data_);
    const std::size_t n = static_cast<std::size_t>(last - first);
    std::copy(data_ + at + n, data_ + size_, data_ + at);
    size_ -= n;
    return data_ + at;
  }

  operator std::vector<std::int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void release() {
    if (data_ != inline_) delete[] data_;
    data_ = inline_;
    cap_ = kInline;
  }
  void take(Shape& o) {  // *this is empty and inline
    if (o.data_ == o.inline_) {
      std::copy(o.inline_, o.inline_ + o.size_, inline_);
      data_ = inline_;
      cap_ = kInline;
    } else {
      data_ = o.data_;
      cap_ = o.cap_;
      o.data_ = o.inline_;
      o.cap_ = kInline;
    }
    size_ = o.size_;
    o.size_ = 0;
  }

  std::int64_t inline_[kInline];
  std::int64_t* data_ = inline_;
  std::size_t size_ = 0;
  std::size_t cap_ = kInline;
};

// Number of elements of a shape (1 for a scalar shape []).
std::int64_t shape_numel(const Shape& shape);

// Row-major strides, in elements.
Shape contiguous_strides(const Shape& shape);

// "[2, 3, 4]"
std::string shape_str(const Shape& shape);

// Wraps a possibly negative dim into [0, ndim); throws ValueError naming `op`.
std::int64_t normalize_dim(std::int64_t dim, std::int64_t ndim, std::string_view op);

// The broadcast of two shapes (numpy rules); throws ShapeError naming `op`.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

}  // namespace attn
