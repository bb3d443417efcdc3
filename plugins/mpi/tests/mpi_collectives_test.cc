// The comm:: collectives on CPU tensors through the mpi plugin, as an
// application calls them. The same program runs as ctests with no launcher
// (a world of one), under `mpirun -np 2` and under `mpirun -np 3`; every
// rank runs every test, in the same order, as collectives require. Each
// rank's input is a known function of (rank, element), so every rank
// computes the expected result itself; AgreesWithMpiCalledDirectly also
// checks against MPI_Allreduce on the same data.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backplane/autograd/autograd.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"
#include "backplane/runtime/collectives.h"
#include "backplane/runtime/distributed_data_parallel.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "backplane/testing/collective_values.h"
#include "backplane/testing/errors.h"
#include "backplane/testing/plugin_environment.h"

namespace backplane {
namespace {

using testing::expectError;
using ::testing::HasSubstr;

bool isCase(const char* name) {
  const char* c = std::getenv("BACKPLANE_MPI_CASE");
  return c != nullptr && std::string(c) == name;
}

// In the case never_starts, rank 1 never loads its plugins, so never starts
// MPI (CollectiveFailures.ARankThatNeverStarts).
const auto* const kPlugins =
    &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH, BACKPLANE_MPI_PLUGIN_PATH, BACKPLANE_GPUSIM_PLUGIN_PATH})
         .beforeLoad([] {
           if (isCase("never_starts") && comm::world().rank() == 1)
             std::this_thread::sleep_for(std::chrono::seconds(120));
         });

// The simulator's device: no collectives of its own, so they fall back.
Device simulator() {
  static const Device d = Runtime(RuntimeOptions{.load_default_plugins = false}).device("gpusim:0");
  return d;
}

int rank() { return comm::world().rank(); }
int size() { return comm::world().size(); }

using testing::rankTensor;
using testing::rankValue;

std::vector<float> floats(const Tensor& t) { return t.to(ScalarType::Float32).contiguous().toVector<float>(); }

TEST(Collectives, TheWorldComesFromTheLauncher) {
  const comm::Group w = comm::world();
  EXPECT_EQ(w.id(), 0);
  EXPECT_GE(w.rank(), 0);
  EXPECT_LT(w.rank(), w.size());
  if (const char* s = std::getenv("OMPI_COMM_WORLD_SIZE"))
    EXPECT_EQ(w.size(), std::atoi(s));
  else
    EXPECT_EQ(w.size(), 1);
}

TEST(Collectives, AllReduceEachReduction) {
  const std::vector<int64_t> shape = {3, 5};
  for (comm::ReduceOp op :
       {comm::ReduceOp::Sum, comm::ReduceOp::Avg, comm::ReduceOp::Min, comm::ReduceOp::Max, comm::ReduceOp::Product}) {
    SCOPED_TRACE(comm::reduceOpName(op));
    Tensor t = rankTensor(rank(), shape, ScalarType::Float64);
    comm::allReduce_(t, op);
    const std::vector<float> got = floats(t);
    for (int64_t i = 0; i < 15; ++i) {
      const double want = testing::reducedValue(op, size(), i);
      EXPECT_NEAR(got[static_cast<size_t>(i)], want, 1e-6 * std::abs(want)) << "element " << i;
    }
  }
}

TEST(Collectives, AllReduceEveryDtype) {
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Int64,
                           ScalarType::Int32, ScalarType::Int16, ScalarType::Int8, ScalarType::UInt8}) {
    SCOPED_TRACE(dtype);
    Tensor t = ones({4}, {.dtype = dtype});
    comm::allReduce_(t);
    EXPECT_THAT(floats(t), ::testing::Each(static_cast<float>(size())));
  }
  // bool: max is "any rank true", min "every rank true".
  Tensor any = full({2}, rank() == 0, {.dtype = ScalarType::Bool});
  comm::allReduce_(any, comm::ReduceOp::Max);
  EXPECT_THAT(floats(any), ::testing::Each(1.0f));
  Tensor every = full({2}, rank() == 0, {.dtype = ScalarType::Bool});
  comm::allReduce_(every, comm::ReduceOp::Min);
  EXPECT_THAT(floats(every), ::testing::Each(size() == 1 ? 1.0f : 0.0f));
}

TEST(Collectives, FunctionalFormsLeaveTheirInputAlone) {
  const Tensor t = rankTensor(rank(), {6});
  const Tensor sum = comm::allReduce(t);
  EXPECT_EQ(floats(t), floats(rankTensor(rank(), {6})));
  float want = 0;
  for (int r = 0; r < size(); ++r) want += rankValue(r, 2);
  EXPECT_FLOAT_EQ(floats(sum)[2], want);
  const Tensor b = comm::broadcast(t, size() - 1);
  EXPECT_EQ(floats(b), floats(rankTensor(size() - 1, {6})));
}

TEST(Collectives, BroadcastFromEachRank) {
  for (int src = 0; src < size(); ++src) {
    Tensor t = rankTensor(rank(), {2, 3});
    comm::broadcast_(t, src);
    EXPECT_EQ(floats(t), floats(rankTensor(src, {2, 3}))) << "src " << src;
  }
}

TEST(Collectives, AllGatherConcatenatesAlongDim0) {
  const Tensor g = comm::allGather(rankTensor(rank(), {2, 3}));
  ASSERT_EQ(g.sizes(), IntArrayRef({2 * size(), 3}));
  for (int r = 0; r < size(); ++r) EXPECT_EQ(floats(g.narrow(0, 2 * r, 2)), floats(rankTensor(r, {2, 3})));
  // A 0-d tensor gathers into [size].
  const Tensor s = comm::allGather(full({}, rank() + 1.0));
  ASSERT_EQ(s.sizes(), IntArrayRef({size()}));
  for (int r = 0; r < size(); ++r) EXPECT_FLOAT_EQ(floats(s)[static_cast<size_t>(r)], r + 1.0f);
}

TEST(Collectives, ReduceScatterGivesEachRankItsBlock) {
  const int64_t block = 4;
  const Tensor out = comm::reduceScatter(rankTensor(rank(), {block * size()}));
  ASSERT_EQ(out.sizes(), IntArrayRef({block}));
  for (int64_t i = 0; i < block; ++i) {
    float want = 0;
    for (int r = 0; r < size(); ++r) want += rankValue(r, rank() * block + i);
    EXPECT_FLOAT_EQ(floats(out)[static_cast<size_t>(i)], want);
  }
}

TEST(Collectives, AllToAllExchangesBlocks) {
  // Block j of rank r holds 100 * r + j; after the exchange, block j of rank
  // r holds what rank j sent to r: 100 * j + r.
  std::vector<float> mine;
  for (int j = 0; j < size(); ++j) mine.insert(mine.end(), 2, 100.0f * rank() + j);
  const Tensor out = comm::allToAll(Tensor(tensorFromVector(mine, {2 * size()})));
  const std::vector<float> got = floats(out);
  for (int j = 0; j < size(); ++j) EXPECT_FLOAT_EQ(got[static_cast<size_t>(2 * j)], 100.0f * j + rank());
}

TEST(Collectives, NonContiguousTensorsAreStaged) {
  Tensor base = rankTensor(rank(), {4, 6});
  Tensor view = base.transpose(0, 1);  // [6, 4], not contiguous
  comm::allReduce_(view);
  for (int64_t i = 0; i < 24; ++i) {
    float want = 0;
    for (int r = 0; r < size(); ++r) want += rankValue(r, i);
    EXPECT_FLOAT_EQ(floats(base)[static_cast<size_t>(i)], want);
  }
}

TEST(Collectives, SendAndRecvAroundARing) {
  if (size() == 1) GTEST_SKIP() << "a rank cannot send to itself";
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  Tensor got = zeros({5});
  // Even ranks send first, so the ring cannot deadlock on rendezvous sends.
  if (rank() % 2 == 0) {
    comm::send(rankTensor(rank(), {5}), next, /*tag=*/7);
    comm::recv_(got, prev, 7);
  } else {
    comm::recv_(got, prev, 7);
    comm::send(rankTensor(rank(), {5}), next, 7);
  }
  EXPECT_EQ(floats(got), floats(rankTensor(prev, {5})));
}

TEST(Collectives, SubGroups) {
  // Every rank makes both groups, in the same order.
  std::vector<int> evens, last_two;
  for (int r = 0; r < size(); r += 2) evens.push_back(r);
  for (int r = std::max(0, size() - 2); r < size(); ++r) last_two.push_back(r);
  const comm::Group g1 = valueOrThrow(comm::newGroup(evens));
  const comm::Group g2 = valueOrThrow(comm::newGroup(last_two));
  EXPECT_NE(g1.id(), g2.id());
  if (g1.isMember()) {
    Tensor t = full({3}, 1.0);
    comm::allReduce_(t, comm::ReduceOp::Sum, g1);
    EXPECT_THAT(floats(t), ::testing::Each(static_cast<float>(evens.size())));
  } else {
    expectError([&] { comm::allReduce_(full({3}, 1.0), comm::ReduceOp::Sum, g1); }, absl::StatusCode::kInvalidArgument,
                {"is not a member of group"});
  }
  if (g2.isMember()) {
    const Tensor g = comm::allGather(full({1}, static_cast<double>(rank())), g2);
    EXPECT_EQ(floats(g).size(), last_two.size());
    EXPECT_FLOAT_EQ(floats(g).back(), static_cast<float>(size() - 1));
  }
  comm::barrier();
}

TEST(Collectives, DisagreeingRanksAllFailAndTheGroupStaysUsable) {
  if (size() == 1) GTEST_SKIP() << "one rank always agrees with itself";
  // Rank 0 reduces 4 elements, the others 5: every rank fails, naming each.
  Tensor t = ones({rank() == 0 ? 4 : 5});
  expectError([&] { comm::allReduce_(t); }, absl::StatusCode::kInvalidArgument, {"the ranks' calls disagree"});
  try {
    comm::allReduce_(t);
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("the ranks' calls disagree"));
    EXPECT_THAT(e.message(), HasSubstr("rank 0: comm::all_reduce_ on float32 [4]"));
    EXPECT_THAT(e.message(), HasSubstr("rank 1: comm::all_reduce_ on float32 [5]"));
  }
  // Different collectives: a broadcast against an all_reduce.
  expectError(
      [&] {
        Tensor x = ones({2});
        if (rank() == 0)
          comm::broadcast_(x, 0);
        else
          comm::allReduce_(x);
      },
      absl::StatusCode::kInvalidArgument, {"the ranks' calls disagree"});
  // The group still works.
  Tensor ok = ones({3});
  comm::allReduce_(ok);
  EXPECT_THAT(floats(ok), ::testing::Each(static_cast<float>(size())));
}

TEST(Collectives, EachRanksOwnArgumentsAreCheckedBeforeAnyCommunication) {
  expectError([] { comm::allReduce_(ones({2}, {.dtype = ScalarType::Int64}), comm::ReduceOp::Avg); },
              absl::StatusCode::kInvalidArgument, {"op='avg' averages floating tensors"});
  expectError([] { comm::broadcast_(ones({2}), size()); }, absl::StatusCode::kInvalidArgument, {"is not a rank of"});
  expectError([] { comm::allGatherOut(ones({2}), zeros({3})); }, absl::StatusCode::kInvalidArgument,
              {"needs an out of shape"});
  expectError([] { comm::allGatherOut(ones({2}), zeros({2 * size()}, {.dtype = ScalarType::Float64})); },
              absl::StatusCode::kInvalidArgument, {"a collective does not convert"});
  expectError([] { comm::reduceScatter(ones({})); }, absl::StatusCode::kInvalidArgument, {"self is 0-d"});
  if (size() > 1)
    expectError([] { comm::reduceScatter(ones({2 * size() + 1})); }, absl::StatusCode::kInvalidArgument,
                {"equal blocks"});
  expectError([] { comm::send(ones({2}), rank()); }, absl::StatusCode::kInvalidArgument, {"own rank"});
  expectError([] { comm::send(ones({2}), 0, comm::kMaxTag + 1); }, absl::StatusCode::kInvalidArgument,
              {"outside [0, 32767]"});
  expectError([] { Dispatcher::singleton().findOpOrThrow("comm::barrier").typed<void(int64_t)>().call(999); },
              absl::StatusCode::kNotFound, {"there is no process group 999"});
  expectError(
      [] {
        Dispatcher::singleton()
            .findOpOrThrow("comm::all_reduce_")
            .typed<Tensor(const Tensor&, std::string_view, int64_t)>()
            .call(ones({2}), "mean", 0);
      },
      absl::StatusCode::kInvalidArgument, {"unknown reduction 'mean'"});
  // Nothing above reached the engine, so the ranks are still in step.
  comm::barrier();
}

TEST(Collectives, AgreesWithMpiCalledDirectly) {
  Tensor t = randn({1000}, {.dtype = ScalarType::Float32});
  t.mul_(full({}, static_cast<double>(rank() + 1)));
  std::vector<float> direct = t.toVector<float>();
  comm::allReduce_(t);
  if (size() > 1) {  // the plugin has started MPI; call it on the same data
    MPI_Allreduce(MPI_IN_PLACE, direct.data(), 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  const std::vector<float> got = t.toVector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], direct[i], 1e-6f * std::abs(direct[i]) + 1e-6f);
}

TEST(Collectives, ADeviceWithoutAnEngineStagesThroughTheHost) {
  Tensor t = rankTensor(rank(), {4, 8}).to(simulator());
  Profiler profiler;
  comm::allReduce_(t);
  const Tensor gathered = comm::allGather(t);
  profiler.stop();
  EXPECT_EQ(t.device(), simulator());
  EXPECT_EQ(gathered.device(), simulator());
  float want = 0;
  for (int r = 0; r < size(); ++r) want += rankValue(r, 5);
  EXPECT_FLOAT_EQ(floats(t.to(Device(DeviceType::CPU)))[5], want);
  EXPECT_EQ(gathered.size(0), 4 * size());
  // The CPU fallback moved the tensor to the host and back, counted.
  const OpReport report = profiler.report();
  const OpStats* row = nullptr;
  for (const OpStats& r : report.ops)
    if (r.op == "comm::all_reduce_") row = &r;
  ASSERT_NE(row, nullptr) << report.table();
  EXPECT_EQ(row->cpu_fallback_calls, 1u) << report.table();
  EXPECT_EQ(row->fallback_bytes, 2u * 4 * 8 * sizeof(float)) << report.table();
}

TEST(Collectives, SeenByTheProfiler) {
  Profiler profiler;
  Tensor t = ones({8});
  comm::allReduce_(t);
  comm::barrier();
  profiler.stop();
  const OpReport report = profiler.report();
  EXPECT_NE(report.find("comm::all_reduce_", DispatchKey::CPU), nullptr) << report.table();
  EXPECT_NE(report.find("comm::barrier", DispatchKey::CPU), nullptr) << report.table();
}

// Note [Gradient buckets]: a two-layer network trained data parallel, each
// rank on its own 3 rows of the batch, gets the gradients one process gets
// on the whole batch (every rank computes those itself), float32 to 1e-6
// relative, in buckets small enough that there are several; two steps, so
// the buckets start afresh; rank 0's parameters reach every rank.
TEST(DistributedDataParallel, GradientsEqualOneProcessOnTheWholeBatch) {
  manualSeed(11);  // the same draws on every rank
  Tensor w1 = randn({16, 8}), b1 = randn({16}), w2 = randn({4, 16}), b2 = randn({4});
  const Tensor x = randn({3 * size(), 8}), y = randn({3 * size(), 4});
  const std::vector<Tensor> start = {w1.clone(), b1.clone(), w2.clone(), b2.clone()};
  if (rank() != 0) w1.fill_(0.5);  // replaced by rank 0's values
  for (Tensor* p : {&w1, &b1, &w2, &b2}) p->requires_grad_();
  auto loss = [&](const Tensor& xs, const Tensor& ys) {
    const Tensor out = linear(relu(linear(xs, w1, b1)), w2, b2);
    return mean(mul(sub(out, ys), sub(out, ys)));
  };
  parallel::DistributedDataParallel ddp({w1, b1, w2, b2},
                                        {.group = comm::world(), .bucket_cap_mb = 0.0003, .first_bucket_mb = 0.0001});
  EXPECT_EQ(floats(w1), floats(start[0]));
  EXPECT_GE(ddp.bucketCount(), 3u);
  EXPECT_EQ(ddp.bucketOfParameters().back(), 0u);  // the last parameter's gradient comes first
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    const std::vector<Tensor> whole = autograd::grad({loss(x, y)}, {w1, b1, w2, b2});
    for (Tensor* p : {&w1, &b1, &w2, &b2}) p->set_grad(Tensor());
    loss(x.narrow(0, 3 * rank(), 3), y.narrow(0, 3 * rank(), 3)).backward();
    ddp.finishGradientSync();
    const std::vector<Tensor> params = {w1, b1, w2, b2};
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> got = floats(params[i].grad()), want = floats(whole[i]);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < got.size(); ++k)
        EXPECT_NEAR(got[k], want[k], 1e-6 * std::abs(want[k]) + 1e-7) << "parameter " << i << " element " << k;
    }
    for (const parallel::DistributedDataParallel::BucketTimes& t : ddp.stepTimeline()) EXPECT_LE(t.started, t.ended);
  }
}

TEST(DistributedDataParallel, AParameterWithoutAGradientIsNamed) {
  Tensor used = ones({3}).requires_grad_(), unused = ones({2}).requires_grad_();
  parallel::DistributedDataParallel ddp({used, unused});
  sum(mul(used, 2.0)).backward();
  expectError([&] { ddp.finishGradientSync(); }, absl::StatusCode::kFailedPrecondition,
              {"parameter 1", "got no gradient in this step"});
  // The next step works.
  sum(add(mul(used, 2.0), sum(unused))).backward();  // d/d unused: 3 (one per element of used)
  ddp.finishGradientSync();
  EXPECT_THAT(floats(unused.grad()), ::testing::Each(3.0f));
  // Two backwards in one step (gradient accumulation) are refused, and so is
  // a finish with no backward; the step after each starts afresh.
  sum(add(used, sum(unused))).backward();
  sum(add(used, sum(unused))).backward();
  expectError([&] { ddp.finishGradientSync(); }, absl::StatusCode::kFailedPrecondition, {"arrived twice"});
  expectError([&] { ddp.finishGradientSync(); }, absl::StatusCode::kFailedPrecondition, {"with no backward"});
  used.set_grad(Tensor());
  unused.set_grad(Tensor());
  sum(add(used, sum(unused))).backward();
  ddp.finishGradientSync();
  EXPECT_THAT(floats(used.grad()), ::testing::Each(1.0f));
}

// Run by mpirun_case.py only (BACKPLANE_MPI_CASE names the case): rank 1
// never calls the collective; rank 0 must fail within its timeout and end
// the job, which would otherwise hang.
TEST(CollectiveFailures, ARankThatNeverArrives) {
  const char* c = std::getenv("BACKPLANE_MPI_CASE");
  if (c == nullptr || std::string(c) != "never_arrives") GTEST_SKIP() << "run by mpirun_case.py";
  const comm::Group pair = valueOrThrow(comm::newGroup({0, 1}, {.timeout_seconds = 2}));
  comm::barrier(pair);  // both ranks have made the pair's communicator
  comm::barrier();      // and the world's
  if (rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return;
  }
  // A send that nobody receives fails after the pair's own timeout (2 s).
  try {
    comm::send(ones({4}), 1, 0, pair);
    ADD_FAILURE() << "the send returned without a receiver";
  } catch (const Error& e) {
    std::fprintf(stderr, "CASE-SEND %s\n", e.message().c_str());
    EXPECT_EQ(e.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(e.message(), HasSubstr("waited 2.0 s for the receiver to take the header"));
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    comm::allReduce_(ones({4}));
    ADD_FAILURE() << "the all_reduce returned without rank 1";
  } catch (const Error& e) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "CASE-RESULT rank 0 failed after %.1f s: %s\n", waited, e.message().c_str());
    EXPECT_EQ(e.code(), absl::StatusCode::kDeadlineExceeded);
  }
  // A later call fails at once, naming why.
  expectError([] { comm::barrier(); }, absl::StatusCode::kFailedPrecondition, {"timed out"});
  std::fflush(nullptr);
  std::_Exit(3);  // as an application would: mpirun then ends rank 1
}

// Rank 1 never loads its plugins, so never starts MPI: rank 0 waits in
// MPI_Init (when its mpi plugin loads), whose watchdog ends the process
// after the timeout. The test itself is never reached.
TEST(CollectiveFailures, ARankThatNeverStarts) {
  if (!isCase("never_starts")) GTEST_SKIP() << "run by mpirun_case.py";
  ADD_FAILURE() << "rank " << rank() << " loaded its plugins although rank 1 never started MPI";
}

// Rank 1 dies before the collective; mpirun ends the job instead of rank 0
// waiting for it.
TEST(CollectiveFailures, ARankThatDies) {
  const char* c = std::getenv("BACKPLANE_MPI_CASE");
  if (c == nullptr || std::string(c) != "dies") GTEST_SKIP() << "run by mpirun_case.py";
  comm::barrier();
  if (rank() == 1) std::_Exit(9);
  Tensor t = ones({4});
  comm::allReduce_(t);
  ADD_FAILURE() << "the all_reduce returned without rank 1";
}

}  // namespace
}  // namespace backplane
