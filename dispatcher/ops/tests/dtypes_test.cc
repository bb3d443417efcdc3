// int16 and the barebones unsigned dtypes (uint16, uint32, uint64) through
// the standard operators on the CPU plugin: int16 wherever int32 works, with
// PyTorch's promotion (uint8 with int8 gives int16); the unsigned ones in
// creation, copies, data movement and comparisons, and refused by every
// other op before a kernel runs (Note [Barebones unsigned dtypes]).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/standard_ops.h"
#include "ops_test_util.h"
#include "test_device.h"

namespace backplane::ops_test {
namespace {

using ::testing::HasSubstr;

Tensor i16(std::vector<int16_t> v) { return tensorFromVector<int16_t>(v, {static_cast<int64_t>(v.size())}); }

// --- int16

TEST(Int16Test, UInt8WithInt8PromotesToInt16) {
  Tensor a = tensorFromVector<uint8_t>({200, 1}, {2});
  Tensor b = tensorFromVector<int8_t>({-100, -2}, {2});
  Tensor r = add(a, b);
  EXPECT_EQ(r.dtype(), ScalarType::Int16);
  EXPECT_EQ(r.toVector<int16_t>(), (std::vector<int16_t>{100, -1}));
  EXPECT_EQ(mul(a, b).toVector<int16_t>(), (std::vector<int16_t>{-20000, -2}));
  EXPECT_EQ(add(i16({1, 2}), tensorFromVector<int32_t>({3, 4}, {2})).dtype(), ScalarType::Int32);
  EXPECT_EQ(add(i16({1, 2}), Scalar(int64_t{3})).dtype(), ScalarType::Int16) << "a Python int keeps int16";
  EXPECT_EQ(add(i16({1, 2}), Scalar(0.5)).dtype(), ScalarType::Float32);
}

TEST(Int16Test, ElementwiseKernelsServeInt16AndWrapAsPyTorch) {
  Tensor a = i16({32767, -32768, 5, -7});
  Tensor b = i16({1, -1, 3, 2});
  EXPECT_EQ(add(a, b).toVector<int16_t>(), (std::vector<int16_t>{-32768, 32767, 8, -5})) << "two's complement wrap";
  EXPECT_EQ(sub(a, b).toVector<int16_t>(), (std::vector<int16_t>{32766, -32767, 2, -9}));
  EXPECT_EQ(neg(i16({3, -4})).toVector<int16_t>(), (std::vector<int16_t>{-3, 4}));
  EXPECT_EQ(abs(i16({3, -4})).toVector<int16_t>(), (std::vector<int16_t>{3, 4}));
  EXPECT_EQ(relu(i16({3, -4})).toVector<int16_t>(), (std::vector<int16_t>{3, 0}));
  EXPECT_EQ(maximum(a, b).toVector<int16_t>(), (std::vector<int16_t>{32767, -1, 5, 2}));
  EXPECT_EQ(pow(i16({3, -2}), Scalar(int64_t{3})).toVector<int16_t>(), (std::vector<int16_t>{27, -8}));
  Tensor d = div(i16({7, -7}), i16({2, 2}));
  EXPECT_EQ(d.dtype(), ScalarType::Float32);
  EXPECT_EQ(d.toVector<float>(), (std::vector<float>{3.5f, -3.5f}));
  EXPECT_EQ(exp(i16({0})).dtype(), ScalarType::Float32);
  EXPECT_EQ(lt(a, b).toVector<bool>(), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(eq(a, Scalar(int64_t{5})).toVector<bool>(), (std::vector<bool>{false, false, true, false}));
  Tensor mask = tensorFromVector<bool>({true, false, false, true}, {4});
  EXPECT_EQ(where(mask, a, b).toVector<int16_t>(), (std::vector<int16_t>{32767, -1, 3, -7}));
  EXPECT_EQ(masked_fill(a, mask, Scalar(int64_t{9})).toVector<int16_t>(), (std::vector<int16_t>{9, -32768, 5, 9}));
  EXPECT_THAT(errorOf([&] { masked_fill(a, mask, Scalar(int64_t{40000})); }),
              HasSubstr("cannot be converted to dtype int16"));
}

TEST(Int16Test, ReductionsLinalgAndDataMovementServeInt16) {
  Tensor m = tensorFromVector<int16_t>({1, -2, 3, 4, 5, -6}, {2, 3});
  Tensor s = sum(m);
  EXPECT_EQ(s.dtype(), ScalarType::Int64) << "integer sums accumulate in int64, as PyTorch";
  EXPECT_EQ(s.item<int64_t>(), 5);
  EXPECT_EQ(amax(m, {1}).toVector<int16_t>(), (std::vector<int16_t>{3, 5}));
  EXPECT_EQ(argmin(m).item<int64_t>(), 5);
  Tensor p = mm(m, tensorFromVector<int16_t>({1, 0, 0, 1, 1, 1}, {3, 2}));
  EXPECT_EQ(p.dtype(), ScalarType::Int16);
  EXPECT_EQ(p.toVector<int16_t>(), (std::vector<int16_t>{4, 1, -2, -1}));
  EXPECT_EQ(cat({m, m}, 0).toVector<int16_t>(), (std::vector<int16_t>{1, -2, 3, 4, 5, -6, 1, -2, 3, 4, 5, -6}));
  EXPECT_EQ(index_select(m, 1, tensorFromVector<int64_t>({2, 0}, {2})).toVector<int16_t>(),
            (std::vector<int16_t>{3, 1, -6, 4}));
  EXPECT_EQ(m.to(ScalarType::Float32).toVector<float>(), (std::vector<float>{1, -2, 3, 4, 5, -6}));
  EXPECT_EQ(Tensor(tensorFromVector<float>({-1.5f, 40000.0f}, {2})).to(ScalarType::Int16).toVector<int16_t>(),
            (std::vector<int16_t>{-1, -25536}))
      << "floating to int16 goes through int64 and wraps, as PyTorch's casts";
  EXPECT_EQ(zeros({2}, {.dtype = ScalarType::Int16}).toVector<int16_t>(), (std::vector<int16_t>{0, 0}));
  EXPECT_EQ(full({2}, Scalar(int64_t{-300}), {.dtype = ScalarType::Int16}).toVector<int16_t>(),
            (std::vector<int16_t>{-300, -300}));
  EXPECT_EQ(arange(Scalar(int64_t{3}), {.dtype = ScalarType::Int16}).toVector<int16_t>(),
            (std::vector<int16_t>{0, 1, 2}));
  EXPECT_THAT(errorOf([] { full({2}, Scalar(int64_t{32768}), {.dtype = ScalarType::Int16}); }),
              HasSubstr("cannot be converted to dtype int16 without overflow"));
}

// --- uint16, uint32, uint64

const ScalarType kUnsigned[] = {ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64};

TEST(BarebonesUnsignedTest, CreationCopiesAndDataMovement) {
  for (ScalarType t : kUnsigned) {
    SCOPED_TRACE(scalarTypeName(t));
    EXPECT_EQ(zeros({3}, {.dtype = t}).toVector<double>(), (std::vector<double>{0, 0, 0}));
    EXPECT_EQ(ones({2}, {.dtype = t}).toVector<double>(), (std::vector<double>{1, 1}));
    Tensor f = full({2}, Scalar(int64_t{65535}), {.dtype = t});
    EXPECT_EQ(f.dtype(), t);
    EXPECT_EQ(f.toVector<double>(), (std::vector<double>{65535, 65535}));
    EXPECT_EQ(zeros_like(f).dtype(), t);
    // A negative integer wraps into an unsigned dtype, as PyTorch's checked
    // conversion (Note [Writing a Scalar into a tensor]); a double past the
    // range is refused.
    EXPECT_EQ(full({1}, Scalar(int64_t{-1}), {.dtype = t}).to(ScalarType::Int64).toVector<int64_t>(),
              (std::vector<int64_t>{t == ScalarType::UInt16   ? 65535
                                    : t == ScalarType::UInt32 ? 4294967295
                                                              : -1}));
    EXPECT_THAT(errorOf([&] { full({2}, Scalar(-1.5), {.dtype = t}); }),
                HasSubstr(strCat("cannot be converted to dtype ", scalarTypeName(t), " without overflow")));
    // Conversions both ways, through every dtype.
    Tensor x = Tensor(tensorFromVector<int64_t>({0, 7, 65535}, {3})).to(t);
    EXPECT_EQ(x.dtype(), t);
    EXPECT_EQ(x.to(ScalarType::Float64).toVector<double>(), (std::vector<double>{0, 7, 65535}));
    EXPECT_EQ(x.to(ScalarType::Int16).toVector<int16_t>(), (std::vector<int16_t>{0, 7, -1}));
    EXPECT_EQ(x.to(ScalarType::Bool).toVector<bool>(), (std::vector<bool>{false, true, true}));
    EXPECT_EQ(Tensor(tensorFromVector<float>({2.75f, 100.0f}, {2})).to(t).toVector<double>(),
              (std::vector<double>{2, 100}));
    // Data movement.
    Tensor m = Tensor(tensorFromVector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3})).to(t);
    EXPECT_EQ(cat({m, m}, 1).toVector<double>(), (std::vector<double>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
    Tensor st = stack({m, m}, 0);
    EXPECT_EQ(st.dim(), 3);
    EXPECT_EQ(st.dtype(), t);
    EXPECT_EQ(st.toVector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(index_select(m, 0, tensorFromVector<int64_t>({1}, {1})).toVector<double>(),
              (std::vector<double>{4, 5, 6}));
    EXPECT_EQ(m.t().contiguous().toVector<double>(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
    Tensor mask = tensorFromVector<bool>({true, false, true, false, false, true}, {2, 3});
    EXPECT_EQ(masked_fill(m, mask, Scalar(int64_t{9})).toVector<double>(), (std::vector<double>{9, 2, 9, 4, 5, 9}));
  }
}

TEST(BarebonesUnsignedTest, ComparisonsAndTheirPromotion) {
  for (ScalarType t : kUnsigned) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor a = Tensor(tensorFromVector<int64_t>({1, 5, 65535}, {3})).to(t);
    Tensor b = Tensor(tensorFromVector<int64_t>({2, 5, 0}, {3})).to(t);
    EXPECT_EQ(lt(a, b).toVector<bool>(), (std::vector<bool>{true, false, false}));
    EXPECT_EQ(eq(a, b).toVector<bool>(), (std::vector<bool>{false, true, false}));
    EXPECT_EQ(ge(a, Scalar(int64_t{5})).toVector<bool>(), (std::vector<bool>{false, true, true}));
    EXPECT_EQ(gt(a, Scalar(-1.0)).toVector<bool>(), (std::vector<bool>{true, true, true}));
    // With a floating tensor: promoted to it.
    EXPECT_EQ(le(a, tensorFromVector<float>({1.5f, 4.5f, 1e6f}, {3})).toVector<bool>(),
              (std::vector<bool>{true, false, true}));
    // With another integer dtype: PyTorch refuses the promotion.
    const std::string e = errorOf([&] { eq(a, tensorFromVector<int32_t>({1, 5, 0}, {3})); });
    EXPECT_THAT(e, HasSubstr(strCat("type promotion of ", scalarTypeName(t), " with int32 is not supported")));
    EXPECT_THAT(e, HasSubstr("convert one operand first"));
  }
  // uint64's upper half compares as unsigned.
  Tensor big = Tensor(tensorFromVector<double>({9.3e18, 1.0}, {2})).to(ScalarType::UInt64);
  EXPECT_EQ(big.toVector<uint64_t>(), (std::vector<uint64_t>{9300000000000000000ull, 1}));
  EXPECT_EQ(gt(big, Scalar(int64_t{1})).toVector<bool>(), (std::vector<bool>{true, false}));
}

TEST(BarebonesUnsignedTest, EveryOtherOpRefusesThemBeforeAKernelRuns) {
  for (ScalarType t : kUnsigned) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor a = zeros({2}, {.dtype = t});
    const std::string name(scalarTypeName(t));
    struct Case {
      const char* op;
      std::function<void()> call;
    };
    const Case cases[] = {
        {"bp::add.Tensor", [&] { add(a, a); }},
        {"bp::mul.Tensor", [&] { mul(a, a); }},
        {"bp::neg", [&] { neg(a); }},
        {"bp::sum", [&] { sum(a); }},
        {"bp::amax", [&] { amax(a); }},
        {"bp::mm", [&] { mm(a.unsqueeze(0), a.unsqueeze(1)); }},
        {"bp::where.self",
         [&] {
           where(tensorFromVector<bool>({true, false}, {2}), a, a);
         }},
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.op);
      const std::string e = errorOf(c.call);
      EXPECT_THAT(e, HasSubstr(strCat(c.op, ": argument '")));
      EXPECT_THAT(e, HasSubstr(strCat("has dtype ", name, ", which this op does not accept (accepted: ")));
      EXPECT_THAT(e, HasSubstr("uint16, uint32 and uint64 have creation, copies, data movement and comparisons only"));
      EXPECT_THAT(e, HasSubstr("Convert it to an accepted dtype first"));
      EXPECT_THAT(e, ::testing::Not(HasSubstr("kernel of plugin"))) << "the host refuses, not a kernel";
    }
  }
  const StandardOp* add_op = findStandardOp("add.Tensor");
  ASSERT_NE(add_op, nullptr);
  EXPECT_FALSE(servesBarebonesUnsigned(*add_op));
  EXPECT_EQ(acceptedDtypes(*add_op, "self").toString(), "every dtype but uint16, uint32, uint64");
  const StandardOp* eq_op = findStandardOp("eq.Tensor");
  ASSERT_NE(eq_op, nullptr);
  EXPECT_TRUE(servesBarebonesUnsigned(*eq_op));
  EXPECT_EQ(acceptedDtypes(*eq_op, "self").toString(), "every dtype");
}

// --- Note [Dtype-fixed arguments]: a kernel's declared dtypes skip the
// arguments whose dtype the op's rule fixes.

// The names of the arguments of `op` whose bit is set.
std::vector<std::string> fixedArguments(const std::string& op) {
  const OperatorHandle h = Dispatcher::singleton().findOpOrThrow(op);
  std::vector<std::string> out;
  const auto& args = h.schema().arguments();
  for (size_t i = 0; i < args.size(); ++i)
    if ((h.entry().dtypeFixedArguments() >> i) & 1) out.push_back(args[i].name);
  return out;
}

TEST(DtypeFixedArgumentsTest, IndicesMasksAndFixedResultsAreExempt) {
  using V = std::vector<std::string>;
  EXPECT_EQ(fixedArguments("bp::index_select.out"), V{"index"});
  EXPECT_EQ(fixedArguments("bp::gather.out"), V{"index"});
  EXPECT_EQ(fixedArguments("bp::embedding"), V{"indices"});
  EXPECT_EQ(fixedArguments("bp::masked_fill.Tensor"), V{"mask"});
  EXPECT_EQ(fixedArguments("bp::where.self_out"), V{"condition"});
  EXPECT_EQ(fixedArguments("bp::eq.Tensor_out"), V{"out"});
  EXPECT_EQ(fixedArguments("bp::argmax.out"), V{"out"});
  EXPECT_EQ(fixedArguments("bp::sort.values_stable"), V{"indices"});
  EXPECT_EQ(fixedArguments("bp::topk.values"), V{"indices"});
  // Arguments whose dtype follows the caller's count.
  EXPECT_EQ(fixedArguments("bp::add.out"), V{});
  EXPECT_EQ(fixedArguments("bp::bitwise_and.Tensor_out"), V{});
  EXPECT_EQ(fixedArguments("bp::mm.out"), V{});
}

// An index_select.out declaring float32 serves a float32 self with its int64
// index (before, the index's int64 sent every call to the CPU fallback); a
// float64 self still goes there.
int g_float32_index_select_calls = 0;
Tensor float32IndexSelect(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out) {
  ++g_float32_index_select_calls;
  out.copy_(index_select(self.cpu(), dim, index.cpu()));
  return out;
}

TEST(DtypeFixedArgumentsTest, ADeclaredKernelServesCallsWithAFixedDtypeIndex) {
  testing::TestDevice& dev = testing::TestDevice::install("fixedargs", 1);
  Library lib("fixedargs");
  ASSERT_TRUE(
      lib.impl("bp::index_select.out", dev.type(), BP_FN(float32IndexSelect), DtypeSet({ScalarType::Float32})).ok());
  const Tensor index = Tensor(tensorFromVector<int64_t>({2, 0}, {2})).to(dev.device(0));
  const Tensor x = Tensor(tensorFromVector<float>({1, 2, 3}, {3})).to(dev.device(0));
  EXPECT_EQ(index_select(x, 0, index).cpu().toVector<float>(), (std::vector<float>{3, 1}));
  EXPECT_EQ(g_float32_index_select_calls, 1);
  const Tensor x64 = Tensor(tensorFromVector<double>({1, 2, 3}, {3})).to(dev.device(0));
  EXPECT_EQ(index_select(x64, 0, index).cpu().toVector<double>(), (std::vector<double>{3, 1}));
  EXPECT_EQ(g_float32_index_select_calls, 1) << "float64 is not declared: the CPU fallback serves it";
}

// tril, triu, roll, repeat and index_add are structured: a device's native
// .out kernel serves the functional form too (the "implement .out" advice),
// handed an out of the result's shape and dtype on its device; an out= of
// another dtype is refused before any kernel runs.
int g_tril_out_calls = 0;
Tensor countingTrilOut(const Tensor& self, int64_t diagonal, const Tensor& out) {
  ++g_tril_out_calls;
  EXPECT_EQ(out.sizes(), self.sizes());
  EXPECT_EQ(out.device(), self.device());
  out.copy_(tril(self.cpu(), diagonal));
  return out;
}

TEST(StructuredIndexingOpsTest, ANativeOutKernelServesTheFunctionalForm) {
  testing::TestDevice& dev = testing::TestDevice::install("trilout", 1);
  Library lib("trilout");
  ASSERT_TRUE(lib.impl("bp::tril.out", dev.type(), BP_FN(countingTrilOut)).ok());
  const Tensor x = Tensor(tensorFromVector<float>({1, 2, 3, 4}, {2, 2})).to(dev.device(0));
  EXPECT_EQ(x.tril().cpu().toVector<float>(), (std::vector<float>{1, 0, 3, 4}));
  EXPECT_EQ(g_tril_out_calls, 1) << "the functional form called the device's tril.out";
  EXPECT_EQ(x.tril(1).cpu().toVector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(g_tril_out_calls, 2);
  const Tensor wrong = Tensor(emptyTensor({2, 2}, ScalarType::Float64, dev.device(0)));
  using Sig = Tensor(const Tensor&, int64_t, const Tensor&);
  auto tril_out = Dispatcher::singleton().findOpOrThrow("bp::tril.out").typed<Sig>();
  EXPECT_THAT([&] { tril_out.call(x, 0, wrong); },
              ::testing::ThrowsMessage<Error>(HasSubstr("bp::tril.out: argument 'out' has dtype float64")));
  EXPECT_EQ(g_tril_out_calls, 2);
}

// Their out= forms on the cpu: an empty out is resized, a strided one
// written in place, each returns its out.
TEST(StructuredIndexingOpsTest, OutFormsResizeAnEmptyOutAndWriteAStridedOne) {
  const Tensor x = Tensor(tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  using Sig2 = Tensor(const Tensor&, IntArrayRef, const Tensor&);
  Tensor empty = Tensor(emptyTensor({0}, ScalarType::Float32));
  const int64_t reps[] = {2, 1};
  Dispatcher::singleton().findOpOrThrow("bp::repeat.out").typed<Sig2>().call(x, IntArrayRef(reps, 2), empty);
  EXPECT_EQ(empty.sizes(), IntArrayRef(std::vector<int64_t>{4, 3}));
  EXPECT_EQ(empty.toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  const Tensor strided = Tensor(emptyTensor({3, 4}, ScalarType::Float32)).t();
  ASSERT_FALSE(strided.is_contiguous());
  Dispatcher::singleton().findOpOrThrow("bp::repeat.out").typed<Sig2>().call(x, IntArrayRef(reps, 2), strided);
  EXPECT_EQ(strided.contiguous().toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  using RollSig = Tensor(const Tensor&, IntArrayRef, IntArrayRef, const Tensor&);
  const int64_t shift[] = {1}, dim[] = {1};
  Tensor rolled = Tensor(emptyTensor({0}, ScalarType::Float32));
  Dispatcher::singleton()
      .findOpOrThrow("bp::roll.out")
      .typed<RollSig>()
      .call(x, IntArrayRef(shift, 1), IntArrayRef(dim, 1), rolled);
  EXPECT_EQ(rolled.toVector<float>(), (std::vector<float>{3, 1, 2, 6, 4, 5}));
  EXPECT_THAT(
      [&] {
        Dispatcher::singleton()
            .findOpOrThrow("bp::roll.out")
            .typed<RollSig>()
            .call(x, IntArrayRef(shift, 1), IntArrayRef(dim, 1), Tensor(emptyTensor({5}, ScalarType::Float32)));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("bp::roll.out: argument 'out' has shape [5]")));
}

}  // namespace
}  // namespace backplane::ops_test
