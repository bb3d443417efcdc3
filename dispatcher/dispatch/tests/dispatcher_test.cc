// The operator x dispatch-key table: def/impl/fallback, precedence,
// handles that restore what came before, errors, tracing, redispatch.
#include "backplane/dispatch/dispatcher.h"

#include <atomic>

#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/cpu_kernels.h"
#include "test_device.h"

namespace backplane {
namespace {

using testing::expectError;
using testing::floats;
using ::testing::HasSubstr;
using ::testing::Not;

Dispatcher& dispatcher() { return Dispatcher::singleton(); }

Tensor fillLike(const Tensor& t, float v) {
  std::vector<float> out(static_cast<size_t>(t.numel()), v);
  return tensorFromVector<float>(out, t.sizes(), t.device());
}

TEST(DispatcherTest, DefImplAndCallTyped) {
  Library lib("dt1");
  ASSERT_TRUE(lib.def("add(Tensor a, Tensor b) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("add", DispatchKey::CPU, &testing::addCpu).ok());
  auto add = dispatcher().findOpOrThrow("dt1::add").typed<Tensor(const Tensor&, const Tensor&)>();
  Tensor r = add.call(floats({1, 2, 3}), floats({10, 20, 30}));
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(add.kernelKind(DispatchKey::CPU), KernelKind::Native);
  EXPECT_TRUE(dispatcher().checkInvariants().ok());
}

TEST(DispatcherTest, DefiningTwiceIsRejected) {
  Library lib("dt2", "first library");
  ASSERT_TRUE(lib.def("f(Tensor a) -> Tensor").ok());
  Library other("dt2");
  absl::Status s = other.def("f(Tensor x) -> Tensor");
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dt2::f is already defined by first library"));
  EXPECT_TRUE(other.def("f.other(Tensor x) -> Tensor").ok()) << "a new overload name is fine";
}

TEST(DispatcherTest, BadSchemaIsRejectedWithPosition) {
  Library lib("dt3");
  absl::Status s = lib.def("f(Tensor a, -> Tensor");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("position"));
  EXPECT_THAT(std::string(Library("dt3").def("other::g(Tensor a) -> Tensor").message()),
              HasSubstr("belongs to namespace 'other'"));
}

TEST(DispatcherTest, ImplForUndefinedOpIsRejected) {
  Library lib("dt4");
  ASSERT_TRUE(lib.def("g.Tensor(Tensor a) -> Tensor").ok());
  absl::Status s = lib.impl("g", DispatchKey::CPU, [](const Tensor& a) { return a; });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dt4::g: the operator is not defined"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("Did you mean dt4::g.Tensor?"));
  EXPECT_EQ(lib.impl("g.Tensor", DispatchKey::Undefined, [](const Tensor& a) { return a; }).code(),
            absl::StatusCode::kInvalidArgument);
}

// Note [Did you mean]: a registration for a misspelled operator names the
// closest defined ones, whichever registration it is.
TEST(DispatcherTest, RegistrationForAnUnknownOpSuggestsTheClosestDefinedNames) {
  Library lib("dt4m");
  ASSERT_TRUE(lib.def("sum.IntList_out(Tensor a, *, Tensor(a!) out) -> Tensor(a!)").ok());
  ASSERT_TRUE(lib.def("sum.dim_IntList(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.def("unrelated(Tensor a) -> Tensor").ok());
  Dispatcher& d = Dispatcher::singleton();
  const auto kernel = [] {
    return KernelFunction::makeFromBoxedFunction([](OperatorKernel*, const OperatorHandle&, DispatchKeySet, Stack*) {});
  };
  for (const absl::Status& s : {d.registerImpl("dt4m::sum.dim_IntList_out", DispatchKey::CPU, kernel()).status(),
                                d.registerComposite("dt4m::sum.dim_IntList_out", kernel()).status(),
                                d.registerMeta("dt4m::sum.dim_IntList_out", kernel()).status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(s.message()), HasSubstr("Did you mean dt4m::sum.IntList_out, dt4m::sum.dim_IntList?"));
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("unrelated")));
  }
  // Lookups share the hint; a name close to nothing gets none.
  const auto lookupError = [&](const char* name) {
    try {
      d.findOpOrThrow(name);
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_THAT(lookupError("dt4m::unrelatd"), HasSubstr("Did you mean dt4m::unrelated?"));
  EXPECT_THAT(lookupError("dt4m::completely_different"), Not(HasSubstr("Did you mean")));
}

TEST(DispatcherTest, KernelSignatureMustMatchSchema) {
  Library lib("dt5");
  ASSERT_TRUE(lib.def("h(Tensor a, Tensor b) -> Tensor").ok());
  absl::Status s = lib.impl("h", DispatchKey::CPU, [](const Tensor& a, int64_t) { return a; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(Tensor, int) -> Tensor"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(Tensor, Tensor) -> Tensor"));
  OperatorHandle op = dispatcher().findOpOrThrow("dt5::h");
  expectError([&] { op.typed<Tensor(const Tensor&)>(); }, {"(Tensor) -> Tensor", "(Tensor, Tensor) -> Tensor"});
}

TEST(DispatcherTest, MissingKernelNamesOpKeyDevicesAndAvailableKeys) {
  auto& dev = testing::TestDevice::install();
  Library lib("dt6");
  ASSERT_TRUE(lib.def("only_dev(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("only_dev", dev.type(), [](const Tensor& a) { return a; }).ok());
  auto op = dispatcher().findOpOrThrow("dt6::only_dev").typed<Tensor(const Tensor&)>();
  try {
    op.call(floats({1, 2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(e.message(), HasSubstr("dt6::only_dev has no kernel for dispatch key CPU"));
    EXPECT_THAT(e.message(), HasSubstr("Tensor[2] float32 cpu"));
    EXPECT_THAT(e.message(), HasSubstr("Kernels exist for: testdev (native)"));
  }
  Tensor on_dev = floats({1, 2}, dev.device());
  EXPECT_TRUE(op.call(on_dev).is_alias_of(on_dev));
}

TEST(DispatcherTest, NoCpuKernelMeansNoCpuFallback) {
  auto& dev = testing::TestDevice::install();
  Library lib("dt7");
  ASSERT_TRUE(lib.def("nothing(Tensor a) -> Tensor").ok());
  auto op = dispatcher().findOpOrThrow("dt7::nothing").typed<Tensor(const Tensor&)>();
  EXPECT_EQ(op.kernelKind(backendKey(dev.type())), KernelKind::Missing);
  expectError([&] { op.call(floats({1}, dev.device())); },
              {"no kernel for dispatch key testdev", "Kernels exist for: none", "no CPU kernel either"});
}

// Note [Kernel precedence]: native > composite > backend fallback > CPU
// fallback > missing, and removing each brings back the one below it.
TEST(DispatcherTest, PrecedenceAndRestoreOnHandleDestruction) {
  auto& dev = testing::TestDevice::install();
  const DispatchKey key = backendKey(dev.type());
  Library base("dt8");
  ASSERT_TRUE(base.def("which(Tensor a) -> Tensor").ok());
  auto op = dispatcher().findOpOrThrow("dt8::which").typed<Tensor(const Tensor&)>();
  Tensor x = floats({0, 0}, dev.device());
  auto result = [&] { return op.call(x).toVector<float>()[0]; };

  EXPECT_EQ(op.kernelKind(key), KernelKind::Missing);
  ASSERT_TRUE(base.impl("which", DispatchKey::CPU, [](const Tensor& a) { return fillLike(a, 1); }).ok());
  EXPECT_EQ(op.kernelKind(key), KernelKind::CpuFallback);
  EXPECT_EQ(result(), 1);
  {
    Library fb("dt8");
    ASSERT_TRUE(fb.fallback(key, KernelFunction::makeFromBoxedFunction(
                                     [](OperatorKernel*, const OperatorHandle&, DispatchKeySet, Stack* s) {
                                       Tensor a = s->back().toTensor();
                                       s->pop_back();
                                       s->emplace_back(fillLike(a, 2));
                                     }))
                    .ok());
    EXPECT_EQ(op.kernelKind(key), KernelKind::BackendFallback);
    EXPECT_EQ(result(), 2);
    {
      Library comp("dt8");
      ASSERT_TRUE(comp.implComposite("which", [](const Tensor& a) { return fillLike(a, 3); }).ok());
      EXPECT_EQ(op.kernelKind(key), KernelKind::Composite);
      EXPECT_EQ(op.kernelKind(DispatchKey::CPU), KernelKind::Native) << "a direct CPU impl beats the composite";
      EXPECT_EQ(result(), 3);
      {
        Library direct("dt8");
        ASSERT_TRUE(direct.impl("which", key, [](const Tensor& a) { return fillLike(a, 4); }).ok());
        EXPECT_EQ(op.kernelKind(key), KernelKind::Native);
        EXPECT_EQ(result(), 4);
        EXPECT_TRUE(dispatcher().checkInvariants().ok());
      }
      EXPECT_EQ(result(), 3);
    }
    EXPECT_EQ(result(), 2);
  }
  EXPECT_EQ(result(), 1);
  base.reset();
  EXPECT_FALSE(op.hasSchema());
  expectError([&] { op.call(x); }, {"dt8::which is not defined"});
  EXPECT_TRUE(dispatcher().checkInvariants().ok());
}

TEST(DispatcherTest, NewerImplShadowsOlderInAnyRemovalOrder) {
  Library def("dt9");
  ASSERT_TRUE(def.def("v(Tensor a) -> Tensor").ok());
  auto op = dispatcher().findOpOrThrow("dt9::v").typed<Tensor(const Tensor&)>();
  Tensor x = floats({0});
  auto older = std::make_unique<Library>("dt9");
  auto newer = std::make_unique<Library>("dt9");
  ASSERT_TRUE(older->impl("v", DispatchKey::CPU, [](const Tensor& a) { return fillLike(a, 1); }).ok());
  ASSERT_TRUE(newer->impl("v", DispatchKey::CPU, [](const Tensor& a) { return fillLike(a, 2); }).ok());
  EXPECT_EQ(op.call(x).item<float>(), 2);
  older.reset();  // removing the shadowed one changes nothing
  EXPECT_EQ(op.call(x).item<float>(), 2);
  newer.reset();
  EXPECT_EQ(op.kernelKind(DispatchKey::CPU), KernelKind::Missing);
  ASSERT_TRUE(def.impl("v", DispatchKey::CPU, [](const Tensor& a) { return fillLike(a, 5); }).ok());
  EXPECT_EQ(op.call(x).item<float>(), 5);
}

TEST(DispatcherTest, RedefinitionKeepsKernelsThatStillFit) {
  Library impls("dt10");
  auto def = std::make_unique<Library>("dt10");
  ASSERT_TRUE(def->def("r(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(impls.impl("r", DispatchKey::CPU, [](const Tensor& a) { return fillLike(a, 7); }).ok());
  def.reset();
  OperatorHandle op = *dispatcher().findOp("dt10::r");
  EXPECT_FALSE(op.hasSchema());
  Library wrong("dt10");
  EXPECT_THAT(std::string(wrong.def("r(Tensor a, int n) -> Tensor").message()), HasSubstr("(Tensor) -> Tensor"));
  ASSERT_TRUE(wrong.def("r(Tensor a) -> Tensor").ok());
  EXPECT_EQ(op.typed<Tensor(const Tensor&)>().call(floats({0})).item<float>(), 7);
}

// A kernel at a functionality key wraps the op and redispatches below itself.
TEST(DispatcherTest, FunctionalityKeyRedispatchAndThreadLocalSets) {
  Library lib("dt11");
  ASSERT_TRUE(lib.def("w(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("w", DispatchKey::CPU, [](const Tensor& a) { return fillLike(a, 1); }).ok());
  static std::atomic<int> wrapped{0};
  wrapped = 0;
  auto op = dispatcher().findOpOrThrow("dt11::w").typed<Tensor(const Tensor&)>();
  ASSERT_TRUE(lib.impl("w", DispatchKey::User0,
                       [](DispatchKeySet ks, const Tensor& a) {
                         ++wrapped;
                         auto self = Dispatcher::singleton().findOpOrThrow("dt11::w").typed<Tensor(const Tensor&)>();
                         Tensor r = self.redispatch(ks & DispatchKeySet::below(DispatchKey::User0), a);
                         return fillLike(r, r.item<float>() + 100);
                       })
                  .ok());
  Tensor x = floats({0});
  EXPECT_EQ(op.call(x).item<float>(), 1) << "User0 is not in the key set unless included";
  {
    IncludeDispatchKeyGuard include(DispatchKey::User0);
    EXPECT_EQ(op.call(x).item<float>(), 101);
    {
      ExcludeDispatchKeyGuard exclude(DispatchKey::User0);
      EXPECT_EQ(op.call(x).item<float>(), 1);
    }
    // Boxed calls dispatch the same way.
    Stack stack{x};
    op.callBoxed(stack);
    EXPECT_EQ(stack.at(0).toTensor().item<float>(), 101);
  }
  EXPECT_EQ(wrapped.load(), 2);
  // A fallthrough at User0 for this op skips the key even when included.
  Library ft("dt11");
  ASSERT_TRUE(ft.impl("w", DispatchKey::User0, KernelFunction::makeFallthrough()).ok());
  IncludeDispatchKeyGuard include(DispatchKey::User0);
  EXPECT_EQ(op.call(x).item<float>(), 1);
  EXPECT_EQ(op.kernelKind(DispatchKey::User0), KernelKind::Fallthrough);
}

TEST(DispatcherTest, FactoryOpsDispatchOnDeviceArgumentOrDefaultToCpu) {
  Library lib("dt12");
  ASSERT_TRUE(lib.def("make(int n, *, Device? device=None) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("make", DispatchKey::CPU,
                       [](int64_t n, std::optional<Device> d) -> Tensor {
                         std::vector<float> v(static_cast<size_t>(n), 3.0f);
                         return tensorFromVector<float>(v, {n}, d.value_or(Device(DeviceType::CPU)));
                       })
                  .ok());
  auto op = dispatcher().findOpOrThrow("dt12::make").typed<Tensor(int64_t, std::optional<Device>)>();
  Tensor c = op.call(4, std::nullopt);
  EXPECT_TRUE(c.device().isCpu());
  EXPECT_EQ(c.toVector<float>(), std::vector<float>(4, 3.0f));
  auto& dev = testing::TestDevice::install();
  Tensor d = op.call(2, dev.device(1));
  EXPECT_EQ(d.device(), dev.device(1)) << "the CPU fallback moves results to the Device argument";
  EXPECT_EQ(d.toVector<float>(), std::vector<float>(2, 3.0f));
}

// Every report spells a kind the same way (kernelKindName()): one word each,
// usable as a JSON value and a column, and parsed back by kernelKindFromName().
TEST(DispatcherTest, EachKernelKindHasOneName) {
  EXPECT_STREQ(kernelKindName(KernelKind::Missing), "missing");
  EXPECT_STREQ(kernelKindName(KernelKind::Native), "native");
  EXPECT_STREQ(kernelKindName(KernelKind::Composite), "composite");
  EXPECT_STREQ(kernelKindName(KernelKind::BackendFallback), "backend_fallback");
  EXPECT_STREQ(kernelKindName(KernelKind::CpuFallback), "cpu_fallback");
  EXPECT_STREQ(kernelKindName(KernelKind::Fallthrough), "fallthrough");
  for (KernelKind k : kAllKernelKinds) EXPECT_EQ(kernelKindFromName(kernelKindName(k)), k) << kernelKindName(k);
  EXPECT_EQ(kernelKindFromName("fallback"), std::nullopt);
  EXPECT_EQ(kernelKindFromName("cpu fallback"), std::nullopt);
  EXPECT_TRUE(isFallback(KernelKind::CpuFallback) && isFallback(KernelKind::BackendFallback));
  EXPECT_FALSE(isFallback(KernelKind::Native) || isFallback(KernelKind::Composite) || isFallback(KernelKind::Missing));
}

TEST(DispatcherTest, TracingLogsOpKeysAndKernelKind) {
  Library lib("dt13");
  ASSERT_TRUE(lib.def("traced(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("traced", DispatchKey::CPU, [](const Tensor& a) { return a; }).ok());
  auto op = dispatcher().findOpOrThrow("dt13::traced").typed<Tensor(const Tensor&)>();
  Tensor x = floats({1});
  ::testing::internal::CaptureStderr();
  dispatcher().setTracing(true);
  Tensor y = op.call(x);
  dispatcher().setTracing(false);
  op.call(x);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("backplane trace: dt13::traced keys={CPU|Tracing} -> CPU (native)"));
  EXPECT_EQ(log.find("dt13::traced", log.find("dt13::traced") + 1), std::string::npos) << "traced once";
  EXPECT_TRUE(y.is_alias_of(x));
}

TEST(DispatcherTest, FindOpErrorsSuggestOverloads) {
  Library lib("dt15");
  ASSERT_TRUE(lib.def("k.one(Tensor a) -> Tensor").ok());
  expectError([] { Dispatcher::singleton().findOpOrThrow("dt15::k"); }, {"dt15::k", "not defined", "dt15::k.one"});
  EXPECT_FALSE(dispatcher().findOp("not a name").has_value());
  bool listed = false;
  for (const OperatorHandle& op : dispatcher().definedOperators())
    listed |= op.operatorName().qualifiedName() == "dt15::k.one";
  EXPECT_TRUE(listed);
  EXPECT_THAT(dispatcher().findOpOrThrow("dt15::k.one").dumpState(), HasSubstr("dt15::k.one(Tensor a) -> Tensor"));
}

// Note [Meta kernels]: the rule runs before the kernel on call() and
// callBoxed(), not on callSkippingMeta() or redispatch(); it can resize an empty
// out; a signature mismatch is refused; removing it restores the older one.
namespace meta_test {
int kernel_calls = 0;
Tensor fillOut(const Tensor& a, const Tensor& out) {
  ++kernel_calls;
  BP_CHECK(out.sizes() == a.sizes(), "the kernel saw an unchecked out ", out.str());
  testing::assignCpu(out, a);
  return out;
}
void sameShapeRule(const Tensor& a, const Tensor& out) {
  if (out.numel() == 0) out.unsafeGetImpl()->resizeEmpty(a.sizes());
  BP_CHECK(out.sizes() == a.sizes(), "dt16::copy_out: out has shape ", out.sizes(), " but a has ", a.sizes());
}
void strictRule(const Tensor& a, const Tensor&) { BP_CHECK(a.numel() < 3, "dt16::copy_out: strict rule"); }
// A rule that computes the result itself for a 1-element input (writing 7),
// and leaves every other call to the kernel.
bool completingRule(const Tensor& a, const Tensor& out) {
  if (a.numel() != 1) return false;
  testing::assignCpu(out, floats({7}));
  return true;
}
bool completingScalarRule(const Tensor&) { return true; }
}  // namespace meta_test

TEST(DispatcherTest, MetaKernelChecksArgumentsBeforeAnyKernel) {
  using meta_test::kernel_calls;
  Library lib("dt16");
  ASSERT_TRUE(lib.def("copy_out(Tensor a, *, Tensor(a!) out) -> Tensor(a!)").ok());
  ASSERT_TRUE(lib.impl("copy_out", DispatchKey::CPU, BP_FN(meta_test::fillOut)).ok());
  auto op = dispatcher().findOpOrThrow("dt16::copy_out").typed<Tensor(const Tensor&, const Tensor&)>();
  {
    // Without a rule the kernel sees whatever it is given.
    kernel_calls = 0;
    EXPECT_THROW(op.call(floats({1, 2}), floats({0})), Error);
    EXPECT_EQ(kernel_calls, 1);
  }
  // A rule with the wrong parameters is refused, naming the expected ones.
  EXPECT_THAT(std::string(lib.meta("copy_out", [](const Tensor&) {}).message()),
              HasSubstr("needs (Tensor, Tensor) -> ()"));
  ASSERT_TRUE(lib.meta("copy_out", BP_FN(meta_test::sameShapeRule)).ok());

  kernel_calls = 0;
  Tensor empty = emptyTensor({0});
  Tensor r = op.call(floats({1, 2, 3}), empty);  // resized by the rule, then filled
  EXPECT_EQ(kernel_calls, 1);
  EXPECT_EQ(empty.toVector<float>(), (std::vector<float>{1, 2, 3}));
  expectError([&] { op.call(floats({1, 2}), floats({0, 0, 0})); }, {"out has shape [3] but a has [2]"});
  EXPECT_EQ(kernel_calls, 1) << "the kernel must not run when the rule refuses";

  Stack stack{floats({1, 2}), floats({0, 0, 0})};
  expectError([&] { op.callBoxed(stack); }, {"out has shape [3]"});
  EXPECT_EQ(kernel_calls, 1);

  // callSkippingMeta() skips the rule: for composites that allocated out themselves.
  Tensor out = emptyTensor({2});
  op.callSkippingMeta(floats({5, 6}), out);
  EXPECT_EQ(kernel_calls, 2);
  EXPECT_EQ(out.toVector<float>(), (std::vector<float>{5, 6}));

  {
    // A newer rule wins; removing it brings back the older one.
    Library stricter("dt16");
    ASSERT_TRUE(stricter.meta("copy_out", BP_FN(meta_test::strictRule)).ok());
    expectError([&] { op.call(floats({1, 2, 3}), emptyTensor({3})); }, {"strict rule"});
  }
  op.call(floats({1, 2, 3}), emptyTensor({3}));
  EXPECT_EQ(kernel_calls, 3);
  EXPECT_TRUE(dispatcher().checkInvariants().ok());
}

// Note [Meta kernels]: a meta of an out= op that returns bool may complete
// the call (the standard ops' out= of another dtype); the op then returns
// its out argument and no kernel runs. Other ops may not have such a meta.
TEST(DispatcherTest, MetaKernelMayCompleteAnOutCall) {
  using meta_test::kernel_calls;
  Library lib("dt17");
  ASSERT_TRUE(lib.def("copy_out(Tensor a, *, Tensor(a!) out) -> Tensor(a!)").ok());
  ASSERT_TRUE(lib.def("copy(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(lib.def("first(Tensor a, *, Tensor(a!) out) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("copy_out", DispatchKey::CPU, BP_FN(meta_test::fillOut)).ok());
  // Only an op whose one return is its last, out= argument.
  EXPECT_THAT(std::string(lib.meta("copy", BP_FN(meta_test::completingScalarRule)).message()),
              HasSubstr("only an out= op whose one return is its last argument allows"));
  EXPECT_THAT(std::string(lib.meta("first", BP_FN(meta_test::completingRule)).message()),
              HasSubstr("only an out= op whose one return is its last argument allows"));
  ASSERT_TRUE(lib.meta("copy_out", BP_FN(meta_test::completingRule)).ok());
  auto op = dispatcher().findOpOrThrow("dt17::copy_out").typed<Tensor(const Tensor&, const Tensor&)>();

  kernel_calls = 0;
  Tensor out = emptyTensor({1});
  Tensor r = op.call(floats({1}), out);  // the rule completes it
  EXPECT_EQ(kernel_calls, 0);
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  EXPECT_EQ(out.toVector<float>(), (std::vector<float>{7}));
  Tensor out2 = emptyTensor({2});
  op.call(floats({3, 4}), out2);  // the rule declines: the kernel runs
  EXPECT_EQ(kernel_calls, 1);
  EXPECT_EQ(out2.toVector<float>(), (std::vector<float>{3, 4}));

  // Boxed: the one return is the out argument.
  Tensor out3 = emptyTensor({1});
  Stack stack{floats({1}), out3};
  op.callBoxed(stack);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].toTensor().unsafeGetImpl(), out3.unsafeGetImpl());
  EXPECT_EQ(out3.toVector<float>(), (std::vector<float>{7}));
  EXPECT_EQ(kernel_calls, 1);
  Stack stack2{floats({5, 6}), emptyTensor({2})};
  op.callBoxed(stack2);
  EXPECT_EQ(kernel_calls, 2);
  EXPECT_EQ(Tensor(stack2[0].toTensor()).toVector<float>(), (std::vector<float>{5, 6}));
  EXPECT_TRUE(dispatcher().checkInvariants().ok());
}

}  // namespace
}  // namespace backplane
