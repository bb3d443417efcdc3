#pragma once
// Note [Differential tests against PyTorch]
// Each case names a standard operator overload ("add.Tensor") and its
// arguments by name; the harness makes the same arguments for Backplane
// (bp::<op>, a boxed call through the dispatcher and the CPU plugin) and for
// libtorch (aten::<op>, a boxed call through c10's dispatcher), fills the
// arguments a case leaves off from each side's own schema defaults, calls
// both, and compares what they do: both raise or neither does; the same
// number of returns; per returned tensor the dtype, the shape and every
// element (bit-exact where the op is exact, NaN equal to NaN and the sign of
// zero checked; within a stated number of the result dtype's epsilons where
// it is not; for ill-conditioned inputs, Backplane's error against a float64
// reference at most a factor times PyTorch's). Tensor arguments are built
// from the same bytes on both sides and then viewed the same way
// (transposed, strided, expanded), so non-contiguous inputs reach both
// libraries.
//
// A disagreement fails its test unless known_differences.txt lists it (Note
// [Known differences from PyTorch] in known_differences.h).
//
// Ops are found by name at run time: an op Backplane's table lacks is a test
// failure that says so, so adding an op to the table turns its cases on.
// Where libtorch 1.13 has no CPU kernel for a 16-bit float dtype ("not
// implemented for 'Half'"), the PyTorch side reruns on float32 copies and
// rounds the result back, and the element check allows one 16-bit rounding.
//
// This header sees no libtorch type: the case tables (cases_*.cc) compile
// without ATen's headers; harness.cc is the one file that includes them.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/core/scalar.h"
#include "backplane/core/scalar_type.h"
#include "backplane/dispatch/ivalue.h"
#include "known_differences.h"

namespace backplane::torch_parity {

// How a tensor argument's elements are chosen.
enum class Fill {
  Special,   // the dtype's edge values (nan, +-inf, -0.0, min/max, subnormals, ...), rotated by `seed`
  Random,    // uniform in [-3, 3] (integers rounded; unsigned in [0, 6]; bool 0/1)
  Small,     // integers in [-2, 2] ([0, 3] unsigned), floats in [-2, 2]
  Positive,  // in (0.1, 4] (integers 1..4)
  Offset,    // 1e4 +- 0.05 (floats; integers 100 +- 2): numerically hard for variances
  Zeros,
  Values,  // `values`, converted to the dtype (must be in range)
};
// How the tensor reaches the op.
enum class View {
  Contiguous,
  Transposed,  // the last two dims of a contiguous tensor swapped (>= 2-d)
  Strided,     // every second element of the last dim
  Expanded,    // dim 0 broadcast from size 1 (stride 0)
};

struct TensorArg {
  ScalarType dtype = ScalarType::Float32;
  std::vector<int64_t> shape;
  Fill fill = Fill::Special;
  View view = View::Contiguous;
  uint32_t seed = 0;
  std::vector<double> values;
};

// One argument as the case gives it.
struct Arg {
  enum class Kind { None, Tensor, TensorList, Scalar, Int, Double, Bool, String, Dtype, IntList };
  Kind kind = Kind::None;
  TensorArg tensor;
  std::vector<TensorArg> tensors;
  Scalar scalar;  // a Python number passed as a Scalar
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  ScalarType dtype = ScalarType::Float32;
  std::vector<int64_t> ints;
};

// Argument builders, read as the Python call would be written.
Arg T(ScalarType dtype, std::vector<int64_t> shape, Fill fill = Fill::Special, View view = View::Contiguous,
      uint32_t seed = 0);
Arg TV(ScalarType dtype, std::vector<int64_t> shape, std::vector<double> values);
Arg TL(std::vector<TensorArg> tensors);
TensorArg TA(ScalarType dtype, std::vector<int64_t> shape, Fill fill = Fill::Random, uint32_t seed = 0);
Arg S(Scalar s);  // a number for a Scalar parameter
Arg I(int64_t i);
Arg F(double d);
Arg B(bool b);
Arg Str(std::string s);
Arg Dt(ScalarType t);
Arg Ints(std::vector<int64_t> v);
Arg None();

// How results are compared.
struct Check {
  enum class Mode { Exact, Close, Accuracy, ShapeOnly } mode = Mode::Exact;
  // Close: |got - want| <= eps(dtype) * (ulps * |want| + atol_ulps), eps the
  // result dtype's epsilon. Integers and bools are always exact.
  // Accuracy (ill-conditioned inputs, where PyTorch's own result is off):
  // PyTorch also runs on float64 copies; Backplane's largest error against
  // that reference is at most `ulps` times PyTorch's largest error (or than
  // eps(dtype) * max |reference|).
  double ulps = 0;
  double atol_ulps = 0;
};
inline Check exact() { return {}; }
inline Check close(double ulps, double atol_ulps = -1) {
  return {Check::Mode::Close, ulps, atol_ulps < 0 ? ulps : atol_ulps};
}
inline Check shapeOnly() { return {Check::Mode::ShapeOnly}; }
inline Check noLessAccurate(double factor) { return {Check::Mode::Accuracy, factor, 0}; }

struct Case {
  std::string op;  // overload name shared by both libraries, e.g. "add.Tensor", "softmax.int"
  std::vector<std::pair<std::string, Arg>> args = {};  // by schema argument name
  Check check = {};
  // The test the case belongs to within its family ("" = `op`).
  std::string group = {};
  // When set, Backplane is called through this function of the public C++
  // API (backplane/ops/ops.h) with the arguments in the case's order, in place of
  // the boxed bp::<op>; PyTorch still runs aten::<op>.
  std::function<std::vector<IValue>(const std::vector<IValue>&)> bp_api = {};
  // A gradient case (Note [Gradients against PyTorch]): both libraries
  // differentiate the op's first result, and the inputs' gradients are
  // compared instead of the results.
  bool gradient = false;
};

// A family of cases: one gtest per group ("torch_parity.<family>/<group>").
struct Family {
  std::string name;
  std::function<std::vector<Case>()> make;
};
// Every family (cases_*.cc).
std::vector<Family> families();

struct Outcome {
  enum class Kind { Agree, Disagree, Missing } kind = Kind::Agree;
  std::string message;                   // what differs, with the call written out
  std::optional<Difference> difference;  // how (Disagree only)
  bool via_float32 = false;              // PyTorch ran on float32 copies (no 16-bit CPU kernel)
};

// Runs one case on both libraries and compares them.
Outcome runCase(const Case& c);

// Note [Gradients against PyTorch]
// The family "gradients" is made from every other family's cases whose op
// has a derivative formula or differentiates through its composite (Note
// [Derivative declarations]): each floating tensor argument becomes a
// float64 leaf that requires grad (random values in place of the special
// ones, whose gradients are conventions), both libraries run the op, and
// each backpropagates sum(result * w) for the same fixed weights w; the
// gradients of every leaf must agree within 1e-6 relative (+1e-8). A case
// whose forward raises on either side is left to the forward's families.
// Disagreements follow the same known-differences policy as the forward.
std::vector<Case> gradientCases();
// The call written out, e.g. "add.Tensor(self=float32[4, 4] special, other=int8[] special, alpha=2)".
std::string describe(const Case& c);

// The dtypes both libraries have, in Backplane's order; Backplane dtypes with
// no libtorch 1.13 counterpart (uint16/32/64) are left out, and are counted by
// dtypesWithoutTorch().
const std::vector<ScalarType>& dtypes();
std::vector<std::string> dtypesWithoutTorch();
const std::vector<ScalarType>& floatingDtypes();
bool isUnsigned(ScalarType t);

// Loads the CPU plugin and sets both libraries to one thread.
void setUp();

}  // namespace backplane::torch_parity
