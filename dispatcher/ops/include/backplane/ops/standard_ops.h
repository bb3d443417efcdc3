#pragma once
// The standard operators: one table of PyTorch-compatible schemas in the
// namespace "bp", defined when the Dispatcher is created, each with its
// shape/dtype rule (a meta kernel, Note [Meta kernels]) where it has out=
// arguments and a backend-agnostic composite kernel where it can be written
// with other operators. Plugins implement them ("add.out" in a plugin means
// "bp::add.out"); the CPU plugin implements all of them, so CPU fallback
// covers every device. Note [The standard operator table] says how the
// table is organised.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/dispatch/kernel_function.h"
#include "backplane/ops/tensor.h"

namespace backplane {

inline constexpr std::string_view kStandardNamespace = "bp";

// A set of dtypes: a bit per ScalarType.
class ScalarTypeSet {
 public:
  constexpr ScalarTypeSet() = default;
  constexpr ScalarTypeSet(std::initializer_list<ScalarType> types) {
    for (ScalarType t : types) bits_ |= bit(t);
  }
  static constexpr ScalarTypeSet all() { return fromBits((1u << kNumScalarTypes) - 1); }
  static constexpr ScalarTypeSet floating() {
    return {ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
  }
  static constexpr ScalarTypeSet allBut(ScalarType t) { return fromBits(all().bits_ & ~bit(t)); }
  constexpr ScalarTypeSet without(ScalarTypeSet other) const { return fromBits(bits_ & ~other.bits_); }
  // This set without the dtypes of `other`.
  constexpr ScalarTypeSet minus(ScalarTypeSet other) const { return fromBits(bits_ & ~other.bits_); }
  constexpr bool contains(ScalarType t) const { return (bits_ & bit(t)) != 0; }
  constexpr bool isAll() const { return bits_ == all().bits_; }
  friend constexpr bool operator==(ScalarTypeSet, ScalarTypeSet) = default;
  // "uint8, int8, float32", in ScalarType order; "every dtype" for all(),
  // "every dtype but bool" for allBut(Bool).
  std::string toString() const;

 private:
  static constexpr uint32_t bit(ScalarType t) { return 1u << static_cast<int>(t); }
  static constexpr ScalarTypeSet fromBits(uint32_t bits) {
    ScalarTypeSet s;
    s.bits_ = bits;
    return s;
  }
  uint32_t bits_ = 0;
};

// Note [Dtype rules live in metas]
// Every dtype rule of a standard op is the host's: its meta (or, for an op
// without one, its composite) refuses a dtype before any kernel runs, so a
// plugin kernel never sees a call it must refuse, and conformance never asks
// a kernel to refuse one. The per-argument part of the rule is data, the
// op's StandardOp::dtypes: the meta checks it (ops::checkDtypes) and
// `backplane ops --schemas` lists it. Rules that relate arguments (operands
// of one dtype, out= castable from the result) stay code in the meta.
// conformance/tests/dtype_rules_test.cc keeps it so: a call the host
// accepts is never refused by the CPU plugin's kernel for its dtype.
struct ArgumentDtypes {
  // A tensor argument's name in the schema ("self", "index"), or "result":
  // the dtype the op computes in (its inputs' promoted dtype).
  const char* argument;
  ScalarTypeSet accepted;
  // What to do instead, for the refusal, ending in ", " ("use logical_xor()
  // instead, "); the message goes on "or convert it to an accepted dtype".
  const char* instead = "";
};

struct StandardOp {
  std::string schema;        // without the namespace
  KernelFunction meta;       // optional: validates arguments, checks/resizes out=
  KernelFunction composite;  // optional: the op written with other standard ops
  const char* family = "";   // "elementwise", "reduction", ... for docs and reports
  // The dtypes its tensor arguments accept (Note [Dtype rules live in
  // metas]); an argument not listed accepts every dtype.
  std::vector<ArgumentDtypes> dtypes = {};
  // For an out= form derived from a functional op (Note [Derived out=
  // forms]): that op's name ("max.dim"). Its composite calls that op and
  // copies the results; its family and dtypes are that op's.
  // With `derived_functional`, this is instead the functional form of an
  // in-place-only op (`zero`, derived from "zero_"): its composite calls
  // that op on a new tensor like self and returns it.
  std::string derived_from = {};
  bool derived_functional = false;
};

// Note [Derived out= forms]
// Where PyTorch has an out= form of an op whose kernel is its functional
// form (a composite, or a native kernel such as linear's or a backward
// op's), the table declares it with `derived_from` set, as PyTorch's
// `autogen:` does: `op.out`'s composite calls the functional op (its rule,
// and its kernel or composite on whatever device serves it) and copies each
// result into its out= argument, resizing an empty one (Note [Derived
// forms] in derived_forms.h). So every such op has its out= form on every
// device, at the cost of one temporary and one copy per call. A plugin
// writes the functional kernel (`backplane ops --schemas` names it); a
// kernel it registers for the out= form itself serves that form instead,
// with no shape rule run first (it checks and resizes `out` itself). Like
// every standard out= form, it records no gradient. (layer_norm_backward,
// batch_norm_backward and conv2d_backward stand for PyTorch's
// native_*_backward and convolution_backward, and so do their out= forms.)
//
// The ops whose only form was in place and that write every element of
// self without reading it (fill_.Scalar, zero_, uniform_, normal_, copy_)
// get PyTorch's functional forms (fill.Scalar, zero, uniform,
// normal_functional, copy) the same way: a composite that makes a new
// contiguous tensor like self (shape, dtype, device) and calls the in-place
// op on it; their out= forms are derived from those.

// Every standard operator, in definition order. Built once, on first use.
const std::vector<StandardOp>& standardOperators();

// The table's entry for `op` ("mm.out" or "bp::mm.out"), or nullptr.
const StandardOp* findStandardOp(std::string_view op);
// The out= form derived from functional op `op` ("max.dim" or
// "bp::max.dim"; Note [Derived out= forms]), or nullptr.
// (derivedFunctionalOf: the functional form derived from in-place op `op`,
// "bp::zero_" gives zero's entry, or nullptr.)
const StandardOp* derivedOutFormOf(std::string_view op);
const StandardOp* derivedFunctionalOf(std::string_view op);

// The dtypes `argument` (a name, or "result") of `op` accepts: what
// op.dtypes lists for it, else every dtype; without uint16, uint32 and
// uint64 unless the op serves them (Note [Barebones unsigned dtypes]).
ScalarTypeSet acceptedDtypes(const StandardOp& op, std::string_view argument);
// Whether `op` serves uint16, uint32 and uint64 tensors (creation, copies,
// data movement, comparisons); every other standard op refuses them.
bool servesBarebonesUnsigned(const StandardOp& op);

class FunctionSchema;
// Bit i set iff argument i of `op` (whose parsed schema is `schema`) has a
// dtype the op's rule fixes (an index, a mask, a bool or int64 result), which
// a kernel's declared dtypes do not apply to (Note [Dtype-fixed arguments]).
uint64_t dtypeFixedArguments(const StandardOp& op, const FunctionSchema& schema);

}  // namespace backplane
