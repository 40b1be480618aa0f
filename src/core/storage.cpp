#include "attn/core/storage.h"

#include <cstdlib>
#include <new>

namespace attn {

Storage::Storage(std::size_t nbytes) : nbytes_(nbytes) {
  std::size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  data_ = std::aligned_alloc(kAlignment, rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Storage::~Storage() { std::free(data_); }

}  // namespace attn
