// The elementwise ONNX op_types in the ONNX -> standard-op table (Note [ONNX
// op mapping] in onnx_ops.cc): arithmetic, comparisons, logic, bitwise ops
// and shifts, unary math, activations, Clip, Cast/CastLike, Where, Identity,
// Dropout, QuantizeLinear/DequantizeLinear.
//
// Note [ONNX elementwise semantics]
// ONNX's elementwise ops take operands of one type (Pow, Where's condition,
// BitShift aside) and give that type; Backplane's ops follow PyTorch's type
// promotion, which agrees on equal types, with these exceptions the entries
// handle:
//  - integer Div truncates toward zero in ONNX; Backplane's div is true
//    division, so integral operands use div(rounding_mode="trunc");
//  - Pow gives the base's type: mixed operand types are computed in float64
//    (as ONNX's reference, NumPy, does) and cast to the base's type;
//  - Mod's fmod=0 is Python's % (the divisor's sign: remainder), fmod=1 C's
//    fmod; ONNX allows fmod=0 for integers only;
//  - uint16, uint32 and uint64 have comparisons and copies but no arithmetic
//    among the standard ops (Note [Barebones unsigned dtypes]). The entries
//    compute them in int64 and cast back where that is exact: +, -, * and
//    the bitwise ops wrap modulo 2^64 in int64 and keep their low bits, so
//    every unsigned width is exact; division, remainder, max/min, abs and
//    sign are exact in int64 for uint16 and uint32 but not for uint64 values
//    of 2^63 and up, so uint64 is unsupported there (Max and Min order
//    uint64 with its own comparisons instead).
// An attribute value, dtype or opset an entry cannot honour exactly makes
// the node unsupported with the reason, before any op runs.

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "backplane/conformance/onnx_ops.h"
#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/core/str_cat.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

// Input `i`, which the op requires.
const Tensor& required(const NodeTest& node, const NodeInputs& inputs, size_t i) {
  BP_CHECK(i < inputs.size() && inputs[i].has_value(), node.op_type, " (", node.name, "): required input ", i,
           " is missing");
  return *inputs[i];
}

// Input `i` if given (present, defined, not an omitted optional input); a
// copy, unlike onnx_node_args.h's optionalInput().
std::optional<Tensor> givenInput(const NodeInputs& inputs, size_t i) {
  if (i < inputs.size() && inputs[i].has_value() && inputs[i]->defined()) return inputs[i];
  return std::nullopt;
}

// Every given input, in order: the operands of a variadic op.
std::vector<Tensor> variadicInputs(const NodeTest& node, const NodeInputs& inputs) {
  std::vector<Tensor> ts;
  for (const auto& t : inputs)
    if (t.has_value() && t->defined()) ts.push_back(*t);
  BP_CHECK(!ts.empty(), node.op_type, " (", node.name, "): needs at least one input");
  return ts;
}

// How exactly int64 carries a uint16/32/64 operand (Note [ONNX elementwise semantics]).
enum class Unsigned {
  kBits,   // the op keeps low bits (wrapping +, -, *, bitwise): every width is exact
  kValue,  // the op needs the value (ordering, division): uint64 is not exact
};

// uint16/uint32/uint64 operands as int64 for ops that have no kernel for
// them. `result_dtype` becomes the dtype to cast the result back to (unset
// when no operand was widened); a reason when int64 cannot carry them.
std::optional<std::string> widenUnsigned(const NodeTest& node, std::vector<Tensor>& operands, Unsigned rule,
                                         std::optional<ScalarType>& result_dtype) {
  result_dtype.reset();
  for (Tensor& t : operands) {
    if (!isBarebonesUnsignedType(t.dtype())) continue;
    if (t.dtype() == ScalarType::UInt64 && rule == Unsigned::kValue)
      return strCat(node.op_type, ": uint64 operands have no standard op (uint64 has comparisons and copies only, ",
                    "and int64 cannot hold uint64 values of 2^63 and up)");
    result_dtype = t.dtype();
    t = t.to(ScalarType::Int64);
  }
  return std::nullopt;
}

// The opset-1..6 "broadcast"/"axis" attributes of binary ops: numpy-style
// suffix broadcasting (broadcast=1 without axis) is what the standard ops do;
// an axis aligns the second operand elsewhere, which they do not.
std::optional<std::string> legacyBroadcastReason(const NodeTest& node) {
  if (node.opset < 7 && node.has("axis"))
    return strCat(node.op_type, " (opset ", node.opset,
                  "): the legacy 'axis' attribute aligns the second operand at an axis, which numpy-style "
                  "broadcasting does not express");
  return std::nullopt;
}

using Binary = Tensor (*)(const Tensor&, const Tensor&);
using Unary = Tensor (*)(const Tensor&);

// An op of same-typed operands folded left to right over every input
// (Add, Mul, ... are the two-input case), with unsigned operands per `rule`.
NodeFunction foldedBinary(Binary op, Unsigned rule) {
  return [op, rule](const NodeTest& node, const NodeInputs& inputs, Device) -> NodeRun {
    if (auto reason = legacyBroadcastReason(node)) return unsupported(*reason);
    std::vector<Tensor> ts = variadicInputs(node, inputs);
    std::optional<ScalarType> back;
    if (auto reason = widenUnsigned(node, ts, rule, back)) return unsupported(*reason);
    Tensor acc = ts[0];
    for (size_t i = 1; i < ts.size(); ++i) acc = op(acc, ts[i]);
    if (back) acc = acc.to(*back);
    return outputs({acc});
  };
}

// An op of one operand, with unsigned operands per `rule`.
NodeFunction unaryOp(Unary op, Unsigned rule = Unsigned::kValue) {
  return [op, rule](const NodeTest& node, const NodeInputs& inputs, Device) -> NodeRun {
    std::vector<Tensor> ts = {required(node, inputs, 0)};
    std::optional<ScalarType> back;
    if (auto reason = widenUnsigned(node, ts, rule, back)) return unsupported(*reason);
    Tensor y = op(ts[0]);
    if (back) y = y.to(*back);
    return outputs({y});
  };
}

// Max and Min. uint64 operands, which int64 cannot order, are ordered by
// the comparisons uint64 has and picked as int64 bit patterns.
NodeFunction extremum(bool is_max) {
  NodeFunction folded = foldedBinary(is_max ? Binary([](const Tensor& a, const Tensor& b) { return maximum(a, b); })
                                            : Binary([](const Tensor& a, const Tensor& b) { return minimum(a, b); }),
                                     Unsigned::kValue);
  return [is_max, folded](const NodeTest& node, const NodeInputs& inputs, Device device) -> NodeRun {
    std::vector<Tensor> ts = variadicInputs(node, inputs);
    if (ts[0].dtype() != ScalarType::UInt64) return folded(node, inputs, device);
    Tensor acc = ts[0];
    for (size_t i = 1; i < ts.size(); ++i) {
      BP_CHECK(ts[i].dtype() == ScalarType::UInt64, node.op_type, " (", node.name, "): operands of ",
               scalarTypeName(acc.dtype()), " and ", scalarTypeName(ts[i].dtype()), "; ONNX requires one type");
      const Tensor keep = is_max ? ge(acc, ts[i]) : le(acc, ts[i]);
      acc = where(keep, acc.to(ScalarType::Int64), ts[i].to(ScalarType::Int64)).to(ScalarType::UInt64);
    }
    return outputs({acc});
  };
}

// A comparison or logical op: every dtype is served, the result is bool.
NodeFunction boolBinary(Binary op) {
  return [op](const NodeTest& node, const NodeInputs& inputs, Device) -> NodeRun {
    if (auto reason = legacyBroadcastReason(node)) return unsupported(*reason);
    return outputs({op(required(node, inputs, 0), required(node, inputs, 1))});
  };
}

// A floating-point function of one operand computed in float64 and cast
// back, for the ONNX ops with no standard op of their own (Tan, Sinh, ...):
// float64 keeps the composition's rounding below the input type's.
NodeFunction viaFloat64(const char* what, Tensor (*f)(const Tensor&)) {
  return [what, f](const NodeTest& node, const NodeInputs& inputs, Device) -> NodeRun {
    const Tensor& x = required(node, inputs, 0);
    if (!isFloatingType(x.dtype()))
      return unsupported(strCat(node.op_type, ": ", scalarTypeName(x.dtype()), " input; ONNX defines ", what,
                                " for floating types only"));
    return outputs({f(x.to(ScalarType::Float64)).to(x.dtype())});
  };
}

// Cast's `to`: an element type number, or (opset 1-5) its name.
std::optional<int64_t> castTarget(const NodeTest& node) {
  auto it = node.attributes.find("to");
  if (it == node.attributes.end()) return std::nullopt;
  if (const auto* name = std::get_if<std::string>(&it->second)) {
    return elementTypeFromName(*name);
  }
  return node.intAttr("to", 0);
}

// Cast and CastLike to `target` (an ONNX element type). `saturate` and
// `round_mode` only change casts to the 8-bit float types, which Backplane
// has no dtype for, so with a target Backplane has they are the default.
NodeRun castTo(const NodeTest& node, const Tensor& x, std::optional<ScalarType> target, int64_t onnx_type) {
  if (!target)
    return unsupported(strCat(node.op_type, ": to ", elementTypeName(onnx_type), ", which Backplane has no dtype for"));
  return outputs({x.to(*target)});
}

// Clip's bounds: attributes before opset 11, optional inputs from opset 11.
NodeRun clip(const NodeTest& node, const NodeInputs& inputs) {
  const Tensor& x = required(node, inputs, 0);
  if (node.opset < 11) {
    std::optional<Scalar> lo, hi;
    if (node.has("min")) lo = Scalar(node.floatAttr("min", 0));
    if (node.has("max")) hi = Scalar(node.floatAttr("max", 0));
    if (!lo && !hi) return outputs({x});
    return outputs({clamp(x, lo, hi)});
  }
  std::vector<Tensor> ts = {x};
  const std::optional<Tensor> lo = givenInput(inputs, 1), hi = givenInput(inputs, 2);
  for (const auto& b : {lo, hi}) {
    if (!b) continue;
    if (b->numel() != 1)
      return unsupported(strCat("Clip: a bound of ", b->numel(), " elements; ONNX's min and max are scalars"));
    ts.push_back(b->dim() == 0 ? *b : b->reshape({}));
  }
  std::optional<ScalarType> back;
  if (auto reason = widenUnsigned(node, ts, Unsigned::kValue, back)) return unsupported(*reason);
  // max(x, min) then min(., max), as numpy.clip: min > max gives max.
  Tensor y = ts[0];
  size_t next = 1;
  if (lo) y = maximum(y, ts[next++]);
  if (hi) y = minimum(y, ts[next++]);
  if (back) y = y.to(*back);
  return outputs({y});
}

// Dropout at inference is the identity with an all-true mask; in training
// mode it draws a random mask, which no standard op reproduces as ONNX's
// reference generator does, unless the ratio is 0.
NodeRun dropout(const NodeTest& node, const NodeInputs& inputs) {
  const Tensor& x = required(node, inputs, 0);
  bool training = false;
  double ratio = 0.5;
  if (node.opset >= 12) {
    if (auto r = givenInput(inputs, 1)) ratio = r->cpu().item<double>();
    if (auto t = givenInput(inputs, 2)) training = t->cpu().item<bool>();
  } else {
    ratio = node.floatAttr("ratio", 0.5);
    if (node.opset < 7) training = node.intAttr("is_test", 0) == 0;
  }
  if (training && ratio != 0)
    return unsupported(strCat("Dropout: training mode with ratio ", ratio,
                              " draws a random mask, which no standard op reproduces as ONNX's reference does"));
  std::vector<Tensor> outs = {x};
  if (wantsOutput(node, 1)) {
    if (node.opset < 10)
      return unsupported(strCat("Dropout (opset ", node.opset, "): the mask output before opset 10 is not mapped"));
    outs.push_back(ones_like(x, {.dtype = ScalarType::Bool}));
  }
  return outputs(std::move(outs));
}

// Pow: the result has the base's type; mixed types compute in float64.
NodeRun power(const NodeTest& node, const NodeInputs& inputs) {
  if (auto reason = legacyBroadcastReason(node)) return unsupported(*reason);
  const Tensor& base = required(node, inputs, 0);
  const Tensor& exponent = required(node, inputs, 1);
  if (base.dtype() == exponent.dtype()) {
    std::vector<Tensor> ts = {base, exponent};
    std::optional<ScalarType> back;
    if (auto reason = widenUnsigned(node, ts, Unsigned::kValue, back)) return unsupported(*reason);
    Tensor y = pow(ts[0], ts[1]);
    return outputs({y.to(base.dtype())});
  }
  if (base.dtype() == ScalarType::Bool || exponent.dtype() == ScalarType::Bool)
    return unsupported("Pow: bool operands are outside ONNX's types for Pow");
  return outputs({pow(base.to(ScalarType::Float64), exponent.to(ScalarType::Float64)).to(base.dtype())});
}

NodeRun isInf(const NodeTest& node, const NodeInputs& inputs) {
  const Tensor& x = required(node, inputs, 0);
  const bool positive = node.intAttr("detect_positive", 1) != 0;
  const bool negative = node.intAttr("detect_negative", 1) != 0;
  const Tensor inf = isinf(x);
  if (positive && negative) return outputs({inf});
  if (positive) return outputs({logical_and(inf, gt(x, 0))});
  if (negative) return outputs({logical_and(inf, lt(x, 0))});
  return outputs({zeros_like(x, {.dtype = ScalarType::Bool})});
}

NodeRun gelu(const NodeTest& node, const NodeInputs& inputs) {
  const std::string approximate = node.stringAttr("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return unsupported(strCat("Gelu: approximate '", approximate, "' (ONNX defines 'none' and 'tanh')"));
  return outputs({gelu(required(node, inputs, 0), approximate)});
}

NodeRun where(const NodeTest& node, const NodeInputs& inputs) {
  std::vector<Tensor> ts = {required(node, inputs, 1), required(node, inputs, 2)};
  std::optional<ScalarType> back;
  if (auto reason = widenUnsigned(node, ts, Unsigned::kBits, back)) return unsupported(*reason);
  Tensor y = where(required(node, inputs, 0), ts[0], ts[1]);
  if (back) y = y.to(*back);
  return outputs({y});
}

NodeRun mod(const NodeTest& node, const NodeInputs& inputs) {
  const int64_t fmod_attr = node.intAttr("fmod", 0);
  std::vector<Tensor> ts = {required(node, inputs, 0), required(node, inputs, 1)};
  if (fmod_attr != 0 && fmod_attr != 1) return unsupported(strCat("Mod: fmod=", fmod_attr, " (ONNX allows 0 or 1)"));
  if (fmod_attr == 0 && isFloatingType(ts[0].dtype()))
    return unsupported(strCat("Mod: fmod=0 with ", scalarTypeName(ts[0].dtype()),
                              " operands; ONNX requires fmod=1 for floating types"));
  std::optional<ScalarType> back;
  if (auto reason = widenUnsigned(node, ts, Unsigned::kValue, back)) return unsupported(*reason);
  Tensor y = fmod_attr == 1 ? fmod(ts[0], ts[1]) : remainder(ts[0], ts[1]);
  if (back) y = y.to(*back);
  return outputs({y});
}

NodeRun shrink(const NodeTest& node, const NodeInputs& inputs) {
  const Tensor& x = required(node, inputs, 0);
  const double lambd = node.floatAttr("lambd", 0.5), bias = node.floatAttr("bias", 0.0);
  if (!isFloatingType(x.dtype()))
    return unsupported(strCat("Shrink: ", scalarTypeName(x.dtype()),
                              " input; only floating inputs are mapped (the float bias would promote)"));
  // x < -lambd: x + bias; x > lambd: x - bias; else 0 (ONNX's reference).
  Tensor y = where(lt(x, -lambd), add(x, bias), where(gt(x, lambd), sub(x, bias), zeros_like(x)));
  return outputs({y});
}

// BitShift on unsigned operands, as int64 products and quotients by 2^y:
// exact for shift amounts in [0, 62] (2^y is an int64 then), with a left
// shift wrapping as the unsigned type (Note [ONNX elementwise semantics]).
// A right shift of uint64 divides the low 63 bits and adds the top bit's
// 2^(63-y) back, since int64 holds uint64's values of 2^63 and up as
// negatives. The amounts are checked on the host first.
NodeRun bitShift(const NodeTest& node, const NodeInputs& inputs) {
  const std::string direction = node.stringAttr("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return unsupported(strCat("BitShift: direction '", direction, "' (ONNX defines LEFT and RIGHT)"));
  const Tensor& x = required(node, inputs, 0);
  const Tensor& y = required(node, inputs, 1);
  if (!isIntegralType(x.dtype(), false) || !isIntegralType(y.dtype(), false))
    return unsupported(strCat("BitShift: ", scalarTypeName(x.dtype()), " and ", scalarTypeName(y.dtype()),
                              " operands; ONNX defines it for unsigned integers"));
  const Tensor y64 = y.to(ScalarType::Int64);
  if (y64.numel() > 0 && any(logical_or(lt(y64, 0), gt(y64, 62))).item<bool>())
    return unsupported("BitShift: shift amounts outside [0, 62] (2^y would not fit in int64)");
  const Tensor x64 = x.to(ScalarType::Int64);
  const Tensor two = full_like(y64, 2);
  const Tensor powers = pow(two, y64);
  if (direction == "LEFT") return outputs({mul(x64, powers).to(x.dtype())});
  if (x.dtype() != ScalarType::UInt64) return outputs({floor_divide(x64, powers).to(x.dtype())});
  const Tensor low = floor_divide(bitwise_and(x64, std::numeric_limits<int64_t>::max()), powers);
  // 2^(63-y) for y >= 1; lanes with y = 0 keep x and compute 2^62 unused.
  const Tensor top_bit = pow(two, clamp(63 - y64, std::nullopt, Scalar(62)));
  const Tensor shifted = add(low, where(lt(x64, 0), top_bit, zeros_like(top_bit)));
  return outputs({where(eq(y64, 0), x64, shifted).to(x.dtype())});
}

// Quantisation parameters (scale, zero point) broadcast to x: a scalar per
// tensor, a 1-D per `axis`, or (block_size > 0) one per block of
// `block_size` along `axis`, repeated to x's extent there.
std::optional<Tensor> quantParam(const Tensor& p, const Tensor& x, int64_t axis, int64_t block_size) {
  if (p.dim() == 0) return p;
  if (p.dim() == 1 && p.numel() == 1 && block_size == 0) return p.reshape({});
  const int64_t rank = x.dim();
  if (axis < -rank || axis >= rank) return std::nullopt;
  if (axis < 0) axis += rank;
  if (block_size == 0) {
    if (p.dim() != 1 || p.size(0) != x.size(axis)) return std::nullopt;
    std::vector<int64_t> sizes(rank, 1);
    sizes[axis] = p.size(0);
    return p.reshape(sizes);
  }
  if (p.dim() != rank || block_size < 0) return std::nullopt;
  std::vector<int64_t> expanded(p.sizes().begin(), p.sizes().end());
  expanded.insert(expanded.begin() + axis + 1, block_size);
  std::vector<int64_t> merged(p.sizes().begin(), p.sizes().end());
  merged[axis] *= block_size;
  if (merged[axis] < x.size(axis)) return std::nullopt;
  return p.unsqueeze(axis + 1).expand(expanded).reshape(merged).narrow(axis, 0, x.size(axis));
}

// DequantizeLinear: (x - zero_point) * scale, computed in float32 as ONNX's
// reference does, in the scale's type (or output_dtype).
NodeRun dequantizeLinear(const NodeTest& node, const NodeInputs& inputs) {
  const Tensor& x = required(node, inputs, 0);
  const Tensor& scale = required(node, inputs, 1);
  const std::optional<Tensor> zero_point = givenInput(inputs, 2);
  const int64_t axis = node.intAttr("axis", 1), block_size = node.intAttr("block_size", 0);
  std::optional<ScalarType> out = scale.dtype();
  if (const int64_t od = node.intAttr("output_dtype", 0); od != 0) {
    out = dtypeOfOnnxElementType(od);
    if (!out || !isFloatingType(*out))
      return unsupported(strCat("DequantizeLinear: output_dtype ", elementTypeName(od), " is not mapped"));
  }
  if (!isIntegralType(x.dtype(), false))
    return unsupported(strCat("DequantizeLinear: ", scalarTypeName(x.dtype()), " input is not mapped"));
  const std::optional<Tensor> s = quantParam(scale, x, axis, block_size);
  if (!s) return unsupported("DequantizeLinear: the scale's shape fits neither per-tensor, per-axis nor blocked");
  Tensor shifted = x.to(ScalarType::Float32);
  if (zero_point) {
    const std::optional<Tensor> z = quantParam(*zero_point, x, axis, block_size);
    if (!z) return unsupported("DequantizeLinear: the zero point's shape does not match the scale's");
    shifted = sub(shifted, z->to(ScalarType::Float32));
  }
  return outputs({mul(shifted, s->to(ScalarType::Float32)).to(*out)});
}

// QuantizeLinear: saturate(round_half_even(x / scale) + zero_point) in the
// zero point's type (or output_dtype, else uint8), computed in float32.
NodeRun quantizeLinear(const NodeTest& node, const NodeInputs& inputs) {
  const Tensor& x = required(node, inputs, 0);
  const Tensor& scale = required(node, inputs, 1);
  const std::optional<Tensor> zero_point = givenInput(inputs, 2);
  const int64_t axis = node.intAttr("axis", 1), block_size = node.intAttr("block_size", 0);
  if (node.intAttr("precision", 0) != 0)
    return unsupported(strCat("QuantizeLinear: precision ", elementTypeName(node.intAttr("precision", 0)),
                              " is not mapped (float32 only)"));
  std::optional<ScalarType> out = ScalarType::UInt8;
  if (zero_point)
    out = zero_point->dtype();
  else if (const int64_t od = node.intAttr("output_dtype", 0); od != 0)
    out = dtypeOfOnnxElementType(od);
  if (!out || !isIntegralType(*out, false) || *out == ScalarType::UInt64 || *out == ScalarType::Int64)
    return unsupported(
        strCat("QuantizeLinear: output type ",
               out ? std::string(scalarTypeName(*out)) : elementTypeName(node.intAttr("output_dtype", 0)),
               " is not mapped (8-, 16- and 32-bit integers are)"));
  const std::optional<Tensor> s = quantParam(scale, x, axis, block_size);
  if (!s) return unsupported("QuantizeLinear: the scale's shape fits neither per-tensor, per-axis nor blocked");
  // Rounded in float32, then in float64 so that int32's bounds and the zero point add exactly.
  Tensor q = round(div(x.to(ScalarType::Float32), s->to(ScalarType::Float32))).to(ScalarType::Float64);
  if (zero_point) {
    const std::optional<Tensor> z = quantParam(*zero_point, x, axis, block_size);
    if (!z) return unsupported("QuantizeLinear: the zero point's shape does not match the scale's");
    q = add(q, z->to(ScalarType::Float64));
  }
  double lo = 0, hi = 0;
  switch (*out) {
    case ScalarType::UInt8: lo = 0, hi = 255; break;
    case ScalarType::Int8: lo = -128, hi = 127; break;
    case ScalarType::UInt16: lo = 0, hi = 65535; break;
    case ScalarType::Int16: lo = -32768, hi = 32767; break;
    case ScalarType::UInt32: lo = 0, hi = 4294967295.0; break;
    default: lo = -2147483648.0, hi = 2147483647.0; break;  // Int32
  }
  return outputs({clamp(q, Scalar(lo), Scalar(hi)).to(*out)});
}

NodeRun prelu(const NodeTest& node, const NodeInputs& inputs) {
  const Tensor& x = required(node, inputs, 0);
  const Tensor& slope = required(node, inputs, 1);
  std::vector<Tensor> ts = {x, slope};
  std::optional<ScalarType> back;
  if (auto reason = widenUnsigned(node, ts, Unsigned::kValue, back)) return unsupported(*reason);
  Tensor y = where(lt(ts[0], zeros_like(ts[0])), mul(ts[0], ts[1]), ts[0]);
  if (back) y = y.to(*back);
  BP_CHECK(y.sizes() == x.sizes(), "PRelu (", node.name, "): slope of sizes ", ArrayRef<int64_t>(slope.sizes()),
           " does not broadcast to X's sizes ", ArrayRef<int64_t>(x.sizes()), " (unidirectional broadcasting)");
  return outputs({y});
}

}  // namespace

void registerElementwiseNodes() {
  // --- Arithmetic (variadic where ONNX's op is).
  registerNode("Add", foldedBinary([](const Tensor& a, const Tensor& b) { return add(a, b); }, Unsigned::kBits));
  registerNode("Sub", foldedBinary([](const Tensor& a, const Tensor& b) { return sub(a, b); }, Unsigned::kBits));
  registerNode("Mul", foldedBinary([](const Tensor& a, const Tensor& b) { return mul(a, b); }, Unsigned::kBits));
  registerNode("Div",
               foldedBinary([](const Tensor& a,
                               const Tensor& b) { return isFloatingType(a.dtype()) ? div(a, b) : div(a, b, "trunc"); },
                            Unsigned::kValue));
  registerNode("Sum", foldedBinary([](const Tensor& a, const Tensor& b) { return add(a, b); }, Unsigned::kBits));
  registerNode("Max", extremum(true));
  registerNode("Min", extremum(false));
  registerNode("Mean", [](const NodeTest& node, const NodeInputs& inputs, Device) -> NodeRun {
    std::vector<Tensor> ts = variadicInputs(node, inputs);
    if (!isFloatingType(ts[0].dtype()))
      return unsupported(strCat("Mean: ", scalarTypeName(ts[0].dtype()), " inputs; ONNX's Mean is floating only"));
    Tensor acc = ts[0];
    for (size_t i = 1; i < ts.size(); ++i) acc = add(acc, ts[i]);
    return outputs({div(acc, static_cast<double>(ts.size()))});
  });
  registerNode("Pow", [](const NodeTest& n, const NodeInputs& in, Device) { return power(n, in); });
  registerNode("Mod", [](const NodeTest& n, const NodeInputs& in, Device) { return mod(n, in); });

  // --- Comparisons and logic (bool results; every dtype served).
  registerNode("Equal", boolBinary([](const Tensor& a, const Tensor& b) { return eq(a, b); }));
  registerNode("Less", boolBinary([](const Tensor& a, const Tensor& b) { return lt(a, b); }));
  registerNode("LessOrEqual", boolBinary([](const Tensor& a, const Tensor& b) { return le(a, b); }));
  registerNode("Greater", boolBinary([](const Tensor& a, const Tensor& b) { return gt(a, b); }));
  registerNode("GreaterOrEqual", boolBinary([](const Tensor& a, const Tensor& b) { return ge(a, b); }));
  registerNode("And", boolBinary([](const Tensor& a, const Tensor& b) { return logical_and(a, b); }));
  registerNode("Or", boolBinary([](const Tensor& a, const Tensor& b) { return logical_or(a, b); }));
  registerNode("Xor", boolBinary([](const Tensor& a, const Tensor& b) { return logical_xor(a, b); }));
  registerNode("Not", unaryOp([](const Tensor& x) { return logical_not(x); }));
  registerNode("BitwiseAnd",
               foldedBinary([](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }, Unsigned::kBits));
  registerNode("BitwiseOr",
               foldedBinary([](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }, Unsigned::kBits));
  registerNode("BitwiseXor",
               foldedBinary([](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }, Unsigned::kBits));
  registerNode("BitwiseNot", unaryOp([](const Tensor& x) { return bitwise_not(x); }, Unsigned::kBits));
  registerNode("BitShift", [](const NodeTest& n, const NodeInputs& in, Device) { return bitShift(n, in); });
  registerNode("Where", [](const NodeTest& n, const NodeInputs& in, Device) { return where(n, in); });
  registerNode("IsNaN", unaryOp([](const Tensor& x) { return isnan(x); }));
  registerNode("IsInf", [](const NodeTest& n, const NodeInputs& in, Device) { return isInf(n, in); });

  // --- Unary math.
  registerNode("Abs", unaryOp([](const Tensor& x) { return abs(x); }));
  registerNode("Neg", unaryOp([](const Tensor& x) { return neg(x); }));
  registerNode("Sign", unaryOp([](const Tensor& x) { return sign(x); }));
  registerNode("Exp", unaryOp([](const Tensor& x) { return exp(x); }));
  registerNode("Log", unaryOp([](const Tensor& x) { return log(x); }));
  registerNode("Sqrt", unaryOp([](const Tensor& x) { return sqrt(x); }));
  registerNode("Reciprocal", unaryOp([](const Tensor& x) { return 1.0 / x; }));
  registerNode("Floor", unaryOp([](const Tensor& x) { return floor(x); }));
  registerNode("Ceil", unaryOp([](const Tensor& x) { return ceil(x); }));
  registerNode("Round", unaryOp([](const Tensor& x) { return round(x); }));  // halves to even, as ONNX
  registerNode("Sin", unaryOp([](const Tensor& x) { return sin(x); }));
  registerNode("Cos", unaryOp([](const Tensor& x) { return cos(x); }));
  registerNode("Tanh", unaryOp([](const Tensor& x) { return tanh(x); }));
  registerNode("Erf", unaryOp([](const Tensor& x) { return erf(x); }));
  registerNode("Tan", viaFloat64("Tan", [](const Tensor& x) { return div(sin(x), cos(x)); }));
  registerNode("Sinh", viaFloat64("Sinh", [](const Tensor& x) { return mul(sub(exp(x), exp(neg(x))), 0.5); }));
  registerNode("Cosh", viaFloat64("Cosh", [](const Tensor& x) { return mul(add(exp(x), exp(neg(x))), 0.5); }));
  // asinh(x) = sign(x) log(|x| + sqrt(x^2 + 1)): the odd form avoids cancellation for x < 0.
  registerNode("Asinh", viaFloat64("Asinh", [](const Tensor& x) {
                 const Tensor a = abs(x);
                 return mul(sign(x), log(add(a, sqrt(add(mul(a, a), 1.0)))));
               }));
  registerNode("Acosh", viaFloat64("Acosh", [](const Tensor& x) { return log(add(x, sqrt(sub(mul(x, x), 1.0)))); }));
  registerNode("Atanh", viaFloat64("Atanh", [](const Tensor& x) { return mul(log(div(add(x, 1.0), 1.0 - x)), 0.5); }));

  // --- Activations.
  registerNode("Sigmoid", unaryOp([](const Tensor& x) { return sigmoid(x); }));
  registerNode("Relu", unaryOp([](const Tensor& x) { return relu(x); }));
  registerNode("Softsign", unaryOp([](const Tensor& x) { return div(x, add(abs(x), 1.0)); }));
  registerNode("Softplus", unaryOp([](const Tensor& x) { return softplus(x); }));
  registerNode("Mish", unaryOp([](const Tensor& x) { return mul(x, tanh(softplus(x))); }));
  registerNode("LeakyRelu", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    return outputs({leaky_relu(required(node, in, 0), node.floatAttr("alpha", 0.01))});
  });
  registerNode("Elu", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    return outputs({elu(required(node, in, 0), node.floatAttr("alpha", 1.0))});
  });
  registerNode("Selu", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    // gamma * (x > 0 ? x : alpha * (exp(x) - 1)): elu with scale gamma. ONNX's defaults are float32 constants.
    const double alpha = node.floatAttr("alpha", 1.67326319217681884765625);
    const double gamma = node.floatAttr("gamma", 1.05070102214813232421875);
    return outputs({elu(required(node, in, 0), alpha, gamma)});
  });
  registerNode("Celu", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    // max(0, x) + min(0, alpha * (exp(x / alpha) - 1)): elu with input_scale 1/alpha.
    const double alpha = node.floatAttr("alpha", 1.0);
    if (alpha == 0) return unsupported("Celu: alpha=0 divides by zero");
    return outputs({elu(required(node, in, 0), alpha, 1.0, 1.0 / alpha)});
  });
  registerNode("HardSigmoid", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    const double alpha = node.floatAttr("alpha", 0.2), beta = node.floatAttr("beta", 0.5);
    return outputs({clamp(add(mul(required(node, in, 0), alpha), beta), Scalar(0.0), Scalar(1.0))});
  });
  registerNode("HardSwish", unaryOp([](const Tensor& x) {
                 return mul(x, clamp(add(mul(x, 1.0 / 6.0), 0.5), Scalar(0.0), Scalar(1.0)));
               }));
  registerNode("ThresholdedRelu", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    const Tensor& x = required(node, in, 0);
    const double alpha = node.floatAttr("alpha", 1.0);
    return outputs({where(gt(x, alpha), x, zeros_like(x))});  // NaN gives 0, as x > alpha is false
  });
  registerNode("Swish", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    const Tensor& x = required(node, in, 0);
    const double alpha = node.floatAttr("alpha", 1.0);
    return outputs({mul(x, sigmoid(mul(x, alpha)))});
  });
  registerNode("Gelu", [](const NodeTest& n, const NodeInputs& in, Device) { return gelu(n, in); });
  registerNode("Shrink", [](const NodeTest& n, const NodeInputs& in, Device) { return shrink(n, in); });
  registerNode("PRelu", [](const NodeTest& n, const NodeInputs& in, Device) { return prelu(n, in); });
  registerNode("Clip", [](const NodeTest& n, const NodeInputs& in, Device) { return clip(n, in); });
  registerNode("Dropout", [](const NodeTest& n, const NodeInputs& in, Device) { return dropout(n, in); });

  // --- Quantisation.
  registerNode("DequantizeLinear",
               [](const NodeTest& n, const NodeInputs& in, Device) { return dequantizeLinear(n, in); });
  registerNode("QuantizeLinear", [](const NodeTest& n, const NodeInputs& in, Device) { return quantizeLinear(n, in); });

  // --- Identity and casts.
  registerNode("Identity", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    return outputs({required(node, in, 0)});
  });
  registerNode("Cast", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    const std::optional<int64_t> to = castTarget(node);
    BP_CHECK(to.has_value(), "Cast (", node.name, "): the attribute 'to' is missing or names no ONNX element type");
    return castTo(node, required(node, in, 0), dtypeOfOnnxElementType(*to), *to);
  });
  registerNode("CastLike", [](const NodeTest& node, const NodeInputs& in, Device) -> NodeRun {
    const Tensor& like = required(node, in, 1);
    return outputs({required(node, in, 0).to(like.dtype())});
  });
}

}  // namespace backplane::conformance::onnx
