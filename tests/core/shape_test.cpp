// Shape: std::vector's behaviour, inline up to six entries and on the heap beyond.
#include "attn/core/shape.h"

#include <map>
#include <utility>

#include "testing.h"

using attn::Shape;

namespace {
std::vector<std::int64_t> vec(const Shape& s) { return {s.begin(), s.end()}; }
}  // namespace

TEST(Shape, BehavesLikeAVectorInlineAndOnTheHeap) {
  for (std::size_t n : {0u, 1u, 5u, 6u, 7u, 13u, 40u}) {
    SCOPED_TRACE(n);
    Shape s;
    std::vector<std::int64_t> v;
    for (std::size_t i = 0; i < n; ++i) {
      s.push_back(static_cast<std::int64_t>(i * 3 + 1));
      v.push_back(static_cast<std::int64_t>(i * 3 + 1));
    }
    EXPECT_EQ(vec(s), v);
    EXPECT_EQ(s.size(), n);
    EXPECT_EQ(s.empty(), n == 0);
    // Copies and moves keep the contents and leave the source valid.
    Shape c = s;
    EXPECT_EQ(vec(c), v);
    Shape m = std::move(c);
    EXPECT_EQ(vec(m), v);
    EXPECT_TRUE(c.empty());  // NOLINT: moved-from is empty by design
    c.push_back(9);
    EXPECT_EQ(vec(c), std::vector<std::int64_t>{9});
    Shape a{1, 2};
    a = m;
    EXPECT_EQ(vec(a), v);
    a = std::move(m);
    EXPECT_EQ(vec(a), v);
    // insert / erase at the front, middle and end
    v.insert(v.begin(), 100);
    a.insert(a.begin(), 100);
    v.insert(v.begin() + v.size() / 2, 3, 7);
    a.insert(a.begin() + a.size() / 2, 3, 7);
    v.insert(v.end(), {5, 6});
    a.insert(a.end(), {5, 6});
    EXPECT_EQ(vec(a), v);
    v.erase(v.begin() + 1, v.begin() + 3);
    a.erase(a.begin() + 1, a.begin() + 3);
    v.erase(v.begin());
    a.erase(a.begin());
    EXPECT_EQ(vec(a), v);
    // inserting a range of itself
    v.insert(v.begin() + 1, v.begin(), v.end());
    a.insert(a.begin() + 1, a.begin(), a.end());
    EXPECT_EQ(vec(a), v);
    a.resize(2, -1);
    v.resize(2, -1);
    EXPECT_EQ(vec(a), v);
    a.resize(9, -1);
    v.resize(9, -1);
    EXPECT_EQ(vec(a), v);
  }
}

TEST(Shape, ConstructionComparisonAndConversion) {
  EXPECT_EQ(vec(Shape{2, 3}), (std::vector<std::int64_t>{2, 3}));  // a list, not (n, value)
  EXPECT_EQ(vec(Shape(3, 4)), (std::vector<std::int64_t>{4, 4, 4}));
  EXPECT_EQ(vec(Shape(2)), (std::vector<std::int64_t>{0, 0}));
  std::vector<std::int64_t> v = {1, 2, 3, 4, 5, 6, 7, 8};
  Shape s = v;
  EXPECT_EQ(static_cast<std::vector<std::int64_t>>(s), v);
  EXPECT_EQ(Shape(v.begin() + 2, v.end()), (Shape{3, 4, 5, 6, 7, 8}));
  EXPECT_NE((Shape{1, 2}), (Shape{1, 2, 3}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 3}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 2, 0}));
  std::map<Shape, int> keys = {{Shape{2, 3}, 1}, {Shape{2}, 2}};
  EXPECT_EQ(keys.at(Shape{2, 3}), 1);
  EXPECT_EQ(keys.begin()->second, 2);
  EXPECT_EQ(attn::shape_str(Shape{}), "[]");
  EXPECT_EQ(attn::shape_numel(Shape{2, 3, 4}), 24);
}
