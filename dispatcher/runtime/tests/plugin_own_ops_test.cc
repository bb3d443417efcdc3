// A plugin's own operator with a rule and conformance samples (BP_HostApi.meta
// and BP_HostApi.spec, ABI 1.9; Note [A plugin's own operators] in
// plugin_api.h), through a real SDK plugin (tests/plugins/tp_own_ops.cc):
// the rule runs before every kernel of the op, on the plugin's device and on
// the cpu, so a call mixing devices never reaches a kernel; the samples are
// parsed against the schema at registration (Note [Sample notation]); wrong
// registrations fail the plugin's init with what to do.
#include <cstdlib>
#include <string>

#include "backplane/core/device_type_registry.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/plugin_specs.h"
#include "backplane/testing/cpu_kernels.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif

namespace backplane {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string pluginPath() { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/tp_own_ops.so"); }

class PluginOwnOpsTest : public ::testing::Test {
 protected:
  // With the CPU plugin: the derived forms copy results with the standard
  // copy_, whose host-memory device goes through the CPU fallback. It stays
  // loaded (its libraries' static state is the process's, as in an app).
  static void SetUpTestSuite() {
    absl::StatusOr<PluginStatus> cpu = plugins().load(BACKPLANE_CPU_PLUGIN_PATH);
    ASSERT_TRUE(cpu.ok() || cpu.status().code() == absl::StatusCode::kAlreadyExists) << cpu.status();
    absl::StatusOr<PluginStatus> s = plugins().load(pluginPath());
    ASSERT_TRUE(s.ok()) << s.status();
  }
  static void TearDownTestSuite() { EXPECT_TRUE(plugins().unload("tp_own_ops").ok()); }
  void SetUp() override { type_ = *DeviceTypeRegistry::global().find("tpowndev"); }

  static int64_t calls(int64_t which) {
    return Dispatcher::singleton().findOpOrThrow("tpown::info").typed<int64_t(int64_t)>().call(which);
  }
  Tensor on(const Tensor& t, int index) const { return t.to(Device(type_, index)); }
  static Tensor addBias(const Tensor& x, const Tensor& bias) {
    return Dispatcher::singleton()
        .findOpOrThrow("tpown::add_bias")
        .typed<Tensor(const Tensor&, const Tensor&)>()
        .call(x, bias);
  }

  DeviceType type_;
};

TEST_F(PluginOwnOpsTest, TheRuleRunsBeforeTheDeviceKernel) {
  const Tensor x = testing::floats({1, 2, 3, 4, 5, 6}).view({2, 3});
  const Tensor bias = testing::floats({10, 20, 30});
  const int64_t dev0 = calls(0), cpu0 = calls(1);

  Tensor r = addBias(on(x, 0), on(bias, 0));
  EXPECT_EQ(r.device(), Device(type_, 0));
  EXPECT_EQ(r.cpu().toVector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(calls(0), dev0 + 1);

  // A bias on the host, or on the other device of the type: the rule says
  // so and no kernel runs (without it the tpowndev kernel would get a cpu
  // tensor: both are host memory here, so it would even "work").
  try {
    addBias(on(x, 0), bias);
    FAIL() << "a bias on the cpu reached a kernel";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tpown::add_bias: x is on tpowndev:0 but bias is on cpu:0"));
    EXPECT_THAT(e.what(), HasSubstr("the shape rule (meta) of plugin 'tp_own_ops' for tpown::add_bias"));
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THROW(addBias(on(x, 0), on(bias, 1)), Error);
  EXPECT_THAT(
      [&] {
        addBias(on(x, 1), on(testing::floats({1, 2}), 1));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("bias must have x's last size")));
  EXPECT_EQ(calls(0), dev0 + 1);
  EXPECT_EQ(calls(1), cpu0);
}

TEST_F(PluginOwnOpsTest, TheRuleRunsBeforeTheCpuKernelAndTheCpuFallback) {
  const Tensor x = testing::floats({1, 2, 3, 4}).view({2, 2});
  const int64_t cpu0 = calls(1);
  EXPECT_THROW(addBias(x, testing::floats({1, 2, 3})), Error);
  EXPECT_EQ(calls(1), cpu0);
  // float64 has no tpowndev kernel (it declares float32): the call would go
  // to the CPU fallback; the rule refuses the mixed call before that.
  EXPECT_THAT([&] { addBias(on(x, 0), Tensor(emptyTensor({2}, ScalarType::Float64, Device(type_, 0)))); },
              ::testing::ThrowsMessage<Error>(HasSubstr("x and bias differ in dtype")));
  EXPECT_EQ(calls(1), cpu0);
  EXPECT_EQ(addBias(x, testing::floats({1, 2})).toVector<float>(), (std::vector<float>{2, 4, 4, 6}));
  EXPECT_EQ(calls(1), cpu0 + 1);
}

// A dtype neither the device kernel nor the cpu kernel declares: the error
// speaks of the caller's device and tensors and of both declarations, not
// of a CPU call the caller never made (it used to say "no kernel for
// dispatch key CPU"); nothing was copied to the host first.
TEST_F(PluginOwnOpsTest, ADtypeNoKernelTakesIsReportedForTheCallersDevice) {
  Tensor x(emptyTensor({2}, ScalarType::Float64, Device(type_, 1)));
  Tensor b(emptyTensor({2}, ScalarType::Float64, Device(type_, 1)));
  const int64_t cpu0 = calls(1);
  try {
    addBias(x, b);
    FAIL() << "a float64 call found a kernel";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(e.what(), HasSubstr("tpown::add_bias has no kernel for tpowndev:1 that takes float64 (arguments: "
                                    "Tensor[2] float64 tpowndev:1, Tensor[2] float64 tpowndev:1): its tpowndev kernel "
                                    "declares float32 and refuses float64, so the call went to the CPU fallback, whose "
                                    "CPU kernel (plugin tp_own_ops) declares float32 and refuses float64. Declare "
                                    "float64 in the CPU kernel's registration and handle it, or call with one of "
                                    "float32"));
    EXPECT_THAT(e.what(), Not(HasSubstr("dispatch key CPU")));
  }
  EXPECT_EQ(calls(1), cpu0);
}

TEST_F(PluginOwnOpsTest, TheSamplesAreDeclaredParsedAndExpandedPerDtype) {
  std::shared_ptr<const DeclaredSpec> spec;
  for (auto& s : declaredSpecs())
    if (s->op == "tpown::add_bias") spec = s;
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->plugin, "tp_own_ops");
  EXPECT_FALSE(spec->reference.isValid()) << "no reference function: the cpu kernel is the reference";
  ASSERT_EQ(spec->samples.size(), 4u);
  EXPECT_EQ(spec->samples[0].name, "rows float32");
  EXPECT_FALSE(spec->samples[0].must_raise);
  EXPECT_EQ(spec->samples[0].args[0].sizes, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(spec->samples[0].args[0].dtype, ScalarType::Float32);
  EXPECT_TRUE(spec->samples[1].args[0].transposed);
  EXPECT_EQ(spec->samples[2].name, "bias of the wrong length");
  EXPECT_TRUE(spec->samples[2].must_raise);
  EXPECT_TRUE(spec->samples[3].args[1].on_host);
  EXPECT_FALSE(spec->samples[3].args[0].on_host);
}

// Note [Derived forms]: the out= and in-place forms the host derives from
// the functional op call its rule and kernel and copy the result.
TEST_F(PluginOwnOpsTest, DerivedOutAndInplaceFormsCallTheFunctionalOp) {
  const DerivedFormNames names = derivedFormsOf("tpown::add_bias");
  EXPECT_EQ(names.out, "tpown::add_bias.out");
  EXPECT_EQ(names.inplace, "tpown::add_bias_");
  OperatorHandle out_op = Dispatcher::singleton().findOpOrThrow("tpown::add_bias.out");
  EXPECT_EQ(out_op.schema().toString(), "tpown::add_bias.out(Tensor x, Tensor bias, *, Tensor(a!) out) -> Tensor(a!)");
  EXPECT_EQ(Dispatcher::singleton().findOpOrThrow("tpown::add_bias_").schema().toString(),
            "tpown::add_bias_(Tensor(a!) x, Tensor bias) -> Tensor(a!)");
  EXPECT_EQ(out_op.kernelKind(backendKey(type_)), KernelKind::Composite);
  auto add_out = out_op.typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  auto add_ = Dispatcher::singleton().findOpOrThrow("tpown::add_bias_").typed<Tensor(const Tensor&, const Tensor&)>();

  const Tensor x = on(testing::floats({1, 2, 3, 4}).view({2, 2}), 0);
  const Tensor bias = on(testing::floats({10, 20}), 0);
  const int64_t dev0 = calls(0);
  Tensor out(emptyTensor({0}, ScalarType::Float32, Device(type_, 0)));
  Tensor r = add_out.call(x, bias, out);
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 2})) << "an empty out is resized";
  EXPECT_EQ(out.cpu().toVector<float>(), (std::vector<float>{11, 22, 13, 24}));
  EXPECT_EQ(calls(0), dev0 + 1) << "the functional op's tpowndev kernel ran";
  EXPECT_THAT([&] { add_out.call(x, bias, Tensor(emptyTensor({3}, ScalarType::Float32, Device(type_, 0)))); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tpown::add_bias.out: argument 'out' has shape [3] but the "
                                                        "result has shape [2, 2]")));
  EXPECT_THAT(
      [&] {
        add_out.call(x, bias, Tensor(emptyTensor({2, 2}, ScalarType::Float32)));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("argument 'out' is on cpu")));
  // The rule still runs first: a bias of the wrong size never reaches a kernel.
  EXPECT_THAT(
      [&] {
        add_out.call(x, on(testing::floats({1, 2, 3}), 0), out);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("bias must have x's last size")));

  Tensor self = x.clone();
  EXPECT_EQ(add_.call(self, bias).unsafeGetImpl(), self.unsafeGetImpl());
  EXPECT_EQ(self.cpu().toVector<float>(), (std::vector<float>{11, 22, 13, 24}));
  EXPECT_EQ(x.cpu().toVector<float>(), (std::vector<float>{1, 2, 3, 4}));

  Tensor leaf = testing::floats({1, 2});
  leaf.requires_grad_();
  EXPECT_THAT(
      [&] {
        add_out.call(leaf, testing::floats({1, 1}), Tensor(emptyTensor({0}, ScalarType::Float32)));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("records no gradient; call tpown::add_bias instead")));
}

// impl with BP_ANY_DEVICE_TYPE: the op's composite serves every device.
TEST_F(PluginOwnOpsTest, ACompositeServesEveryDevice) {
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("tpown::add_bias_twice");
  EXPECT_EQ(op.kernelKind(backendKey(type_)), KernelKind::Composite);
  EXPECT_EQ(op.kernelKind(DispatchKey::CPU), KernelKind::Composite);
  auto f = op.typed<Tensor(const Tensor&, const Tensor&)>();
  const int64_t dev0 = calls(0), cpu0 = calls(1);
  Tensor r = f.call(on(testing::floats({1, 2}), 1), on(testing::floats({10, 20}), 1));
  EXPECT_EQ(r.device(), Device(type_, 1));
  EXPECT_EQ(r.cpu().toVector<float>(), (std::vector<float>{21, 42}));
  EXPECT_EQ(calls(0), dev0 + 2) << "add_bias's tpowndev kernel ran twice under the composite";
  EXPECT_EQ(f.call(testing::floats({1}), testing::floats({1})).toVector<float>(), (std::vector<float>{3}));
  EXPECT_EQ(calls(1), cpu0 + 2);
}

// Note [Sample notation]: what a vendor's typo gets.
TEST(SampleNotationTest, ErrorsNameTheLineAndWhatIsWrong) {
  const FunctionSchema schema = *FunctionSchema::parse(
      "ns::op(Tensor x, Tensor? w, int[] dims, float eps, ScalarType dtype, bool flag) -> Tensor");
  auto parse = [&](const char* text) { return parseSampleNotation(schema, text); };
  absl::StatusOr<std::vector<SampleDecl>> ok = parse(
      "dtypes: float32, bfloat16\n# a comment\n\nall: T[2,3].T, none, [0, 1], 1, float16, true\n"
      "raises fixed: int64[], float32[3]@cpu, [], -0.5, int8, false\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[1].name, "all bfloat16");
  EXPECT_EQ((*ok)[1].args[0].dtype, ScalarType::BFloat16);
  EXPECT_EQ((*ok)[1].args[2].ints, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ((*ok)[1].args[3].kind, SampleArg::Kind::Int);
  EXPECT_EQ((*ok)[1].args[4].dtype, ScalarType::Float16);
  EXPECT_TRUE((*ok)[2].must_raise);
  EXPECT_TRUE((*ok)[2].args[0].sizes.empty());
  EXPECT_DOUBLE_EQ((*ok)[2].args[3].d, -0.5);

  auto message = [&](const char* text) { return std::string(parse(text).status().message()); };
  EXPECT_THAT(message("a: float32[2], none, [1], 1, float32"),
              HasSubstr("line 1 (a: float32[2], none, [1], 1, float32): 5 arguments"));
  EXPECT_THAT(message("\na: none, none, [1], 1, float32, true"), HasSubstr("line 2"));
  EXPECT_THAT(message("a: none, none, [1], 1, float32, true"), HasSubstr("argument 1 (Tensor x) is 'none'"));
  EXPECT_THAT(message("a: float32[2], none, [1], 1, float32, 1"), HasSubstr("it takes true or false"));
  EXPECT_THAT(message("a: float32[2], none, [1], \"x\", float32, true"), HasSubstr("it takes a number"));
  EXPECT_THAT(message("a: flaot32[2], none, [1], 1, float32, true"), HasSubstr("flaot32"));
  EXPECT_THAT(message("a: float32[2].X, none, [1], 1, float32, true"), HasSubstr("only .T and @cpu may follow"));
  EXPECT_THAT(message("a: float32[2].T, none, [1], 1, float32, true"), HasSubstr(".T needs at least two dims"));
  EXPECT_THAT(message("a: T[2], none, [1], 1, float32, true"), HasSubstr("T needs a dtypes: line"));
  EXPECT_THAT(message("a float32[2], none, [1], 1, float32, true"), HasSubstr("no ':'"));
  EXPECT_THAT(message("# only a comment"), HasSubstr("hold no sample call"));
  EXPECT_THAT(message("a: float32[2], none, [1], \"x, float32, true"), HasSubstr("a string is not closed"));
  EXPECT_THAT(message("raises: float32[2], none, [1], 1, float32, true"), HasSubstr("the sample has no name"));
  EXPECT_THAT(message("a: float32[2], none, [1], 99999999999999999999, float32, true"),
              HasSubstr("'99999999999999999999' is out of the int64 range"));
  EXPECT_THAT(message("a: float32[1048576,1048576], none, [1], 1, float32, true"),
              HasSubstr("at most 16777216 elements"));
  EXPECT_THAT(message("a: float32[2], none, [1], 1, float32, true\na: float32[3], none, [1], 1, float32, true"),
              HasSubstr("line 2 (a: float32[3], none, [1], 1, float32, true): a second sample named 'a'"));
  absl::StatusOr<std::vector<SampleDecl>> spaced = parse("dtypes : float64\nb: T[1], none, [], 1, float32, false");
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_EQ((*spaced)[0].name, "b float64");
}

// Wrong registrations of a rule or samples fail the plugin's init, naming
// the operator and what to do; the plugin is not loaded.
TEST(PluginOwnOpsRegistrationTest, WrongRegistrationsFailInit) {
  const std::pair<const char*, const char*> cases[] = {
      {"meta_standard", "meta(bp::add.Tensor): the operator is not this plugin's"},
      {"meta_undefined", "meta(tpown::add_bais): the plugin has not defined it; def() it first. Did you mean"},
      {"meta_twice", "meta(tpown::add_bias) again: an operator has one rule"},
      {"meta_signature", "the meta of tpown::add_bias has C++ signature (Tensor) -> (), but the schema"},
      {"spec_twice", "spec(tpown::add_bias): a second spec"},
      {"spec_count", "line 1 (one: 1, 2): 2 arguments, but tpown::info(int which) -> int takes 1"},
      {"spec_kind", "argument 1 (int which) is 'float32[2]': it takes an int"},
      {"spec_t", "line 4 (second: T[3]): T needs a dtypes: line"},
      {"spec_dtype", "line 1 (dtypes: float33)"},
      {"spec_empty", "hold no sample call"},
      {"forms_twice", "derive_forms(tpown::add_bias) again"},
      {"forms_int",
       "cannot derive the out= and in-place forms of tpown::info (tpown::info(int which) -> int): it must "
       "return one Tensor"},
      {"forms_none", "forms must be BP_FORM_OUT, BP_FORM_INPLACE or both"},
      {"composite_standard", "impl(BP_ANY_DEVICE_TYPE)(bp::neg): the operator is not this plugin's"},
  };
  for (const auto& [bad, expected] : cases) {
    SCOPED_TRACE(bad);
    ASSERT_EQ(setenv("TPOWN_BAD", bad, 1), 0);
    absl::StatusOr<PluginStatus> s = plugins().load(pluginPath());
    unsetenv("TPOWN_BAD");
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(expected));
    EXPECT_FALSE(Dispatcher::singleton().findOp("tpown::add_bias").has_value() &&
                 Dispatcher::singleton().findOp("tpown::add_bias")->hasSchema())
        << "a failed init left its operator defined";
  }
  // A failed init left nothing behind: the good plugin loads again, with one
  // spec and one pair of derived forms (a leftover would refuse the second).
  absl::StatusOr<PluginStatus> good = plugins().load(pluginPath());
  ASSERT_TRUE(good.ok()) << good.status();
  int specs = 0;
  for (auto& spec : declaredSpecs()) specs += spec->op == "tpown::add_bias";
  EXPECT_EQ(specs, 1);
  EXPECT_EQ(derivedFormsOf("tpown::add_bias").out, "tpown::add_bias.out");
  EXPECT_TRUE(plugins().unload("tp_own_ops").ok());
  EXPECT_TRUE(declaredSpecs().empty() || declaredSpecs().front()->op != "tpown::add_bias");
  EXPECT_EQ(derivedFormsOf("tpown::add_bias").out, "") << "unloading removed the derived forms";
}

}  // namespace
}  // namespace backplane
