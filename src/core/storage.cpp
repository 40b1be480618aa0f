#include "attn/core/storage.h"

#include <cstdlib>
#include <new>

#include "attn/core/threads.h"

namespace attn {

Storage::Storage(std::size_t nbytes) : nbytes_(nbytes) {
  static const bool threads_ready = (init_threads_from_env(), true);
  (void)threads_ready;
  std::size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  data_ = std::aligned_alloc(kAlignment, rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Storage::~Storage() { std::free(data_); }

}  // namespace attn
