// attn bench allreduce — under mpirun: the time to sum a buffer of floats
// over the processes, MPI_Allreduce (what `attn train --reduce fast` uses)
// against the ordered sum (the default: rank order, the same bits as one
// process with --accum-steps N), for message sizes from 4 KB up.
#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench_timing.h"
#include "commands.h"
#include "mpi_comm.h"

namespace attn::cli {
namespace {

struct AllreduceBenchOptions {
  std::int64_t max_bytes = std::int64_t{64} << 20;
  int repeats = 11;
  bool json = false;
};

int run_allreduce(const AllreduceBenchOptions& o) {
  optim::Communicator* comm = mpi_world();
  if (!comm || comm->size() < 2)
    throw Error(
        "bench allreduce: run it under mpirun with 2 or more processes (mpirun -np 2 attn bench "
        "allreduce)");
  const bool printer = comm->rank() == 0;
  if (printer && !o.json)
    fmt::print(
        "{} processes; milliseconds, median of {} (each after a barrier)\n{:>10} {:>12} "
        "{:>12} {:>8} {:>14}\n",
        comm->size(), o.repeats, "bytes", "allreduce", "ordered", "ratio", "ordered GB/s");
  std::vector<double> barrier(1);
  auto sync = [&] { comm->allreduce_sum(std::span<double>(barrier)); };
  for (std::int64_t bytes = 4096; bytes <= o.max_bytes; bytes *= 4) {
    std::vector<float> data(static_cast<std::size_t>(bytes / 4), 1.0f);
    const std::span<float> d(data);
    const double fast = median_ms(
        o.repeats, [&] { comm->allreduce_sum(d); }, sync);
    const double ordered = median_ms(
        o.repeats, [&] { comm->ordered_sum(d); }, sync);
    if (!printer) continue;
    const double gbs = static_cast<double>(bytes) / (ordered * 1e-3) / 1e9;
    if (o.json) {
      fmt::print("{}\n", nlohmann::json{{"bytes", bytes},
                                        {"processes", comm->size()},
                                        {"allreduce_ms", fast},
                                        {"ordered_ms", ordered}}
                             .dump());
    } else {
      fmt::print("{:>10} {:>12.3f} {:>12.3f} {:>8.2f} {:>14.2f}\n", bytes, fast, ordered,
                 ordered / fast, gbs);
    }
  }
  return 0;
}

void setup_bench_allreduce(CLI::App& parent, Context& ctx) {
  CLI::App* sub = parent.add_subcommand(
      "allreduce",
      "Under mpirun: the gradients' sum over the processes, MPI_Allreduce against the ordered "
      "sum, by message size");
  auto o = std::make_shared<AllreduceBenchOptions>();
  sub->add_option("--max-bytes", o->max_bytes, "The largest message (sizes 4 KB, x4, up to this)")
      ->check(in_range(std::int64_t{4096}, std::int64_t{1} << 32))
      ->capture_default_str();
  sub->add_option("--repeats", o->repeats, "Timed runs per size; the median is reported")
      ->check(in_range(1, 100000))
      ->capture_default_str();
  sub->add_flag("--json", o->json, "One JSON line per size: bytes, allreduce_ms, ordered_ms");
  set_action(sub, ctx, [o](const Context&) { return run_allreduce(*o); });
}

const Registration bench_allreduce_registration{"bench", "allreduce", 1, setup_bench_allreduce};

}  // namespace
}  // namespace attn::cli
