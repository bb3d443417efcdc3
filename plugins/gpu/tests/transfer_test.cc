// Device data stays on the device: contiguous(), clone(), reshape() that
// must copy and copy_ within one device run the device's _copy_on_device_
// kernel, and no byte crosses to the host (Note [Tensor and TensorBase] in
// backplane/ops/tensor.h, Note [Counting host<->device transfers]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "gpu_test_util.h"

namespace backplane::gpu_test {
namespace {

class TransferTest : public GpusimSuite {
 protected:
  // 2 x 3 x 4 x 5 distinct values on the CPU.
  static Tensor values() {
    std::vector<float> v(120);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 7.0f;
    return tensorFromVector<float>(v, {2, 3, 4, 5});
  }
};

// The largest absolute difference between two tensors of one shape.
double compareMax(const Tensor& x, const Tensor& y) {
  const std::vector<double> a = x.toVector<double>(), b = y.toVector<double>();
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Layouts no view can make contiguous: transposed, the heads of an
// attention layer, every other element, a broadcast.
struct Layout {
  const char* name;
  std::function<Tensor(const Tensor&)> make;
};
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"transpose", [](const Tensor& t) { return t.transpose(0, 3); }},
      {"heads",
       [](const Tensor& t) {
         return t.permute({0, 2, 1, 3});
       }},
      {"step 2", [](const Tensor& t) { return t.slice(3, 0, 5, 2); }},
      {"broadcast",
       [](const Tensor& t) {
         return t.select(1, 1).unsqueeze(1).expand({2, 3, 4, 5});
       }},
  };
  return all;
}

TEST_F(TransferTest, ContiguousCloneReshapeAndCopyStayOnTheDevice) {
  const Tensor host = values();
  const Tensor dev = host.to(sim());
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE(layout.name);
    const Tensor view = layout.make(dev), expected = layout.make(host).contiguous();
    ASSERT_FALSE(view.is_contiguous());
    const TransferCount before = hostDeviceTransfers();
    const Tensor contiguous = view.contiguous();
    const Tensor cloned = view.clone();
    const Tensor reshaped = view.reshape({-1});
    const Tensor target = emptyTensor(view.sizes(), view.dtype(), sim());
    target.copy_(view);
    const TransferCount after = hostDeviceTransfers();
    EXPECT_EQ(after.bytes - before.bytes, 0u) << "a same-device copy went through the host";
    EXPECT_EQ(after.copies - before.copies, 0u);

    for (const Tensor& t : {contiguous, cloned, target}) {
      EXPECT_EQ(t.device(), sim());
      EXPECT_TRUE(t.is_contiguous());
      EXPECT_EQ(t.toVector<float>(), expected.toVector<float>());
    }
    EXPECT_EQ(reshaped.device(), sim());
    EXPECT_EQ(reshaped.toVector<float>(), expected.toVector<float>());
  }
}

TEST_F(TransferTest, TheReportShowsTheDevicesCopyKernelAndNoTransfers) {
  const Tensor dev = values().to(sim());
  Profiler profiler;
  const Tensor c = dev.transpose(1, 2).contiguous();
  profiler.stop();
  const OpReport report = profiler.report();
  const OpStats* copy = report.find("bp::_copy_on_device_", backendKey(sim().type));
  ASSERT_NE(copy, nullptr) << report.table();
  EXPECT_EQ(copy->native_calls, 1u) << report.table();
  EXPECT_EQ(copy->transfer_bytes, 0u);
  EXPECT_NE(report.summary().find("host<->device: 0 B in 0 copies"), std::string::npos) << report.summary();
}

TEST_F(TransferTest, CopiesBetweenTheHostAndTheDeviceAreCountedOncePerCopy) {
  const Tensor host = values();
  TransferCount before = hostDeviceTransfers();
  const Tensor dev = host.to(sim());  // contiguous: one copy of its bytes
  TransferCount after = hostDeviceTransfers();
  EXPECT_EQ(after.bytes - before.bytes, host.nbytes());
  EXPECT_EQ(after.copies - before.copies, 1u);

  // A strided view to the host: packed on the device first (its span is
  // mostly gaps), then one copy of the elements alone.
  const Tensor sparse = dev.slice(3, 0, 5, 4);
  before = hostDeviceTransfers();
  const Tensor back = sparse.cpu();
  after = hostDeviceTransfers();
  EXPECT_EQ(after.bytes - before.bytes, sparse.nbytes());
  EXPECT_EQ(after.copies - before.copies, 1u);
  EXPECT_EQ(back.toVector<float>(), host.slice(3, 0, 5, 4).contiguous().toVector<float>());
}

TEST_F(TransferTest, NumbersAndCpuScalarsReachTheDeviceAsKernelArgumentsInEveryDtype) {
  // Note [CPU scalars]: the value is filled on the device by its fill_
  // kernel, exactly, and no byte crosses.
  const std::vector<std::pair<ScalarType, Scalar>> cases = {
      {ScalarType::Float32, Scalar(0.1)},
      {ScalarType::Float64, Scalar(1.0 / 3.0)},
      {ScalarType::Float16, Scalar(65504.0)},
      {ScalarType::BFloat16, Scalar(-3.3895e38)},
      {ScalarType::Int64, Scalar(int64_t{(int64_t{1} << 62) + 1})},
      {ScalarType::Int32, Scalar(int64_t{-7})},
      {ScalarType::Int8, Scalar(int64_t{-128})},
      {ScalarType::UInt8, Scalar(int64_t{255})},
      {ScalarType::Bool, Scalar(true)}};
  for (const auto& [dtype, value] : cases) {
    SCOPED_TRACE(scalarTypeName(dtype));
    const Tensor host = full({5}, value, {.dtype = dtype});
    const Tensor scalar = full({}, value, {.dtype = dtype});  // a 0-d CPU tensor
    const Tensor dev = host.to(sim());
    const TransferCount before = hostDeviceTransfers();
    const Tensor product = dtype == ScalarType::Bool ? where(dev, scalar, dev) : dev.mul(scalar);
    const TransferCount after = hostDeviceTransfers();
    EXPECT_EQ(after.bytes - before.bytes, 0u);
    EXPECT_EQ(product.device(), sim());
    const Tensor expected = dtype == ScalarType::Bool ? where(host, scalar, host) : host.mul(scalar);
    EXPECT_EQ(product.toVector<double>(), expected.toVector<double>());
  }
  const Tensor x = values().to(sim());
  const TransferCount before = hostDeviceTransfers();
  const Tensor y = x * 0.125 + 1 - 2.0 * x;  // numbers wrap as 0-d CPU tensors
  const TransferCount after = hostDeviceTransfers();
  EXPECT_EQ(after.bytes - before.bytes, 0u);
  EXPECT_EQ(y.toVector<float>(), (values() * 0.125 + 1 - 2.0 * values()).toVector<float>());
}

TEST_F(TransferTest, MatrixProductsReadTransposedAndBroadcastOperandsThroughTheirStrides) {
  // No copy in front of a GEMM whose operands a strided GEMM can take: one
  // launch each (addmm and linear: the bias broadcast into the result, then
  // the GEMM accumulating onto it).
  static const auto launches = [] {
    static const auto stat =
        Dispatcher::singleton().findOpOrThrow("gpusim::activity_stat").typed<int64_t(std::string_view)>();
    return stat.call("kernel_launches");
  };
  const Tensor a = randn({32, 64}).to(sim()).t();  // [64, 32], transposed
  const Tensor b = randn({32, 48}).to(sim());
  const Tensor x = randn({3, 64, 32}).to(sim());
  const Tensor w = randn({48, 32}).to(sim());  // linear's weight, read as w.T
  const Tensor bias = randn({48}).to(sim());
  const Tensor shared = randn({1, 32, 16}).to(sim());  // broadcast over x's batch
  struct Case {
    const char* name;
    std::function<Tensor()> run;
    int64_t launches;
  };
  const std::vector<Case> cases = {
      {"mm of a transposed operand", [&] { return mm(a, b); }, 1},
      {"matmul folding a batch into rows", [&] { return matmul(x, b); }, 1},
      {"matmul broadcasting a batch (stride 0)",
       [&] {
         return matmul(x, shared.expand({3, 32, 16}));
       },
       1},
      {"bmm of transposed matrices", [&] { return bmm(x.transpose(1, 2), x); }, 1},
      {"addmm", [&] { return addmm(bias, a, b); }, 2},
      {"linear", [&] { return linear(x, w, bias); }, 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t before = launches();
    const TransferCount moved_before = hostDeviceTransfers();
    const Tensor r = c.run();
    EXPECT_EQ(launches() - before, c.launches) << "a copy ran in front of the GEMM";
    EXPECT_EQ(hostDeviceTransfers().bytes - moved_before.bytes, 0u);
    EXPECT_EQ(r.device(), sim());
  }
  EXPECT_LE(compareMax(mm(a, b).cpu(), mm(a.cpu(), b.cpu())), 1e-4);
  EXPECT_LE(compareMax(linear(x, w, bias).cpu(), linear(x.cpu(), w.cpu(), bias.cpu())), 1e-4);
}

}  // namespace
}  // namespace backplane::gpu_test
