// all_reduce through Backplane (comm::all_reduce_ on CPU tensors, the mpi
// plugin) against MPI_Allreduce called directly, in the same run, on the
// same buffers: a table like nccl-tests' (size, time, algorithm and bus
// bandwidth, a correctness column, the ratio). Run under mpirun:
//   mpirun -np 2 build-release/bench/comm/allreduce_bench [--iters N] [--max-bytes B]
// scripts/bench.sh does.
//
// Google Benchmark picks each benchmark's iteration count per process, and
// ranks that run different counts of a collective deadlock, so this program
// times a fixed count on every rank (as nccl-tests and the OSU benchmarks
// do): after a barrier, `iters` calls, and the slowest rank's mean is the
// figure. The two paths alternate by size, each repeated `reps` times, and
// the median of the repetitions is reported, so that a noisy neighbour lands
// on both.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/runtime/collectives.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call on the slowest rank for `iters` calls of `fn`.
template <typename Fn>
double timeCalls(int iters, Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) fn();
  double mine = std::chrono::duration<double>(Clock::now() - start).count() / iters, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  int iters_small = 2000, reps = 5;
  int64_t max_bytes = int64_t{64} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters"))
      iters_small = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-bytes"))
      max_bytes = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
  }
  backplane::Runtime runtime;  // loads the plugins, the mpi plugin among them
  // Backplane starts MPI on its first collective (the mpi plugin), so the
  // direct calls below share that MPI, as an application that uses both would.
  backplane::comm::barrier();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    std::printf(
        "# all_reduce (sum, float32) across %d processes: Backplane's comm::all_reduce_ (cpu, mpi plugin) "
        "against MPI_Allreduce called directly; the slowest rank's mean per call, median of %d runs\n",
        size, reps);
    std::printf("# busbw = algbw * 2 (n-1) / n, as nccl-tests; ratio = MPI's time / Backplane's (>= 0.95 wanted)\n");
    std::printf("%12s %10s %10s %10s %10s %10s %10s %6s %7s %6s\n", "size(B)", "count", "mpi(us)", "mpi_algbw",
                "mpi_busbw", "bp(us)", "bp_busbw", "ratio", "+us", "check");
  }
  int failures = 0;
  for (int64_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
    const int64_t count = bytes / static_cast<int64_t>(sizeof(float));
    const int iters =
        static_cast<int>(std::max<int64_t>(5, std::min<int64_t>(iters_small, (int64_t{256} << 20) / bytes)));
    backplane::Tensor t = backplane::full({count}, 1.0);
    std::vector<float> direct(static_cast<size_t>(count), 1.0f);
    std::vector<double> mpi_times, bp_times;
    for (int r = 0; r < reps; ++r) {
      mpi_times.push_back(timeCalls(iters, [&] {
        MPI_Allreduce(MPI_IN_PLACE, direct.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }));
      bp_times.push_back(timeCalls(iters, [&] { backplane::comm::allReduce_(t); }));
    }
    // Correctness: a fresh all_reduce of rank + 1 must give n (n + 1) / 2.
    backplane::Tensor check = backplane::full({count}, rank + 1.0);
    backplane::comm::allReduce_(check);
    const std::vector<float> got = check.toVector<float>();
    const float want = static_cast<float>(size * (size + 1) / 2);
    bool ok = std::all_of(got.begin(), got.end(), [&](float v) { return v == want; });
    int all_ok = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    failures += all_ok ? 0 : 1;
    const double mpi = median(mpi_times), bp = median(bp_times);
    const double factor = size > 1 ? 2.0 * (size - 1) / size : 1.0;
    if (rank == 0) {
      std::printf("%12lld %10lld %10.2f %10.3f %10.3f %10.2f %10.3f %6.3f %7.2f %6s\n", static_cast<long long>(bytes),
                  static_cast<long long>(count), mpi * 1e6, bytes / mpi / 1e9, bytes / mpi / 1e9 * factor, bp * 1e6,
                  bytes / bp / 1e9 * factor, mpi / bp, (bp - mpi) * 1e6, all_ok ? "ok" : "WRONG");
    }
  }
  if (rank == 0) std::printf("# %s\n", failures ? "some sizes gave WRONG results" : "every result correct");
  return failures ? 1 : 0;
}
