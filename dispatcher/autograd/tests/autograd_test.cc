// The autograd layer through the CPU plugin: the engine's behaviour (leaves,
// accumulation, retain_graph, grad(), hooks, views, in-place ops, version
// counters, no_grad, custom functions, errors) and every derivative formula
// against central finite differences in float64.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backplane/autograd/autograd.h"
#include "backplane/autograd/optim.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/derivatives.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/testing/errors.h"
#include "backplane/testing/plugin_environment.h"
#include "test_device.h"

namespace backplane::autograd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const auto* const kEnv = &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH}).leaveFallbackMode();

Tensor doubles(std::vector<double> v, IntArrayRef sizes) { return tensorFromVector<double>(v, sizes); }
Tensor leaf(std::vector<double> v, IntArrayRef sizes) {
  Tensor t = doubles(std::move(v), sizes);
  t.requires_grad_();
  return t;
}
Tensor randomDoubles(IntArrayRef sizes, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return doubles(v, sizes);
}
std::vector<double> values(const Tensor& t) { return t.contiguous().toVector<double>(); }

std::string errorText(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// --- Engine behaviour.

TEST(Autograd, SquareSumGivesTwiceTheInput) {
  Tensor x = leaf({1, -2, 3}, {3});
  Tensor y = (x * x).sum();
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn_name(), "sumBackward");
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, -4, 6}));
}

TEST(Autograd, TensorsThatDoNotRequireGradRecordNothing) {
  Tensor a = doubles({1, 2}, {2}), b = doubles({3, 4}, {2});
  Tensor c = a * b;
  EXPECT_FALSE(c.requires_grad());
  EXPECT_TRUE(c.is_leaf());
  EXPECT_EQ(c.grad_fn_name(), "");
  EXPECT_THAT(errorText([&] { c.sum().backward(); }), HasSubstr("does not require grad"));
}

// The Autograd kernel (as the Profiling and Tracing kernels) hands its
// call's arguments on without checking the op's accepted dtypes again
// (OperatorHandle::redispatchBoxedSameArguments): the check where the call
// enters the op is what refuses them, typed or boxed.
TEST(Autograd, AnOpsAcceptedDtypesRefuseACallThatRecords) {
  Tensor x = leaf({1, 2}, {2});
  Tensor u = zeros({2}, {ScalarType::UInt16});
  const auto refused =
      AllOf(HasSubstr("bp::add.Tensor"), HasSubstr("'other'"), HasSubstr("uint16"), HasSubstr("does not accept"));
  EXPECT_THAT(errorText([&] { (void)(x + u); }), refused);
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bp::add.Tensor");
  Stack stack{IValue(x), IValue(u), IValue(Scalar(int64_t{1}))};
  EXPECT_THAT(errorText([&] { op.callBoxed(stack); }), refused);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, BroadcastGradientsAreSummedToTheInputsShape) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = leaf({10, 20, 30}, {3});
  (x + b * 2).sum().backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(6, 1));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{4, 4, 4}));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1, 2}, {2});
  (x * 3).sum().backward();
  (x * 3).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{6, 6}));
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
}

// A later backward adds into the leaf's gradient in place when nothing
// else holds it, and makes a new one when something does (that holder
// keeps its values).
TEST(Autograd, AccumulationWritesInPlaceOnlyWhenNothingElseHoldsTheGradient) {
  Tensor x = leaf({1, 2}, {2});
  (x * 3).sum().backward();
  const void* first = x.grad().data_ptr();
  (x * 3).sum().backward();
  EXPECT_EQ(x.grad().data_ptr(), first);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{6, 6}));
  const Tensor held = x.grad();
  (x * 3).sum().backward();
  EXPECT_EQ(values(held), (std::vector<double>{6, 6}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{9, 9}));
}

TEST(Autograd, AUsedTwiceInputGetsBothGradients) {
  Tensor x = leaf({2}, {1});
  (x * x * x).sum().backward();  // 3x^2
  EXPECT_EQ(values(x.grad()), (std::vector<double>{12}));
}

TEST(Autograd, NoGradRecordsNothingAndIsThreadLocal) {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard g;
    EXPECT_FALSE(isGradEnabled());
    EXPECT_FALSE((x * 2).requires_grad());
    bool other_thread_enabled = false;
    std::thread([&] { other_thread_enabled = isGradEnabled() && (x * 2).requires_grad(); }).join();
    EXPECT_TRUE(other_thread_enabled);
    {
      EnableGradGuard e;
      EXPECT_TRUE((x * 2).requires_grad());
    }
    EXPECT_FALSE((x * 2).requires_grad());
  }
  EXPECT_TRUE(isGradEnabled());
  EXPECT_TRUE((x * 2).requires_grad());
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = (x.exp()).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_NEAR(values(x.grad())[0], 2 * std::exp(1.0), 1e-12);
  Tensor z = (x.exp()).sum();
  z.backward();
  EXPECT_THAT(errorText([&] { z.backward(); }), AllOf(HasSubstr("bp::sum"), HasSubstr("retain_graph=true")));
}

TEST(Autograd, GradReturnsGradientsWithoutTouchingLeaves) {
  Tensor x = leaf({1, 2}, {2}), w = leaf({3, 4}, {2});
  std::vector<Tensor> g = grad({(x * w).sum()}, {x, w});
  EXPECT_EQ(values(g[0]), (std::vector<double>{3, 4}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{1, 2}));
  EXPECT_FALSE(x.grad().defined());
  Tensor unused = leaf({1}, {1});
  EXPECT_THAT(errorText([&] { grad({(x * 2).sum()}, {unused}); }), HasSubstr("allow_unused"));
  EXPECT_FALSE(grad({(x * 2).sum()}, {unused}, {}, std::nullopt, false, /*allow_unused=*/true)[0].defined());
}

TEST(Autograd, CreateGraphGivesSecondDerivatives) {
  Tensor x = leaf({2}, {1});
  Tensor y = (x * x * x).sum();
  Tensor dy = grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];  // 3x^2
  EXPECT_TRUE(dy.requires_grad());
  Tensor d2 = grad({dy.sum()}, {x})[0];  // 6x
  EXPECT_EQ(values(dy), (std::vector<double>{12}));
  EXPECT_EQ(values(d2), (std::vector<double>{12}));
}

TEST(Autograd, CreateGraphReachesThroughViews) {
  Tensor x = leaf({1, 2, 3, 4}, {4});
  Tensor y = (x.slice(0, 1, 3).pow(Scalar(3))).sum();  // dy/dx = 3 x^2 on [1, 3)
  Tensor dy = grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_EQ(values(dy), (std::vector<double>{0, 12, 27, 0}));
  EXPECT_EQ(values(grad({dy.sum()}, {x})[0]), (std::vector<double>{0, 12, 18, 0}));  // 6 x on [1, 3)
  Tensor m = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor z = (m.t().select(0, 2) * m.t().select(0, 2)).sum();  // column 2 of m, squared
  Tensor dz = grad({z}, {m}, {}, std::nullopt, true)[0];
  EXPECT_EQ(values(dz), (std::vector<double>{0, 0, 6, 0, 0, 12}));
  EXPECT_EQ(values(grad({dz.sum()}, {m})[0]), (std::vector<double>{0, 0, 2, 0, 0, 2}));
}

TEST(Autograd, NonScalarBackwardNeedsAGradient) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 2;
  EXPECT_THAT(errorText([&] { y.backward(); }), HasSubstr("one-element output"));
  y.backward(doubles({1, 10}, {2}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 20}));
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 2;
  std::vector<double> seen;
  registerHook(y, [&](const Tensor& g) {
    seen = values(g);
    return g * 10;
  });
  int accumulated = 0;
  registerPostAccumulateGradHook(x, [&](const Tensor& t) {
    ++accumulated;
    EXPECT_TRUE(t.grad().defined());
  });
  const uint64_t id = registerHook(x, [](const Tensor& g) { return g + 1; });
  y.sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{1, 1}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{21, 21}));
  EXPECT_EQ(accumulated, 1);
  EXPECT_TRUE(removeHook(x, id));
  EXPECT_FALSE(removeHook(x, id));
}

TEST(Autograd, RetainGradKeepsANonLeafsGradient) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 3;
  y.retain_grad();
  (y * y).sum().backward();
  EXPECT_EQ(values(y.grad()), (std::vector<double>{6, 12}));
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = leaf({1, 2}, {2});
  Tensor d = (x * 2).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_alias_of(x * 0) == false);
  (x * d).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 4}));
}

TEST(Autograd, RequiresGradIsForLeavesOfFloatingDtype) {
  Tensor x = leaf({1}, {1});
  Tensor y = x * 2;
  EXPECT_THAT(errorText([&] { y.requires_grad_(false); }), HasSubstr("only a leaf"));
  Tensor i = tensorFromVector<int64_t>({1}, {1});
  EXPECT_THAT(errorText([&] { i.requires_grad_(); }), HasSubstr("floating dtype"));
}

// --- Views.

TEST(Autograd, ViewsAreDifferentiable) {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = doubles({1, 2, 3, 4, 5, 6}, {3, 2});
  (x.t() * w).sum().backward();  // grad = w^T
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 3, 5, 2, 4, 6}));
  x.set_grad(Tensor());
  (x.slice(1, 1, 3) * 2).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 2, 2, 0, 2, 2}));
  x.set_grad(Tensor());
  x.select(0, 1).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  x.set_grad(Tensor());
  x.unsqueeze(0).expand({4, 2, 3}).sum().backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(6, 4));
  x.set_grad(Tensor());
  (x.view({6}) * doubles({1, 2, 3, 4, 5, 6}, {6})).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  x.set_grad(Tensor());
  x.permute({1, 0}).reshape({6}).sum().backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(6, 1));
}

TEST(Autograd, CloneAndContiguousPassTheGradientThrough) {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  (x.t().contiguous() * 2).sum().backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(4, 2));
}

// --- In-place ops and version counters.

TEST(Autograd, InPlaceOnANonLeafRewritesItsHistory) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 2;
  y.mul_(doubles({3, 3}, {2}));
  EXPECT_EQ(y.grad_fn_name(), "mul_Backward");
  y.sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{6, 6}));
}

TEST(Autograd, InPlaceMulUsesSelfsValueFromBeforeTheWrite) {
  Tensor x = leaf({2, 3}, {2});
  Tensor y = x * 1;
  Tensor w = leaf({5, 7}, {2});
  y.mul_(w);  // d/dw = y before the write = x
  y.sum().backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{2, 3}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{5, 7}));
}

TEST(Autograd, InPlaceOnALeafThatRequiresGradIsRefused) {
  Tensor x = leaf({1, 2}, {2});
  EXPECT_THAT(errorText([&] {
                x.add_(doubles({1, 1}, {2}));
              }),
              AllOf(HasSubstr("bp::add_.Tensor"), HasSubstr("leaf that requires grad"), HasSubstr("no_grad")));
  NoGradGuard g;  // as an optimizer step does
  x.add_(doubles({1, 1}, {2}));
  EXPECT_EQ(values(x), (std::vector<double>{2, 3}));
}

TEST(Autograd, InPlaceOnAViewOfAGradTensorIsRefused) {
  Tensor x = leaf({1, 2, 3, 4}, {4});
  Tensor y = x * 2;
  EXPECT_THAT(errorText([&] { y.slice(0, 0, 2).mul_(doubles({2}, {1})); }),
              AllOf(HasSubstr("view of a tensor that requires grad"), HasSubstr("clone()")));
}

TEST(Autograd, WritingASavedTensorIsCaughtAtBackward) {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = doubles({3, 4}, {2});  // does not require grad, saved by mul
  Tensor y = (x * w).sum();
  const uint64_t before = version(w);
  w.add_(doubles({1, 1}, {2}));
  EXPECT_GT(version(w), before);
  EXPECT_THAT(errorText([&] { y.backward(); }), AllOf(HasSubstr("bp::mul.Tensor"), HasSubstr("argument 'other'"),
                                                      HasSubstr("modified by an in-place"), HasSubstr("saved at 0")));
}

TEST(Autograd, WritingATensorNoFormulaReadsIsFine) {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = doubles({3, 4}, {2});
  Tensor y = (x + w).sum();  // add's formulas read neither tensor
  w.add_(doubles({1, 1}, {2}));
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 1}));
}

// Note [What a node saves]: a node holds only the tensors its formulas read,
// so the graph keeps no more memory alive than the backward needs.
TEST(Autograd, ANodeKeepsOnlyWhatItsFormulasRead) {
  Tensor a = leaf({1, -2, 3}, {3});
  Tensor x = a * 2;  // a non-leaf: nothing but this handle holds it
  ASSERT_EQ(x.use_count(), 1);
  Tensor sum = x + x;  // add reads neither input nor its result
  EXPECT_EQ(x.use_count(), 1);
  EXPECT_EQ(sum.storage().useCount(), 1);
  Tensor r = x.relu();  // relu reads its result only
  EXPECT_EQ(x.use_count(), 1);
  EXPECT_EQ(r.storage().useCount(), 2);
  Tensor p = x * x;  // mul reads both inputs, not its result
  EXPECT_GT(x.use_count(), 1);
  EXPECT_EQ(p.storage().useCount(), 1);
  Tensor y = x.clone();
  y.add_(doubles({1, 1, 1}, {3}));  // add_ keeps no copy of self's value from before the write
  EXPECT_EQ(y.storage().useCount(), 1);
  (sum + r + p + y).sum().backward();
  // d/da of 2x + relu(x) + x^2 + (x + 1) with x = 2a: 2 * (3 + [x > 0] + 2x).
  EXPECT_EQ(values(a.grad()), (std::vector<double>{2 * (3 + 1 + 4), 2 * (3 + 0 - 8), 2 * (3 + 1 + 12)}));
}

// Note [Leaf accumulators]: a leaf's accumulator lives with the leaf, and a
// graph that outlives a leaf drops that leaf's gradient (nothing can read it).
TEST(Autograd, AGraphOutlivingALeafStillReachesTheOthers) {
  Tensor kept = leaf({1, 2}, {2});
  Tensor y;
  {
    Tensor gone = leaf({3, 4}, {2});
    y = (gone + kept).sum();  // add saves neither input: only `gone` holds it
  }
  y.backward();
  EXPECT_EQ(values(kept.grad()), (std::vector<double>{1, 1}));
  Tensor z = (kept * 3).sum();  // the same accumulator, a second graph
  z.backward();
  EXPECT_EQ(values(kept.grad()), (std::vector<double>{4, 4}));
}

TEST(Autograd, ALeafDestroyedWhileAnotherThreadRunsBackwardIsSafe) {
  for (int i = 0; i < 200; ++i) {
    Tensor kept = leaf({1}, {1});
    Tensor y;
    std::optional<Tensor> gone = leaf({2}, {1});
    y = (*gone + kept).sum();
    std::thread t([&] { y.backward(); });
    gone.reset();
    t.join();
    EXPECT_EQ(values(kept.grad()), (std::vector<double>{1}));
  }
}

TEST(Autograd, OutFormsRefuseArgumentsThatRequireGrad) {
  Tensor x = leaf({1, 2}, {2});
  Tensor out = empty({2}, {ScalarType::Float64});
  auto addOut = Dispatcher::singleton()
                    .findOpOrThrow("bp::add.out")
                    .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
  EXPECT_THAT(errorText([&] { addOut.call(x, x, 1, out); }),
              AllOf(HasSubstr("bp::add.out"), HasSubstr("'self' requires grad"), HasSubstr("functional form")));
}

TEST(Autograd, NotImplementedRaisesAtBackwardNamingOpInputAndDevice) {
  // A backward op has no formula of its own yet (double backward).
  Tensor x = randomDoubles({2, 3}, 1);
  x.requires_grad_();
  using Sig = Tensor(const Tensor&, const Tensor&, std::string_view);
  Tensor y = Dispatcher::singleton()
                 .findOpOrThrow("bp::gelu_backward")
                 .typed<Sig>()
                 .call(randomDoubles({2, 3}, 2), x, "none");  // forward works
  EXPECT_TRUE(y.requires_grad());
  EXPECT_THAT(errorText([&] { y.sum().backward(); }),
              AllOf(HasSubstr("bp::gelu_backward"), HasSubstr("not implemented"), HasSubstr("'self' on cpu")));
}

// An op a library or plugin defines without a derivative: its forward works
// on tensors that require grad; backward through it raises, naming it.
TEST(Autograd, AnOpWithoutADeclaredDerivativeRaisesAtBackward) {
  Library lib("autograd_test");
  ASSERT_TRUE(lib.def("twice(Tensor self) -> Tensor").ok());
  ASSERT_TRUE(
      lib.impl("twice", DispatchKey::CPU,
               [](const Tensor& x) -> Tensor { return tensorFromVector<double>({x.toVector<double>()[0] * 2}, {1}); })
          .ok());
  const auto twice = Dispatcher::singleton().findOpOrThrow("autograd_test::twice").typed<Tensor(const Tensor&)>();
  Tensor x = leaf({3}, {1});
  Tensor y = twice.call(x);
  EXPECT_EQ(values(y), (std::vector<double>{6}));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_THAT(errorText([&] { y.sum().backward(); }),
              AllOf(HasSubstr("autograd_test::twice"), HasSubstr("not implemented"), HasSubstr("'self' on cpu")));
}

// Note [Declared derivatives]: an op outside the standard table declares its
// derivative as the call of a backward op; a device's own declaration
// replaces a standard op's formula for calls on that device only; a
// declaration ends with its registration; bad ones are refused, saying why.
TEST(DeclaredDerivatives, ABackwardOpBecomesTheDerivative) {
  Library lib("declared_test");
  ASSERT_TRUE(lib.def("scale(Tensor x, float k) -> Tensor").ok());
  ASSERT_TRUE(lib.def("scale_backward(Tensor grad, float k, Tensor x) -> (Tensor, Tensor)").ok());
  ASSERT_TRUE(lib.impl("scale", DispatchKey::CPU, [](const Tensor& x, double k) -> Tensor { return x * k; }).ok());
  // Returns the input's gradient and, as its second result, something no
  // input takes (skipped with `_`).
  ASSERT_TRUE(lib.impl("scale_backward", DispatchKey::CPU,
                       [](const Tensor& g, double k, const Tensor& x) -> std::tuple<Tensor, Tensor> {
                         return {g * k, x};
                       })
                  .ok());
  const auto scale =
      Dispatcher::singleton().findOpOrThrow("declared_test::scale").typed<Tensor(const Tensor&, double)>();
  {
    absl::StatusOr<DerivativeRegistration> r = declareDerivative(
        "declared_test::scale", std::nullopt, "declared_test::scale_backward(grad, k, x) -> (x, _)", "this test");
    ASSERT_TRUE(r.ok()) << r.status();
    Tensor x = leaf({1, 2}, {2});
    scale.call(x, 3.0).sum().backward();
    EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 3}));
    // A graph recorded while the declaration lived keeps it past its end.
    Tensor y = scale.call(x, 5.0).sum();
    r = DerivativeRegistration();
    x.set_grad(Tensor());
    y.backward();
    EXPECT_EQ(values(x.grad()), (std::vector<double>{5, 5}));
  }
  // Without the declaration, backward raises again.
  Tensor x = leaf({1}, {1});
  EXPECT_THAT(errorText([&] { scale.call(x, 2.0).sum().backward(); }), HasSubstr("not implemented"));
}

TEST(DeclaredDerivatives, BadDeclarationsAreRefusedSayingWhy) {
  Library lib("declared_bad");
  ASSERT_TRUE(lib.def("f(Tensor x, int n) -> Tensor").ok());
  ASSERT_TRUE(lib.def("f_backward(Tensor grad, Tensor x) -> Tensor").ok());
  auto why = [](std::string_view op, std::string_view decl, std::optional<DeviceType> dev = std::nullopt) {
    absl::StatusOr<DerivativeRegistration> r = declareDerivative(op, dev, decl, "this test");
    return r.ok() ? std::string("(accepted)") : std::string(r.status().message());
  };
  EXPECT_THAT(why("declared_bad::g", "non_differentiable"),
              HasSubstr("operator 'declared_bad::g' is not defined; def it before"));
  EXPECT_THAT(why("declared_bad::f", "declared_bad::nope(grad, x) -> x"),
              HasSubstr("backward op 'declared_bad::nope' is not defined"));
  EXPECT_THAT(why("declared_bad::f", "declared_bad::f_backward(grad) -> x"),
              HasSubstr("declared_bad::f_backward takes 2 arguments but the declaration passes 1"));
  EXPECT_THAT(why("declared_bad::f", "declared_bad::f_backward(grad, y) -> x"),
              HasSubstr("'y' is neither an argument of declared_bad::f (x, n) nor grad, gradN, result or resultN"));
  EXPECT_THAT(why("declared_bad::f", "declared_bad::f_backward(grad1, x) -> x"),
              HasSubstr("'grad1' names result 1 but declared_bad::f returns 1"));
  EXPECT_THAT(why("declared_bad::f", "declared_bad::f_backward(grad, x) -> n"),
              HasSubstr("'n' is not a tensor argument of declared_bad::f"));
  EXPECT_THAT(why("declared_bad::f", "declared_bad::f_backward(grad, x) -> (x, x)"),
              HasSubstr("returns 1 values but the declaration names 2 gradients"));
  EXPECT_THAT(why("declared_bad::f", "maybe"), HasSubstr("A declaration is non_differentiable, not_implemented"));
  EXPECT_THAT(why("bp::mul.Tensor", "non_differentiable"),
              HasSubstr("a plugin may replace it on its own device type only"));
  absl::StatusOr<DerivativeRegistration> first =
      declareDerivative("declared_bad::f", std::nullopt, "non_differentiable", "the first");
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(why("declared_bad::f", "not_implemented"), HasSubstr("already declared by the first"));
}

TEST(DeclaredDerivatives, ADevicesOwnDeclarationReplacesTheFormulaThereOnly) {
  // A "fused backward" for mul.Tensor on one device: every gradient 7 * grad.
  // The test device runs mul through the CPU fallback; the CPU keeps the formula.
  Library lib("declared_dev");
  ASSERT_TRUE(lib.def("mul_backward(Tensor grad) -> (Tensor, Tensor)").ok());
  ASSERT_TRUE(lib.implComposite("mul_backward",
                                [](const Tensor& g) -> std::tuple<Tensor, Tensor> {
                                  return {g * 7, g * 7};
                                })
                  .ok());
  testing::TestDevice& dev = testing::TestDevice::install("declareddev", 1);
  absl::StatusOr<DerivativeRegistration> r =
      declareDerivative("bp::mul.Tensor", dev.type(), "declared_dev::mul_backward(grad) -> (self, other)", "this test");
  ASSERT_TRUE(r.ok()) << r.status();
  Tensor a = leaf({2}, {1}), b = leaf({5}, {1});
  (a * b).sum().backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{5}));  // the formula: grad * other
  Tensor c = doubles({2}, {1}).to(dev.device(0));
  c.requires_grad_();
  Tensor d = doubles({5}, {1}).to(dev.device(0));
  d.requires_grad_();
  (c * d).sum().backward();
  EXPECT_EQ(values(c.grad().cpu()), (std::vector<double>{7}));  // the device's own
  EXPECT_EQ(values(d.grad().cpu()), (std::vector<double>{7}));
}

TEST(Autograd, CompositeOpsDifferentiateThroughTheirDecomposition) {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor w = leaf({1, 0, 0, 1}, {2, 2});
  Tensor b = leaf({1, 1}, {2});
  linear(x, w, b).sum().backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{4, 6, 4, 6}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 1, 1, 1}));
}

TEST(Autograd, NonDifferentiableResultsDoNotRequireGrad) {
  Tensor x = leaf({1, 2}, {2});
  EXPECT_FALSE(x.gt(doubles({1, 1}, {2})).requires_grad());
  EXPECT_FALSE(argmax(x).requires_grad());
  auto [values_, indices] = sort(x);
  EXPECT_TRUE(values_.requires_grad());
  EXPECT_FALSE(indices.requires_grad());
}

// --- Typed Autograd kernels (Note [Typed Autograd kernels]).

// Boxes `args` as a boxed caller (Python, the profiler) would, and calls `op` boxed.
template <typename... A>
Tensor callBoxed(const char* op, const A&... args) {
  Stack stack;
  (backplane::detail::ArgTraits<A>::push(stack, args), ...);
  Dispatcher::singleton().findOpOrThrow(op).callBoxed(stack);
  return Tensor(stack.at(0).toTensor());
}

// Each op's typed call (ops.h) and its boxed call, on leaves of the same
// values, record graphs that give the same gradients, bit for bit, and the
// same node: the typed kernel for a formula, and for linear (differentiated
// through its composite) the fallback it hands the call to.
TEST(TypedAutograd, ATypedCallRecordsWhatTheBoxedFallbackRecords) {
  struct Case {
    const char* what;
    std::vector<std::vector<int64_t>> shapes;
    std::function<Tensor(const std::vector<Tensor>&)> typed, boxed;
  };
  const std::vector<int64_t> last{4}, dim1{1};
  const std::vector<Case> cases = {
      {"add.Tensor with alpha",
       {{3, 4}, {4}},
       [](auto& x) { return add(x[0], x[1], Scalar(2.5)); },
       [](auto& x) { return callBoxed("bp::add.Tensor", x[0], x[1], Scalar(2.5)); }},
      {"mul.Tensor",
       {{3, 4}, {3, 4}},
       [](auto& x) { return x[0] * x[1]; },
       [](auto& x) { return callBoxed("bp::mul.Tensor", x[0], x[1]); }},
      {"softmax.int",
       {{3, 4}},
       [](auto& x) { return softmax(x[0], 1); },
       [](auto& x) { return callBoxed("bp::softmax.int", x[0], int64_t{1}, std::optional<ScalarType>()); }},
      {"sum.dim_IntList",
       {{3, 4}},
       [&](auto& x) { return sum(x[0], dim1); },
       [&](auto& x) {
         return callBoxed("bp::sum.dim_IntList", x[0], std::optional<IntArrayRef>(dim1), false,
                          std::optional<ScalarType>());
       }},
      {"layer_norm with weight, no bias",
       {{3, 4}, {4}},
       [&](auto& x) { return layer_norm(x[0], last, x[1], std::nullopt, 1e-5); },
       [&](auto& x) {
         return callBoxed("bp::layer_norm", x[0], IntArrayRef(last), std::optional<Tensor>(x[1]),
                          std::optional<Tensor>(), 1e-5, true);
       }},
      {"linear without bias (composite)",
       {{3, 4}, {2, 4}},
       [](auto& x) { return linear(x[0], x[1]); },
       [](auto& x) { return callBoxed("bp::linear", x[0], x[1], std::optional<Tensor>()); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<Tensor> a, b;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      a.push_back(randomDoubles(c.shapes[i], 7 + static_cast<uint32_t>(i)));
      b.push_back(a.back().clone());
      a.back().requires_grad_();
      b.back().requires_grad_();
    }
    Tensor typed = c.typed(a), boxed = c.boxed(b);
    ASSERT_TRUE(typed.requires_grad());
    ASSERT_TRUE(boxed.requires_grad());
    EXPECT_EQ(typed.grad_fn_name(), boxed.grad_fn_name());
    Tensor weights = randomDoubles(typed.sizes(), 99);
    (typed * weights).sum().backward();
    (boxed * weights).sum().backward();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(a[i].grad().defined()) << "input " << i;
      EXPECT_EQ(values(a[i].grad()), values(b[i].grad())) << "input " << i;
    }
  }
}

// The list names no signature that no op has (a typo would silently leave
// its ops on the fallback), and only ops that write no argument get one.
TEST(TypedAutograd, EachSignatureServesStandardOpsThatWriteNothing) {
  std::set<std::string> served;
  for (const OperatorHandle& op : Dispatcher::singleton().definedOperators()) {
    if (!op.entry().slot(DispatchKey::Autograd).kernel.hasUnboxed()) continue;
    EXPECT_EQ(op.operatorName().ns, kStandardNamespace) << op.operatorName().qualifiedName();
    EXPECT_EQ(op.entry().writtenArguments(), 0u) << op.operatorName().qualifiedName();
    served.insert(cppSignatureForSchema(op.schema()));
  }
  const std::vector<std::string> listed = detail::typedAutogradSignatures();
  EXPECT_EQ(listed.size(), 20u);
  for (const std::string& s : listed) EXPECT_TRUE(served.count(s)) << s << " serves no standard op";
  EXPECT_EQ(served.size(), listed.size());
  auto& d = Dispatcher::singleton();
  EXPECT_TRUE(d.findOpOrThrow("bp::add.Tensor").entry().slot(DispatchKey::Autograd).kernel.hasUnboxed());
  EXPECT_FALSE(d.findOpOrThrow("bp::add_.Tensor").entry().slot(DispatchKey::Autograd).kernel.hasUnboxed());
  EXPECT_FALSE(d.findOpOrThrow("bp::add.out").entry().slot(DispatchKey::Autograd).kernel.hasUnboxed());
}

// --- Custom functions.

struct ScaleBy : Function<ScaleBy> {
  static Tensor forward(AutogradContext& ctx, const Tensor& x, double c) {
    ctx.saved_data["c"] = c;
    ctx.save_for_backward({x});
    return x * c;
  }
  static std::vector<Tensor> backward(AutogradContext& ctx, std::vector<Tensor> grads) {
    EXPECT_EQ(ctx.get_saved_variables().size(), 1u);
    return {grads[0] * ctx.saved_data["c"], Tensor()};
  }
};

TEST(Autograd, CustomFunctionsRunTheirBackward) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = ScaleBy::apply(x, 5.0);
  EXPECT_TRUE(y.requires_grad());
  (y * y).sum().backward();  // 2 * 5x * 5
  EXPECT_EQ(values(x.grad()), (std::vector<double>{50, 100}));
}

// --- Optimizers (backplane/autograd/optim.h). torch_parity's optimizers
// family checks their arithmetic against torch::optim.

TEST(Optimizers, RefuseWhatCannotBeTrained) {
  const Tensor x = leaf({1, 2}, {2});
  EXPECT_THAT(
      errorText([&] {
        optim::SGD({doubles({1, 2}, {2})}, {});
      }),
      HasSubstr("SGD: parameter 0 (Tensor[2] float64 cpu) is not a leaf that requires grad; call requires_grad_()"));
  EXPECT_THAT(errorText([&] { optim::SGD({x * 2}, {}); }), HasSubstr("is not a leaf that requires grad"));
  EXPECT_THAT(errorText([&] {
                optim::AdamW({x, x}, {});
              }),
              HasSubstr("AdamW: parameters 0 and 1 are the same tensor; list each parameter once"));
  EXPECT_THAT(errorText([&] { optim::AdamW({}, {}); }), HasSubstr("AdamW: got no parameters"));
  EXPECT_THAT(errorText([&] { optim::SGD({x}, {.lr = 0.1, .nesterov = true}); }),
              HasSubstr("SGD: nesterov momentum requires momentum > 0 and dampening 0"));
  EXPECT_THAT(errorText([&] { optim::SGD({x}, {.lr = -1}); }),
              HasSubstr("SGD: option lr must be a finite number >= 0, got -1"));
  EXPECT_THAT(errorText([&] { optim::AdamW({x}, {.beta2 = 1.5}); }),
              HasSubstr("AdamW: option beta2 must be in [0, 1), got 1.5"));
}

TEST(Optimizers, StepUpdatesParametersWithGradientsAndSkipsTheRest) {
  const Tensor a = leaf({1, 2}, {2}), b = leaf({3}, {1});
  optim::SGD opt({a, b}, {.lr = 0.5});
  (a * a).sum().backward();  // b gets no gradient
  opt.step();
  EXPECT_EQ(values(a), (std::vector<double>{0, 0}));  // a - 0.5 * 2a
  EXPECT_EQ(values(b), (std::vector<double>{3}));
  EXPECT_TRUE(a.is_leaf());
  EXPECT_TRUE(a.requires_grad());
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  // The step ran under no_grad: it recorded nothing on the parameters.
  EXPECT_EQ(a.grad_fn_name(), "");
}

TEST(Optimizers, AdamWCountsStepsPerParameter) {
  const Tensor a = leaf({1}, {1}), b = leaf({2}, {1});
  optim::AdamW opt({a, b}, {.lr = 0.1, .weight_decay = 0});
  (a * 3).sum().backward();
  opt.step();
  opt.zero_grad();
  (a * 3 + b * 3).sum().backward();
  opt.step();
  EXPECT_EQ(opt.step_count(0), 2);
  EXPECT_EQ(opt.step_count(1), 1);
  // Adam's first step moves each parameter by lr against its gradient's
  // sign, whatever its size: b took its first step, a its second.
  EXPECT_NEAR(values(b)[0], 2 - 0.1, 1e-9);
  EXPECT_NEAR(values(a)[0], 1 - 0.1 - 0.1, 1e-6);
}

TEST(Optimizers, TrainALinearModelToItsTarget) {
  // y = x @ w + c for a known w and c; both optimizers drive the squared
  // error to nearly 0.
  const Tensor x = randomDoubles({16, 3}, 5), w_true = doubles({0.5, -2, 1}, {3, 1});
  const Tensor y = x.mm(w_true) + 0.25;
  for (int which = 0; which < 2; ++which) {
    const Tensor w = randomDoubles({3, 1}, 6).requires_grad_(), c = doubles({0}, {1}).requires_grad_();
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0)
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{w, c}, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
    else
      opt =
          std::make_unique<optim::AdamW>(std::vector<Tensor>{w, c}, optim::AdamWOptions{.lr = 0.05, .weight_decay = 0});
    double first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
      opt->zero_grad();
      Tensor loss = ((x.mm(w) + c - y) * (x.mm(w) + c - y)).mean();
      loss.backward();
      opt->step();
      last = loss.item<double>();
      if (step == 0) first = last;
    }
    EXPECT_LT(last, first * 1e-3) << (which == 0 ? "SGD" : "AdamW") << ": " << first << " -> " << last;
  }
}

// --- Every op declares how it differentiates (Note [Derivative declarations]).

TEST(DerivativeTable, EveryStandardOpDeclaresHowItDifferentiates) {
  std::vector<std::string> missing;
  for (const OperatorHandle& op : Dispatcher::singleton().definedOperators()) {
    if (op.operatorName().ns != kStandardNamespace) continue;
    std::string name = op.operatorName().name;
    if (!op.operatorName().overload.empty()) name += "." + op.operatorName().overload;
    if (findDerivative(name) == nullptr) missing.push_back(name);
  }
  EXPECT_THAT(missing, ::testing::IsEmpty())
      << "add each to dispatcher/ops/src/derivatives.cc: a formula, non_differentiable, not_implemented or "
         "composite";
}

TEST(DerivativeTable, EachOpIsDeclaredOnceAndFormulasNameRealArguments) {
  std::set<std::string> seen;
  for (const OpDerivative& d : derivativeTable()) {
    EXPECT_TRUE(seen.insert(d.op).second) << d.op << " is declared twice";
    const StandardOp* s = findStandardOp(d.op);
    ASSERT_NE(s, nullptr) << d.op << " is not a standard op";
    for (const DerivativeFormula& f : d.formulas) {
      forEachListedName(f.inputs, [&](std::string_view name) {
        EXPECT_NE(s->schema.find(strCat(" ", name)), std::string::npos) << d.op << "'s formula names '" << name << "'";
      });
    }
    if (d.saves != nullptr) {  // Note [What a node saves]
      forEachListedName(d.saves, [&](std::string_view name) {
        if (name != "result") {
          EXPECT_NE(s->schema.find(strCat(" ", name)), std::string::npos) << d.op << " saves '" << name << "'";
        }
      });
    }
    if (d.kind == Differentiability::Composite) {
      EXPECT_TRUE(s->composite.isValid()) << d.op;
    }
  }
}

// --- Gradcheck: every formula against central finite differences (float64,
// eps 1e-6, atol 1e-5, rtol 1e-3).

struct GradCase {
  std::string op;
  std::vector<Tensor> inputs;  // float64; the differentiable ones require grad
  std::function<Tensor(const std::vector<Tensor>&)> fn;
};

void gradcheck(const GradCase& c) {
  SCOPED_TRACE(c.op);
  std::vector<Tensor> inputs;
  for (const Tensor& t : c.inputs) {
    Tensor copy = t.detach().clone();
    if (t.requires_grad()) copy.requires_grad_();
    inputs.push_back(copy);
  }
  Tensor out = c.fn(inputs);
  Tensor weights = randomDoubles(out.sizes(), 99);  // a random projection of the output
  std::vector<Tensor> diff;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) diff.push_back(t);
  std::vector<Tensor> analytic = grad({(out * weights).sum()}, diff, {}, std::nullopt, false, true);
  const double eps = 1e-6;
  for (size_t k = 0; k < diff.size(); ++k) {
    std::vector<double> base = values(diff[k]);
    std::vector<double> numeric(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      auto eval = [&](double delta) {
        std::vector<Tensor> args;
        for (const Tensor& t : inputs) {
          if (t.unsafeGetImpl() != diff[k].unsafeGetImpl()) {
            args.push_back(t.detach());
            continue;
          }
          std::vector<double> v = base;
          v[i] += delta;
          args.push_back(doubles(v, t.sizes()));
        }
        NoGradGuard g;
        return (c.fn(args) * weights).sum().item<double>();
      };
      numeric[i] = (eval(eps) - eval(-eps)) / (2 * eps);
    }
    std::vector<double> a = analytic[k].defined() ? values(analytic[k]) : std::vector<double>(base.size(), 0);
    ASSERT_EQ(a.size(), numeric.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], numeric[i], 1e-5 + 1e-3 * std::abs(numeric[i])) << "input " << k << " element " << i;
  }
}

Tensor req(Tensor t) {
  t.requires_grad_();
  return t;
}

Tensor batchNorm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm, const Tensor& rv, bool training) {
  using Opt = const std::optional<Tensor>&;
  static const auto op = Dispatcher::singleton()
                             .findOpOrThrow("bp::batch_norm")
                             .typed<Tensor(const Tensor&, Opt, Opt, Opt, Opt, bool, double, double, bool)>();
  return op.call(x, w, b, rm, rv, training, 0.1, 1e-5, true);
}

std::vector<GradCase> gradCases() {
  const Tensor a = randomDoubles({3, 4}, 1), b = randomDoubles({4}, 2), pos = randomDoubles({3, 4}, 3, 0.5, 2);
  const Tensor m1 = randomDoubles({3, 5}, 4), m2 = randomDoubles({5, 2}, 5);
  const Tensor b1 = randomDoubles({2, 3, 4}, 6), b2 = randomDoubles({2, 4, 2}, 7);
  const Tensor mask =
      tensorFromVector<bool>({true, false, false, true, true, true, false, false, true, false, true, false}, {3, 4});
  using V = const std::vector<Tensor>&;
  std::vector<GradCase> cs = {
      {"add.Tensor", {req(a), req(b)}, [](V x) { return add(x[0], x[1], 2); }},
      {"add.Scalar", {req(a)}, [](V x) { return add(x[0], Scalar(1.5)); }},
      {"sub.Tensor", {req(a), req(b)}, [](V x) { return sub(x[0], x[1], 3); }},
      {"sub.Scalar", {req(a)}, [](V x) { return sub(x[0], Scalar(1.5)); }},
      {"rsub.Scalar", {req(a)}, [](V x) { return Scalar(2) - x[0]; }},
      {"mul.Tensor", {req(a), req(b)}, [](V x) { return mul(x[0], x[1]); }},
      {"mul.Scalar", {req(a)}, [](V x) { return mul(x[0], Scalar(-3)); }},
      {"div.Tensor", {req(a), req(pos)}, [](V x) { return div(x[0], x[1]); }},
      {"div.Scalar", {req(a)}, [](V x) { return div(x[0], Scalar(4)); }},
      {"true_divide.Tensor", {req(a), req(pos)}, [](V x) { return true_divide(x[0], x[1]); }},
      {"neg", {req(a)}, [](V x) { return neg(x[0]); }},
      {"abs", {req(a)}, [](V x) { return abs(x[0]); }},
      {"exp", {req(a)}, [](V x) { return exp(x[0]); }},
      {"log", {req(pos)}, [](V x) { return log(x[0]); }},
      {"sqrt", {req(pos)}, [](V x) { return sqrt(x[0]); }},
      {"rsqrt", {req(pos)}, [](V x) { return rsqrt(x[0]); }},
      {"sin", {req(a)}, [](V x) { return sin(x[0]); }},
      {"cos", {req(a)}, [](V x) { return cos(x[0]); }},
      {"tanh", {req(a)}, [](V x) { return tanh(x[0]); }},
      {"sigmoid", {req(a)}, [](V x) { return sigmoid(x[0]); }},
      {"relu", {req(a)}, [](V x) { return relu(x[0]); }},
      {"gelu", {req(a)}, [](V x) { return gelu(x[0]); }},
      {"gelu tanh", {req(a)}, [](V x) { return gelu(x[0], "tanh"); }},
      {"silu", {req(a)}, [](V x) { return silu(x[0]); }},
      {"erf", {req(a)}, [](V x) { return erf(x[0]); }},
      {"leaky_relu", {req(a)}, [](V x) { return leaky_relu(x[0], 0.2); }},
      {"hardtanh", {req(a)}, [](V x) { return hardtanh(x[0], -1, 1); }},
      {"elu", {req(a)}, [](V x) { return elu(x[0], 1.5); }},
      {"softplus", {req(a)}, [](V x) { return softplus(x[0], 2, 3); }},
      {"pow.Tensor_Scalar", {req(pos)}, [](V x) { return pow(x[0], Scalar(2.5)); }},
      {"pow.Tensor_Tensor", {req(pos), req(a)}, [](V x) { return pow(x[0], x[1]); }},
      {"maximum", {req(a), req(randomDoubles({3, 4}, 9))}, [](V x) { return maximum(x[0], x[1]); }},
      {"minimum", {req(a), req(randomDoubles({3, 4}, 9))}, [](V x) { return minimum(x[0], x[1]); }},
      {"clamp", {req(a)}, [](V x) { return clamp(x[0], Scalar(-0.5), Scalar(0.7)); }},
      {"where.self", {mask, req(a), req(b)}, [](V x) { return where(x[0], x[1], x[2]); }},
      {"masked_fill.Scalar", {req(a), mask}, [](V x) { return masked_fill(x[0], x[1], 2); }},
      {"mm", {req(m1), req(m2)}, [](V x) { return mm(x[0], x[1]); }},
      {"bmm", {req(b1), req(b2)}, [](V x) { return bmm(x[0], x[1]); }},
      {"addmm", {req(randomDoubles({2}, 10)), req(m1), req(m2)}, [](V x) { return addmm(x[0], x[1], x[2], 0.5, 2); }},
      {"matmul", {req(b1), req(randomDoubles({4, 2}, 11))}, [](V x) { return matmul(x[0], x[1]); }},
      {"_addmm_activation relu",
       {req(randomDoubles({2}, 16)), req(m1), req(m2)},
       [](V x) { return _addmm_activation(x[0], x[1], x[2], 1, 1, false); }},
      {"_addmm_activation gelu",
       {req(randomDoubles({3, 2}, 17)), req(m1), req(m2)},
       [](V x) { return _addmm_activation(x[0], x[1], x[2], 0.5, 2, true); }},
      {"linear",
       {req(a), req(randomDoubles({5, 4}, 12)), req(randomDoubles({5}, 13))},
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"sum", {req(a)}, [](V x) { return sum(x[0]); }},
      {"sum.dim_IntList",
       {req(b1)},
       [](V x) {
         return sum(x[0], {0, 2});
       }},
      {"sum.dim_IntList keepdim", {req(b1)}, [](V x) { return sum(x[0], {-1}, true); }},
      {"mean", {req(a)}, [](V x) { return mean(x[0]); }},
      {"mean.dim", {req(b1)}, [](V x) { return mean(x[0], {1}); }},
      {"amax", {req(a)}, [](V x) { return amax(x[0], {1}); }},
      {"amin", {req(a)}, [](V x) { return amin(x[0], {0}, true); }},
      {"var.dim", {req(a)}, [](V x) { return var(x[0], {1}); }},
      {"std.dim", {req(a)}, [](V x) { return backplane::std(x[0], {0}, true, 0); }},
      {"cumsum", {req(a)}, [](V x) { return cumsum(x[0], 1); }},
      {"softmax.int", {req(a)}, [](V x) { return softmax(x[0], 1); }},
      {"log_softmax.int", {req(a)}, [](V x) { return log_softmax(x[0], 0); }},
      {"cat",
       {req(a), req(randomDoubles({2, 4}, 14))},
       [](V x) {
         return cat({x[0], x[1]}, 0);
       }},
      {"stack",
       {req(a), req(pos)},
       [](V x) {
         return stack({x[0], x[1]}, 1);
       }},
      {"index_select",
       {req(a), tensorFromVector<int64_t>({2, 0, 2}, {3})},
       [](V x) { return index_select(x[0], 1, x[1]); }},
      {"gather",
       {req(a), tensorFromVector<int64_t>({0, 2, 1, 1, 3, 0}, {3, 2})},
       [](V x) { return gather(x[0], 1, x[1]); }},
      {"embedding",
       {req(randomDoubles({5, 3}, 15)), tensorFromVector<int64_t>({1, 4, 1, 0}, {2, 2})},
       [](V x) { return embedding(x[0], x[1], 3); }},
      {"flip",
       {req(a)},
       [](V x) {
         return flip(x[0], {0, 1});
       }},
      // Edge pads, wide enough that padded elements repeat or mirror more
      // than one input element, and through pad()'s composite.
      {"reflection_pad1d", {req(randomDoubles({2, 3, 4}, 21))}, [](V x) { return pad(x[0], {3, 2}, "reflect"); }},
      {"reflection_pad2d",
       {req(randomDoubles({1, 2, 3, 4}, 22))},
       [](V x) { return pad(x[0], {2, 3, 2, 1}, "reflect"); }},
      {"replication_pad2d",
       {req(randomDoubles({2, 3, 4}, 23))},
       [](V x) { return pad(x[0], {3, 1, 0, 4}, "replicate"); }},
      {"replication_pad3d",
       {req(randomDoubles({1, 2, 2, 3}, 24))},
       [](V x) { return pad(x[0], {1, 2, 2, 0, 1, 1}, "replicate"); }},
      {"sort", {req(a)}, [](V x) { return std::get<0>(sort(x[0], 1)); }},
      {"topk", {req(a)}, [](V x) { return std::get<0>(topk(x[0], 2, 1)); }},
      {"to.dtype", {req(a)}, [](V x) { return x[0].to(ScalarType::Float64, /*copy=*/true) * 2; }},
      {"layer_norm",
       {req(b1), req(randomDoubles({4}, 16)), req(randomDoubles({4}, 17))},
       [](V x) { return layer_norm(x[0], {4}, x[1], x[2]); }},
      {"layer_norm 2 dims, no affine",
       {req(b1)},
       [](V x) {
         return layer_norm(x[0], {3, 4});
       }},
      {"batch_norm training",
       {req(randomDoubles({4, 3, 2, 2}, 18)), req(randomDoubles({3}, 19)), req(randomDoubles({3}, 20))},
       [](V x) {
         Tensor rm = zeros({3}, {ScalarType::Float64}), rv = ones({3}, {ScalarType::Float64});
         return batchNorm(x[0], x[1], x[2], rm, rv, true);
       }},
      {"batch_norm evaluation",
       {req(randomDoubles({4, 3, 2, 2}, 21)), req(randomDoubles({3}, 22)), req(randomDoubles({3}, 23))},
       [](V x) {
         Tensor rm = randomDoubles({3}, 24), rv = randomDoubles({3}, 25, 0.5, 2);
         return batchNorm(x[0], x[1], x[2], rm, rv, false);
       }},
      {"views", {req(b1)}, [](V x) { return x[0].transpose(0, 2).slice(1, 1, 3).reshape({-1}); }},
      // The window ops (Note [Window op gradients]).
      {"conv2d",
       {req(randomDoubles({2, 3, 5, 6}, 30)), req(randomDoubles({4, 3, 3, 2}, 31)), req(randomDoubles({4}, 32))},
       [](V x) { return conv2d(x[0], x[1], x[2]); }},
      {"conv2d stride 2, padding, dilation",
       {req(randomDoubles({2, 2, 7, 6}, 33)), req(randomDoubles({3, 2, 2, 3}, 34))},
       [](V x) { return conv2d(x[0], x[1], std::nullopt, {2, 2}, {1, 2}, {2, 1}); }},
      {"conv2d groups, unbatched, stride that skips input",
       {req(randomDoubles({4, 6, 5}, 35)), req(randomDoubles({6, 2, 2, 2}, 36)), req(randomDoubles({6}, 37))},
       [](V x) { return conv2d(x[0], x[1], x[2], {3, 2}, {0, 1}, {1, 1}, 2); }},
      {"max_pool2d",
       {req(randomDoubles({2, 3, 5, 6}, 38))},
       [](V x) { return max_pool2d(x[0], {2, 3}, {1, 2}, {1, 1}); }},
      {"max_pool2d dilation, ceil_mode, unbatched",
       {req(randomDoubles({2, 7, 6}, 39))},
       [](V x) {
         static const auto op = Dispatcher::singleton()
                                    .findOpOrThrow("bp::max_pool2d")
                                    .typed<Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef,
                                                  bool)>();
         return op.call(x[0], std::vector<int64_t>{2, 2}, std::vector<int64_t>{2, 2}, std::vector<int64_t>{1, 0},
                        std::vector<int64_t>{2, 1}, true);
       }},
      {"avg_pool2d",
       {req(randomDoubles({2, 3, 5, 6}, 40))},
       [](V x) { return avg_pool2d(x[0], {3, 2}, {2, 2}, {1, 1}); }},
      {"avg_pool2d ceil_mode, count_include_pad false, divisor_override",
       {req(randomDoubles({2, 3, 5, 7}, 41))},
       [](V x) {
         static const auto op =
             Dispatcher::singleton()
                 .findOpOrThrow("bp::avg_pool2d")
                 .typed<Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool,
                               std::optional<int64_t>)>();
         const std::vector<int64_t> k{3, 3}, st{2, 2}, pd{1, 1};
         return op.call(x[0], k, st, pd, true, false, std::nullopt) +
                op.call(x[0], k, st, pd, false, true, int64_t{5});
       }},
  };
  return cs;
}

class GradCheck : public ::testing::TestWithParam<size_t> {};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  static const std::vector<GradCase> cases = gradCases();
  gradcheck(cases[GetParam()]);
}

INSTANTIATE_TEST_SUITE_P(Formulas, GradCheck, ::testing::Range<size_t>(0, gradCases().size()), [](const auto& info) {
  static const std::vector<GradCase> cases = gradCases();
  std::string n = cases[info.param].op;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

}  // namespace
}  // namespace backplane::autograd
