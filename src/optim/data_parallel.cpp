#include "attn/optim/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "attn/core/error.h"

namespace attn::optim {

RowRange shard_rows(std::int64_t total, int rank, int size) {
  ATTN_CHECK(size > 0 && rank >= 0 && rank < size && total >= 0, ValueError,
             "shard_rows: process {} of {} cannot take rows of {}", rank, size, total);
  const std::int64_t first = total * rank / size, next = total * (rank + 1) / size;
  return {first, next - first};
}

namespace {
void check_f32_contiguous(const Tensor& p) {
  ATTN_CHECK(p.dtype() == DType::f32 && p.is_contiguous(), ValueError,
             "data parallel: parameters must be contiguous f32, got {} {}", dtype_name(p.dtype()),
             shape_str(p.shape()));
}
}  // namespace

void allreduce_gradients(Communicator& comm, const std::vector<Tensor>& params,
                         std::span<double> extra, std::vector<float>& buffer, ReduceOrder order) {
  std::size_t total = 0;
  for (const Tensor& p : params) {
    check_f32_contiguous(p);
    total += static_cast<std::size_t>(p.numel());
  }
  buffer.resize(total);
  std::size_t at = 0;
  for (const Tensor& p : params) {
    const auto n = static_cast<std::size_t>(p.numel());
    const Tensor g = p.grad();
    if (g.defined())
      std::memcpy(buffer.data() + at, g.contiguous().data<float>(), n * sizeof(float));
    else
      std::fill_n(buffer.data() + at, n, 0.0f);
    at += n;
  }
  if (order == ReduceOrder::ordered) {
    comm.ordered_sum(std::span<float>(buffer));
    if (!extra.empty()) comm.ordered_sum(extra);
  } else {
    comm.allreduce_sum(std::span<float>(buffer));
    if (!extra.empty()) comm.allreduce_sum(extra);
  }
  // The sums go back into the gradients in place, unless a gradient is
  // missing, strided, or shares its memory with another parameter's.
  std::vector<const void*> written;
  at = 0;
  for (const Tensor& p : params) {
    const auto n = static_cast<std::size_t>(p.numel());
    Tensor g = p.grad();
    const bool shared =
        g.defined() && std::find(written.begin(), written.end(), g.raw_data()) != written.end();
    if (!g.defined() || !g.is_contiguous() || shared) {
      g = zeros(p.shape(), p.dtype());
      p.set_grad(g);
    }
    std::memcpy(g.data<float>(), buffer.data() + at, n * sizeof(float));
    written.push_back(g.raw_data());
    at += n;
  }
}

void broadcast_parameters(Communicator& comm, const std::vector<Tensor>& params) {
  for (const Tensor& p : params) {
    check_f32_contiguous(p);
    comm.broadcast(std::span<float>(p.data<float>(), static_cast<std::size_t>(p.numel())), 0);
  }
}

}  // namespace attn::optim
