// The standard operator table as a whole: the CPU plugin (or a composite)
// serves every op, so CPU fallback covers every device, and the structured
// ops are wired as Note [The standard operator table] says.
#include "backplane/ops/standard_ops.h"
#include "ops_test_util.h"
#include "test_device.h"

namespace backplane::ops_test {
namespace {

std::string qualifiedName(const StandardOp& op) {
  return std::string(kStandardNamespace) + "::" + op.schema.substr(0, op.schema.find('('));
}

TEST(StandardOpCoverage, TheCpuPluginOrACompositeServesEveryOp) {
  ASSERT_GT(standardOperators().size(), 100u);
  for (const StandardOp& s : standardOperators()) {
    OperatorHandle h = Dispatcher::singleton().findOpOrThrow(qualifiedName(s));
    KernelKind k = h.kernelKind(DispatchKey::CPU);
    EXPECT_TRUE(k == KernelKind::Native || k == KernelKind::Composite)
        << qualifiedName(s) << " has no CPU kernel (" << kernelKindName(k) << ")";
    EXPECT_NE(std::string(s.family), "") << qualifiedName(s);
  }
}

TEST(StandardOpCoverage, ADeviceWithoutKernelsGetsEveryOpThroughCompositesOrCpuFallback) {
  auto& dev = testing::TestDevice::install();
  const DispatchKey key = backendKey(dev.type());
  for (const StandardOp& s : standardOperators()) {
    OperatorHandle h = Dispatcher::singleton().findOpOrThrow(qualifiedName(s));
    KernelKind k = h.kernelKind(key);
    EXPECT_TRUE(k == KernelKind::Composite || k == KernelKind::CpuFallback)
        << qualifiedName(s) << " on " << dev.device() << ": " << kernelKindName(k);
  }
}

TEST(StandardOpCoverage, OutVariantsHaveAShapeRuleAndTheirFunctionalFormsAComposite) {
  for (const StandardOp& s : standardOperators()) {
    const std::string name = qualifiedName(s);
    OperatorHandle h = Dispatcher::singleton().findOpOrThrow(name);
    bool has_out = false;
    for (const Argument& a : h.schema().arguments()) has_out |= a.isOut();
    if (has_out) {
      EXPECT_NE(h.entry().meta(), nullptr) << name << " takes out= but has no meta kernel (shape rule)";
      EXPECT_TRUE(s.meta.isValid()) << name;
    }
  }
  // Spot checks of the triple for one op of each structured family.
  for (const char* fn : {"bp::add.Tensor", "bp::sum.dim_IntList", "bp::mm", "bp::cat", "bp::index_select"}) {
    EXPECT_EQ(Dispatcher::singleton().findOpOrThrow(fn).kernelKind(DispatchKey::CPU), KernelKind::Composite) << fn;
  }
}

// Note [Dtype rules live in metas]: a rule names a tensor argument of its
// op's schema (or "result"), so none is inert through a typo, and accepts
// some dtype.
TEST(StandardOpCoverage, DtypeRulesNameTensorArgumentsOfTheirSchema) {
  size_t ops_with_rules = 0;
  for (const StandardOp& s : standardOperators()) {
    const std::string name = qualifiedName(s);
    const FunctionSchema& schema = Dispatcher::singleton().findOpOrThrow(name).schema();
    ops_with_rules += !s.dtypes.empty();
    for (const ArgumentDtypes& d : s.dtypes) {
      bool names_a_tensor = std::string_view(d.argument) == "result";
      for (const Argument& a : schema.arguments())
        names_a_tensor |= a.name == d.argument && a.type.base == BaseType::Tensor;
      EXPECT_TRUE(names_a_tensor) << name << ": the dtype rule for '" << d.argument << "' names no tensor argument";
      EXPECT_NE(d.accepted, ScalarTypeSet()) << name << ": '" << d.argument << "' accepts no dtype";
      EXPECT_NE(findStandardOp(name), nullptr) << name;
    }
  }
  EXPECT_GT(ops_with_rules, 50u);
  // The listing's words for a rule.
  // mm serves neither bool nor the barebones unsigned dtypes (Note
  // [Barebones unsigned dtypes]); copy_ serves every dtype.
  EXPECT_EQ(acceptedDtypes(*findStandardOp("bp::mm.out"), "self").toString(),
            "every dtype but bool, uint16, uint32, uint64");
  EXPECT_EQ(acceptedDtypes(*findStandardOp("mm.out"), "out").toString(), "every dtype but uint16, uint32, uint64");
  EXPECT_EQ(acceptedDtypes(*findStandardOp("copy_"), "self").toString(), "every dtype");
  EXPECT_EQ(acceptedDtypes(*findStandardOp("gather"), "index").toString(), "int64");
  EXPECT_EQ(acceptedDtypes(*findStandardOp("conv2d"), "input").toString(),
            "every dtype but bool, uint16, uint32, uint64");
  EXPECT_EQ(acceptedDtypes(*findStandardOp("avg_pool2d"), "self").toString(),
            "int64, float16, bfloat16, float32, float64");
}

}  // namespace
}  // namespace backplane::ops_test
