// The conformance specs as GoogleTest cases: each spec's every form on the
// CPU plugin and on a device with no kernels (composites and CPU fallback).
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "backplane/conformance/runner.h"
#include "backplane/dispatcher/dispatcher.h"
#include "backplane/dispatcher/library.h"
#include "test_device.h"

namespace backplane::conformance {
namespace {

class CpuPluginEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    absl::StatusOr<PluginStatus> s = plugins().load(BACKPLANE_CPU_PLUGIN_PATH);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->loaded) << s->error;
  }
};
::testing::Environment* const kEnv = ::testing::AddGlobalTestEnvironment(new CpuPluginEnvironment);

std::string describe(const Result& r) {
  return r.op + " (" + r.form + ") on " + r.backend + " [" + r.kernel + "]: " + outcomeName(r.outcome) +
         (r.sample.empty() ? "" : " at sample '" + r.sample + "'") + (r.message.empty() ? "" : ": " + r.message);
}

class SpecTest : public ::testing::TestWithParam<size_t> {
 protected:
  const OpSpec& spec() const { return allSpecs()[GetParam()]; }
};

TEST_P(SpecTest, PassesOnTheCpuPlugin) {
  for (const Result& r : runSpec(spec(), Device(DeviceType::CPU))) {
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_TRUE(r.kernel == "native" || r.kernel == "composite") << describe(r);
    EXPECT_GT(r.samples, 0) << describe(r);
  }
}

TEST_P(SpecTest, PassesThroughTheCpuFallback) {
  testing::TestDevice& dev = testing::TestDevice::install("conftest", 1);
  for (const Result& r : runSpec(spec(), dev.device(0))) {
    EXPECT_EQ(r.outcome, Outcome::Pass) << describe(r);
    EXPECT_TRUE(r.kernel == "fallback" || r.kernel == "composite") << describe(r);
  }
}

std::string specName(const ::testing::TestParamInfo<size_t>& info) {
  std::string n = allSpecs()[info.param].op.substr(4);  // without "bp::"
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllSpecs, SpecTest, ::testing::Range<size_t>(0, allSpecs().size()), specName);

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
      EXPECT_EQ(r.kernel, "native");
      EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
      EXPECT_NE(r.message.find("expected"), std::string::npos) << r.message;
      EXPECT_GT(r.max_abs_error, 0);
      caught = true;
    } else {
      // add.Tensor and add_.Tensor are composites over the wrong add.out.
      EXPECT_EQ(r.outcome, Outcome::Fail) << describe(r);
    }
  }
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace backplane::conformance
