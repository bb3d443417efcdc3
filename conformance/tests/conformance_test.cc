// The conformance specs as GoogleTest cases: each spec's every form on every
// backend a built plugin provides (with a device here), and on a device with
// no kernels (composites and the CPU fallback); the device API checks on
// every backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backend_run.h"
#include "backplane/conformance/runner.h"
#include "backplane/conformance/suite.h"
#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "test_device.h"

namespace backplane::conformance {
namespace {

// Every plugin this build made (BACKPLANE_BUILT_PLUGIN_DIR), loaded once,
// before the test cases are made: a backend gets cases when its plugin
// loaded and it has a device here (cuda on a machine without a GPU, hip
// without an AMD GPU get none).
struct Backends {
  std::vector<std::string> names;  // with devices, in registry order
  std::vector<std::string> load_errors;
};

const Backends& builtBackends() {
  static const Backends* b = [] {
    auto* out = new Backends();
    std::vector<std::filesystem::path> libs;
    for (const auto& e : std::filesystem::directory_iterator(BACKPLANE_BUILT_PLUGIN_DIR))
      if (e.path().extension() == ".so") libs.push_back(e.path());
    std::sort(libs.begin(), libs.end());
    for (const auto& lib : libs) {
      absl::StatusOr<PluginStatus> s = plugins().load(lib.string());
      if (!s.ok())
        out->load_errors.push_back(lib.string() + ": " + std::string(s.status().message()));
      else if (!s->loaded)
        out->load_errors.push_back(lib.string() + ": " + s->error);
    }
    DeviceTypeRegistry& reg = DeviceTypeRegistry::global();
    for (const std::string& name : reg.activeNames()) {
      std::optional<DeviceType> t = reg.find(name);
      DeviceInterface* iface = t ? reg.interface(*t) : nullptr;
      if (iface && iface->deviceCount() > 0) out->names.push_back(name);
    }
    return out;
  }();
  return *b;
}

// Every standard op is certified: each is a spec's op, or its in-place or
// out= form, so a kernel a vendor writes for any of them has a spec to
// pass (a new op without one fails here, by name).
TEST(Specs, CoverEveryStandardOp) {
  std::set<std::string> covered;
  for (const OpSpec& s : allSpecs())
    for (const std::string* name : {&s.op, &s.inplace, &s.out})
      if (!name->empty()) covered.insert(*name);
  std::vector<std::string> uncovered;
  for (const StandardOp& op : standardOperators()) {
    const std::string name = "bp::" + op.schema.substr(0, op.schema.find('('));
    if (!covered.count(name)) uncovered.push_back(name);
  }
  EXPECT_TRUE(uncovered.empty()) << "standard ops without a conformance spec: " << ::testing::PrintToString(uncovered)
                                 << "; add one (conformance/src/specs_*.cc)";
}

TEST(BuiltPlugins, AllLoad) {
  EXPECT_TRUE(builtBackends().load_errors.empty()) << ::testing::PrintToString(builtBackends().load_errors);
  EXPECT_NE(std::find(builtBackends().names.begin(), builtBackends().names.end(), "cpu"), builtBackends().names.end());
}

std::string describe(const Result& r) {
  return r.op + " (" + r.form + ") on " + r.backend + " [" + kernelNameOf(r) + "]: " + outcomeName(r.outcome) +
         (r.sample.empty() ? "" : " at sample '" + r.sample + "'") + (r.message.empty() ? "" : ": " + r.message);
}

// (backend, spec index)
using Case = std::tuple<std::string, size_t>;

class SpecTest : public ::testing::TestWithParam<Case> {
 protected:
  const std::string& backend() const { return std::get<0>(GetParam()); }
  const OpSpec& spec() const { return allSpecs()[std::get<1>(GetParam())]; }
};

// Every form of the spec passes on the backend's device 0. On cpu, every
// op has a kernel of its own or a composite (no fallback to itself).
TEST_P(SpecTest, Passes) {
  const DeviceType type = *DeviceTypeRegistry::global().find(backend());
  for (const Result& r : runSpec(spec(), Device(type, 0))) {
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_GT(r.samples, 0) << describe(r);
    if (type == DeviceType::CPU) {
      EXPECT_TRUE(r.kernel == KernelKind::Native || r.kernel == KernelKind::Composite) << describe(r);
    }
  }
}

// The same through a device with no kernels at all: composites and the CPU
// fallback serve every op.
TEST_P(SpecTest, PassesThroughTheCpuFallback) {
  if (backend() != "cpu") GTEST_SKIP() << "run once, with the cpu cases";
  testing::TestDevice& dev = testing::TestDevice::install("conftest", 1);
  for (const Result& r : runSpec(spec(), dev.device(0))) {
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_TRUE(r.kernel == KernelKind::CpuFallback || r.kernel == KernelKind::Composite) << describe(r);
  }
}

std::vector<Case> allCases() {
  std::vector<Case> out;
  for (const std::string& b : builtBackends().names)
    for (size_t i = 0; i < allSpecs().size(); ++i) out.emplace_back(b, i);
  return out;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  // The op's name and overload, without the namespace: cpu_add_Tensor.
  const OperatorName op = OperatorName::parse(allSpecs()[std::get<1>(info.param)].op).value();
  std::string n = std::get<0>(info.param) + "_" + op.name + (op.overload.empty() ? "" : "_" + op.overload);
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllSpecs, SpecTest, ::testing::ValuesIn(allCases()), caseName);

// Device API checks on every backend with devices.
class DeviceCheckTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceCheckTest, Passes) {
  const DeviceType type = *DeviceTypeRegistry::global().find(GetParam());
  const std::vector<std::string> names = deviceCheckNames(type);
  EXPECT_GE(names.size(), 3u);
  for (const std::string& name : names) {
    const Result r = runDeviceCheck(name, type);
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_GT(r.samples, 0) << describe(r);
  }
}

INSTANTIATE_TEST_SUITE_P(AllBackends, DeviceCheckTest, ::testing::ValuesIn(builtBackends().names),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The device checks pass on the in-tree test device (two devices, opaque
// addresses, every access bounds-checked against a live allocation).
TEST(DeviceChecks, PassOnTheTestDevice) {
  testing::TestDevice& dev = testing::TestDevice::install("devcheck", 2);
  const std::vector<std::string> names = deviceCheckNames(dev.type());
  EXPECT_NE(std::find(names.begin(), names.end(), "device.several_devices"), names.end());
  for (const std::string& name : names) {
    const Result r = runDeviceCheck(name, dev.type());
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
  }
  EXPECT_EQ(dev.liveAllocations(), 0u);
}

// A host-memory device whose device-to-host copies flip one byte in the
// middle of anything longer than 64 bytes.
// A device type of `count` devices whose memory is host memory and whose
// work is synchronous: the base of the in-process devices below.
class HostDevice : public DeviceInterface, private Allocator {
 public:
  explicit HostDevice(int count) : count_(count) {}
  int deviceCount() const override { return count_; }
  bool isHostAccessible() const override { return true; }
  Allocator& allocator() override { return *this; }
  void copyHostToDevice(void* dst, Device, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copyDeviceToHost(void* dst, const void* src, Device, size_t n) override { std::memcpy(dst, src, n); }
  void copyDeviceToDevice(void* dst, Device, const void* src, Device, size_t n) override { std::memcpy(dst, src, n); }
  void memset(void* dst, Device, uint8_t value, size_t n) override { std::memset(dst, value, n); }
  void synchronize(Device) override {}

 private:
  DataPtr allocate(size_t nbytes, Device device) override {
    void* p = std::malloc(nbytes ? nbytes : 1);
    if (!p) BP_THROW(kResourceExhausted, "host test device: cannot allocate ", nbytes, " bytes");
    return DataPtr(
        p, nullptr, [](void*, void* q) { std::free(q); }, device);
  }
  int count_;
};

// One device whose device-to-host copies flip one byte in the middle of
// anything longer than 64 bytes.
class CorruptingDevice final : public HostDevice {
 public:
  CorruptingDevice() : HostDevice(1) {}
  void copyDeviceToHost(void* dst, const void* src, Device d, size_t n) override {
    HostDevice::copyDeviceToHost(dst, src, d, n);
    if (n > 64) static_cast<uint8_t*>(dst)[n / 2] ^= 1;
  }
};

TEST(DeviceChecks, CatchACorruptingCopy) {
  static CorruptingDevice device;
  DeviceTypeRegistry& reg = DeviceTypeRegistry::global();
  absl::StatusOr<DeviceType> type = reg.registerType("corrupting");
  ASSERT_TRUE(type.ok()) << type.status();
  ASSERT_TRUE(reg.setInterface(*type, &device).ok());
  const Result r = runDeviceCheck("device.copy", *type);
  EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
  EXPECT_NE(r.message.find("expected"), std::string::npos) << r.message;
  EXPECT_FALSE(r.sample.empty());
}

// A host-memory device of two devices with streams and events that work
// (its work is synchronous, so streams and events only have to keep their
// state right), and its two mutants from a vendor's trial: a
// setCurrentStream that does nothing, and an event query that never
// reports completion. Both passed the device checks before device.streams
// and device.events.
class StreamingDevice final : public HostDevice {
 public:
  enum class Mutant { None, CurrentStreamIgnored, EventNeverCompletes };
  explicit StreamingDevice(Mutant m) : HostDevice(2), mutant_(m) {}

  bool hasStreams() const override { return true; }
  StreamHandle createStream(Device) override { return new int(0); }
  void destroyStream(Device, StreamHandle s) override { delete static_cast<int*>(s); }
  void synchronizeStream(Device, StreamHandle) override {}
  StreamHandle currentStream(Device d) override { return current_[d.index]; }
  void setCurrentStream(Device d, StreamHandle s) override {
    if (mutant_ != Mutant::CurrentStreamIgnored) current_[d.index] = s;
  }
  bool hasEvents() const override { return true; }
  EventHandle createEvent(Device) override { return new int(0); }
  void destroyEvent(Device, EventHandle e) override { delete static_cast<int*>(e); }
  void recordEvent(Device, EventHandle e, StreamHandle) override { *static_cast<int*>(e) = 1; }
  void waitEvent(Device, EventHandle, StreamHandle) override {}
  void synchronizeEvent(Device, EventHandle) override {}
  bool queryEvent(Device, EventHandle e) override {
    // The mutant: complete only before anything was recorded.
    return mutant_ != Mutant::EventNeverCompletes || *static_cast<int*>(e) == 0;
  }

 private:
  Mutant mutant_;
  StreamHandle current_[2] = {nullptr, nullptr};
};

DeviceType installStreamingDevice(const char* name, StreamingDevice* device) {
  DeviceTypeRegistry& reg = DeviceTypeRegistry::global();
  absl::StatusOr<DeviceType> type = reg.registerType(name);
  EXPECT_TRUE(type.ok()) << type.status();
  EXPECT_TRUE(reg.setInterface(*type, device).ok());
  return *type;
}

TEST(DeviceChecks, StreamsAndEventsPassOnAWorkingDevice) {
  static StreamingDevice device(StreamingDevice::Mutant::None);
  const DeviceType type = installStreamingDevice("streaming", &device);
  const std::vector<std::string> names = deviceCheckNames(type);
  for (const char* want : {"device.streams", "device.events", "device.several_devices"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const std::string& name : names) {
    const Result r = runDeviceCheck(name, type);
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_GT(r.samples, 0) << describe(r);
  }
}

TEST(DeviceChecks, CatchASetCurrentStreamThatDoesNothing) {
  static StreamingDevice device(StreamingDevice::Mutant::CurrentStreamIgnored);
  const DeviceType type = installStreamingDevice("ignoresstream", &device);
  const Result r = runDeviceCheck("device.streams", type);
  EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
  EXPECT_EQ(r.sample, "setCurrentStream on ignoresstream:0");
  EXPECT_NE(r.message.find("had no effect"), std::string::npos) << r.message;
}

TEST(DeviceChecks, CatchAnEventQueryThatNeverCompletes) {
  static StreamingDevice device(StreamingDevice::Mutant::EventNeverCompletes);
  const DeviceType type = installStreamingDevice("neverdone", &device);
  const auto start = std::chrono::steady_clock::now();
  const Result r = runDeviceCheck("device.events", type);
  EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
  EXPECT_EQ(r.sample, "queryEvent on neverdone:0");
  EXPECT_NE(r.message.find("still read incomplete after"), std::string::npos) << r.message;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1900))
      << "it polled for its whole limit (2 s)";
}

// The runner catches a kernel that computes the wrong thing: an add.out
// that subtracts, registered for a device of its own.
Tensor subtractingAdd(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  static const auto sub = Dispatcher::singleton()
                              .findOpOrThrow("bp::sub.out")
                              .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
  return sub.call(self, other, alpha, out);
}

TEST(Runner, CatchesAWrongKernel) {
  testing::TestDevice& dev = testing::TestDevice::install("wrongadd", 1);
  Library lib("wrongadd");
  ASSERT_TRUE(lib.impl("bp::add.out", dev.type(), BP_FN(subtractingAdd)).ok());
  const OpSpec* add = nullptr;
  for (const OpSpec& s : allSpecs())
    if (s.op == "bp::add.Tensor") add = &s;
  ASSERT_NE(add, nullptr);
  bool caught = false;
  for (const Result& r : runSpec(*add, dev.device(0))) {
    if (r.form == "out") {
      EXPECT_EQ(r.kernel, KernelKind::Native);
      EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
      EXPECT_NE(r.message.find("expected"), std::string::npos) << r.message;
      EXPECT_GT(r.max_abs_error, 0);
      caught = true;
    } else if (r.form == "gradient") {
      // add's gradient is grad (and grad * alpha): no add.out in it.
      EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    } else {
      // add.Tensor and add_.Tensor are composites over the wrong add.out.
      EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
    }
  }
  EXPECT_TRUE(caught);
}

const OpSpec& specOf(const std::string& op) {
  for (const OpSpec& s : allSpecs())
    if (s.op == op) return s;
  BP_THROW(kNotFound, "no spec for ", op);
}

// Note [Uncertified operators]: an operator of a device's own, with a
// native kernel and no spec, is an item of its own that reports
// uncertified; --native selects it, --ops can leave it out.
Tensor ownScale(const Tensor& self) { return self; }

TEST(Runner, AnOpWithANativeKernelAndNoSpecIsUncertified) {
  testing::TestDevice& dev = testing::TestDevice::install("ownop", 1);
  Library lib("ownop");
  ASSERT_TRUE(lib.def("ownop::scale(Tensor self) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("ownop::scale", dev.type(), BP_FN(ownScale)).ok());
  const std::vector<Item> items = selectItems(dev.type(), "^ownop::", false, "", true);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].name, "ownop::scale");
  EXPECT_TRUE(items[0].uncertified);
  const std::vector<Result> results = runItem(items[0], dev.device(0), 0, {});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, Outcome::Uncertified);
  EXPECT_EQ(results[0].form, "functional");
  EXPECT_EQ(results[0].kernel, KernelKind::Native);
  EXPECT_NE(results[0].message.find("no conformance spec covers this op"), std::string::npos);
  EXPECT_TRUE(selectItems(dev.type(), "^bp::relu\\b", false).size() == 1) << "--ops leaves it out";
}

// Note [Mixed-dtype samples]: an add.out that declares {float16, float32}
// but was written for one dtype per call, the trap of the vendor trial,
// fails conformance at a mixed sample; the same kernel handling mixed calls
// passes. (sub.out with -alpha is add.out without calling it again.)
Tensor addThroughSub(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  static const auto sub = Dispatcher::singleton()
                              .findOpOrThrow("bp::sub.out")
                              .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
  return sub.call(self, other, Scalar(-alpha.toDouble()), out);
}
Tensor onlyOneDtypePerCall(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  BP_CHECK(self.dtype() == other.dtype() && other.dtype() == out.dtype(), "perdtype add.out: self ", self.dtype(),
           ", other ", other.dtype(), ", out ", out.dtype(), ": this kernel expects one dtype per call");
  return addThroughSub(self, other, alpha, out);
}

TEST(Runner, SendsMixedDtypeSamplesToAKernelDeclaringSeveralDtypes) {
  const DtypeSet halfAndFloat({ScalarType::Float16, ScalarType::Float32});
  for (bool mixed_ok : {false, true}) {
    SCOPED_TRACE(mixed_ok ? "a kernel that handles mixed dtypes" : "a kernel written per dtype");
    testing::TestDevice& dev = testing::TestDevice::install(mixed_ok ? "mixedok" : "perdtype", 1);
    Library lib(mixed_ok ? "mixedok" : "perdtype");
    const absl::Status registered = mixed_ok
                                        ? lib.impl("bp::add.out", dev.type(), BP_FN(addThroughSub), halfAndFloat)
                                        : lib.impl("bp::add.out", dev.type(), BP_FN(onlyOneDtypePerCall), halfAndFloat);
    ASSERT_TRUE(registered.ok()) << registered;
    bool saw_out = false;
    for (const Result& r : runSpec(specOf("bp::add.Tensor"), dev.device(0))) {
      if (r.form != "out") continue;
      saw_out = true;
      if (mixed_ok) {
        EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
      } else {
        EXPECT_EQ(r.outcome, Outcome::Error) << describe(r);
        EXPECT_NE(r.sample.find("as float32 (mixed dtypes: the kernel declares float16, float32)"), std::string::npos)
            << r.sample;
        EXPECT_NE(r.message.find("this kernel expects one dtype per call"), std::string::npos) << r.message;
      }
    }
    EXPECT_TRUE(saw_out);
  }
}

// The gradient form (Note [Gradient forms]) catches a wrong backward
// kernel: a gelu_backward that doubles the gradient, registered for a device
// of its own. The forward forms pass; the gradient form fails, naming the
// leaf, the element and what the CPU computed.
Tensor doublingGeluBackward(const Tensor& grad_output, const Tensor& self, std::string_view approximate) {
  static const auto right = Dispatcher::singleton()
                                .findOpOrThrow("bp::gelu_backward")
                                .typed<Tensor(const Tensor&, const Tensor&, std::string_view)>();
  // The host's composite, computed on the CPU and moved back, times 2.
  return right.call(grad_output.cpu(), self.cpu(), approximate).mul(Scalar(2)).to(grad_output.device());
}

TEST(Runner, CatchesAWrongBackwardKernel) {
  testing::TestDevice& dev = testing::TestDevice::install("wronggelu", 1);
  Library lib("wronggelu");
  ASSERT_TRUE(lib.impl("bp::gelu_backward", dev.type(), BP_FN(doublingGeluBackward)).ok());
  bool caught = false;
  for (const OpSpec& spec : allSpecs()) {
    if (spec.op != "bp::gelu") continue;
    for (const Result& r : runSpec(spec, dev.device(0))) {
      if (r.form == "gradient") {
        EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
        EXPECT_NE(r.message.find("gradient of leaf 0 element"), std::string::npos) << r.message;
        EXPECT_NE(r.message.find("the CPU's"), std::string::npos) << r.message;
        caught = true;
      } else {
        EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
      }
    }
  }
  EXPECT_TRUE(caught);
  // gelu_backward's own spec (Note [Backward op specs]) fails it too,
  // against the derivative written out in double, and so does its out=
  // form, derived from it (Note [Derived out= forms]).
  const std::vector<Result> own = runSpec(specOf("bp::gelu_backward"), dev.device(0));
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].kernel, KernelKind::Native);
  EXPECT_EQ(own[1].op, "bp::gelu_backward.grad_input");
  EXPECT_EQ(own[1].kernel, KernelKind::Composite);
  for (const Result& r : own) {
    EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
    EXPECT_NE(r.message.find("expected"), std::string::npos) << r.message;
  }
}

// Conformance certifies exactly what is declared (Note [Declared dtypes]):
// an add.out that serves float32 only (computing self - (-alpha) * other
// through sub.out) passes, its result carries the declared set and names
// what served the other dtypes, and a declared dtype that no sample
// exercises is noted, not failed.
Tensor float32OnlyAdd(const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& out) {
  static const auto sub = Dispatcher::singleton()
                              .findOpOrThrow("bp::sub.out")
                              .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
  EXPECT_EQ(self.dtype(), ScalarType::Float32);
  EXPECT_EQ(out.dtype(), ScalarType::Float32);
  return sub.call(self, other, alpha.isIntegral() ? Scalar(-alpha.to<int64_t>()) : Scalar(-alpha.toDouble()), out);
}

// An optimizer's spec certifies every tensor the step writes: an AdamW
// whose kernel updates the parameters and first moments right but never
// stores the second moments fails, naming the list and its element.
void adamwForgettingSecondMoments(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                                  TensorList max_exp_avg_sqs, int64_t step, double lr, double beta1, double beta2,
                                  double weight_decay, double eps, bool amsgrad, bool maximize) {
  auto onCpu = [](TensorList list) {
    std::vector<Tensor> out;
    for (const Tensor& t : list) out.push_back(t.cpu());
    return out;
  };
  std::vector<Tensor> p = onCpu(self), m = onCpu(exp_avgs), v = onCpu(exp_avg_sqs), vmax = onCpu(max_exp_avg_sqs);
  backplane::_fused_adamw_(p, onCpu(grads), m, v, vmax, step, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize);
  for (size_t i = 0; i < self.size(); ++i) {
    self[i].copy_(p[i]);
    exp_avgs[i].copy_(m[i]);
  }
}

TEST(Runner, CatchesAnOptimizerStepThatDropsItsState) {
  testing::TestDevice& dev = testing::TestDevice::install("forgetfuladamw", 1);
  Library lib("forgetfuladamw");
  ASSERT_TRUE(lib.impl("bp::_fused_adamw_", dev.type(), BP_FN(adamwForgettingSecondMoments)).ok());
  const std::vector<Result> results = runSpec(specOf("bp::_fused_adamw_"), dev.device(0));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].kernel, KernelKind::Native);
  EXPECT_EQ(results[0].outcome, Outcome::Fail) << describe(results[0]);
  EXPECT_NE(results[0].message.find("argument 'exp_avg_sqs[0]' after the call"), std::string::npos)
      << results[0].message;
}

TEST(Runner, CertifiesWhatIsDeclared) {
  testing::TestDevice& dev = testing::TestDevice::install("declaredadd", 1);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  Library lib("declaredadd");
  ASSERT_TRUE(lib.impl("bp::add.out", dev.type(), BP_FN(float32OnlyAdd), {ScalarType::Float32}).ok());
  bool seen = false;
  for (const Result& r : runSpec(specOf("bp::add.Tensor"), dev.device(0))) {
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    if (r.form != "out") continue;
    seen = true;
    EXPECT_EQ(r.kernel, KernelKind::Native);
    ASSERT_TRUE(r.dtypes.has_value());
    EXPECT_EQ(*r.dtypes, DtypeSet({ScalarType::Float32}));
    EXPECT_EQ(r.declined, KernelKind::CpuFallback);
    EXPECT_EQ(kernelTextOf(r), "native (float32), cpu_fallback (others)");
    EXPECT_EQ(r.note, "") << "float32 samples reached the kernel";
    // The worker's line carries all of it to the parent.
    std::optional<Result> back = decodeResult(encodeResult(r));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->dtypes, r.dtypes);
    EXPECT_EQ(back->declined, r.declined);
  }
  EXPECT_TRUE(seen);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
}

// Note [Declined calls]: a kernel that declines every call at run time (as
// a plugin kernel's BP_DECLINED does, through the same entry point). Its
// calls run where they would without it, the CPU fallback: the form passes,
// is counted there (so --strict fails it) and says so.
struct Decliner final : OperatorKernel {};
void declineEverything(OperatorKernel* self, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  op.serveDeclinedBoxed(ks, self, "this device adds nothing", *stack);
}

TEST(Runner, CountsCallsItsKernelDeclinesWhereTheyRan) {
  testing::TestDevice& dev = testing::TestDevice::install("declinesadd", 1);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  Library lib("declinesadd");
  ASSERT_TRUE(lib.impl("bp::add.out", dev.type(),
                       KernelFunction::makeFromBoxedFunction(&declineEverything, std::make_shared<Decliner>()))
                  .ok());
  bool seen = false;
  for (const Result& r : runSpec(specOf("bp::add.Tensor"), dev.device(0))) {
    if (r.form != "out") continue;
    seen = true;
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_EQ(r.kernel, KernelKind::CpuFallback) << "counted where the calls ran";
    EXPECT_THAT(r.note, ::testing::MatchesRegex("its native kernel declined [0-9]+ calls at run time, which ran on "
                                                "cpu_fallback"));
    EXPECT_FALSE(countsAsFailure(r, /*strict=*/false));
    EXPECT_TRUE(countsAsFailure(r, /*strict=*/true));
  }
  EXPECT_TRUE(seen);
  EXPECT_GT(Dispatcher::singleton().findOpOrThrow("bp::add.out").declinedCalls(backendKey(dev.type())), 0u);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
}

// A boxed out= kernel that must never run.
void unreachableOut(OperatorKernel*, const OperatorHandle& op, DispatchKeySet, Stack*) {
  ADD_FAILURE() << op.operatorName().qualifiedName() << ": no sample has the declared dtype";
  BP_THROW(kInternal, "unreachable");
}

TEST(Runner, NotesADeclaredDtypeNoSampleExercises) {
  // An out= form and a dtype that none of its spec's samples has, each
  // sample having a tensor argument: a kernel that declares only that dtype
  // is never called, and every sample runs through the CPU fallback.
  const OpSpec* spec = nullptr;
  std::optional<ScalarType> absent;
  for (const OpSpec& s : allSpecs()) {
    if (s.out.empty()) continue;
    uint64_t present = 0;
    bool every_sample_has_a_tensor = true;
    for (const Sample& sample : s.samples()) {
      bool tensor = false;
      for (const IValue& v : sample.args) {
        if (v.isTensor() && v.toTensor().defined()) {
          present |= uint64_t{1} << static_cast<int>(v.toTensor().dtype());
          tensor = true;
        } else if (v.isTensorList()) {
          every_sample_has_a_tensor = false;  // keep to plain tensors
        }
      }
      every_sample_has_a_tensor &= tensor;
    }
    if (!every_sample_has_a_tensor) continue;
    for (int t = 0; t < kNumScalarTypes && !absent; ++t)
      if (!((present >> t) & 1)) absent = static_cast<ScalarType>(t);
    if (absent) {
      spec = &s;
      break;
    }
  }
  ASSERT_NE(spec, nullptr) << "every out= spec's samples cover every dtype";
  testing::TestDevice& dev = testing::TestDevice::install("declaredunused", 1);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  Library lib("declaredunused");
  ASSERT_TRUE(lib.impl(spec->out, dev.type(), KernelFunction::makeFromBoxedFunction(&unreachableOut), {*absent}).ok());
  bool seen = false;
  for (const Result& r : runSpec(*spec, dev.device(0))) {
    if (r.form != "out") continue;
    seen = true;
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_EQ(r.note, "the kernel declares " + std::string(scalarTypeName(*absent)) +
                          ", which no sample of this form exercises: not certified for it")
        << spec->out;
    std::optional<Result> back = decodeResult(encodeResult(r));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->note, r.note);
  }
  EXPECT_TRUE(seen);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
}

// A worker's results reach the parent as lines (Note [Conformance workers]):
// each kernel kind, and none (a device check), survive the trip under the
// name the reports print; a line naming no kind is not a result.
TEST(Suite, ResultLinesCarryTheKernelKind) {
  const std::optional<KernelKind> kinds[] = {std::nullopt,
                                             KernelKind::Native,
                                             KernelKind::Composite,
                                             KernelKind::BackendFallback,
                                             KernelKind::CpuFallback,
                                             KernelKind::Missing};
  for (const std::optional<KernelKind>& kind : kinds) {
    Result r;
    r.op = "bp::add.out";
    r.form = "out";
    r.backend = "cpu";
    r.kernel = kind;
    r.samples = 3;
    const std::string line = encodeResult(r);
    EXPECT_NE(line.find(std::string("\t") + kernelNameOf(r) + "\t"), std::string::npos) << line;
    std::optional<Result> back = decodeResult(line);
    ASSERT_TRUE(back.has_value()) << line;
    EXPECT_EQ(back->kernel, kind) << line;
    EXPECT_EQ(back->samples, 3);
  }
  Result r;
  r.kernel = KernelKind::CpuFallback;
  std::string line = encodeResult(r);
  line.replace(line.find("cpu_fallback"), 12, "fallback");  // the name before the kinds had one each
  EXPECT_FALSE(decodeResult(line).has_value()) << line;
}

// runSpec tells its observer each sample before it runs and each form's
// result as soon as the form ends (what a worker writes to its parent), and
// starts at the form it is given (where a new worker resumes after a crash).
TEST(Runner, TellsTheObserverEachSampleBeforeItRuns) {
  const OpSpec* relu = nullptr;
  for (const OpSpec& s : allSpecs())
    if (s.op == "bp::relu") relu = &s;
  ASSERT_NE(relu, nullptr);
  const std::vector<Form> forms = formsOf(*relu);
  ASSERT_EQ(forms.size(), 4u);
  EXPECT_EQ(forms[0].op, "bp::relu");
  EXPECT_STREQ(forms[1].name, "inplace");
  EXPECT_EQ(forms[2].op, "bp::relu.out");
  EXPECT_STREQ(forms[3].name, "gradient");  // Note [Gradient forms]

  struct Event {
    size_t form;
    int number;  // 0: the form's result
    std::string sample;
  };
  std::vector<Event> events;
  SpecObserver observer;
  observer.before_sample = [&](size_t form, int number, const Sample& s) { events.push_back({form, number, s.name}); };
  observer.form_done = [&](size_t form, const Result& r) {
    EXPECT_EQ(r.op, forms[form].op);
    events.push_back({form, 0, ""});
  };
  const std::vector<Result> results = runSpec(*relu, Device(DeviceType::CPU, 0), /*first_form=*/1, observer);
  ASSERT_EQ(results.size(), 3u) << "the functional form is skipped";
  EXPECT_EQ(results[0].form, "inplace");
  EXPECT_EQ(results[1].form, "out");
  EXPECT_EQ(results[2].form, "gradient");
  // Samples 1..n of form 1, its result, then samples 1..m of form 2 and its
  // result. A sample's typed call (Note [Typed calls in conformance]) is
  // announced again, under the same number, as "<sample> (called typed)":
  // in the in-place and out= forms (relu_ and relu.out have typed calls),
  // not in the gradient form.
  size_t form = 1;
  int expected = 1;
  int typed_announcements[4] = {0, 0, 0, 0};
  const std::string typed_suffix = " (called typed)";
  for (const Event& e : events) {
    ASSERT_EQ(e.form, form);
    if (e.number == 0) {
      EXPECT_EQ(expected - 1, results[form - 1].samples) << "one announcement per sample counted";
      ++form;
      expected = 1;
      continue;
    }
    if (e.sample.ends_with(typed_suffix)) {
      EXPECT_EQ(e.number, expected - 1) << "the typed call of the sample just announced";
      ++typed_announcements[form];
      continue;
    }
    EXPECT_EQ(e.number, expected++);
    EXPECT_FALSE(e.sample.empty());
  }
  EXPECT_EQ(form, 4u) << "the three forms ended";
  EXPECT_GT(typed_announcements[1], 0) << "relu_ called typed";
  EXPECT_GT(typed_announcements[2], 0) << "relu.out called typed";
  EXPECT_EQ(typed_announcements[3], 0) << "the gradient form calls boxed only";
  EXPECT_EQ(events.front().sample, "[3,4] float32");
  EXPECT_TRUE(runSpec(*relu, Device(DeviceType::CPU, 0), /*first_form=*/4).empty());
}

// The line announcing a sample survives the trip with tabs and newlines in
// the sample's name; other lines are not announcements.
TEST(Suite, SampleLinesRoundTrip) {
  const SampleStart s{12, 2, 7, "odd\tname\nwith \\ escapes"};
  const std::string line = encodeSampleStart(s);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  std::optional<SampleStart> back = decodeSampleStart(line);
  ASSERT_TRUE(back.has_value()) << line;
  EXPECT_EQ(back->item, 12u);
  EXPECT_EQ(back->form, 2u);
  EXPECT_EQ(back->number, 7);
  EXPECT_EQ(back->sample, s.sample);
  EXPECT_FALSE(decodeSampleStart("sample\t1\tx\t3\tname").has_value());
  EXPECT_FALSE(decodeSampleStart(encodeResult(Result{})).has_value());
  EXPECT_FALSE(decodeResult(line).has_value());
}

}  // namespace
}  // namespace backplane::conformance
