#include "mpi_comm.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "attn/core/error.h"

#ifdef ATTN_HAVE_MPI
#include <mpi.h>
#endif

namespace attn::cli {

bool launched_by_mpirun() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v && *v) return true;
  }
  return false;
}

std::string process_label() {
  if (!launched_by_mpirun()) return "";
  auto env = [](std::initializer_list<const char*> names) -> std::string {
    for (const char* name : names)
      if (const char* v = std::getenv(name); v && *v) return v;
    return "?";
  };
  return fmt::format("process {} of {}: ", env({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}),
                     env({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}));
}

#ifdef ATTN_HAVE_MPI

namespace {

// MPI counts are ints: big buffers go in pieces.
template <class T, class F>
void in_pieces(std::span<T> data, F f) {
  for (std::size_t at = 0; at < data.size();) {
    const std::size_t n = std::min<std::size_t>(data.size() - at, INT_MAX);
    f(data.data() + at, static_cast<int>(n));
    at += n;
  }
}

// ordered_sum's chain: process r receives the sum of processes 0..r-1, adds
// its own values and passes it on, a piece of 2^18 values at a time (the
// pieces flow down the chain one behind the other); the last process then
// holds the sums in rank order and sends them to all.
template <class T>
void chain_sum(std::span<T> data, MPI_Datatype type, int rank, int size) {
  constexpr std::size_t kPiece = std::size_t{1} << 18;
  std::vector<T> before(std::min(kPiece, data.size()));
  for (std::size_t at = 0; at < data.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, data.size() - at));
    T* mine = data.data() + at;
    if (rank > 0) {
      MPI_Recv(before.data(), n, type, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < n; ++i) mine[i] = before[static_cast<std::size_t>(i)] + mine[i];
    }
    if (rank + 1 < size) MPI_Send(mine, n, type, rank + 1, 0, MPI_COMM_WORLD);
  }
  in_pieces(data, [&](T* p, int n) { MPI_Bcast(p, n, type, size - 1, MPI_COMM_WORLD); });
}

class MpiWorld final : public optim::Communicator {
 public:
  MpiWorld() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allreduce_sum(std::span<float> data) override {
    in_pieces(data, [](float* p, int n) {
      MPI_Allreduce(MPI_IN_PLACE, p, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
  }
  void allreduce_sum(std::span<double> data) override {
    in_pieces(data, [](double* p, int n) {
      MPI_Allreduce(MPI_IN_PLACE, p, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    });
  }
  void ordered_sum(std::span<float> data) override { chain_sum(data, MPI_FLOAT, rank_, size_); }
  void ordered_sum(std::span<double> data) override { chain_sum(data, MPI_DOUBLE, rank_, size_); }
  void broadcast(std::span<float> data, int root) override {
    in_pieces(data, [root](float* p, int n) { MPI_Bcast(p, n, MPI_FLOAT, root, MPI_COMM_WORLD); });
  }
  void broadcast(std::string& bytes, int root) override {
    unsigned long long n = bytes.size();
    MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
    bytes.resize(static_cast<std::size_t>(n));
    in_pieces(std::span<char>(bytes.data(), bytes.size()),
              [root](char* p, int k) { MPI_Bcast(p, k, MPI_CHAR, root, MPI_COMM_WORLD); });
  }

 private:
  int rank_ = 0, size_ = 1;
};

MpiWorld* g_world = nullptr;

}  // namespace

optim::Communicator* mpi_world() {
  if (!launched_by_mpirun()) return nullptr;
  static MpiWorld world;
  g_world = &world;
  return &world;
}

int mpi_rank() { return g_world ? g_world->rank() : 0; }

void mpi_abort_world(int code) {
  if (g_world && g_world->size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

std::string mpi_description() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(std::max(len, 0)));
  v = v.substr(0, v.find_first_of(",\n"));
  return fmt::format("MPI: {} (mpirun -np N attn train ...: data-parallel training)", v);
}

#else  // built without MPI

optim::Communicator* mpi_world() {
  ATTN_CHECK(!launched_by_mpirun(), Error,
             "attn was started by mpirun but built without MPI (no Open MPI at configure time): "
             "each process would train alone; install libopenmpi-dev and rebuild");
  return nullptr;
}

int mpi_rank() { return 0; }

void mpi_abort_world(int) {}

std::string mpi_description() {
  return "MPI: not built in (one process; configure with Open MPI for mpirun)";
}

#endif

}  // namespace attn::cli
