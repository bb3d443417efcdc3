#pragma once
// Conformance samples that plugins declare for their own operators
// (BP_HostApi.spec, ABI 1.9; Note [A plugin's own operators] in
// plugin_api.h), parsed and checked against the operator's schema when the
// plugin registers them. The conformance suite turns them into specs.
//
// Note [Sample notation]
// One sample call per line; blank lines and lines starting with '#' are
// skipped. `NAME: ARG, ARG, ...` is a call that must return what the
// reference returns; `raises NAME: ARG, ...` is one that must throw (NAME
// says what is wrong with it). Every argument of the schema is given, in
// order. An argument is
//   float32[4,8]    a tensor of that dtype and shape with seeded random
//                   values (floats in [-2, 2), integers in [-5, 5]);
//                   float32[] is 0-d; suffix .T: stored transposed (the
//                   last two dims swapped in memory, so not contiguous);
//                   suffix @cpu: left on the host where the other tensors
//                   move to the backend's device (a device-mismatch call)
//   T[4,8]          the same for each dtype of the `dtypes:` line: a
//                   sample that names T runs once per dtype, its name
//                   ending in the dtype
//   3, -1.5, true   int, float, bool (an int also fills a float or Scalar)
//   [2, 3]          an int list
//   none            None, for an optional argument
//   float16         a dtype argument (ScalarType)
//   "text"          a string
//   device          the backend's device (a factory's `device=`)
// A line `dtypes: float32, float16` lists the dtypes T stands for.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backplane/core/scalar_type.h"
#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/kernel_function.h"

namespace backplane {

struct SampleArg {
  enum class Kind { Tensor, Int, Double, Bool, None, IntList, Dtype, String, Device };
  Kind kind = Kind::None;
  // Tensor: dtype, sizes, stored transposed, kept on the host.
  ScalarType dtype = ScalarType::Float32;
  std::vector<int64_t> sizes;
  bool transposed = false;
  bool on_host = false;
  int64_t i = 0;              // Int
  double d = 0;               // Double
  bool b = false;             // Bool
  std::vector<int64_t> ints;  // IntList
  std::string str;            // String
};

struct SampleDecl {
  std::string name;  // with " float32" appended for each dtype of a T sample
  bool must_raise = false;
  std::vector<SampleArg> args;  // one per schema argument
};

struct DeclaredSpec {
  std::string op;      // "toyaccel::bias_relu"
  std::string plugin;  // the plugin that declared it
  std::vector<SampleDecl> samples;
  // The plugin's reference kernel (called boxed with host tensors), or
  // empty: the operator's cpu kernel is the reference.
  KernelFunction reference;
  double atol = 0, rtol = 0;  // 0 and 0: the result dtype's default
};

// Parses `text` (Note [Sample notation]) for an operator of `schema`:
// InvalidArgumentError naming the line and what is wrong with it (a count
// or a kind of arguments the schema does not take, an unknown dtype, T
// without a `dtypes:` line, no sample at all).
absl::StatusOr<std::vector<SampleDecl>> parseSampleNotation(const FunctionSchema& schema, std::string_view text);

// The specs the loaded plugins declared, in load order.
std::vector<std::shared_ptr<const DeclaredSpec>> declaredSpecs();

// The out= and in-place forms a loaded plugin derived from `functional`
// (BP_HostApi.derive_forms; Note [Derived forms]); empty names for none.
struct DerivedFormNames {
  std::string out;
  std::string inplace;
};
DerivedFormNames derivedFormsOf(std::string_view functional);

}  // namespace backplane
