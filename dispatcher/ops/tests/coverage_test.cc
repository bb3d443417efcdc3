// The standard operator table as a whole: the CPU plugin (or a composite)
// serves every op, so CPU fallback covers every device, and the structured
// ops are wired as Note [The standard operator table] says.
#include "backplane/ops/derived_forms.h"
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

// Note [Derived out= forms]: the other out= forms are derived from their
// functional op, a composite that calls it.
TEST(StandardOpCoverage, OutVariantsHaveAShapeRuleAndTheirFunctionalFormsAComposite) {
  size_t derived = 0;
  for (const StandardOp& s : standardOperators()) {
    const std::string name = qualifiedName(s);
    OperatorHandle h = Dispatcher::singleton().findOpOrThrow(name);
    bool has_out = false;
    for (const Argument& a : h.schema().arguments()) has_out |= a.isOut();
    if (s.derived_functional) {
      EXPECT_FALSE(has_out) << name << " is the functional form of " << s.derived_from;
      EXPECT_EQ(h.kernelKind(DispatchKey::CPU), KernelKind::Composite) << name;
      EXPECT_EQ(derivedFunctionalOf(s.derived_from), &s) << name;
    } else if (!s.derived_from.empty()) {
      ++derived;
      EXPECT_TRUE(has_out) << name << " is derived from " << s.derived_from << " but takes no out=";
      EXPECT_FALSE(s.meta.isValid()) << name << ": the functional op's rule runs in the call";
      EXPECT_EQ(h.kernelKind(DispatchKey::CPU), KernelKind::Composite) << name;
      EXPECT_EQ(derivedOutFormOf(s.derived_from), &s) << name;
    } else if (has_out) {
      EXPECT_NE(h.entry().meta(), nullptr) << name << " takes out= but has no meta kernel (shape rule)";
      EXPECT_TRUE(s.meta.isValid()) << name;
    }
  }
  EXPECT_EQ(derived, 53u) << "docs/operators.md and the README count them";
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

// --- Note [Derived out= forms]

Tensor emptyOut(ScalarType dtype, Device device = Device(DeviceType::CPU, 0)) {
  return Tensor(emptyTensor({0}, dtype, device));
}

// A factory's out= form has no dtype or device: the result is made in
// out's, and an empty out is resized.
TEST(DerivedOutForms, AFactoryTakesItsDtypeFromOut) {
  Tensor out = emptyOut(ScalarType::Int64);
  Stack stack{IValue(int64_t{2}), IValue(int64_t{3}), IValue(out)};  // eye.m_out(int n, int m, *, out)
  op("eye.m_out").callBoxed(stack);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].toTensor().unsafeGetImpl(), out.unsafeGetImpl()) << "the form returns its out argument";
  EXPECT_EQ(out.dtype(), ScalarType::Int64);
  EXPECT_EQ(out.toVector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0, 1, 0}));
  Tensor filled = Tensor(emptyTensor({2, 2}, ScalarType::Float64));
  callT("full.out", {IValue(std::vector<int64_t>{2, 2}), IValue(Scalar(2.5)), IValue(filled)});
  EXPECT_EQ(filled.toVector<double>(), (std::vector<double>{2.5, 2.5, 2.5, 2.5}));
}

// max.dim_max writes values and indices into its two out= arguments, in
// order, and returns both.
TEST(DerivedOutForms, EachResultGoesToItsOutArgument) {
  const Tensor x = Tensor(tensorFromVector<float>({1, 5, 3, 7, 2, 0}, {2, 3}));
  Tensor values = emptyOut(ScalarType::Float32), indices = emptyOut(ScalarType::Int64);
  Stack stack{IValue(x), IValue(int64_t{1}), IValue(false), IValue(values), IValue(indices)};
  op("max.dim_max").callBoxed(stack);
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(stack[0].toTensor().unsafeGetImpl(), values.unsafeGetImpl());
  EXPECT_EQ(stack[1].toTensor().unsafeGetImpl(), indices.unsafeGetImpl());
  EXPECT_EQ(values.toVector<float>(), (std::vector<float>{5, 7}));
  EXPECT_EQ(indices.toVector<int64_t>(), (std::vector<int64_t>{1, 0}));
  // A strided out is written in place.
  Tensor strided = Tensor(emptyTensor({3, 2}, ScalarType::Float32)).t();
  ASSERT_FALSE(strided.is_contiguous());
  callT("linear.out", {IValue(x), IValue(Tensor(tensorFromVector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3}))),
                       IValue(), IValue(strided)});
  EXPECT_EQ(strided.contiguous().toVector<float>(), x.toVector<float>());
}

// A result the call leaves undefined (output_mask drops it) leaves its out=
// argument as it was.
TEST(DerivedOutForms, AMaskedResultLeavesItsOutUntouched) {
  const Tensor x = Tensor(tensorFromVector<float>({1, 2, 3, 4}, {1, 1, 2, 2}));
  const Tensor w = Tensor(tensorFromVector<float>({1}, {1, 1, 1, 1}));
  Tensor gi = emptyOut(ScalarType::Float32), gw = emptyOut(ScalarType::Float32), gb = emptyOut(ScalarType::Float32);
  Stack stack{IValue(x),
              IValue(x),
              IValue(w),
              IValue(std::vector<int64_t>{1, 1}),
              IValue(std::vector<int64_t>{0, 0}),
              IValue(std::vector<int64_t>{1, 1}),
              IValue(int64_t{1}),
              IValue(std::vector<bool>{true, false, false}),
              IValue(gi),
              IValue(gw),
              IValue(gb)};
  op("conv2d_backward.out").callBoxed(stack);
  EXPECT_EQ(gi.toVector<float>(), x.toVector<float>()) << "a 1x1 kernel of 1 passes the gradient through";
  EXPECT_EQ(gw.numel(), 0);
  EXPECT_EQ(gb.numel(), 0);
}

// Bad out= arguments get the form's name and what to pass; an argument that
// requires grad is refused, as for every out= form.
TEST(DerivedOutForms, BadOutArgumentsGetClearErrors) {
  const Tensor x = Tensor(tensorFromVector<float>({1, 2, 3, 4}, {2, 2}));
  const Tensor w = Tensor(tensorFromVector<float>({1, 0, 0, 1, 1, 1}, {3, 2}));
  auto linear = [&](const Tensor& input, const Tensor& out) {
    callT("linear.out", {IValue(input), IValue(w), IValue(), IValue(out)});
  };
  EXPECT_THAT(
      [&] {
        linear(x, Tensor(emptyTensor({2, 2}, ScalarType::Float32)));
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
          "bp::linear.out: argument 'out' has shape [2, 2] but the result has shape [2, 3]; pass a tensor of "
          "that shape or an empty one (which is resized)")));
  EXPECT_THAT([&] { linear(x, emptyOut(ScalarType::Int64)); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "bp::linear.out: the result has dtype float32, which cannot be cast to argument 'out' of dtype "
                  "int64")));
  EXPECT_THAT([&] { linear(x, Tensor()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("bp::linear.out: argument 'out' is undefined")));
  Tensor leaf = Tensor(x.clone());
  leaf.requires_grad_();
  EXPECT_THAT([&] { linear(leaf, emptyOut(ScalarType::Float32)); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "bp::linear.out: an out= form does not record gradients, but argument 'input' requires grad")));
  // The functional op's own rule still runs.
  EXPECT_THAT(
      [&] {
        linear(Tensor(tensorFromVector<float>({1, 2, 3}, {1, 3})), emptyOut(ScalarType::Float32));
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("bp::linear")));
}

// An index result needs an out of its dtype; every out is checked before
// any is written, and one with overlapping elements before any work.
TEST(DerivedOutForms, OutsAreCheckedBeforeAnyIsWritten) {
  const Tensor x = Tensor(tensorFromVector<float>({1, 5, 3, 7, 2, 0}, {2, 3}));
  auto maxDim = [&](const Tensor& values, const Tensor& indices) {
    Stack stack{IValue(x), IValue(int64_t{1}), IValue(false), IValue(values), IValue(indices)};
    op("max.dim_max").callBoxed(stack);
  };
  Tensor values = Tensor(emptyTensor({2}, ScalarType::Float32));
  values.fill_(Scalar(-1.0));
  EXPECT_THAT([&] { maxDim(values, emptyOut(ScalarType::Float32)); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "bp::max.dim_max: argument 'max_values' has dtype float32 but the result it holds is always int64; "
                  "pass a tensor of dtype int64")));
  EXPECT_EQ(values.toVector<float>(), (std::vector<float>{-1, -1})) << "the first out was written before the second "
                                                                       "was refused";
  const Tensor row = Tensor(emptyTensor({1, 2}, ScalarType::Float32));
  EXPECT_THAT(
      [&] {
        maxDim(row.expand({2, 2}).select(1, 0), emptyOut(ScalarType::Int64));
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("bp::max.dim_max")));
  EXPECT_THAT(
      [&] {
        callT("linear.out", {IValue(x), IValue(Tensor(tensorFromVector<float>({1, 0, 0}, {1, 3}))), IValue(),
                             IValue(Tensor(emptyTensor({1, 1}, ScalarType::Float32)).expand({2, 1}))});
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("bp::linear.out: argument 'out' (sizes [2, 1], strides [0, "
                                                           "1]) has several elements at one memory location")));
}

// Only a factory computes in out's dtype; another op computes as its
// functional form does, and the result is cast into out, as in PyTorch.
TEST(DerivedOutForms, OnlyAFactoryComputesInOutsDtype) {
  const Tensor ints = Tensor(tensorFromVector<int64_t>({1, 2}, {2}));
  Tensor out = emptyOut(ScalarType::Float32);
  callT("full_like.out", {IValue(ints), IValue(Scalar(2.5)), IValue(out)});
  EXPECT_EQ(out.toVector<float>(), (std::vector<float>{2, 2})) << "2.5 filled into int64, then cast";
  EXPECT_THAT(
      [&] {
        callT("rand.out", {IValue(std::vector<int64_t>{2}), IValue(emptyOut(ScalarType::Int64))});
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr("bp::rand.out: with out's dtype int64 and device cpu")));
}

// The in-place-only ops' functional forms: a new tensor like self, which
// stays as it was.
TEST(DerivedOutForms, AnInPlaceOnlyOpGetsAFunctionalForm) {
  const Tensor self = Tensor(tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3})).t();
  const Tensor zero = callT("zero", {IValue(self)});
  EXPECT_EQ(zero.sizes(), self.sizes());
  EXPECT_TRUE(zero.is_contiguous());
  EXPECT_EQ(zero.toVector<float>(), (std::vector<float>(6, 0)));
  EXPECT_EQ(self.contiguous().toVector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6})) << "self is not written";
  const Tensor row = Tensor(tensorFromVector<int32_t>({7, 8}, {2}));
  const Tensor copied = callT("copy", {IValue(self), IValue(row.view({1, 2}).expand({3, 2})), IValue(false)});
  EXPECT_EQ(copied.dtype(), ScalarType::Float32);
  EXPECT_EQ(copied.toVector<float>(), (std::vector<float>{7, 8, 7, 8, 7, 8}));
  Tensor out = emptyOut(ScalarType::Float64);
  callT("fill.Scalar_out", {IValue(self), IValue(Scalar(1.5)), IValue(out)});
  EXPECT_EQ(out.sizes(), self.sizes());
  EXPECT_EQ(out.toVector<double>(), (std::vector<double>(6, 1.5)));
  // Gradients: copy's src gets the gradient summed over its broadcast; the
  // fill's self (whose values it does not read) gets zeros.
  Tensor src = Tensor(tensorFromVector<float>({1, 2, 3}, {3}));
  src.requires_grad_();
  Tensor into = Tensor(emptyTensor({2, 3}, ScalarType::Float32));
  callT("copy", {IValue(into), IValue(src), IValue(false)}).sum().backward();
  ASSERT_TRUE(src.grad().defined());
  EXPECT_EQ(src.grad().toVector<float>(), (std::vector<float>{2, 2, 2}));
  Tensor leaf = Tensor(self.contiguous().clone());
  leaf.requires_grad_();
  const Tensor filled = callT("fill.Scalar", {IValue(leaf), IValue(Scalar(3.0))});
  EXPECT_EQ(filled.toVector<float>(), (std::vector<float>(6, 3)));
  filled.sum().backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_EQ(leaf.grad().toVector<float>(), (std::vector<float>(6, 0)));
  // An error of the in-place op names the functional form it serves.
  EXPECT_THAT(
      [&] {
        callT("uniform", {IValue(row), IValue(0.0), IValue(1.0)});
      },
      ::testing::ThrowsMessage<Error>(
          ::testing::HasSubstr("bp::uniform (bp::uniform_ on a new tensor like self): bp::uniform_: ")));
  // Its derivation checks the two schemas.
  const absl::Status bad =
      derivedFunctionalKernel(op("zero_"), *FunctionSchema::parse("bp::zero(Tensor self, int k) -> Tensor")).status();
  EXPECT_NE(bad.message().find("they must take the same arguments"), std::string_view::npos) << bad;
}

// PyTorch's out= forms of the ops in the table exist here under its names
// (Note [Derived out= forms]), so an app's or a vendor's `op.out` is found.
TEST(DerivedOutForms, PyTorchsOutFormsOfTheTablesOpsExist) {
  for (const char* name : {"empty.out",
                           "zeros.out",
                           "ones.out",
                           "full.out",
                           "empty_like.out",
                           "zeros_like.out",
                           "ones_like.out",
                           "full_like.out",
                           "eye.out",
                           "eye.m_out",
                           "linspace.out",
                           "rand.out",
                           "randn.out",
                           "rand_like.out",
                           "randn_like.out",
                           "bernoulli.float_out",
                           "fill.Scalar_out",
                           "zero.out",
                           "uniform.out",
                           "normal.out",
                           "copy.out",
                           "max.unary_out",
                           "max.dim_max",
                           "max.out",
                           "min.unary_out",
                           "min.dim_min",
                           "min.out",
                           "norm.out",
                           "argsort.stable_out",
                           "rsub.Scalar_out",
                           "linear.out",
                           "layer_norm.out",
                           "avg_pool2d.out",
                           "embedding.out",
                           "index.Tensor_out",
                           "index_put.out",
                           "repeat_interleave.Tensor_out",
                           "_unique2.out",
                           "gelu_backward.grad_input",
                           "_softmax_backward_data.out",
                           "_log_softmax_backward_data.out",
                           "embedding_dense_backward.out",
                           "max_pool2d_backward.out",
                           "avg_pool2d_backward.grad_input",
                           "arange.out",
                           "arange.start_out",
                           "sum.out",
                           "sum.IntList_out",
                           "mean.dtype_out",
                           "mean.out",
                           "std.out",
                           "var.out",
                           "std.correction_out",
                           "var.correction_out",
                           "scatter.value_out",
                           "scatter.src_out"}) {
    EXPECT_TRUE(Dispatcher::singleton().findOp(std::string("bp::") + name).has_value()) << name;
  }
}

// On a device, the form calls the device's functional kernel; a kernel the
// device registers for the out= form itself serves it instead.
int g_device_linear_calls = 0, g_device_linear_out_calls = 0;
Tensor countingLinear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  ++g_device_linear_calls;
  return linear(input.cpu(), weight.cpu(), bias ? std::optional<Tensor>(bias->cpu()) : std::nullopt).to(input.device());
}
Tensor countingLinearOut(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                         const Tensor& out) {
  ++g_device_linear_out_calls;
  out.copy_(linear(input.cpu(), weight.cpu(), bias ? std::optional<Tensor>(bias->cpu()) : std::nullopt));
  return out;
}

TEST(DerivedOutForms, ServedByTheDevicesFunctionalKernelOrItsOwn) {
  testing::TestDevice& dev = testing::TestDevice::install("derivedout", 1);
  Library lib("derivedout");
  ASSERT_TRUE(lib.impl("bp::linear", dev.type(), BP_FN(countingLinear)).ok());
  const Tensor x = Tensor(tensorFromVector<float>({1, 2, 3, 4}, {2, 2})).to(dev.device(0));
  const Tensor w = Tensor(tensorFromVector<float>({1, 1}, {1, 2})).to(dev.device(0));
  Tensor out = emptyOut(ScalarType::Float32, dev.device(0));
  EXPECT_EQ(op("linear.out").kernelKind(backendKey(dev.type())), KernelKind::Composite);
  callT("linear.out", {IValue(x), IValue(w), IValue(), IValue(out)});
  EXPECT_EQ(g_device_linear_calls, 1);
  EXPECT_EQ(out.cpu().toVector<float>(), (std::vector<float>{3, 7}));
  // An out on another device than the result's is refused.
  EXPECT_THAT(
      [&] {
        callT("linear.out", {IValue(x), IValue(w), IValue(), IValue(emptyOut(ScalarType::Float32))});
      },
      ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
          "bp::linear.out: argument 'out' is on cpu but the result is computed on derivedout:0; pass a tensor on that "
          "device")));
  ASSERT_TRUE(lib.impl("bp::linear.out", dev.type(), BP_FN(countingLinearOut)).ok());
  EXPECT_EQ(op("linear.out").kernelKind(backendKey(dev.type())), KernelKind::Native);
  Tensor out2 = Tensor(emptyTensor({2, 1}, ScalarType::Float32, dev.device(0)));
  callT("linear.out", {IValue(x), IValue(w), IValue(), IValue(out2)});
  EXPECT_EQ(g_device_linear_out_calls, 1);
  EXPECT_EQ(g_device_linear_calls, 2) << "the native out= kernel, not the functional one, served the call";
  EXPECT_EQ(out2.cpu().toVector<float>(), (std::vector<float>{3, 7}));
}

// An out= form that does not match its functional op cannot be derived; the
// error names the mismatch.
TEST(DerivedOutForms, AFormThatDoesNotMatchItsFunctionalIsRefused) {
  auto derive = [](const char* functional, const char* out_form) {
    const absl::Status s = derivedOutKernel(op(functional), *FunctionSchema::parse(out_form)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  EXPECT_THAT(derive("linear", "bp::linear.out(Tensor input, int weight, *, Tensor(a!) out) -> Tensor(a!)"),
              ::testing::HasSubstr("argument 'weight' is int here but Tensor in the functional op"));
  EXPECT_THAT(derive("linear", "bp::linear.out(Tensor input, *, Tensor(a!) out) -> Tensor(a!)"),
              ::testing::HasSubstr("the functional op's argument 'weight' has no default and no argument here"));
  EXPECT_THAT(derive("linear", "bp::linear.out(Tensor input, Tensor weight, int k, *, Tensor(a!) out) -> Tensor(a!)"),
              ::testing::HasSubstr("argument 'k' is not an argument of the functional op"));
  EXPECT_THAT(derive("max.dim", "bp::max.dim_max(Tensor self, int dim, *, Tensor(a!) max) -> Tensor(a!)"),
              ::testing::HasSubstr("it has 1 out= arguments for 2 returns"));
  EXPECT_THAT(derive("linear", "bp::linear.out(Tensor input, Tensor weight) -> Tensor"),
              ::testing::HasSubstr("it has no out= argument"));
}

}  // namespace
}  // namespace backplane::ops_test
