// The comm:: collectives on CUDA tensors (Note [NCCL engine] in
// plugins/cuda/nccl_engine.cu), on a machine with a GPU (every test skips
// without one). Run with no launcher it is a world of one: NCCL serves the
// calls on the GPU, with no host<->device traffic. Run under `mpirun -np 2`
// on one GPU, both ranks hold cuda:0, which NCCL refuses to share: the
// engine declines and the host stages the calls through host memory and the
// CPU engine, counted in the profiler. Either way the results are what every
// rank computes itself from the other ranks' known inputs. With
// BACKPLANE_NCCL_LIBRARY naming a file that does not exist, the engine has
// no NCCL and every call is staged too.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backplane/ops/ops.h"
#include "backplane/runtime/collectives.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "backplane/testing/collective_values.h"
#include "backplane/testing/errors.h"
#include "backplane/testing/plugin_environment.h"

namespace backplane {
namespace {

using testing::expectError;

const auto* const kPlugins = &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH,
#ifdef BACKPLANE_MPI_PLUGIN_PATH
                                                             BACKPLANE_MPI_PLUGIN_PATH,
#endif
                                                             BACKPLANE_CUDA_PLUGIN_PATH});

bool hasCuda() {
  static const bool has = [] {
    for (const DeviceInfo& d : Runtime(RuntimeOptions{.load_default_plugins = false}).devices())
      if (d.device.str() == "cuda:0") return true;
    return false;
  }();
  return has;
}
const Device kCuda = Device::fromString("cuda:0");

int rank() { return comm::world().rank(); }
int size() { return comm::world().size(); }

// Whether this run's calls are staged: every rank uses cuda:0, so two or
// more ranks share it, or NCCL was pointed at a file that is not there.
bool staged() {
  const char* lib = std::getenv("BACKPLANE_NCCL_LIBRARY");
  struct stat st {};
  return size() > 1 || (lib != nullptr && *lib != '\0' && stat(lib, &st) != 0);
}

#define SKIP_WITHOUT_CUDA() \
  if (!hasCuda()) GTEST_SKIP() << "no cuda:0 here"

using testing::rankValue;

// Rank r's tensor (collective_values.h) on the GPU.
Tensor rankTensor(int r, const std::vector<int64_t>& shape, ScalarType dtype = ScalarType::Float32) {
  return testing::rankTensor(r, shape, dtype).to(kCuda);
}

std::vector<float> floats(const Tensor& t) {
  return t.to(Device(DeviceType::CPU)).to(ScalarType::Float32).contiguous().toVector<float>();
}

const OpStats& row(const OpReport& report, const char* op) {
  for (const OpStats& r : report.ops)
    if (r.op == op) return r;
  ADD_FAILURE() << op << " is not in the report:\n" << report.table();
  static const OpStats none{};
  return none;
}

// NCCL on the GPU moves nothing through the host; the staged path moves
// the tensor there and back.
void expectPath(const OpStats& r, uint64_t tensor_bytes) {
  if (staged()) {
    EXPECT_EQ(r.cpu_fallback_calls, r.calls);
    EXPECT_GE(r.fallback_bytes, 2 * tensor_bytes);
  } else {
    EXPECT_EQ(r.cpu_fallback_calls, 0u);
    EXPECT_EQ(r.fallback_bytes, 0u);
  }
}

TEST(GpuCollectives, AllReduceEachReductionOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  for (comm::ReduceOp op :
       {comm::ReduceOp::Sum, comm::ReduceOp::Avg, comm::ReduceOp::Min, comm::ReduceOp::Max, comm::ReduceOp::Product}) {
    SCOPED_TRACE(comm::reduceOpName(op));
    Tensor t = rankTensor(rank(), {3, 5}, ScalarType::Float64);
    Profiler profiler;
    comm::allReduce_(t, op);
    profiler.stop();
    EXPECT_EQ(t.device(), kCuda);
    expectPath(row(profiler.report(), "comm::all_reduce_"), 15 * sizeof(double));
    const std::vector<float> got = floats(t);
    for (int64_t i = 0; i < 15; ++i) {
      const double want = testing::reducedValue(op, size(), i);
      EXPECT_NEAR(got[static_cast<size_t>(i)], want, 1e-6 * std::abs(want)) << "element " << i;
    }
  }
}

TEST(GpuCollectives, EveryDtype) {
  SKIP_WITHOUT_CUDA();
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float64,
                           ScalarType::Int64, ScalarType::Int32, ScalarType::Int8, ScalarType::UInt8}) {
    SCOPED_TRACE(dtype);
    Tensor t = ones({4}, {.dtype = dtype, .device = kCuda});
    comm::allReduce_(t);
    EXPECT_THAT(floats(t), ::testing::Each(static_cast<float>(size())));
  }
  // NCCL has no 16-bit integer reductions: declined, staged, still right.
  Tensor s = ones({4}, {.dtype = ScalarType::Int16, .device = kCuda});
  Profiler profiler;
  comm::allReduce_(s);
  profiler.stop();
  EXPECT_EQ(row(profiler.report(), "comm::all_reduce_").cpu_fallback_calls, 1u) << profiler.report().table();
  EXPECT_THAT(floats(s), ::testing::Each(static_cast<float>(size())));
  // bool: max is "any rank true", min "every rank true".
  Tensor any = full({2}, rank() == 0, {.dtype = ScalarType::Bool, .device = kCuda});
  comm::allReduce_(any, comm::ReduceOp::Max);
  EXPECT_THAT(floats(any), ::testing::Each(1.0f));
  Tensor every = full({2}, rank() == 0, {.dtype = ScalarType::Bool, .device = kCuda});
  comm::allReduce_(every, comm::ReduceOp::Min);
  EXPECT_THAT(floats(every), ::testing::Each(size() == 1 ? 1.0f : 0.0f));
}

TEST(GpuCollectives, GatherScatterAllToAllAndBroadcast) {
  SKIP_WITHOUT_CUDA();
  Profiler profiler;
  const Tensor g = comm::allGather(rankTensor(rank(), {2, 3}));
  const int64_t block = 4;
  const Tensor rs = comm::reduceScatter(rankTensor(rank(), {block * size()}));
  std::vector<float> mine;
  for (int j = 0; j < size(); ++j) mine.insert(mine.end(), 2, 100.0f * rank() + j);
  const Tensor a2a = comm::allToAll(Tensor(tensorFromVector(mine, {2 * size()})).to(kCuda));
  Tensor b = rankTensor(rank(), {2, 3});
  comm::broadcast_(b, size() - 1);
  profiler.stop();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&g, &rs, &a2a, &b}) EXPECT_EQ(t->device(), kCuda);
  ASSERT_EQ(g.sizes(), IntArrayRef({2 * size(), 3}));
  for (int r = 0; r < size(); ++r) EXPECT_EQ(floats(g.narrow(0, 2 * r, 2)), floats(rankTensor(r, {2, 3})));
  for (int64_t i = 0; i < block; ++i) {
    float want = 0;
    for (int r = 0; r < size(); ++r) want += rankValue(r, rank() * block + i);
    EXPECT_FLOAT_EQ(floats(rs)[static_cast<size_t>(i)], want);
  }
  for (int j = 0; j < size(); ++j) EXPECT_FLOAT_EQ(floats(a2a)[static_cast<size_t>(2 * j)], 100.0f * j + rank());
  EXPECT_EQ(floats(b), floats(rankTensor(size() - 1, {2, 3})));
  const OpReport report = profiler.report();
  expectPath(row(report, "comm::all_gather.out"), 6 * sizeof(float));
  expectPath(row(report, "comm::broadcast_"), 6 * sizeof(float));
}

TEST(GpuCollectives, NonContiguousTensorsAndTheStreamOrder) {
  SKIP_WITHOUT_CUDA();
  // The input is made by a kernel just queued, and read by one queued after.
  Tensor base = mul(rankTensor(rank(), {4, 6}), 2.0);
  Tensor view = base.transpose(0, 1);
  comm::allReduce_(view);
  const Tensor after = add(base, 1.0);
  for (int64_t i = 0; i < 24; ++i) {
    float want = 0;
    for (int r = 0; r < size(); ++r) want += 2 * rankValue(r, i);
    EXPECT_FLOAT_EQ(floats(after)[static_cast<size_t>(i)], want + 1);
  }
}

TEST(GpuCollectives, SendAndRecvAroundARing) {
  SKIP_WITHOUT_CUDA();
  if (size() == 1) GTEST_SKIP() << "a rank cannot send to itself";
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  Tensor got = zeros({5}, {.device = kCuda});
  if (rank() % 2 == 0) {
    comm::send(rankTensor(rank(), {5}), next, /*tag=*/7);
    comm::recv_(got, prev, 7);
  } else {
    comm::recv_(got, prev, 7);
    comm::send(rankTensor(rank(), {5}), next, 7);
  }
  EXPECT_EQ(floats(got), floats(rankTensor(prev, {5})));
}

TEST(GpuCollectives, DisagreeingRanksAllFail) {
  SKIP_WITHOUT_CUDA();
  if (size() == 1) GTEST_SKIP() << "one rank always agrees with itself";
  Tensor t = ones({rank() == 0 ? 4 : 5}, {.device = kCuda});
  expectError([&] { comm::allReduce_(t); }, absl::StatusCode::kInvalidArgument, {"the ranks' calls disagree"});
  Tensor ok = ones({3}, {.device = kCuda});
  comm::allReduce_(ok);
  EXPECT_THAT(floats(ok), ::testing::Each(static_cast<float>(size())));
}

}  // namespace
}  // namespace backplane
