// Tensor (backplane/ops/tensor.h, Note [Tensor and TensorBase]): what the ops
// layer adds to core's TensorBase. reshape() and flatten() view when they
// can and copy when they must; contiguous() and clone() copy on the
// tensor's device, with the device's _copy_on_device_ kernel when it has
// one and through core's staged copy when not. Every case runs on the host
// and on the test device, whose memory the host cannot read.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backplane/core/checked_math.h"
#include "backplane/core/error.h"
#include "backplane/core/transfers.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/errors.h"
#include "test_device.h"

namespace backplane {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const Device kCpu(DeviceType::CPU);

testing::TestDevice& testDevice() { return testing::TestDevice::install("testdev", 2); }

// 0, 1, ..., numel-1 as int64 in a contiguous tensor of `sizes` on `device`.
Tensor iota(std::vector<int64_t> sizes, Device device = kCpu) {
  std::vector<int64_t> values(static_cast<size_t>(checkedNumel(sizes)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i);
  return tensorFromVector(values, sizes, device);
}

std::vector<int64_t> values(const Tensor& t) { return t.toVector<int64_t>(); }
std::vector<int64_t> sizesOf(const Tensor& t) { return t.sizes().vec(); }
std::vector<int64_t> stridesOf(const Tensor& t) { return t.strides().vec(); }

// ------------------------------------------------------------ TensorBase

TEST(TensorTest, IsATensorBaseHandleAndViewsStayTensors) {
  TensorBase base = iota({2, 3});
  Tensor t = base;  // the same TensorImpl, one more reference
  EXPECT_EQ(t.unsafeGetImpl(), base.unsafeGetImpl());
  EXPECT_EQ(t.use_count(), 2u);
  Tensor moved = std::move(base);
  EXPECT_EQ(moved.unsafeGetImpl(), t.unsafeGetImpl());
  EXPECT_EQ(t.use_count(), 2u);
  // A view of a Tensor is a Tensor, so operators chain on it.
  Tensor row = t.t().select(1, 1).unsqueeze(0).squeeze(0);
  EXPECT_TRUE(row.is_alias_of(t));
  EXPECT_THAT(values(row.contiguous()), ElementsAre(3, 4, 5));
  EXPECT_EQ(Tensor().str(), "Tensor[undefined]");
}

// ------------------------------------------------------- reshape, flatten

class ReshapeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testDevice();
    device_ = Device::fromString(GetParam());
  }

  // torch.arange(numel).view(sizes) as int64 on the device under test.
  Tensor iota(std::vector<int64_t> sizes) const { return ::backplane::iota(std::move(sizes), device_); }
  // A view over the same storage as `base`, on the same device.
  void expectView(const Tensor& v, const Tensor& base) const {
    EXPECT_TRUE(v.is_alias_of(base));
    EXPECT_EQ(v.device(), device_);
  }

  Device device_;
};

INSTANTIATE_TEST_SUITE_P(Devices, ReshapeTest, ::testing::Values("cpu", "testdev:1"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "cpu" ? std::string("Cpu") : std::string("TestDev");
                         });

TEST_P(ReshapeTest, ReshapeOfTransposedCopies) {
  Tensor x = iota({3, 4});
  Tensor r = x.t().reshape({12});
  EXPECT_FALSE(r.is_alias_of(x));
  EXPECT_EQ(r.device(), device_);
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_THAT(stridesOf(r), ElementsAre(1));
  EXPECT_THAT(values(r), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  Tensor r2 = x.t().reshape({2, -1});
  EXPECT_THAT(sizesOf(r2), ElementsAre(2, 6));
  EXPECT_THAT(values(r2), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  // The original is unchanged.
  EXPECT_THAT(values(x), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
}

TEST_P(ReshapeTest, ReshapeOfContiguousIsAView) {
  Tensor x = iota({3, 4});
  Tensor r = x.reshape({6, 2});
  expectView(r, x);
  EXPECT_THAT(stridesOf(r), ElementsAre(2, 1));
  EXPECT_THAT(values(r), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  Tensor r2 = x.slice(0, 1).reshape({-1});  // contiguous, offset 4
  expectView(r2, x);
  EXPECT_EQ(r2.storage_offset(), 4);
  EXPECT_THAT(values(r2), ElementsAre(4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_THAT(testing::errorOf([&] { x.reshape({7, -1}); }), HasSubstr("reshape: shape [7, -1]"));
}

// ------------------------------------------------------------------- flatten

TEST_P(ReshapeTest, Flatten) {
  Tensor y = iota({2, 3, 4});
  Tensor all = y.flatten();
  expectView(all, y);
  EXPECT_THAT(sizesOf(all), ElementsAre(24));
  EXPECT_THAT(sizesOf(y.flatten(1)), ElementsAre(2, 12));
  EXPECT_THAT(sizesOf(y.flatten(0, 1)), ElementsAre(6, 4));
  EXPECT_THAT(stridesOf(y.flatten(0, 1)), ElementsAre(4, 1));
  EXPECT_THAT(sizesOf(y.flatten(-2, -1)), ElementsAre(2, 12));
  EXPECT_THAT(sizesOf(y.flatten(1, 1)), ElementsAre(2, 3, 4));
  EXPECT_THAT(sizesOf(iota({}).flatten()), ElementsAre(1));

  // Flattening a transposed tensor copies.
  Tensor t = y.transpose(0, 2).flatten();
  EXPECT_FALSE(t.is_alias_of(y));
  EXPECT_EQ(t.device(), device_);
  EXPECT_THAT(values(t), ElementsAre(0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21,  //
                                     2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23));
  // ...unless the flattened dims are still adjacent in memory.
  Tensor part = y.transpose(0, 2).flatten(1, 2);  // dims (3, 2) with strides (4, 12): copy
  EXPECT_FALSE(part.is_alias_of(y));
  Tensor rows = y.slice(2, 0, 2).flatten(0, 1);  // sizes (6, 2), strides (4, 1): a view
  expectView(rows, y);
  EXPECT_THAT(values(rows), ElementsAre(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21));

  EXPECT_THAT(testing::errorOf([&] { y.flatten(2, 1); }), HasSubstr("start_dim 2 is after end_dim 1"));
  EXPECT_THAT(testing::errorOf([&] { y.flatten(0, 3); }), HasSubstr("out of range"));
}

// -------------------------------------------------------------------- clone

TEST(CloneTest, TestDeviceCloneIsIndependentAndContiguous) {
  testing::TestDevice& dev = testDevice();
  Tensor x = iota({3, 4}, dev.device(1));
  Tensor c = x.t().clone();
  EXPECT_EQ(c.device(), dev.device(1));
  EXPECT_EQ(c.dtype(), ScalarType::Int64);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_THAT(sizesOf(c), ElementsAre(4, 3));
  EXPECT_THAT(stridesOf(c), ElementsAre(3, 1));
  EXPECT_EQ(c.storage_offset(), 0);
  EXPECT_FALSE(c.is_alias_of(x));
  EXPECT_THAT(values(c), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));

  // Writing into the original does not change the clone.
  copyElements(x, tensorFromVector<int64_t>(std::vector<int64_t>(12, 0), {3, 4}));
  EXPECT_THAT(values(x), ElementsAreArray(std::vector<int64_t>(12, 0)));
  EXPECT_THAT(values(c), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));

  // contiguous() copies only when needed.
  EXPECT_TRUE(x.contiguous().is_alias_of(x));
  Tensor xc = x.t().contiguous();
  EXPECT_FALSE(xc.is_alias_of(x));
  EXPECT_TRUE(xc.is_contiguous());
  EXPECT_EQ(xc.device(), dev.device(1));
}

TEST(CloneTest, CpuCloneOfZeroDimAndExpanded) {
  Tensor s = tensorFromVector<double>({2.5}, {});
  Tensor c = s.clone();
  EXPECT_EQ(c.dim(), 0);
  EXPECT_FALSE(c.is_alias_of(s));
  EXPECT_EQ(c.item<double>(), 2.5);

  Tensor e = Tensor(tensorFromVector<int64_t>({1, 2}, {2, 1})).expand({2, 3}).clone();
  EXPECT_THAT(stridesOf(e), ElementsAre(3, 1));
  EXPECT_THAT(values(e), ElementsAre(1, 1, 1, 2, 2, 2));
}

TEST(CloneTest, CloneIsNeverAnAlias) {
  for (Device d : {kCpu, testDevice().device(1)}) {
    SCOPED_TRACE(d.str());
    Tensor x = iota({2, 3}, d);
    Tensor c = x.clone();
    EXPECT_FALSE(c.is_alias_of(x));
    EXPECT_EQ(x.use_count(), 1u);
    EXPECT_EQ(x.storage().useCount(), 1u);
    EXPECT_THAT(values(c), ElementsAre(0, 1, 2, 3, 4, 5));
  }
}

TEST(CloneTest, CopiesLeaveNoTestDeviceAllocationsBehind) {
  testing::TestDevice& dev = testDevice();
  const size_t before = dev.liveAllocations();
  {
    Tensor x = iota({4, 6}, dev.device(0));
    Tensor c = x.clone();
    Tensor r = x.t().reshape({24});   // copies
    Tensor f = x.t().flatten();       // copies
    Tensor same = x.reshape({6, 4});  // a view
    Tensor flat = x.flatten();        // a view
    Tensor t = x.t().contiguous();    // copies
    EXPECT_TRUE(same.is_alias_of(x));
    EXPECT_TRUE(flat.is_alias_of(x));
    EXPECT_TRUE(x.contiguous().is_alias_of(x));
    EXPECT_EQ(dev.liveAllocations(), before + 5);
    EXPECT_THAT(values(r), ElementsAreArray(values(f)));
    EXPECT_THAT(values(t.view({24})), ElementsAreArray(values(r)));
  }
  EXPECT_EQ(dev.liveAllocations(), before);
}

TEST(CloneTest, WithoutACopyKernelTheDeviceStagesThroughTheHostWithoutFallingBack) {
  // The test device has no _copy_on_device_ kernel (and no CPU kernel lies
  // behind it here): core's copyElements stages the strided copy, counted,
  // and a BACKPLANE_FALLBACK=error setting does not refuse it.
  testing::TestDevice& dev = testDevice();
  Tensor x = iota({3, 4}, dev.device(0));
  Dispatcher& dispatcher = Dispatcher::singleton();
  const FallbackMode mode = dispatcher.fallbackMode();
  dispatcher.setFallbackMode(FallbackMode::Error);
  dev.resetCounters();
  const TransferCount before = hostDeviceTransfers();
  Tensor c = x.t().contiguous();
  const TransferCount after = hostDeviceTransfers();
  dispatcher.setFallbackMode(mode);
  EXPECT_EQ(after.bytes - before.bytes, dev.bytesToHost() + dev.bytesFromHost());
  EXPECT_GE(after.bytes - before.bytes, 2 * x.nbytes()) << "to the host and back";
  EXPECT_THAT(values(c), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
}

// A _copy_on_device_ kernel for the test device that counts its calls and
// copies with core's copyElements, or, with `nested`, first makes src
// contiguous itself (a kernel that calls back into contiguous()).
struct CountingCopyKernel {
  static inline int calls = 0;
  static inline bool nested = false;
  static Tensor run(const Tensor& self, const Tensor& src) {
    ++calls;
    copyElements(self, nested ? src.contiguous() : src);
    return self;
  }
};

TEST(CloneTest, ADeviceCopyKernelMakesTheCopyOnTheDevice) {
  testing::TestDevice& dev = testDevice();
  Library lib("bp", "tensor_test copy kernel");
  ASSERT_TRUE(lib.impl("_copy_on_device_", dev.type(), &CountingCopyKernel::run).ok());
  CountingCopyKernel::calls = 0;
  CountingCopyKernel::nested = false;
  Tensor x = iota({3, 4}, dev.device(1));

  Tensor c = x.t().clone();
  EXPECT_EQ(CountingCopyKernel::calls, 1) << "a strided clone runs the device's kernel";
  EXPECT_EQ(c.device(), dev.device(1));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_THAT(values(c), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));

  Tensor r = x.t().reshape({12});
  EXPECT_EQ(CountingCopyKernel::calls, 2) << "so does a reshape that must copy";
  EXPECT_THAT(values(r), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));

  Tensor same = x.clone();  // contiguous: the bytes are copied as a block
  EXPECT_EQ(CountingCopyKernel::calls, 2);
  EXPECT_TRUE(x.contiguous().is_alias_of(x));
  EXPECT_EQ(CountingCopyKernel::calls, 2);
  EXPECT_THAT(values(same), ElementsAreArray(values(x)));

  // A kernel that itself asks for a contiguous copy gets a staged one
  // instead of calling itself without end.
  CountingCopyKernel::nested = true;
  Tensor n = x.t().contiguous();
  EXPECT_EQ(CountingCopyKernel::calls, 3);
  EXPECT_THAT(values(n), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
  CountingCopyKernel::nested = false;

  lib.reset();
  Tensor staged = x.t().clone();
  EXPECT_EQ(CountingCopyKernel::calls, 3) << "without the kernel, core's staged copy";
  EXPECT_THAT(values(staged), ElementsAre(0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11));
}

}  // namespace
}  // namespace backplane
