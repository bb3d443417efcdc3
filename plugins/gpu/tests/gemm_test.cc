// The GPU plugins' matrix products (linalg.cu, gemm.cuh, and cuBLAS in the
// CUDA plugin) against a float64 product on the CPU: sizes that are not
// multiples of the tiles, K == 0, transposed and sliced operands and
// outputs, batches, every dtype (16-bit floats against the float
// reference), integer wrapping, and the TF32 switch. Runs on the simulator
// everywhere; on the CUDA and HIP plugins where a device is present (each
// test skips otherwise). The CUDA-only tests compare cuBLAS with our tiled
// kernel (which the CUDA plugin uses for outputs in no BLAS layout) and the
// CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using gpu_test::GpuPlugin;

constexpr ScalarType kF16 = ScalarType::Float16, kBF16 = ScalarType::BFloat16, kF32 = ScalarType::Float32,
                     kF64 = ScalarType::Float64;

// |x - ref| <= atol + rtol * |ref| elementwise (both moved to the cpu as float64).
void expectClose(const Tensor& x, const Tensor& ref, double atol, double rtol) {
  ASSERT_EQ(x.sizes(), ref.sizes());
  const std::vector<double> g = x.cpu().to(kF64).contiguous().toVector<double>();
  const std::vector<double> r = ref.cpu().to(kF64).contiguous().toVector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_LE(std::abs(g[i] - r[i]), atol + rtol * std::abs(r[i])) << "element " << i << ": " << g[i] << " vs " << r[i];
  }
}

// The tolerance of a product with inner dimension k of standard normal
// operands in `dtype`: the result's rounding (relative) and the accumulated
// rounding, which grows like sqrt(k) (absolute).
void expectProductClose(const Tensor& x, const Tensor& ref, ScalarType dtype, int64_t k) {
  const double eps = dtype == kF16 ? 1e-3 : dtype == kBF16 ? 8e-3 : dtype == kF32 ? 1e-6 : 1e-14;
  expectClose(x, ref, 4 * eps * std::sqrt(static_cast<double>(k) + 1), 2 * eps);
}

// The exact product of the operands as given (already rounded to their
// dtype), in float64 on the cpu.
Tensor reference(const Tensor& a, const Tensor& b) { return matmul(a.cpu().to(kF64), b.cpu().to(kF64)); }

Tensor mmOut(const Tensor& a, const Tensor& b, const Tensor& out) {
  return Dispatcher::singleton()
      .findOpOrThrow("bp::mm.out")
      .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>()
      .call(a, b, out);
}

class GemmTest : public ::testing::TestWithParam<GpuPlugin> {
 protected:
  void SetUp() override {
    rt_ = gpu_test::runtimeWith(GetParam().path);
    if (!gpu_test::hasDevice(*rt_, dev0())) GTEST_SKIP() << "no " << GetParam().type << " device here";
    dev_ = Device::fromString(dev0());
  }
  void TearDown() override {
    if (dev_.type != DeviceType::CPU) setAllowTf32(false);  // the switch is process-wide
  }
  std::string dev0() const { return std::string(GetParam().type) + ":0"; }
  bool isCuda() const { return std::string(GetParam().type) == "cuda"; }

  // Standard normal values rounded to `dtype`, on the device.
  Tensor operand(std::vector<int64_t> sizes, ScalarType dtype) const { return randn(sizes).to(dtype).to(dev_); }

  void setAllowTf32(bool allow) const {
    Dispatcher::singleton()
        .findOpOrThrow(std::string(GetParam().type) + "::set_allow_tf32")
        .typed<void(bool)>()
        .call(allow);
  }
  bool allowTf32() const {
    return Dispatcher::singleton().findOpOrThrow(std::string(GetParam().type) + "::allow_tf32").typed<bool()>().call();
  }

  std::unique_ptr<Runtime> rt_;
  Device dev_{DeviceType::CPU};
};

TEST_P(GemmTest, SizesThatAreNotMultiplesOfTheTileInEveryFloatDtype) {
  for (ScalarType dt : {kF32, kF64, kF16, kBF16}) {
    SCOPED_TRACE(std::string(scalarTypeName(dt)));
    // 67 x 129 spans partial tiles in M and N; K = 257 partial k-tiles.
    Tensor a = operand({67, 33}, dt), b = operand({33, 129}, dt);
    expectProductClose(mm(a, b), reference(a, b), dt, 33);
    Tensor c = operand({5, 257}, dt), d = operand({257, 3}, dt);
    expectProductClose(mm(c, d), reference(c, d), dt, 257);
    Tensor e = operand({1, 1}, dt), f = operand({1, 1}, dt);
    expectProductClose(mm(e, f), reference(e, f), dt, 1);
  }
}

TEST_P(GemmTest, IntegerProductsWrapLikeTheCpu) {
  for (ScalarType dt : {ScalarType::Int8, ScalarType::UInt8, ScalarType::Int32, ScalarType::Int64}) {
    SCOPED_TRACE(std::string(scalarTypeName(dt)));
    // Values up to +-100 (int8 products overflow and wrap).
    Tensor a = mul(randn({19, 70}), 40).to(dt), b = mul(randn({70, 23}), 40).to(dt);
    expectClose(mm(a.to(dev_), b.to(dev_)), mm(a, b), 0, 0);
  }
}

TEST_P(GemmTest, TransposedAndSlicedOperandsAndOutputs) {
  Tensor a = operand({33, 67}, kF32).t();                                // column-major
  Tensor b = operand({129, 66}, kF32).slice(1, 0, std::nullopt, 2).t();  // [33, 129], neither layout
  expectProductClose(mm(a, b), reference(a, b), kF32, 33);
  // An output in no BLAS layout: every other column of a wider matrix.
  Tensor wide = zeros({67, 258}, {.device = dev_});
  Tensor out = wide.slice(1, 0, std::nullopt, 2);
  mmOut(a, b, out);
  expectProductClose(out, reference(a, b), kF32, 33);
  expectClose(wide.slice(1, 1, std::nullopt, 2), zeros({67, 129}), 0, 0);  // the gaps untouched
  // A transposed output (column-major).
  Tensor tout = zeros({129, 67}, {.device = dev_}).t();
  mmOut(a, b, tout);
  expectProductClose(tout, reference(a, b), kF32, 33);
}

TEST_P(GemmTest, EmptyInnerDimension) {
  Tensor a = operand({4, 0}, kF32), b = operand({0, 5}, kF32);
  expectClose(mm(a, b), zeros({4, 5}), 0, 0);
  Tensor self = operand({4, 5}, kF32);
  expectClose(addmm(self, a, b, 2, 3), mul(self.cpu(), 2), 1e-6, 1e-6);
  // beta == 0 never reads self: NaN in it does not propagate.
  Tensor nan_self = full({4, 5}, NAN, {.device = dev_});
  expectClose(addmm(nan_self, a, b, 0, 1), zeros({4, 5}), 0, 0);
  Tensor c = operand({4, 3}, kF32), d = operand({3, 5}, kF32);
  expectProductClose(addmm(nan_self, c, d, 0, 1), reference(c, d), kF32, 3);
}

TEST_P(GemmTest, BatchesAndBroadcastBatches) {
  for (ScalarType dt : {kF32, kF16}) {
    SCOPED_TRACE(std::string(scalarTypeName(dt)));
    Tensor x = operand({3, 17, 70}, dt), y = operand({3, 70, 9}, dt);
    expectProductClose(bmm(x, y), reference(x, y), dt, 70);
    Tensor xt = operand({3, 70, 17}, dt).transpose(1, 2);
    expectProductClose(bmm(xt, y), reference(xt, y), dt, 70);
    Tensor p = operand({2, 1, 5, 6}, dt), q = operand({3, 6, 4}, dt);
    expectProductClose(matmul(p, q), reference(p, q), dt, 6);
  }
}

TEST_P(GemmTest, AddmmAndLinear) {
  Tensor self = operand({4}, kF32), m1 = operand({3, 40}, kF32), m2 = operand({40, 4}, kF32);
  Tensor ref = add(mul(self.cpu().to(kF64), 0.5), mul(reference(m1, m2), -1.5));
  expectProductClose(addmm(self, m1, m2, 0.5, -1.5), ref, kF32, 40);
  Tensor input = operand({2, 3, 40}, kF32), weight = operand({40, 7}, kF32).t(), bias = operand({3, 1}, kF32);
  Tensor lref = add(reference(input, weight.t()), bias.cpu().to(kF64));
  expectProductClose(linear(input, weight, bias), lref, kF32, 40);
}

TEST_P(GemmTest, Tf32SwitchIsOffByDefaultAndRoundTrips) {
  EXPECT_FALSE(allowTf32());
  setAllowTf32(true);
  EXPECT_TRUE(allowTf32());
  setAllowTf32(false);
  EXPECT_FALSE(allowTf32());
}

// CUDA: a contiguous out goes to cuBLAS, an out in no BLAS layout to the
// tiled kernel; both must match the CPU, with TF32 off and on.
TEST_P(GemmTest, CublasMatchesTheTiledKernelAndTheCpu) {
  if (!isCuda()) GTEST_SKIP() << "cuBLAS runs only in the CUDA plugin";
  constexpr int64_t k = 1024;
  for (ScalarType dt : {kF32, kF16, kBF16, kF64}) {
    SCOPED_TRACE(std::string(scalarTypeName(dt)));
    Tensor a = operand({300, k}, dt), b = operand({k, 200}, dt);
    const Tensor ref = reference(a, b);
    Tensor blas = mm(a, b);
    Tensor tiled = empty({300, 400}, {.dtype = dt, .device = dev_}).slice(1, 0, std::nullopt, 2);
    mmOut(a, b, tiled);
    expectProductClose(blas, ref, dt, k);
    expectProductClose(tiled, ref, dt, k);
  }
  // TF32 rounds float32 inputs to 10 mantissa bits: about 5e-4 relative per
  // term. The tiled kernel always computes in float32.
  Tensor a = operand({300, k}, kF32), b = operand({k, 200}, kF32);
  const Tensor ref = reference(a, b);
  setAllowTf32(true);
  expectClose(mm(a, b), ref, 2e-3 * std::sqrt(static_cast<double>(k)), 2e-3);
  Tensor tiled = empty({300, 400}, {.device = dev_}).slice(1, 0, std::nullopt, 2);
  mmOut(a, b, tiled);
  expectProductClose(tiled, ref, kF32, k);
  setAllowTf32(false);
  expectProductClose(mm(a, b), ref, kF32, k);
}

INSTANTIATE_TEST_SUITE_P(Built, GemmTest, ::testing::ValuesIn(gpu_test::builtPlugins(gpu_test::WithSimulator::kYes)),
                         [](const ::testing::TestParamInfo<GpuPlugin>& info) { return std::string(info.param.type); });

}  // namespace
}  // namespace backplane
