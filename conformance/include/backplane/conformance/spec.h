#pragma once
// Conformance specs: for a standard operator, the sample calls it is
// certified on and a reference that computes what each call must return.
//
// Note [Conformance specs]
// A spec depends on no plugin. Its samples are built on the host with core
// code only (tensorFromVector and core views: transposed, sliced and
// expanded inputs), from a seed derived from the op's name, so every run
// and every backend sees the same values. A factory's `device=` argument is
// given as the host device and the runner replaces it with the backend's.
// Its reference is plain
// double-precision code over the samples' host values. The runner moves
// each sample to the backend's device with its strides intact (stageSpan),
// calls the op there through the dispatcher, reads the results back with
// core copies and compares them with the reference within the tolerance of
// the result's dtype. A sample may instead be one that must raise: then the
// call must throw backplane::Error on every backend.
//
// Specs of structured ops also certify the other forms: `inplace` names
// `op_` (self is a clone of the sample's first argument; the result must
// alias it and hold the reference) and `out` names `op.out` (called with a
// fresh empty `out`, which must be resized and hold the reference). Samples
// whose result has another shape or dtype than self skip the in-place form.

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backplane/dispatch/ivalue.h"
#include "backplane/ops/tensor.h"

namespace backplane::conformance {

// An expected result: a shape, a dtype and row-major values in double.
struct Expected {
  std::vector<int64_t> sizes;
  ScalarType dtype = ScalarType::Float32;
  std::vector<double> values;
  // -1: a value the op returns (the reference lists them in order). Else
  // the index of an argument the op writes (batch_norm's running stats):
  // what that argument must hold after the call.
  int argument = -1;
  // With `argument` a tensor list (an optimizer's parameters and state):
  // the position in the list.
  int element = -1;
  // A return the call's output_mask leaves out (conv2d_backward's,
  // batch_norm_backward's): not checked, as a kernel may leave it
  // undefined or compute it anyway.
  bool masked = false;
};

// Absolute and relative tolerance: |actual - expected| <= atol + rtol * |expected|.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};
// PyTorch's defaults for each dtype (exact for integral and bool).
Tolerance defaultTolerance(ScalarType t);

struct Sample {
  std::string name;          // "broadcast [3,1] + [4]", "transposed", ...
  std::vector<IValue> args;  // every argument of the schema, on the host
  bool must_raise = false;   // the call must throw (bad shape, dtype, ...)
  std::string raise_reason;  // what is wrong with it, for the report
  // Bit i: argument i (a tensor) stays on the host when the others move to
  // the backend's device: a call mixing devices, which must raise there.
  uint64_t host_args = 0;
};

using Reference = std::function<std::vector<Expected>(const Sample&)>;
// For ops whose results no reference can predict value by value (random
// ops, empty): gets the sample and the results copied to the host (sizes
// and strides kept), returns an empty string when they are right, else what
// is wrong with them.
using Checker = std::function<std::string(const Sample&, const std::vector<Tensor>& host_results)>;

struct OpSpec {
  std::string op;      // "bp::add.Tensor"
  std::string family;  // "elementwise", "reduction", ...
  std::function<std::vector<Sample>()> samples;
  // What each sample must return. With `check` set, only the shapes and
  // dtypes of the reference's results are compared (its values are
  // ignored) and `check` judges the values.
  Reference reference;
  Checker check;
  std::string inplace;  // "bp::add_.Tensor", or empty
  std::string out;      // "bp::add.out", or empty
  // Extra slack for a dtype (reductions over many elements, ...); else the
  // dtype's default.
  std::function<Tolerance(ScalarType, const Sample&)> tolerance;
  // Said in each form's result note: what the reference is, for a spec a
  // plugin declared ("reference: plugin toyaccel's reference function").
  std::string reference_note;
};

// The specs the loaded plugins declared for their own operators
// (BP_HostApi.spec; Note [A plugin's own operators] in plugin_api.h), in
// load order. Each lives as long as the process.
std::vector<const OpSpec*> pluginSpecs();

// Every spec, in registration order. Built once.
const std::vector<OpSpec>& allSpecs();

// --- Building samples (all on the host, deterministic).

// A deterministic generator: same seed, same values on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next();
  double uniform(double lo, double hi);     // [lo, hi)
  int64_t integer(int64_t lo, int64_t hi);  // [lo, hi]

 private:
  uint64_t state_;
};
uint64_t seedFor(const std::string& text);

// Value ranges for random tensors.
struct Range {
  double lo = -2, hi = 2;     // floating dtypes: uniform in [lo, hi)
  int64_t ilo = -5, ihi = 5;  // integral dtypes: uniform in [ilo, ihi]
};

// The dtype lists specs iterate over.
extern const std::vector<ScalarType> kFloatTypes;    // float32, float64, float16, bfloat16
extern const std::vector<ScalarType> kNumericTypes;  // the floating ones, int32, int64, int8, uint8, int16
extern const std::vector<ScalarType> kAllTypes;      // the numeric ones and bool
// uint16, uint32, uint64: creation, copies, data movement and comparisons only
// (Note [Barebones unsigned dtypes]).
extern const std::vector<ScalarType> kBarebonesUnsignedTypes;
extern const std::vector<ScalarType> kEveryType;  // kAllTypes and kBarebonesUnsignedTypes

// A sample that calls the op with `args`.
Sample makeSample(std::string name, std::vector<IValue> args);
// A sample whose call must throw, for `reason`.
Sample raising(std::string name, std::vector<IValue> args, std::string reason);
// " float32": a dtype as the end of a sample's name.
std::string dtypeSuffix(ScalarType t);
// The `device=` argument of a factory sample: the host device, which the
// runner replaces with the backend's.
IValue backendDevice();

// A contiguous host tensor of `sizes` and `dtype` with random values.
Tensor randomTensor(Rng& rng, std::vector<int64_t> sizes, ScalarType dtype, Range range = {});
// A host tensor holding `values` (converted to dtype).
Tensor hostTensor(const std::vector<double>& values, std::vector<int64_t> sizes, ScalarType dtype);

// Every element of a (host) tensor, row-major, as double.
std::vector<double> valuesOf(const Tensor& t);

// --- Reference helpers.

// The row-major index into a tensor of `sizes` broadcast to `out_sizes`,
// for element `linear` of the output.
int64_t broadcastIndex(const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_sizes, int64_t linear);
// PyTorch's broadcast of two shapes (the caller knows they broadcast).
std::vector<int64_t> broadcastShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
std::vector<int64_t> sizesOf(const Tensor& t);
int64_t numelOf(const std::vector<int64_t>& sizes);
// PyTorch's result_type for two tensors (dim-ful over 0-d over scalar).
ScalarType promoteArgs(const Tensor& a, const Tensor& b);
// Machine epsilon of a floating dtype (2^-23 for float32, ...), 0 for the
// others, whose arithmetic is exact: for tolerances that grow with rounding.
double machineEpsilon(ScalarType t);
// A double as an element of `t` would hold it: rounded to float32 or to
// the 16-bit formats, wrapped to the integer width, 0/1 for bool.
double roundTo(ScalarType t, double v);
// An optional tensor argument as the op sees it: None is an undefined tensor.
Tensor optionalTensor(const IValue& v);
// Infinity, for references and samples.
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Registration of the families' specs (one function per family source).
void addElementwiseSpecs(std::vector<OpSpec>& specs);
void addElementwiseMoreSpecs(std::vector<OpSpec>& specs);  // specs_elementwise_more.cc
void addReductionSpecs(std::vector<OpSpec>& specs);
void addCreationSpecs(std::vector<OpSpec>& specs);
void addDataMovementSpecs(std::vector<OpSpec>& specs);
void addLinalgSpecs(std::vector<OpSpec>& specs);
void addNnSpecs(std::vector<OpSpec>& specs);
void addRandomSpecs(std::vector<OpSpec>& specs);
void addSortScanPadSpecs(std::vector<OpSpec>& specs);  // prod, all/any, cumsum, sort, topk, flip, pads
// specs_indexing.cc: scatter, index, index_put, nonzero, masked_select, index_add, tril/triu, roll, repeat, isclose
void addIndexingSpecs(std::vector<OpSpec>& specs);
void addOptimSpecs(std::vector<OpSpec>& specs);     // _fused_sgd_, _fused_adamw_
void addBackwardSpecs(std::vector<OpSpec>& specs);  // the backward ops (Note [Backward op specs])
// specs_collectives.cc: the comm:: collectives in a world of one
void addCollectiveSpecs(std::vector<OpSpec>& specs);

}  // namespace backplane::conformance
