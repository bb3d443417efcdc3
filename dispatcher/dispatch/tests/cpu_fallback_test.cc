// Note [CPU fallback], exercised on the test device (memory the host cannot
// read): arguments staged to the host, written arguments copied back,
// returns moved to the target device, counters, modes, warnings.
#include "backplane/dispatch/builtin_kernels.h"

#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/cpu_kernels.h"
#include "test_device.h"

namespace backplane {
namespace {

using testing::expectError;
using testing::floats;
using ::testing::HasSubstr;

class CpuFallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = &testing::TestDevice::install();
    key_ = backendKey(dev_->type());
    live_before_ = dev_->liveAllocations();
    Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
    ASSERT_TRUE(lib_.def("add(Tensor a, Tensor b) -> Tensor").ok());
    ASSERT_TRUE(lib_.def("add_(Tensor(a!) self, Tensor other) -> Tensor(a!)").ok());
    ASSERT_TRUE(lib_.def("add.out(Tensor a, Tensor b, *, Tensor(a!) out) -> Tensor(a!)").ok());
    ASSERT_TRUE(lib_.def("sum_all(Tensor[] xs, Tensor? bias=None) -> Tensor").ok());
    ASSERT_TRUE(lib_.impl("add", DispatchKey::CPU, &testing::addCpu).ok());
    ASSERT_TRUE(lib_.impl("add_", DispatchKey::CPU,
                          [](const Tensor& self, const Tensor& other) {
                            EXPECT_TRUE(self.device().isCpu());
                            testing::assignCpu(self, testing::addCpu(self, other));
                            return self;
                          })
                    .ok());
    ASSERT_TRUE(lib_.impl("add.out", DispatchKey::CPU,
                          [](const Tensor& a, const Tensor& b, const Tensor& out) {
                            testing::assignCpu(out, testing::addCpu(a, b));
                            return out;
                          })
                    .ok());
    ASSERT_TRUE(lib_.impl("sum_all", DispatchKey::CPU,
                          [](TensorList xs, const std::optional<Tensor>& bias) {
                            Tensor acc = bias ? *bias
                                              : Tensor(tensorFromVector<float>(std::vector<float>(xs[0].numel(), 0),
                                                                               xs[0].sizes()));
                            for (const Tensor& x : xs) acc = testing::addCpu(acc, x);
                            return acc;
                          })
                    .ok());
  }
  void TearDown() override {
    lib_.reset();
    Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
  }
  Device dev(int i = 0) const { return dev_->device(static_cast<DeviceIndex>(i)); }
  OperatorHandle op(const char* name) { return Dispatcher::singleton().findOpOrThrow(name); }

  testing::TestDevice* dev_;
  DispatchKey key_;
  size_t live_before_;
  Library lib_{"fb"};
};

TEST_F(CpuFallbackTest, OutOfPlaceResultLandsOnTheDevice) {
  auto add = op("fb::add").typed<Tensor(const Tensor&, const Tensor&)>();
  EXPECT_EQ(add.kernelKind(key_), KernelKind::CpuFallback);
  uint64_t calls = add.fallbackCalls(key_), bytes = add.fallbackBytes(key_);
  Tensor a = floats({1, 2, 3}, dev()), b = floats({10, 20, 30}, dev());
  dev_->resetCounters();
  Tensor r = add.call(a, b);
  EXPECT_EQ(dev_->bytesToHost(), 2u * 12u) << "both inputs staged to the host";
  EXPECT_EQ(dev_->bytesFromHost(), 12u) << "only the result uploaded";
  EXPECT_EQ(r.device(), dev());
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(add.fallbackCalls(key_), calls + 1);
  EXPECT_EQ(add.fallbackBytes(key_) - bytes, 3u * 12u) << "two inputs in, one result out";
}

TEST_F(CpuFallbackTest, InPlaceWritesBackIntoTheOriginalAndReturnsIt) {
  auto add_ = op("fb::add_").typed<Tensor(const Tensor&, const Tensor&)>();
  Tensor self = floats({1, 2, 3}, dev());
  Tensor r = add_.call(self, floats({1, 1, 1}, dev()));
  EXPECT_EQ(r.unsafeGetImpl(), self.unsafeGetImpl()) << "Tensor(a!) return is the argument itself";
  EXPECT_EQ(self.toVector<float>(), (std::vector<float>{2, 3, 4}));
}

TEST_F(CpuFallbackTest, OutArgumentIsWrittenOnItsDevice) {
  auto add_out = op("fb::add.out").typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  Tensor out = floats({0, 0}, dev(1));
  Tensor r = add_out.call(floats({1, 2}, dev(1)), floats({3, 4}, dev(1)), out);
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  EXPECT_EQ(out.toVector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(out.device(), dev(1));
}

TEST_F(CpuFallbackTest, StridedViewsGoThroughWithoutKernels) {
  auto add_ = op("fb::add_").typed<Tensor(const Tensor&, const Tensor&)>();
  auto add = op("fb::add").typed<Tensor(const Tensor&, const Tensor&)>();
  Tensor base = tensorFromVector<float>({0, 1, 2, 3, 4, 5}, {2, 3}, dev());
  Tensor t = add.call(base.t(), base.t());  // transposed inputs
  EXPECT_EQ(t.sizes(), IntArrayRef({3, 2}));
  EXPECT_EQ(t.toVector<float>(), (std::vector<float>{0, 6, 2, 8, 4, 10}));
  // Write through a strided view: only its elements change.
  Tensor every_other = base.view({6}).slice(0, 0, 6, 2);  // elements 0, 2, 4
  add_.call(every_other, floats({100, 100, 100}, dev()));
  EXPECT_EQ(base.toVector<float>(), (std::vector<float>{100, 1, 102, 3, 104, 5}));
}

TEST_F(CpuFallbackTest, TensorListsAndOptionalTensors) {
  auto sum_all = op("fb::sum_all").typed<Tensor(TensorList, const std::optional<Tensor>&)>();
  std::vector<Tensor> xs{floats({1, 2}, dev()), floats({3, 4}, dev())};
  Tensor r = sum_all.call(xs, std::nullopt);
  EXPECT_EQ(r.device(), dev());
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{4, 6}));
  Tensor with_bias = sum_all.call(xs, floats({10, 10}, dev()));
  EXPECT_EQ(with_bias.toVector<float>(), (std::vector<float>{14, 16}));
}

TEST_F(CpuFallbackTest, TensorsMustShareOneDeviceExceptCpuScalars) {
  auto add = op("fb::add").typed<Tensor(const Tensor&, const Tensor&)>();
  expectError(
      [&] {
        add.call(floats({1, 2}, dev(0)), floats({1, 2}, dev(1)));
      },
      {"fb::add: expected all tensors on one device, but found testdev:0 and testdev:1", "argument 'b'"});
  expectError(
      [&] {
        add.call(floats({1, 2}, dev(0)), floats({1, 2}));
      },
      {"argument 'b' is a Tensor[2] float32 cpu", "only 0-d cpu tensors"});
  auto add_ = op("fb::add_").typed<Tensor(const Tensor&, const Tensor&)>();
  Tensor self = tensorFromVector<float>({1}, IntArrayRef(), dev());
  add_.call(self, tensorFromVector<float>({2}, IntArrayRef()));  // a 0-d cpu tensor is a scalar
  EXPECT_EQ(self.item<float>(), 3.0f);
}

TEST_F(CpuFallbackTest, ErrorModeRefusesAndNamesTheSwitch) {
  Dispatcher::singleton().setFallbackMode(FallbackMode::Error);
  auto add = op("fb::add").typed<Tensor(const Tensor&, const Tensor&)>();
  expectError([&] { add.call(floats({1}, dev()), floats({1}, dev())); },
              {"fb::add has no kernel for testdev", "BACKPLANE_FALLBACK=error"});
}

TEST_F(CpuFallbackTest, WarnsOncePerOperatorAndDevice) {
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
  Library lib("fbw");
  ASSERT_TRUE(lib.def("twice(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("twice", DispatchKey::CPU, [](const Tensor& a) { return testing::addCpu(a, a); }).ok());
  auto twice = op("fbw::twice").typed<Tensor(const Tensor&)>();
  ::testing::internal::CaptureStderr();
  twice.call(floats({1}, dev()));
  twice.call(floats({2}, dev()));
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("fbw::twice has no kernel for testdev; running it on the CPU"));
  EXPECT_EQ(log.find("fbw::twice", log.find("fbw::twice") + 1), std::string::npos) << log;
}

TEST_F(CpuFallbackTest, KernelErrorsPropagateAndNothingLeaks) {
  auto add = op("fb::add").typed<Tensor(const Tensor&, const Tensor&)>();
  // The CPU kernel's message, its code, and then the op and device the
  // caller used: the kernel's words speak of the CPU, where the caller's
  // tensors never were.
  try {
    add.call(floats({1, 2}, dev()), floats({1, 2, 3}, dev()));
    ADD_FAILURE() << "mismatched shapes were added";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(e.message(), HasSubstr("shapes differ"));
    EXPECT_THAT(e.message(), HasSubstr(strCat("(raised while running fb::add for ", dev().str(),
                                              " through the CPU fallback: its inputs were copied to the host and "
                                              "the CPU kernel ran)")));
  }
  {
    Tensor r = add.call(floats({1}, dev()), floats({1}, dev()));
    EXPECT_EQ(r.item<float>(), 2.0f);
  }
  EXPECT_EQ(dev_->liveAllocations(), live_before_);
}

// A kernel that breaks the boxed calling convention is reported as an
// internal error naming the op (no argument of the caller is wrong).
TEST_F(CpuFallbackTest, KernelsThatBreakTheStackConventionAreInternalErrors) {
  Library lib("fbs");
  ASSERT_TRUE(lib.def("drop(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("drop", DispatchKey::CPU,
                       KernelFunction::makeFromBoxedFunction(
                           [](OperatorKernel*, const OperatorHandle&, DispatchKeySet, Stack* s) { s->clear(); }))
                  .ok());
  auto drop = op("fbs::drop").typed<Tensor(const Tensor&)>();
  EXPECT_EQ(drop.kernelKind(key_), KernelKind::CpuFallback);
  expectError([&] { drop.call(floats({1}, dev())); }, absl::StatusCode::kInternal,
              {"fbs::drop", "left 0 values on the stack but the schema has 1 returns"});

  // A wrapper above the backends that loses an argument before redispatching.
  ASSERT_TRUE(lib.impl("fb::add", DispatchKey::User0,
                       KernelFunction::makeFromBoxedFunction(
                           [](OperatorKernel*, const OperatorHandle& o, DispatchKeySet ks, Stack* s) {
                             s->pop_back();
                             o.redispatchBoxed(ks & DispatchKeySet::below(DispatchKey::User0), *s);
                           }))
                  .ok());
  IncludeDispatchKeyGuard user0(DispatchKey::User0);
  auto add = op("fb::add").typed<Tensor(const Tensor&, const Tensor&)>();
  expectError([&] { add.call(floats({1}, dev()), floats({2}, dev())); }, absl::StatusCode::kInternal,
              {"fb::add", "needs 2 arguments but the stack holds only 1"});
}

}  // namespace
}  // namespace backplane
