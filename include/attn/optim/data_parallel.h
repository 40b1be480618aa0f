// attn/optim/data_parallel.h — data parallelism: the processes of a run and
// the sums they exchange.
//
// Each process computes the gradients of its rows of every batch; the sums
// over processes (an allreduce) are then every process's gradients, and each
// process takes the same optimizer step. The library holds no network code:
// a Communicator is what a program gives it (the attn program's is MPI's,
// apps/attn/mpi_comm.cpp); one process needs none.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::optim {

// The processes of a data-parallel run, numbered 0..size()-1. Every call is
// collective: each process makes the same calls in the same order with the
// same sizes, and each returns when all have made it (an error on any
// process ends the run, never a hang).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every process's data becomes the elementwise sum over processes.
  virtual void allreduce_sum(std::span<float> data) = 0;
  virtual void allreduce_sum(std::span<double> data) = 0;
  // In place: every process's data becomes the sum over processes taken in
  // rank order, ((x0 + x1) + x2) + ...: the same bits whatever the transport
  // or the timing, and those of one process adding the parts in that order.
  virtual void ordered_sum(std::span<float> data) = 0;
  virtual void ordered_sum(std::span<double> data) = 0;
  // In place: every process's data becomes process `root`'s.
  virtual void broadcast(std::span<float> data, int root) = 0;
  // Every process's `bytes` become process `root`'s (sizes may differ before).
  virtual void broadcast(std::string& bytes, int root) = 0;
};

// The rows [first, first + count) of `total` that process `rank` of `size`
// takes: contiguous, in rank order, sizes differing by at most 1 (a process
// may get none when total < size).
struct RowRange {
  std::int64_t first = 0, count = 0;
};
RowRange shard_rows(std::int64_t total, int rank, int size);

// How the processes' gradients are summed: ordered (ordered_sum: in rank
// order, so that N processes give the bits of one process with N
// micro-batches), or fast (allreduce_sum: the MPI library's own order,
// which for 3 or more processes rounds otherwise).
enum class ReduceOrder { ordered, fast };

// Sums every parameter's gradient over the processes, together with `extra`
// (losses, flags): one allreduce of one f32 buffer for the gradients (f32
// parameters; a parameter without a gradient contributes zeros and gets
// one), one of f64 for `extra`. The buffers are kept between calls in
// `buffer`.
void allreduce_gradients(Communicator& comm, const std::vector<Tensor>& params,
                         std::span<double> extra, std::vector<float>& buffer,
                         ReduceOrder order = ReduceOrder::ordered);

// Process 0's parameter values on every process.
void broadcast_parameters(Communicator& comm, const std::vector<Tensor>& params);

}  // namespace attn::optim
