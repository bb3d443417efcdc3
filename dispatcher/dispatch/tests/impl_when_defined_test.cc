// Note [Kernels for operators defined later]: Library::implWhenDefined /
// Dispatcher::registerImplWhenDefined, in process. Kernels registered before
// their operator's definition wait (the op is not callable), serve calls once
// it is defined, stay inactive (with a warning, the def succeeding) if they
// do not fit, and wait again when the definition goes; a plain impl of an
// undefined op still fails at once. The same through plugins:
// plugin_impl_when_defined_test.cc.
#include <memory>
#include <string>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/cpu_kernels.h"

namespace backplane {
namespace {

using testing::expectError;
using testing::floats;
using ::testing::HasSubstr;
using ::testing::Not;

Dispatcher& dispatcher() { return Dispatcher::singleton(); }

Tensor times2(const Tensor& a, double f) {
  return testing::zipCpu(a, a, [f](float x, float) { return x * 2 * static_cast<float>(f); });
}
Tensor times3(const Tensor& a, double f) {
  return testing::zipCpu(a, a, [f](float x, float) { return x * 3 * static_cast<float>(f); });
}
Tensor wrongSignature(const Tensor& a, int64_t) { return a; }

constexpr const char* kScaleSchema = "scale(Tensor self, float factor) -> Tensor";

float callScale(const char* op, float x, double f) {
  return dispatcher().findOpOrThrow(op).typed<Tensor(const Tensor&, double)>().call(floats({x}), f).item<float>();
}

std::vector<Dispatcher::InactiveKernel> inactiveFor(const std::string& op) {
  std::vector<Dispatcher::InactiveKernel> out;
  for (Dispatcher::InactiveKernel& k : dispatcher().inactiveKernels())
    if (k.op == op) out.push_back(std::move(k));
  return out;
}

bool listed(const std::string& op) {
  for (const OperatorHandle& h : dispatcher().definedOperators())
    if (h.operatorName().qualifiedName() == op) return true;
  return false;
}

void expectInvariants() {
  absl::Status s = dispatcher().checkInvariants();
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ImplWhenDefinedTest, KernelRegisteredBeforeTheDefinitionServesCallsOnceItArrives) {
  Library device("wd1", "device library");
  ASSERT_TRUE(device.implWhenDefined("scale", DispatchKey::CPU, &times2).ok());

  // Not defined: not callable, not listed, and calls fail as for any undefined op.
  std::optional<OperatorHandle> op = dispatcher().findOp("wd1::scale");
  ASSERT_TRUE(op.has_value()) << "the registration names the op";
  EXPECT_FALSE(op->hasSchema());
  EXPECT_FALSE(listed("wd1::scale"));
  EXPECT_EQ(op->kernelKind(DispatchKey::CPU), KernelKind::Missing);
  expectError([] { dispatcher().findOpOrThrow("wd1::scale"); }, absl::StatusCode::kNotFound,
              {"cannot find wd1::scale: the operator is not defined"});
  Stack stack{floats({1}), 2.0};
  expectError([&] { op->callBoxed(stack); }, absl::StatusCode::kFailedPrecondition,
              {"operator wd1::scale is not defined"});
  std::vector<Dispatcher::InactiveKernel> waiting = inactiveFor("wd1::scale");
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].key, DispatchKey::CPU);
  EXPECT_EQ(waiting[0].registrant, "device library");
  EXPECT_THAT(waiting[0].reason, HasSubstr("wd1::scale is not defined"));
  EXPECT_THAT(dispatcher().dumpState(),
              HasSubstr("kernels waiting for their operator's definition:\n  wd1::scale CPU [device library]"));
  expectInvariants();

  Library definer("wd1", "definer library");
  ASSERT_TRUE(definer.def(kScaleSchema).ok());
  EXPECT_TRUE(listed("wd1::scale"));
  EXPECT_EQ(op->kernelKind(DispatchKey::CPU), KernelKind::Native);
  EXPECT_EQ(callScale("wd1::scale", 1.5f, 2), 6.0f);
  EXPECT_TRUE(inactiveFor("wd1::scale").empty());
  EXPECT_THAT(op->dumpState(), HasSubstr("CPU: native [device library]"));
  EXPECT_THAT(dispatcher().dumpState(), Not(HasSubstr("wd1::scale CPU [device library]")));
  expectInvariants();
}

TEST(ImplWhenDefinedTest, OnADefinedOperatorItIsImpl) {
  Library definer("wd2");
  ASSERT_TRUE(definer.def(kScaleSchema).ok());
  Library device("wd2");
  ASSERT_TRUE(device.implWhenDefined("scale", DispatchKey::CPU, &times2).ok());
  EXPECT_EQ(callScale("wd2::scale", 1, 1), 2.0f);

  // A signature that does not fit fails at once, with impl()'s message.
  absl::Status when = device.implWhenDefined("scale", DispatchKey::CPU, &wrongSignature);
  absl::Status plain = device.impl("scale", DispatchKey::CPU, &wrongSignature);
  EXPECT_EQ(when.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(when, plain);
  EXPECT_THAT(std::string(when.message()), HasSubstr("has C++ signature (Tensor, int) -> Tensor"));
  EXPECT_EQ(callScale("wd2::scale", 1, 1), 2.0f) << "the refused kernel left nothing behind";
  EXPECT_TRUE(inactiveFor("wd2::scale").empty());

  // A bad key or name is refused too.
  EXPECT_EQ(device.implWhenDefined("scale", DispatchKey::Undefined, &times2).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(device.implWhenDefined("wd2::", DispatchKey::CPU, &times2).ok());
  expectInvariants();
}

TEST(ImplWhenDefinedTest, AKernelThatDoesNotFitStaysInactiveAndTheDefinitionSucceeds) {
  Library fits("wd3", "fitting library");
  Library stale("wd3", "stale library");
  ASSERT_TRUE(fits.implWhenDefined("scale", DispatchKey::CPU, &times2).ok());
  ASSERT_TRUE(stale.implWhenDefined("scale", DispatchKey::CPU, &wrongSignature).ok());  // newer: would win

  Library definer("wd3", "definer library");
  ::testing::internal::CaptureStderr();
  absl::Status def = definer.def(kScaleSchema);
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(def.ok()) << def << ": a stale kernel must not blame the definer";
  EXPECT_THAT(log, HasSubstr("backplane: warning: the CPU kernel for wd3::scale from stale library has C++ signature "
                             "(Tensor, int) -> Tensor, but the schema wd3::scale(Tensor self, float factor) -> "
                             "Tensor (defined by definer library) needs (Tensor, float) -> Tensor; the kernel stays "
                             "inactive"));
  EXPECT_THAT(log, Not(HasSubstr("fitting library")));

  // The newest kernel that fits serves the calls.
  EXPECT_EQ(callScale("wd3::scale", 1, 1), 2.0f);
  std::vector<Dispatcher::InactiveKernel> inactive = inactiveFor("wd3::scale");
  ASSERT_EQ(inactive.size(), 1u);
  EXPECT_EQ(inactive[0].registrant, "stale library");
  EXPECT_THAT(inactive[0].reason, HasSubstr("needs (Tensor, float) -> Tensor"));
  OperatorHandle op = dispatcher().findOpOrThrow("wd3::scale");
  EXPECT_THAT(op.dumpState(), HasSubstr("CPU: native [fitting library]"));
  EXPECT_THAT(op.dumpState(), HasSubstr("CPU: inactive [stale library]: the CPU kernel for wd3::scale"));
  expectInvariants();

  // Without a fitting one, calls miss, and the error says why.
  fits.reset();
  EXPECT_EQ(op.kernelKind(DispatchKey::CPU), KernelKind::Missing);
  expectError([] { callScale("wd3::scale", 1, 1); }, absl::StatusCode::kUnimplemented,
              {"wd3::scale has no kernel for dispatch key CPU",
               "An inactive kernel: the CPU kernel for wd3::scale "
               "from stale library has C++ signature"});
  // Removing the stale kernel removes its note.
  stale.reset();
  EXPECT_TRUE(inactiveFor("wd3::scale").empty());
  EXPECT_THAT(op.dumpState(), Not(HasSubstr("inactive")));
  expectInvariants();
}

TEST(ImplWhenDefinedTest, RegistrantRemovedBeforeOrAfterTheDefinition) {
  {
    auto device = std::make_unique<Library>("wd4");
    ASSERT_TRUE(device->implWhenDefined("scale", DispatchKey::CPU, &times2).ok());
    device.reset();  // before the def
    EXPECT_TRUE(inactiveFor("wd4::scale").empty());
    Library definer("wd4");
    ASSERT_TRUE(definer.def(kScaleSchema).ok());
    EXPECT_EQ(dispatcher().findOpOrThrow("wd4::scale").kernelKind(DispatchKey::CPU), KernelKind::Missing);
    expectInvariants();
  }
  {
    auto device = std::make_unique<Library>("wd5");
    ASSERT_TRUE(device->implWhenDefined("scale", DispatchKey::CPU, &times2).ok());
    Library definer("wd5");
    ASSERT_TRUE(definer.def(kScaleSchema).ok());
    EXPECT_EQ(callScale("wd5::scale", 1, 1), 2.0f);
    device.reset();  // after the def
    EXPECT_EQ(dispatcher().findOpOrThrow("wd5::scale").kernelKind(DispatchKey::CPU), KernelKind::Missing);
    EXPECT_TRUE(inactiveFor("wd5::scale").empty());
    expectInvariants();
  }
}

TEST(ImplWhenDefinedTest, DefinerRemovedTheKernelsWaitAgainAndEachNewDefinitionChecksThem) {
  Library device("wd6", "device library");
  ASSERT_TRUE(device.implWhenDefined("scale", DispatchKey::CPU, &times2).ok());
  OperatorHandle op = *dispatcher().findOp("wd6::scale");
  {
    Library definer("wd6");
    ASSERT_TRUE(definer.def(kScaleSchema).ok());
    EXPECT_EQ(callScale("wd6::scale", 1, 1), 2.0f);
  }
  // Undefined again: waiting, not callable.
  EXPECT_FALSE(op.hasSchema());
  EXPECT_FALSE(listed("wd6::scale"));
  ASSERT_EQ(inactiveFor("wd6::scale").size(), 1u);
  EXPECT_THAT(inactiveFor("wd6::scale")[0].reason, HasSubstr("is not defined"));
  expectError([] { dispatcher().findOpOrThrow("wd6::scale"); }, {"the operator is not defined"});
  expectInvariants();
  {
    // A definition the kernel does not fit: accepted, the kernel inactive.
    Library other("wd6", "other definer");
    ::testing::internal::CaptureStderr();
    ASSERT_TRUE(other.def("scale(Tensor self, int factor) -> Tensor").ok());
    EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("(defined by other definer) needs (Tensor, int)"));
    EXPECT_EQ(op.kernelKind(DispatchKey::CPU), KernelKind::Missing);
    ASSERT_EQ(inactiveFor("wd6::scale").size(), 1u);
    EXPECT_THAT(inactiveFor("wd6::scale")[0].reason, HasSubstr("has C++ signature (Tensor, float) -> Tensor"));
    expectInvariants();
  }
  // That definition gone: waiting again, and the first one makes it active.
  ASSERT_EQ(inactiveFor("wd6::scale").size(), 1u);
  EXPECT_THAT(inactiveFor("wd6::scale")[0].reason, HasSubstr("is not defined"));
  Library definer("wd6");
  ASSERT_TRUE(definer.def(kScaleSchema).ok());
  EXPECT_EQ(callScale("wd6::scale", 1, 1), 2.0f);
  EXPECT_TRUE(inactiveFor("wd6::scale").empty());
  expectInvariants();
}

TEST(ImplWhenDefinedTest, PlainImplOfAnUndefinedOperatorStillFailsAtOnce) {
  Library device("wd7");
  absl::Status before = device.impl("scale", DispatchKey::CPU, &times2);
  EXPECT_EQ(before.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(before.message(),
            "cannot register a CPU kernel for wd7::scale: the operator is not defined. Define it first "
            "(Library::def with its schema) or load the library or plugin that defines it");
  // The same once a waiting kernel has named the op.
  ASSERT_TRUE(device.implWhenDefined("scale", DispatchKey::CPU, &times3).ok());
  EXPECT_EQ(device.impl("scale", DispatchKey::CPU, &times2), before);
  EXPECT_EQ(device.size(), 1u);
  expectInvariants();
}

TEST(ImplWhenDefinedTest, PlainImplKeptFromAnEarlierDefinitionStillBlocksOneItDoesNotFit) {
  Library device("wd8");
  Library waiting("wd8");
  {
    Library definer("wd8");
    ASSERT_TRUE(definer.def(kScaleSchema).ok());
    ASSERT_TRUE(device.impl("scale", DispatchKey::CPU, &times2).ok());
  }
  ASSERT_TRUE(waiting.implWhenDefined("scale", DispatchKey::CPU, &times3).ok());
  Library other("wd8");
  absl::Status s = other.def("scale(Tensor self, int factor) -> Tensor");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot define wd8::scale(Tensor self, int factor) -> Tensor"));
  EXPECT_TRUE(inactiveFor("wd8::scale").size() == 2u) << "both wait; the failed def marked nothing";
  ASSERT_TRUE(other.def(kScaleSchema).ok());
  EXPECT_EQ(callScale("wd8::scale", 1, 1), 3.0f) << "the newest registration wins";
  expectInvariants();
}

TEST(ImplWhenDefinedTest, BoxedKernelsAndFallbacksWhileWaiting) {
  // A boxed kernel declares no signature: it fits any definition.
  Library device("wd9");
  ASSERT_TRUE(device
                  .implWhenDefined("scale", DispatchKey::CPU,
                                   KernelFunction::makeFromBoxedFunction(
                                       [](OperatorKernel*, const OperatorHandle&, DispatchKeySet, Stack* s) {
                                         double f = s->back().toDouble();
                                         s->pop_back();
                                         Tensor a = s->back().toTensor();
                                         s->pop_back();
                                         s->emplace_back(testing::zipCpu(
                                             a, a, [f](float x, float) { return x * 5 * static_cast<float>(f); }));
                                       }))
                  .ok());
  // A fallback registered meanwhile recomputes every table, the waiting op's too.
  Library fb("wd9");
  ASSERT_TRUE(fb.fallback(DispatchKey::Tracing, KernelFunction::makeFallthrough()).ok());
  expectInvariants();
  Library definer("wd9");
  ASSERT_TRUE(definer.def(kScaleSchema).ok());
  EXPECT_EQ(callScale("wd9::scale", 1, 2), 10.0f);
  expectInvariants();
}

}  // namespace
}  // namespace backplane
