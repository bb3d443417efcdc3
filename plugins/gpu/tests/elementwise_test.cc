// The GPU plugins' creation, elementwise and data-movement kernels on the
// simulator plugin, for what the conformance suite does not check: random
// draws equal to the CPU plugin's bit for bit for a seed (conformance only
// judges their statistics), big non-contiguous broadcasts through the
// general index path, the dense (vectorized and misaligned) paths at every
// tail length, 0-d tensors as fill values, and the errors of index values
// checked on the device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class GpusimKernelsTest : public gpu_test::GpusimSuite {
 protected:
};

using DrawFn = Tensor (*)(const Tensor&, uint64_t seed, uint64_t offset);

Tensor uniformDraw(const Tensor& t, uint64_t seed, uint64_t offset) {
  static auto op = Dispatcher::singleton()
                       .findOpOrThrow("bp::_philox_uniform_")
                       .typed<Tensor(const Tensor&, double, double, int64_t, int64_t)>();
  return op.call(t, -2.0, 3.0, static_cast<int64_t>(seed), static_cast<int64_t>(offset));
}
Tensor normalDraw(const Tensor& t, uint64_t seed, uint64_t offset) {
  static auto op = Dispatcher::singleton()
                       .findOpOrThrow("bp::_philox_normal_")
                       .typed<Tensor(const Tensor&, double, double, int64_t, int64_t)>();
  return op.call(t, 1.5, 0.5, static_cast<int64_t>(seed), static_cast<int64_t>(offset));
}
Tensor bernoulliDraw(const Tensor& t, uint64_t seed, uint64_t offset) {
  static auto op = Dispatcher::singleton()
                       .findOpOrThrow("bp::_philox_bernoulli_")
                       .typed<Tensor(const Tensor&, double, int64_t, int64_t)>();
  return op.call(t, 0.3, static_cast<int64_t>(seed), static_cast<int64_t>(offset));
}

TEST_F(GpusimKernelsTest, PhiloxDrawsEqualTheCpuPluginsForASeedInEveryDtypeAndLayout) {
  struct Case {
    const char* op;
    DrawFn draw;
    std::vector<ScalarType> dtypes;
  };
  const std::vector<ScalarType> floats = {ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32,
                                          ScalarType::Float64};
  const std::vector<Case> cases = {
      {"bp::_philox_uniform_", &uniformDraw, floats},
      {"bp::_philox_normal_", &normalDraw, floats},
      {"bp::_philox_bernoulli_",
       &bernoulliDraw,
       {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int8, ScalarType::Int32, ScalarType::Int64,
        ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64}},
  };
  for (const Case& c : cases) {
    expectNative(c.op);
    for (ScalarType dtype : c.dtypes) {
      // An odd element count (a partial last Philox block), contiguous and
      // transposed: element i is drawn from the same block and lane however
      // it is laid out.
      for (bool transposed : {false, true}) {
        SCOPED_TRACE(std::string(c.op) + " " + std::string(scalarTypeName(dtype)) + (transposed ? " transposed" : ""));
        Tensor on_cpu = empty({13, 7}, {dtype, cpu()});
        Tensor on_sim = empty({13, 7}, {dtype, sim()});
        if (transposed) {
          on_cpu = on_cpu.t();
          on_sim = on_sim.t();
        }
        c.draw(on_cpu, 20240607, 3);
        c.draw(on_sim, 20240607, 3);
        EXPECT_EQ(valuesOf(on_sim), valuesOf(on_cpu));
      }
    }
  }
}

TEST_F(GpusimKernelsTest, Float16AndBFloat16CastsFollowTheRuleEveryLayerShares) {
  // Casts between float32 and the 16-bit floats run the plugin's kernel and
  // give the bits core's and the SDK's types give (Note [16-bit float
  // conversions]), NaNs included; every float16 and bfloat16 pattern.
  expectNative("bp::_copy_on_device_");
  float16_test::expectFloat16ConversionsFollowTheRule(gpu_test::castsOn(sim()));
}

TEST_F(GpusimKernelsTest, IntegerArithmeticWrapsAroundAsOnTheCpu) {
  // Two's complement wrap-around, as PyTorch's (and without signed-overflow
  // undefined behaviour, which the sanitizer build of the simulator reports).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  const Tensor big = tensorFromVector<int64_t>({kMax, kMin, (int64_t{1} << 62) + 1, -3}, {4});
  const Tensor small = tensorFromVector<int32_t>({std::numeric_limits<int32_t>::max(), -7, 1 << 20, 0}, {4});
  for (const Tensor& host : {big, small}) {
    SCOPED_TRACE(scalarTypeName(host.dtype()));
    const Tensor dev = host.to(sim());
    EXPECT_EQ(valuesOf(dev + dev), valuesOf(host + host));
    EXPECT_EQ(valuesOf(dev * dev), valuesOf(host * host));
    EXPECT_EQ(valuesOf(dev.sub(dev.neg(), 3)), valuesOf(host.sub(host.neg(), 3)));
    EXPECT_EQ(valuesOf(dev.abs()), valuesOf(host.abs()));
    EXPECT_EQ(valuesOf(dev.pow(3)), valuesOf(host.pow(3)));
  }
}

// Comparisons convert both operands to their result_type first (Note
// [Comparison dtype]), as the CPU plugin does; the numbers an op writes
// into a tensor wrap into integer dtypes; signed zeros as PyTorch's CPU.
TEST_F(GpusimKernelsTest, ComparisonsClampAndSignedZerosFollowPyTorchAsOnTheCpu) {
  for (const char* op : {"bp::eq.Tensor_out", "bp::eq.Scalar_out", "bp::lt.Scalar_out", "bp::clamp.out",
                         "bp::maximum.out", "bp::abs.out", "bp::gelu.out"})
    expectNative(op);
  using D = std::vector<double>;
  const Tensor f = tensorFromVector<float>({0.1f, 0.2f}, {2}, sim());
  EXPECT_EQ(valuesOf(eq(f, tensorFromVector<double>({0.1}, {}, cpu()))), (D{1, 0}));        // in float32
  EXPECT_EQ(valuesOf(eq(f, tensorFromVector<double>({0.1, 0.1}, {2}, sim()))), (D{0, 0}));  // in float64
  const Tensor big = tensorFromVector<int64_t>({16777217, 16777218}, {2}, sim());
  EXPECT_EQ(valuesOf(eq(big, tensorFromVector<float>({16777216}, {}, cpu()))), (D{1, 0}));  // in float32
  const Tensor i8 = tensorFromVector<int8_t>({44, 127}, {2}, sim());
  EXPECT_EQ(valuesOf(eq(i8, tensorFromVector<int64_t>({300}, {}, cpu()))), (D{1, 0}));  // 300 is 44
  EXPECT_EQ(valuesOf(eq(i8, Scalar(int64_t{300}))), (D{1, 0}));
  const Tensor h = Tensor(tensorFromVector<float>({INFINITY, 65504}, {2}, cpu())).to(ScalarType::Float16).to(sim());
  EXPECT_EQ(valuesOf(lt(h, Scalar(1e5))), (D{0, 1}));  // 1e5 is inf
  const Tensor u8 = tensorFromVector<uint8_t>({0, 7, 250}, {3}, sim());
  EXPECT_EQ(valuesOf(clamp(u8, Scalar(int64_t{-6}))), (D{250, 250, 250}));  // -6 is 250
  const Tensor z = tensorFromVector<float>({-0.0f, 0.0f}, {2}, sim()),
               nz = tensorFromVector<float>({0.0f, -0.0f}, {2}, sim());
  auto signs = [&](const Tensor& t) {
    D s;
    for (double v : valuesOf(t)) s.push_back(std::signbit(v) ? -1 : 1);
    return s;
  };
  EXPECT_EQ(signs(abs(z)), (D{1, 1}));
  EXPECT_EQ(signs(maximum(z, nz)), (D{-1, 1}));
  EXPECT_EQ(signs(minimum(z, nz)), (D{-1, 1}));
  EXPECT_EQ(signs(gelu(z)), (D{-1, 1}));
}

TEST_F(GpusimKernelsTest, LargeNonContiguousBroadcastsMatchTheCpu) {
  expectNative("bp::add.out");
  expectNative("bp::where.self_out");
  // [40,1,300] transposed to [300,1,40] against a sliced [1,90,1]: no
  // dimension merges, so every element goes through the general index math.
  Tensor a = rand({40, 1, 300}, {ScalarType::Float32, cpu()}).transpose(0, 2);
  Tensor b = rand({1, 180, 1}, {ScalarType::Float32, cpu()}).slice(1, 0, std::nullopt, 2);
  Tensor cond = rand({300, 90, 1}, {ScalarType::Float32, cpu()}).gt(0.5);
  const Tensor sum = add(a.to(sim()), b.to(sim()));
  EXPECT_EQ(sum.device(), sim());
  EXPECT_EQ(std::vector<int64_t>(sum.sizes().begin(), sum.sizes().end()), (std::vector<int64_t>{300, 90, 40}));
  EXPECT_EQ(valuesOf(sum), valuesOf(add(a, b)));
  EXPECT_EQ(valuesOf(where(cond.to(sim()), a.to(sim()), b.to(sim()))), valuesOf(where(cond, a, b)));
  // Into a non-contiguous out: in place on a transposed view.
  Tensor target = zeros({40, 90, 300}, {ScalarType::Float32, sim()}).transpose(0, 2);
  target.add_(b.to(sim()));
  EXPECT_EQ(valuesOf(target), valuesOf(b.expand({300, 90, 40})));
}

// Note [Contiguous elementwise loops] in plugins/gpu/loops.cuh: dense
// operands take a vectorized path, dense ones not aligned to a 16-byte
// vector (a view starting at element 1) an unrolled one, and the rest the
// strided one. Whatever the path, and at every tail length, the numbers
// are the CPU plugin's.
TEST_F(GpusimKernelsTest, ElementwisePathsMatchTheCpuForDenseMisalignedAndStridedOperands) {
  expectNative("bp::add.out");
  expectNative("bp::exp.out");
  expectNative("bp::gt.Tensor_out");
  expectNative("bp::fill_.Scalar");
  expectNative("bp::_copy_on_device_");
  for (ScalarType dtype : {ScalarType::Float32, ScalarType::Float16, ScalarType::Int64, ScalarType::UInt8}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4096 + 5}}) {
      SCOPED_TRACE(std::string(scalarTypeName(dtype)) + " n=" + std::to_string(n));
      std::vector<float> values(static_cast<size_t>(2 * n + 2));
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 61) - 20.0f;
      const Tensor base_cpu = Tensor(tensorFromVector<float>(values, {2 * n + 2}, cpu())).to(dtype);
      const Tensor base_sim = base_cpu.to(sim());
      // The layouts, sliced on each device (a view keeps its offset).
      auto layouts = [n](const Tensor& base) {
        return std::vector<Tensor>{base.slice(0, 0, n), base.slice(0, 1, n + 1), base.slice(0, 0, 2 * n, 2)};
      };
      const std::vector<Tensor> on_cpu = layouts(base_cpu), on_sim = layouts(base_sim);
      for (size_t i = 0; i < on_cpu.size(); ++i) {
        for (size_t j = 0; j < on_cpu.size(); ++j) {
          SCOPED_TRACE("layouts " + std::to_string(i) + ", " + std::to_string(j));
          EXPECT_EQ(valuesOf(add(on_sim[i], on_sim[j])), valuesOf(add(on_cpu[i], on_cpu[j])));
          EXPECT_EQ(valuesOf(on_sim[i].gt(on_sim[j])), valuesOf(on_cpu[i].gt(on_cpu[j])));
          EXPECT_EQ(valuesOf(where(on_sim[i].gt(on_sim[j]), on_sim[i], on_sim[j])),
                    valuesOf(where(on_cpu[i].gt(on_cpu[j]), on_cpu[i], on_cpu[j])));
        }
        EXPECT_EQ(valuesOf(on_sim[i] * 3), valuesOf(on_cpu[i] * 3));  // a scalar operand
        if (dtype != ScalarType::Int64 && dtype != ScalarType::UInt8) {
          EXPECT_EQ(valuesOf(on_sim[i].exp()), valuesOf(on_cpu[i].exp()));
        }
        // Conversions, and a same-dtype copy of each layout.
        EXPECT_EQ(valuesOf(on_sim[i].to(ScalarType::Float64)), valuesOf(on_cpu[i].to(ScalarType::Float64)));
        EXPECT_EQ(valuesOf(on_sim[i].to(ScalarType::Int32)), valuesOf(on_cpu[i].to(ScalarType::Int32)));
        EXPECT_EQ(valuesOf(on_sim[i].contiguous()), valuesOf(on_cpu[i]));
      }
      // Into each layout: in place (out misaligned or strided) and fill_.
      for (size_t i = 0; i < on_cpu.size(); ++i) {
        const Tensor target_cpu = base_cpu.clone(), target_sim = base_sim.clone();
        layouts(target_cpu)[i].add_(on_cpu[0]);
        layouts(target_sim)[i].add_(on_sim[0]);
        EXPECT_EQ(valuesOf(target_sim), valuesOf(target_cpu)) << "add_ into layout " << i;
        layouts(target_cpu)[i].fill_(5);
        layouts(target_sim)[i].fill_(5);
        EXPECT_EQ(valuesOf(target_sim), valuesOf(target_cpu)) << "fill_ of layout " << i;
      }
    }
  }
}

// masked_fill's value may be a 0-d cpu tensor among device tensors (as in
// PyTorch): the kernel reads it on the host.
TEST_F(GpusimKernelsTest, AZeroDimCpuValueFillsADeviceTensor) {
  expectNative("bp::masked_fill.Tensor_out");
  const Tensor x = tensorFromVector<float>({1, -2, 3, -4, 5, -6}, {2, 3}, sim());
  static auto masked_fill = Dispatcher::singleton()
                                .findOpOrThrow("bp::masked_fill.Tensor")
                                .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  const Tensor filled = masked_fill.call(x, x.lt(0), tensorFromVector<double>({2.5}, {}, cpu()));
  EXPECT_EQ(filled.device(), sim());
  EXPECT_EQ(valuesOf(filled), (std::vector<double>{1, 2.5, 3, 2.5, 5, 2.5}));
  // A 0-d value on the device is read back from it.
  EXPECT_EQ(valuesOf(masked_fill.call(x, x.gt(2), tensorFromVector<int64_t>({7}, {}, sim()))),
            (std::vector<double>{1, -2, 7, -4, 7, -6}));
}

// A 0-d cpu operand of a binary op or of where (Note [CPU scalars] in
// dispatcher/ops/src/meta.h) is copied to the device by the host, and the
// plugin's kernel runs: no call goes through the CPU fallback.
TEST_F(GpusimKernelsTest, ZeroDimCpuOperandsOfBinaryOpsAndWhereRunNatively) {
  const DispatchKey key = backendKey(sim().type);
  auto fallbacks = [&] {
    uint64_t n = 0;
    for (const char* op : {"bp::mul.out", "bp::add.out", "bp::where.self_out", "bp::gt.Tensor_out"}) {
      expectNative(op);
      n += Dispatcher::singleton().findOpOrThrow(op).fallbackCalls(key);
    }
    return n;
  };
  const uint64_t before = fallbacks();
  const Tensor x = tensorFromVector<float>({1, -2, 3}, {3}, sim());
  const Tensor two = tensorFromVector<double>({2}, {}, cpu());
  const Tensor product = x * two;
  EXPECT_EQ(product.device(), sim());
  EXPECT_EQ(product.dtype(), ScalarType::Float32);  // a 0-d tensor of the same category does not promote
  EXPECT_EQ(valuesOf(product), (std::vector<double>{2, -4, 6}));
  EXPECT_EQ(valuesOf(x.add(two, 3)), (std::vector<double>{7, 4, 9}));
  EXPECT_EQ(valuesOf(where(x.gt(tensorFromVector<float>({0}, {}, cpu())), x, two)), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(fallbacks(), before);
}

// Note [CPU scalars as kernel arguments]: the GPU plugins' binary kernels
// take a 0-d cpu operand (or a number, which the host wraps as one) as it
// is, reading its value on the host: one launch and one allocation (the
// result) per call, as with no scalar at all, instead of a fill launch and
// a 0-d tensor on the device first.
TEST_F(GpusimKernelsTest, CpuScalarsCostNoLaunchAndNoAllocation) {
  static auto memory_stat =
      Dispatcher::singleton().findOpOrThrow("gpusim::memory_stat").typed<int64_t(std::string_view, int64_t)>();
  const DispatchKey key = backendKey(sim().type);
  for (const char* op : {"bp::add.out", "bp::mul.out", "bp::where.self_out", "bp::gt.Tensor_out",
                         "bp::floor_divide.out", "bp::logical_and.out", "bp::bitwise_xor.Tensor_out"})
    EXPECT_TRUE(Dispatcher::singleton().findOpOrThrow(op).takesCpuScalars(key)) << op;
  const Tensor x = tensorFromVector<float>({1, -2, 3}, {3}, sim());
  const Tensor two = tensorFromVector<double>({2}, {}, cpu());
  const Tensor i = tensorFromVector<int32_t>({7, -7, 9}, {3}, sim());
  struct Call {
    const char* what;
    std::function<Tensor()> run;
    std::vector<double> want;
  };
  const std::vector<Call> calls = {
      {"x * two", [&] { return x * two; }, {2, -4, 6}},
      {"x * 2.0", [&] { return x.mul(2.0); }, {2, -4, 6}},
      {"x + two * 3", [&] { return x.add(two, 3); }, {7, 4, 9}},
      {"x > two", [&] { return x.gt(two); }, {0, 0, 1}},
      {"where(x > 0, x, two)", [&] { return where(x.gt(0.0), x, two); }, {1, 2, 3}},
      {"i // 2", [&] { return floor_divide(i, tensorFromVector<int64_t>({2}, {}, cpu())); }, {3, -4, 4}},
  };
  for (const Call& c : calls) {
    SCOPED_TRACE(c.what);
    const int64_t launches = activity("kernel_launches"), allocations = memory_stat.call("allocations", 0);
    const Tensor r = c.run();
    const int64_t call_launches = activity("kernel_launches") - launches;
    const int64_t call_allocations = memory_stat.call("allocations", 0) - allocations;
    EXPECT_EQ(valuesOf(r), c.want);
    const bool where_call = std::string_view(c.what).rfind("where", 0) == 0;  // x > 0 first
    EXPECT_EQ(call_launches, where_call ? 2 : 1);
    EXPECT_EQ(call_allocations, where_call ? 2 : 1) << "the result only";
  }
}

// Note [Deferred device errors]: index values and integral divisors live on
// the device, so kernels check them as they read them and the error comes
// at the next synchronization, naming the op, the value and its element; no
// call waits for the device, no bad index is dereferenced, and the device
// stays usable after the report.
TEST_F(GpusimKernelsTest, BadIndicesAndZeroDivisorsAreReportedAtTheNextSynchronization) {
  expectNative("bp::index_select.out");
  const Tensor self = tensorFromVector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}, sim());
  expectDeferredError(
      [&] {
        index_select(self, 0, tensorFromVector<int64_t>({1, 3, 7, 2}, {4}, sim()));
      },
      absl::StatusCode::kOutOfRange,
      {"bp::index_select.out: index 7 (element 2 of 'index') is out of range for dimension 0 of "
       "'self', which has size 4; valid indices are 0 to 3",
       "gpusim:0"});
  // Along dim 1, with an int32 index: the element is the index's, not out's.
  expectDeferredError(
      [&] {
        index_select(self, 1, tensorFromVector<int32_t>({0, -1}, {2}, sim()));
      },
      absl::StatusCode::kOutOfRange,
      {"index -1 (element 1 of 'index') is out of range for dimension 1 of 'self', which has size 3"});
  // gather and the scatters check every element; the in-range ones of a
  // scatter_add still land (the bad one is skipped, nothing outside self is written).
  const Tensor src = tensorFromVector<float>({10, 11, 12, 20, 21, 22}, {2, 3}, sim());
  EXPECT_EQ(valuesOf(gather(src, 1, tensorFromVector<int64_t>({2, 0, 1, 1, 2, 0}, {2, 3}, sim()))),
            (std::vector<double>{12, 10, 11, 21, 22, 20}));
  expectDeferredError(
      [&] {
        gather(src, 1, tensorFromVector<int64_t>({0, 3}, {1, 2}, sim()));
      },
      absl::StatusCode::kOutOfRange, {"bp::gather.out: index 3 (element 1 of 'index')"});
  static auto scatter_add = Dispatcher::singleton()
                                .findOpOrThrow("bp::scatter_add")
                                .typed<Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&)>();
  Tensor sum;
  expectDeferredError(
      [&] {
        sum = scatter_add.call(zeros({2, 3}, {ScalarType::Float32, sim()}), 1,
                               tensorFromVector<int64_t>({0, 5, 2, 1, 1, 1}, {2, 3}, sim()), src);
      },
      absl::StatusCode::kOutOfRange, {"bp::scatter_add.out: index 5 (element 1 of 'index')"});
  EXPECT_EQ(valuesOf(sum), (std::vector<double>{10, 0, 12, 0, 63, 0}));
  // An integral division by a zero in device memory.
  expectDeferredError(
      [&] {
        floor_divide(tensorFromVector<int32_t>({7, 8, 9}, {3}, sim()),
                     tensorFromVector<int32_t>({2, 0, 3}, {3}, sim()));
      },
      absl::StatusCode::kInvalidArgument, {"ZeroDivisionError"});
  // A copy to the host is a synchronization too.
  const Tensor picked = index_select(self, 0, tensorFromVector<int64_t>({4}, {1}, sim()));
  EXPECT_THROW(picked.cpu(), Error);
  EXPECT_EQ(valuesOf(index_select(self, 0, tensorFromVector<int64_t>({3}, {1}, sim()))),
            (std::vector<double>{10, 11, 12}));
}

}  // namespace
}  // namespace backplane
