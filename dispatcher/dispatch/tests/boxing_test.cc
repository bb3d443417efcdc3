// Boxed and unboxed calls in both directions, argument conversion, defaults
// and the canonical-signature rules.
#include "backplane/dispatch/boxing.h"

#include "backplane/dispatch/library.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/cpu_kernels.h"

namespace backplane {
namespace {

using testing::expectError;
using testing::floats;
using ::testing::HasSubstr;

// Every argument kind in one schema; the kernel echoes what it received.
constexpr const char* kEverythingSchema =
    "everything(Tensor a, Tensor? b, Tensor[] c, int d, int[2] e, int[]? f, float g, float? h, "
    "bool i, str j, Scalar k, Scalar? l, ScalarType? m, Device? n) -> (Tensor, Tensor)";

struct Seen {
  bool b_present;
  size_t c_count;
  int64_t d;
  std::vector<int64_t> e;
  bool f_present;
  double g;
  std::optional<double> h;
  bool i;
  std::string j;
  Scalar k;
  std::optional<Scalar> l;
  std::optional<ScalarType> m;
  std::optional<Device> n;
};
Seen g_seen;

std::tuple<Tensor, Tensor> everything(const Tensor& a, const std::optional<Tensor>& b, TensorList c, int64_t d,
                                      IntArrayRef e, std::optional<IntArrayRef> f, double g, std::optional<double> h,
                                      bool i, std::string_view j, const Scalar& k, const std::optional<Scalar>& l,
                                      std::optional<ScalarType> m, std::optional<Device> n) {
  g_seen = Seen{b.has_value(), c.size(), d, e.vec(), f.has_value(), g, h, i, std::string(j), k, l, m, n};
  return {a, c.empty() ? a : c[0]};
}

TEST(BoxingTest, SchemaAndKernelSignaturesAgreeForEveryArgumentKind) {
  FunctionSchema schema = *FunctionSchema::parse(std::string("bx::") + kEverythingSchema);
  KernelFunction k = KernelFunction::makeFromFunction(BP_FN(everything));
  EXPECT_EQ(k.cppSignature(), cppSignatureForSchema(schema));
  EXPECT_EQ(k.cppSignature(),
            "(Tensor, Tensor?, Tensor[], int, int[], int[]?, float, float?, bool, str, Scalar, Scalar?, "
            "ScalarType?, Device?) -> (Tensor, Tensor)");
}

TEST(BoxingTest, UnboxedKernelCalledBoxedAndTyped) {
  Library lib("bx");
  ASSERT_TRUE(lib.def(kEverythingSchema).ok());
  ASSERT_TRUE(lib.impl("everything", DispatchKey::CPU, BP_FN(everything)).ok());
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bx::everything");
  Tensor a = floats({1}), c0 = floats({2});

  Stack stack{a,
              IValue(),
              std::vector<Tensor>{c0},
              int64_t{4},
              std::vector<int64_t>{5, 6},
              IValue(),
              1.5,
              2.5,
              true,
              "mode",
              Scalar(int64_t{7}),
              IValue(),
              ScalarType::Float16,
              Device(DeviceType::CPU)};
  op.callBoxed(stack);
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_TRUE(stack[0].toTensor().is_alias_of(a));
  EXPECT_TRUE(stack[1].toTensor().is_alias_of(c0));
  EXPECT_FALSE(g_seen.b_present);
  EXPECT_EQ(g_seen.c_count, 1u);
  EXPECT_EQ(g_seen.d, 4);
  EXPECT_EQ(g_seen.e, (std::vector<int64_t>{5, 6}));
  EXPECT_FALSE(g_seen.f_present);
  EXPECT_EQ(g_seen.g, 1.5);
  EXPECT_EQ(g_seen.h, 2.5);
  EXPECT_TRUE(g_seen.i);
  EXPECT_EQ(g_seen.j, "mode");
  EXPECT_EQ(g_seen.k, Scalar(int64_t{7}));
  EXPECT_FALSE(g_seen.l.has_value());
  EXPECT_EQ(g_seen.m, ScalarType::Float16);

  auto typed = op.typed<std::tuple<Tensor, Tensor>(
      const Tensor&, const std::optional<Tensor>&, TensorList, int64_t, IntArrayRef, std::optional<IntArrayRef>, double,
      std::optional<double>, bool, std::string_view, const Scalar&, const std::optional<Scalar>&,
      std::optional<ScalarType>, std::optional<Device>)>();
  std::vector<Tensor> list{c0, a};
  std::vector<int64_t> f{9};
  auto [r0, r1] = typed.call(a, c0, list, 1, {2, 3}, IntArrayRef(f), 0.5, std::nullopt, false, "x", 2.5, Scalar(true),
                             std::nullopt, std::nullopt);
  EXPECT_TRUE(r1.is_alias_of(c0));
  EXPECT_TRUE(g_seen.b_present);
  EXPECT_EQ(g_seen.c_count, 2u);
  EXPECT_TRUE(g_seen.f_present);
  EXPECT_EQ(g_seen.k, Scalar(2.5));
  EXPECT_EQ(g_seen.l, Scalar(true));
}

TEST(BoxingTest, BoxedKernelCalledTyped) {
  Library lib("bx2");
  ASSERT_TRUE(lib.def("scaled(Tensor a, int times, str label) -> (Tensor, int)").ok());
  static std::string label_seen;
  ASSERT_TRUE(lib.impl("scaled", DispatchKey::CPU,
                       KernelFunction::makeFromBoxedFunction(
                           [](OperatorKernel*, const OperatorHandle& op, DispatchKeySet, Stack* s) {
                             EXPECT_EQ(op.operatorName().name, "scaled");
                             label_seen = s->back().toString();
                             int64_t times = (*s)[s->size() - 2].toInt();
                             Tensor a = (*s)[s->size() - 3].toTensor();
                             s->resize(s->size() - 3);
                             s->emplace_back(a);
                             s->emplace_back(times * 2);
                           }))
                  .ok());
  auto op = Dispatcher::singleton()
                .findOpOrThrow("bx2::scaled")
                .typed<std::tuple<Tensor, int64_t>(const Tensor&, int64_t, std::string_view)>();
  Tensor a = floats({1});
  auto [t, n] = op.call(a, 21, "hello");
  EXPECT_TRUE(t.is_alias_of(a));
  EXPECT_EQ(n, 42);
  EXPECT_EQ(label_seen, "hello");
}

TEST(BoxingTest, BoxedCallFillsDefaultsAndChecksTypes) {
  Library lib("bx3");
  ASSERT_TRUE(lib.def("defaults(Tensor a, int k=3, *, float alpha=1, str mode=\"x\", Scalar s=2, "
                      "MemoryFormat? fmt=None, int[2] stride=1) -> Tensor")
                  .ok());
  static int64_t k_seen;
  static double alpha_seen;
  static std::string mode_seen;
  static std::vector<int64_t> stride_seen;
  ASSERT_TRUE(lib.impl("defaults", DispatchKey::CPU,
                       [](const Tensor& a, int64_t k, double alpha, std::string mode, const Scalar& s,
                          std::optional<int64_t> fmt, IntArrayRef stride) {
                         k_seen = k;
                         alpha_seen = alpha + s.toDouble();
                         mode_seen = mode;
                         stride_seen = stride.vec();
                         EXPECT_FALSE(fmt.has_value());
                         return a;
                       })
                  .ok());
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bx3::defaults");
  Stack stack{floats({1})};
  op.callBoxed(stack);
  EXPECT_EQ(k_seen, 3);
  EXPECT_EQ(alpha_seen, 3.0);
  EXPECT_EQ(mode_seen, "x");
  EXPECT_EQ(stride_seen, (std::vector<int64_t>{1, 1}));

  Stack bad{int64_t{5}};
  expectError([&] { op.callBoxed(bad); }, {"bx3::defaults: argument 'a' (position 0) must be Tensor but got int"});
  Stack too_many{floats({1}), 1, 1.0, "m", 1, IValue(), std::vector<int64_t>{1, 1}, 8};
  expectError([&] { op.callBoxed(too_many); }, {"takes 7 arguments but the boxed call passed 8"});
  Stack none;
  expectError([&] { op.callBoxed(none); }, {"missing argument 'a'"});
}

// Found by fuzz_library_registration: the schema check accepts an int[] for
// a float[] and a Tensor[] for a Tensor?[], but typed kernels then failed to
// unbox them ("expected a value of type float[] but got int[]"). callBoxed
// converts them (Note [Boxed argument conversions]).
TEST(BoxingTest, BoxedCallConvertsTheListsItAccepts) {
  Library lib("bx3c");
  ASSERT_TRUE(lib.def("scale(float[] factors, Tensor?[] maybe) -> float").ok());
  static std::vector<double> factors_seen;
  static size_t maybe_seen;
  ASSERT_TRUE(lib.impl("scale", DispatchKey::CPU,
                       [](ArrayRef<double> factors, ArrayRef<std::optional<Tensor>> maybe) {
                         factors_seen = factors.vec();
                         maybe_seen = maybe.size();
                         return factors.empty() ? 0.0 : factors[0];
                       })
                  .ok());
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bx3c::scale");
  Stack stack{std::vector<int64_t>{2, -3}, std::vector<TensorBase>{floats({1}), floats({2})}};
  op.callBoxed(stack);
  EXPECT_EQ(factors_seen, (std::vector<double>{2.0, -3.0}));
  EXPECT_EQ(maybe_seen, 2u);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].toDouble(), 2.0);
  // The schema's own types pass through unchanged.
  Stack exact{std::vector<double>{0.5}, std::vector<std::optional<TensorBase>>{std::nullopt}};
  op.callBoxed(exact);
  EXPECT_EQ(factors_seen, (std::vector<double>{0.5}));
  EXPECT_EQ(maybe_seen, 1u);
}

TEST(BoxingTest, StatefulLambdasAndKeySetParameter) {
  Library lib("bx4");
  ASSERT_TRUE(lib.def("count(Tensor a) -> int").ok());
  auto calls = std::make_shared<int>(0);
  ASSERT_TRUE(lib.impl("count", DispatchKey::CPU,
                       [calls](DispatchKeySet ks, const Tensor&) -> int64_t {
                         EXPECT_TRUE(ks.has(DispatchKey::CPU));
                         return ++*calls;
                       })
                  .ok());
  auto op = Dispatcher::singleton().findOpOrThrow("bx4::count").typed<int64_t(const Tensor&)>();
  EXPECT_EQ(op.call(floats({1})), 1);
  EXPECT_EQ(op.call(floats({1})), 2);
  EXPECT_EQ(*calls, 2);
}

TEST(BoxingTest, BoxedKernelReturningTheWrongCountIsAnInternalError) {
  Library lib("bx5");
  ASSERT_TRUE(lib.def("liar(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("liar", DispatchKey::CPU,
                       KernelFunction::makeFromBoxedFunction(
                           [](OperatorKernel*, const OperatorHandle&, DispatchKeySet, Stack* s) { s->clear(); }))
                  .ok());
  auto op = Dispatcher::singleton().findOpOrThrow("bx5::liar").typed<Tensor(const Tensor&)>();
  try {
    op.call(floats({1}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(e.message(), HasSubstr("left 0 values on the stack but the schema has 1 returns"));
  }
}

TEST(BoxingTest, IValueAccessorsNameBothTypesOnMismatch) {
  IValue v(int64_t{3});
  EXPECT_EQ(v.toDouble(), 3.0);
  EXPECT_EQ(v.toScalar(), Scalar(int64_t{3}));
  expectError([&] { v.toTensor(); }, {"expected a value of type Tensor but got int (3)"});
  IValue list(std::vector<int64_t>{1, 2});
  EXPECT_EQ(list.str(), "[1, 2]");
  EXPECT_TRUE(IValue(std::optional<Tensor>()).isNone());
  // Note [Long lists in messages]: what a refused boxed argument prints stays short.
  std::vector<int64_t> many(1000000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i);
  EXPECT_EQ(IValue(many).str(),
            "[0, 1, 2, 3, 4, 5, 6, 7, ..., 999992, 999993, 999994, 999995, 999996, 999997, 999998, 999999] "
            "(1000000 entries)");
  EXPECT_EQ(IValue(std::vector<bool>(100, true)).str(),
            "[True, True, True, True, True, True, True, True, ..., True, True, True, True, True, True, True, True] "
            "(100 entries)");
  EXPECT_EQ(IValue(std::vector<bool>{true, false}).str(), "[True, False]");
}

}  // namespace
}  // namespace backplane
