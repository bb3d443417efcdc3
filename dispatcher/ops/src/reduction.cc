// The reduction standard operators: sum, mean, amax/amin, argmax/argmin,
// var/std and softmax/log_softmax. Each is structured (Note [The standard
// operator table]): plugins implement the out= form; the meta kernel of
// that form validates dims (wrapped, no duplicates), dtypes and `out`, and
// the functional forms are composites that apply the same rule, allocate
// and call the out= form.
#include <cmath>

#include "backplane/ops/ops.h"
#include "families.h"
#include "structured.h"

namespace backplane::ops {

namespace {

// --- shape rule shared by every reduction

// The result shape of reducing `self` over `dims` (none or empty: every
// dimension), as PyTorch: reduced dims are dropped, or kept with size 1 when
// `keepdim`. Dims are wrapped and may not repeat. Also returns, per
// dimension of self, whether it is reduced.
struct Reduced {
  Shape sizes;
  absl::InlinedVector<bool, 6> mask;
};

Reduced reducedShape(std::string_view op, const Tensor& self, std::optional<IntArrayRef> dims, bool keepdim) {
  BP_CHECK(self.defined(), op, ": argument 'self' is undefined");
  const int64_t nd = self.dim();
  Reduced r;
  r.mask.assign(static_cast<size_t>(nd), !dims || dims->empty());
  if (dims) {
    for (int64_t d : *dims) {
      const int64_t w = wrapDim(op, d, nd);
      if (nd == 0) continue;  // a 0-d tensor accepts dim 0 / -1 and has nothing to reduce
      BP_CHECK(!r.mask[static_cast<size_t>(w)], op, ": dimension ", w, " appears more than once in the list of dims ",
               shapeString(*dims), "; name each dimension once");
      r.mask[static_cast<size_t>(w)] = true;
    }
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (!r.mask[static_cast<size_t>(d)])
      r.sizes.push_back(self.size(d));
    else if (keepdim)
      r.sizes.push_back(1);
  }
  return r;
}

// Rejects reducing a dimension of size 0 for ops with no identity (amax,
// argmax, ...), as PyTorch does.
void checkNonEmptyReduction(std::string_view op, const Tensor& self, const Reduced& r) {
  if (self.dim() == 0) return;
  for (int64_t d = 0; d < self.dim(); ++d) {
    BP_CHECK(!r.mask[static_cast<size_t>(d)] || self.size(d) != 0, op, ": cannot reduce over dimension ", d,
             " of size 0 of a tensor of shape ", shapeString(self.sizes()),
             " (the operation has no identity); pass dim= naming only dimensions of nonzero size");
  }
}

// An out= whose dtype the op fixes (amax, argmax, var, softmax, or an
// explicit dtype=): PyTorch refuses a different one rather than cast.
void checkExactDtype(std::string_view op, const Tensor& out, ScalarType expected, std::string_view why) {
  BP_CHECK(out.defined(), op, ": argument 'out' is undefined; pass a tensor to write the result into");
  BP_CHECK(out.dtype() == expected, op, ": expected argument 'out' to have dtype ", expected, " (", why,
           "), but it has dtype ", out.dtype(), "; pass a tensor of dtype ", expected);
}

// --- sum and mean

// sum: integral and bool inputs accumulate into int64 unless dtype says
// otherwise (PyTorch's get_dtype_from_self with promote_integers).
ScalarType sumDtype(const Tensor& self, std::optional<ScalarType> dtype) {
  if (dtype) return *dtype;
  return isFloatingType(self.dtype()) ? self.dtype() : ScalarType::Int64;
}

// mean: the result must be floating; integral inputs need an explicit
// floating dtype (as PyTorch, which refuses to guess).
ScalarType meanDtype(std::string_view op, const Tensor& self, std::optional<ScalarType> dtype) {
  if (dtype) {
    BP_CHECK(isFloatingType(*dtype), op, ": dtype must be a floating point type, got ", *dtype,
             "; pass dtype=float32 or float64");
    return *dtype;
  }
  BP_CHECK(isFloatingType(self.dtype()), op, ": could not infer the output dtype: the input has dtype ", self.dtype(),
           " but the mean needs a floating point type; pass dtype=float32 (or float64), or convert "
           "the input first");
  return self.dtype();
}

enum class SumKind { Sum, Mean };

template <FixedString Name, SumKind Kind>
OutputMeta sumMeta(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  const std::string& op = qualified<Name>();
  Reduced r = reducedShape(op, self, dim, keepdim);
  ScalarType t = Kind == SumKind::Sum ? sumDtype(self, dtype) : meanDtype(op, self, dtype);
  return OutputMeta{std::move(r.sizes), t, self.device()};
}

using SumOutSig = Tensor(const Tensor&, std::optional<IntArrayRef>, bool, std::optional<ScalarType>, const Tensor&);

template <FixedString Name, SumKind Kind>
void sumOutMeta(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype,
                const Tensor& out) {
  const std::string& op = qualified<Name>();
  OutputMeta m = sumMeta<Name, Kind>(self, dim, keepdim, dtype);
  // Without dtype= the result is computed in out's dtype (castable from the
  // rule's); with it, out must have exactly that dtype.
  if (dtype) checkExactDtype(op, out, *dtype, "the dtype= argument");
  checkOut(op, out, m, {{"self", &self}});
}

template <FixedString Name, FixedString OutName, SumKind Kind>
Tensor sumDimFunctional(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
                        std::optional<ScalarType> dtype) {
  Tensor out = allocate(sumMeta<Name, Kind>(self, dim, keepdim, dtype));
  return BP_STANDARD_OP(OutName.c_str(), SumOutSig).callSkippingMeta(self, dim, keepdim, dtype, out);
}

template <FixedString Name, FixedString OutName, SumKind Kind>
Tensor sumAllFunctional(const Tensor& self, std::optional<ScalarType> dtype) {
  Tensor out = allocate(sumMeta<Name, Kind>(self, std::nullopt, false, dtype));
  return BP_STANDARD_OP(OutName.c_str(), SumOutSig).callSkippingMeta(self, std::nullopt, false, dtype, out);
}

// --- amax, amin: int[1] dim=[] (empty: every dimension)

using AmaxOutSig = Tensor(const Tensor&, IntArrayRef, bool, const Tensor&);

template <FixedString Name>
OutputMeta amaxMeta(const Tensor& self, IntArrayRef dim, bool keepdim) {
  const std::string& op = qualified<Name>();
  Reduced r = reducedShape(op, self, dim, keepdim);
  checkNonEmptyReduction(op, self, r);
  return OutputMeta{std::move(r.sizes), self.dtype(), self.device()};
}

template <FixedString Name>
void amaxOutMeta(const Tensor& self, IntArrayRef dim, bool keepdim, const Tensor& out) {
  OutputMeta m = amaxMeta<Name>(self, dim, keepdim);
  checkExactDtype(qualified<Name>(), out, m.dtype, "the input's dtype");
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
}

template <FixedString Name, FixedString OutName>
Tensor amaxFunctional(const Tensor& self, IntArrayRef dim, bool keepdim) {
  Tensor out = allocate(amaxMeta<Name>(self, dim, keepdim));
  return BP_STANDARD_OP(OutName.c_str(), AmaxOutSig).callSkippingMeta(self, dim, keepdim, out);
}

// --- argmax, argmin: int? dim=None (None: the flattened tensor)

using ArgmaxOutSig = Tensor(const Tensor&, std::optional<int64_t>, bool, const Tensor&);

template <FixedString Name>
OutputMeta argmaxMeta(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  const std::string& op = qualified<Name>();
  BP_CHECK(self.defined(), op, ": argument 'self' is undefined");
  if (!dim) {
    BP_CHECK(self.numel() != 0, op, ": the input of shape ", shapeString(self.sizes()),
             " is empty, so there is no index to return; pass dim= naming a dimension of nonzero size");
    // keepdim without dim keeps every dimension, with size 1 (as PyTorch).
    return OutputMeta{keepdim ? Shape(static_cast<size_t>(self.dim()), 1) : Shape{}, ScalarType::Int64, self.device()};
  }
  const int64_t d = *dim;
  Reduced r = reducedShape(op, self, IntArrayRef(&d, 1), keepdim);
  checkNonEmptyReduction(op, self, r);
  return OutputMeta{std::move(r.sizes), ScalarType::Int64, self.device()};
}

template <FixedString Name>
void argmaxOutMeta(const Tensor& self, std::optional<int64_t> dim, bool keepdim, const Tensor& out) {
  OutputMeta m = argmaxMeta<Name>(self, dim, keepdim);
  checkExactDtype(qualified<Name>(), out, ScalarType::Int64, "indices are int64");
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
}

template <FixedString Name, FixedString OutName>
Tensor argmaxFunctional(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  Tensor out = allocate(argmaxMeta<Name>(self, dim, keepdim));
  return BP_STANDARD_OP(OutName.c_str(), ArgmaxOutSig).callSkippingMeta(self, dim, keepdim, out);
}

// --- argsort
Tensor argsortComposite(const Tensor& self, int64_t dim, bool descending) {
  return std::get<1>(sort(self, dim, descending));
}
Tensor argsortStableComposite(const Tensor& self, bool /*stable*/, int64_t dim, bool descending) {
  return std::get<1>(sort(self, dim, descending));
}

// --- max, min: PyTorch's overloads of the names. max(self) is amax over
// every dim (an empty input raises); max.dim(self, dim, keepdim) gives the
// values and the index of the first maximum of each row, a NaN being the
// maximum as in amax and argmax (argmax of a bool tensor reads it as
// uint8, which PyTorch's max.dim allows); max.other(self, other) is
// maximum. Composites over amax/amin, argmax/argmin and maximum/minimum,
// so every device has them.
template <FixedString Name>
void maxAllMeta(const Tensor& self) {
  BP_CHECK(self.defined(), qualified<Name>(), ": argument 'self' is undefined");
  (void)amaxMeta<Name>(self, {}, false);
}

template <FixedString Name, bool Max>
Tensor maxAll(const Tensor& self) {
  maxAllMeta<Name>(self);
  return Max ? amax(self) : amin(self);
}

template <FixedString Name>
void maxDimMeta(const Tensor& self, int64_t dim, bool keepdim) {
  (void)argmaxMeta<Name>(self, dim, keepdim);
}

template <FixedString Name, bool Max>
std::tuple<Tensor, Tensor> maxDim(const Tensor& self, int64_t dim, bool keepdim) {
  maxDimMeta<Name>(self, dim, keepdim);
  const Tensor values = Max ? amax(self, {dim}, keepdim) : amin(self, {dim}, keepdim);
  const Tensor ordered = self.dtype() == ScalarType::Bool ? self.to(ScalarType::UInt8) : self;
  return {values, Max ? argmax(ordered, dim, keepdim) : argmin(ordered, dim, keepdim)};
}

template <bool Max>
Tensor maxOther(const Tensor& self, const Tensor& other) {
  return Max ? maximum(self, other) : minimum(self, other);
}

// --- var, std: divisor max(0, N - correction), correction 1 by default

using VarOutSig = Tensor(const Tensor&, std::optional<IntArrayRef>, const std::optional<Scalar>&, bool, const Tensor&);

template <FixedString Name>
OutputMeta varMeta(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  const std::string& op = qualified<Name>();
  Reduced r = reducedShape(op, self, dim, keepdim);
  checkDtypes(op, standardOp<Name>(), {{"self", &self}});
  return OutputMeta{std::move(r.sizes), self.dtype(), self.device()};
}

template <FixedString Name>
void varOutMeta(const Tensor& self, std::optional<IntArrayRef> dim, const std::optional<Scalar>& correction,
                bool keepdim, const Tensor& out) {
  (void)correction;  // any real number is valid, as in PyTorch
  OutputMeta m = varMeta<Name>(self, dim, keepdim);
  checkExactDtype(qualified<Name>(), out, m.dtype, "the input's dtype");
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
}

template <FixedString Name, FixedString OutName>
Tensor varCorrectionFunctional(const Tensor& self, std::optional<IntArrayRef> dim,
                               const std::optional<Scalar>& correction, bool keepdim) {
  Tensor out = allocate(varMeta<Name>(self, dim, keepdim));
  return BP_STANDARD_OP(OutName.c_str(), VarOutSig).callSkippingMeta(self, dim, correction, keepdim, out);
}

// var(self, unbiased) and var.dim(self, dim, unbiased, keepdim): the older
// spellings, correction 1 (unbiased) or 0.
template <FixedString Name, FixedString OutName>
Tensor varUnbiasedFunctional(const Tensor& self, bool unbiased) {
  Tensor out = allocate(varMeta<Name>(self, std::nullopt, false));
  return BP_STANDARD_OP(OutName.c_str(), VarOutSig)
      .callSkippingMeta(self, std::nullopt, Scalar(int64_t{unbiased ? 1 : 0}), false, out);
}

template <FixedString Name, FixedString OutName>
Tensor varDimFunctional(const Tensor& self, std::optional<IntArrayRef> dim, bool unbiased, bool keepdim) {
  Tensor out = allocate(varMeta<Name>(self, dim, keepdim));
  return BP_STANDARD_OP(OutName.c_str(), VarOutSig)
      .callSkippingMeta(self, dim, Scalar(int64_t{unbiased ? 1 : 0}), keepdim, out);
}

// --- softmax, log_softmax along one dim; dtype= converts the input first

using SoftmaxOutSig = Tensor(const Tensor&, int64_t, std::optional<ScalarType>, const Tensor&);

template <FixedString Name>
OutputMeta softmaxMeta(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  const std::string& op = qualified<Name>();
  BP_CHECK(self.defined(), op, ": argument 'self' is undefined");
  wrapDim(op, dim, self.dim());
  const ScalarType t = dtype ? *dtype : self.dtype();
  BP_CHECK(isFloatingType(t), op, ": the result must be floating point, but it would have dtype ", t,
           dtype ? " (from dtype=)" : " (the input's)", "; pass dtype=float32 or float64");
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), t, self.device()};
}

template <FixedString Name>
void softmaxOutMeta(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, const Tensor& out) {
  OutputMeta m = softmaxMeta<Name>(self, dim, dtype);
  checkExactDtype(qualified<Name>(), out, m.dtype, dtype ? "the dtype= argument" : "the input's dtype");
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
}

// --- norm: the p-norm over dims (every dim when none), a composite:
// max |x| for p = inf, min |x| for -inf, the count of nonzeros for 0,
// (sum |x|^p)^(1/p) otherwise (sqrt of the sum of squares for 2).
Tensor normComposite(const Tensor& self, double p, std::optional<IntArrayRef> dim, bool keepdim) {
  const std::string& op = qualified<"norm">();
  checkDefined(op, self, "self");
  checkDtypes(op, standardOp<"norm">(), {{"self", &self}});
  const Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  std::vector<int64_t> dims;
  if (dim && !dim->empty()) {
    for (int64_t d : *dim) dims.push_back(wrapDim(op, d, self.dim()));
  } else {
    for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  }
  const bool keep = keepdim && self.dim() != 0;
  const Tensor a = x.abs();
  Tensor r;
  if (std::isinf(p))
    r = p > 0 ? a.amax(dims, keep) : a.amin(dims, keep);
  else if (p == 0)
    r = a.ne(0).to(self.dtype()).sum(dims, keep);
  else if (p == 1)
    r = a.sum(dims, keep);
  else if (p == 2)
    r = (a * a).sum(dims, keep).sqrt();
  else
    r = a.pow(p).sum(dims, keep).pow(1.0 / p);
  return self.dim() == 0 ? r.reshape({}) : r;
}

template <FixedString Name, FixedString OutName>
Tensor softmaxFunctional(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor out = allocate(softmaxMeta<Name>(self, dim, dtype));
  return BP_STANDARD_OP(OutName.c_str(), SoftmaxOutSig).callSkippingMeta(self, dim, dtype, out);
}

template <auto F>
KernelFunction fn() {
  return KernelFunction::makeFromFunction(CompileTimeFunction<F>());
}

// --- prod, all/any, cumsum, sort, topk (Note [Products, logical reductions, scans and sorts])
//
// Note [Products, logical reductions, scans and sorts]
// As PyTorch:
//   * prod: integral and bool inputs multiply in int64 (wrapping) unless
//     dtype= says otherwise; an empty reduction is 1. prod.out (every
//     element) and prod.int_out (one dim) are both kernels.
//   * all/any: the result is bool, or uint8 for a uint8 input (PyTorch's
//     compatibility rule); `out` may be either. dim=None reduces every
//     dimension, dim=[] none (each element is tested alone). all.dims_out is
//     the kernel; the other out= forms are composites over it.
//   * cumsum, cumprod: the running sum (product) along one dim, with sum's
//     dtype rule (integral and bool inputs give int64); `out` without
//     dtype= chooses the dtype the scan runs in.
//   * sort: stable, ascending or descending; NaN sorts as the largest value
//     (last ascending, first descending). sort.values_stable is the kernel.
//   * topk: the k largest (or smallest) along a dim, always returned in
//     sorted order, ties in index order, NaN the largest; 0 <= k <= size.
//     Bool inputs are refused, as by PyTorch's CPU kernel.

using DimOutSig = Tensor(const Tensor&, int64_t, bool, std::optional<ScalarType>, const Tensor&);
using AllOutSig = Tensor(const Tensor&, std::optional<ScalarType>, const Tensor&);

// One dim (int dim) or every dim (nullopt) as reducedShape's dim list.
Reduced oneOrAllDims(std::string_view op, const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return reducedShape(op, self, std::nullopt, false);
  const int64_t d = *dim;
  return reducedShape(op, self, IntArrayRef(&d, 1), keepdim);
}

template <FixedString Name>
OutputMeta prodMeta(const Tensor& self, std::optional<int64_t> dim, bool keepdim, std::optional<ScalarType> dtype) {
  Reduced r = oneOrAllDims(qualified<Name>(), self, dim, keepdim);
  return OutputMeta{std::move(r.sizes), sumDtype(self, dtype), self.device()};
}

template <FixedString Name>
void checkProdOut(const Tensor& self, const OutputMeta& m, std::optional<ScalarType> dtype, const Tensor& out) {
  if (dtype) checkExactDtype(qualified<Name>(), out, *dtype, "the dtype= argument");
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
}

template <FixedString Name>
void prodDimOutMeta(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype, const Tensor& out) {
  checkProdOut<Name>(self, prodMeta<Name>(self, dim, keepdim, dtype), dtype, out);
}

template <FixedString Name>
void prodAllOutMeta(const Tensor& self, std::optional<ScalarType> dtype, const Tensor& out) {
  checkProdOut<Name>(self, prodMeta<Name>(self, std::nullopt, false, dtype), dtype, out);
}

Tensor prodDimFunctional(const Tensor& self, int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  Tensor out = allocate(prodMeta<"prod.dim_int">(self, dim, keepdim, dtype));
  return BP_STANDARD_OP("prod.int_out", DimOutSig).callSkippingMeta(self, dim, keepdim, dtype, out);
}

Tensor prodAllFunctional(const Tensor& self, std::optional<ScalarType> dtype) {
  Tensor out = allocate(prodMeta<"prod">(self, std::nullopt, false, dtype));
  return BP_STANDARD_OP("prod.out", AllOutSig).callSkippingMeta(self, dtype, out);
}

// all/any over `dims`: nullopt reduces every dim, an empty list none.
template <FixedString Name>
OutputMeta logicalMeta(const Tensor& self, std::optional<IntArrayRef> dims, bool keepdim) {
  const std::string& op = qualified<Name>();
  BP_CHECK(self.defined(), op, ": argument 'self' is undefined");
  const ScalarType t = self.dtype() == ScalarType::UInt8 ? ScalarType::UInt8 : ScalarType::Bool;
  if (dims && dims->empty()) return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), t, self.device()};
  Reduced r = reducedShape(op, self, dims, keepdim);
  return OutputMeta{std::move(r.sizes), t, self.device()};
}

// `out` of all/any holds truth values: bool or uint8, whatever the input.
template <FixedString Name>
void checkLogicalOut(const Tensor& self, OutputMeta m, const Tensor& out) {
  const std::string& op = qualified<Name>();
  BP_CHECK(out.defined(), op, ": argument 'out' is undefined; pass a tensor to write the result into");
  BP_CHECK(out.dtype() == ScalarType::Bool || out.dtype() == ScalarType::UInt8, op, ": argument 'out' has dtype ",
           out.dtype(),
           " but the result holds truth values; pass a tensor of dtype "
           "bool (or uint8)");
  m.dtype = out.dtype();
  checkOut(op, out, m, {{"self", &self}});
}

using LogicalOutSig = Tensor(const Tensor&, std::optional<IntArrayRef>, bool, const Tensor&);

template <FixedString Name>
void logicalDimsOutMeta(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, const Tensor& out) {
  checkLogicalOut<Name>(self, logicalMeta<Name>(self, dim, keepdim), out);
}

template <FixedString Name>
void logicalDimOutMeta(const Tensor& self, int64_t dim, bool keepdim, const Tensor& out) {
  checkLogicalOut<Name>(self, logicalMeta<Name>(self, IntArrayRef(&dim, 1), keepdim), out);
}

template <FixedString Name>
void logicalAllOutMeta(const Tensor& self, const Tensor& out) {
  checkLogicalOut<Name>(self, logicalMeta<Name>(self, std::nullopt, false), out);
}

template <FixedString Name, FixedString KernelName>
Tensor logicalDimsFunctional(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  Tensor out = allocate(logicalMeta<Name>(self, dim, keepdim));
  return BP_STANDARD_OP(KernelName.c_str(), LogicalOutSig).callSkippingMeta(self, dim, keepdim, out);
}

template <FixedString Name, FixedString KernelName>
Tensor logicalDimFunctional(const Tensor& self, int64_t dim, bool keepdim) {
  return logicalDimsFunctional<Name, KernelName>(self, IntArrayRef(&dim, 1), keepdim);
}

template <FixedString Name, FixedString KernelName>
Tensor logicalAllFunctional(const Tensor& self) {
  return logicalDimsFunctional<Name, KernelName>(self, std::nullopt, false);
}

// all.out / all.all_out: their meta has checked and sized `out`.
template <FixedString KernelName>
Tensor logicalDimOutComposite(const Tensor& self, int64_t dim, bool keepdim, const Tensor& out) {
  return BP_STANDARD_OP(KernelName.c_str(), LogicalOutSig).callSkippingMeta(self, IntArrayRef(&dim, 1), keepdim, out);
}

template <FixedString KernelName>
Tensor logicalAllOutComposite(const Tensor& self, const Tensor& out) {
  return BP_STANDARD_OP(KernelName.c_str(), LogicalOutSig).callSkippingMeta(self, std::nullopt, false, out);
}

// --- cumsum

using CumsumOutSig = Tensor(const Tensor&, int64_t, std::optional<ScalarType>, const Tensor&);

template <FixedString Name>
OutputMeta cumsumMeta(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  const std::string& op = qualified<Name>();
  BP_CHECK(self.defined(), op, ": argument 'self' is undefined");
  wrapDim(op, dim, self.dim());
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), sumDtype(self, dtype), self.device()};
}

template <FixedString Name>
void cumsumOutMeta(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, const Tensor& out) {
  OutputMeta m = cumsumMeta<Name>(self, dim, dtype);
  if (dtype) checkExactDtype(qualified<Name>(), out, *dtype, "the dtype= argument");
  checkOut(qualified<Name>(), out, m, {{"self", &self}});
}

// cumsum and cumprod (Name, its .out kernel, and its in-place form) share
// everything but the kernel: sum's dtype rule, and in place the scan runs in
// self's dtype.
template <FixedString Name, FixedString OutName>
Tensor cumsumFunctional(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  Tensor out = allocate(cumsumMeta<Name>(self, dim, dtype));
  return BP_STANDARD_OP(OutName.c_str(), CumsumOutSig).callSkippingMeta(self, dim, dtype, out);
}

// In place the sum runs in self's dtype (PyTorch's cumsum_ with out = self);
// dtype=, when given, must be self's.
template <FixedString Name, FixedString OutName>
Tensor cumsumInplace(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  const std::string& op = qualified<Name>();
  OutputMeta m = cumsumMeta<Name>(self, dim, dtype);
  if (dtype) checkExactDtype(op, self, *dtype, "the dtype= argument, in place");
  m.dtype = self.dtype();
  checkOut(op, self, m, {}, "self");
  return BP_STANDARD_OP(OutName.c_str(), CumsumOutSig).callSkippingMeta(self, dim, self.dtype(), self);
}

// --- sort, topk: values of self's dtype and int64 indices

using SortPair = std::tuple<Tensor, Tensor>;
using SortOutSig = SortPair(const Tensor&, std::optional<bool>, int64_t, bool, const Tensor&, const Tensor&);
using TopkOutSig = SortPair(const Tensor&, int64_t, int64_t, bool, bool, const Tensor&, const Tensor&);

void checkSortOuts(std::string_view op, const Tensor& self, const OutputMeta& m, const Tensor& values,
                   const Tensor& indices) {
  BP_CHECK(values.defined() && indices.defined(), op,
           ": arguments 'values' and 'indices' must be defined; pass tensors to write the results into");
  checkExactDtype(op, values, self.dtype(), "the input's dtype");
  BP_CHECK(indices.dtype() == ScalarType::Int64, op,
           ": expected argument 'indices' to have dtype int64, but it has "
           "dtype ",
           indices.dtype(), "; pass a tensor of dtype int64");
  BP_CHECK(!values.is_alias_of(indices) || values.numel() == 0, op,
           ": arguments 'values' and 'indices' share memory; pass separate tensors");
  checkOut(op, values, m, {{"self", &self}}, "values");
  checkOut(op, indices, OutputMeta{m.sizes, ScalarType::Int64, m.device}, {{"self", &self}}, "indices");
}

template <FixedString Name>
OutputMeta sortMeta(const Tensor& self, int64_t dim) {
  const std::string& op = qualified<Name>();
  BP_CHECK(self.defined(), op, ": argument 'self' is undefined");
  wrapDim(op, dim, self.dim());
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), self.dtype(), self.device()};
}

template <FixedString Name>
void sortStableOutMeta(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending,
                       const Tensor& values, const Tensor& indices) {
  (void)stable, (void)descending;  // every sort is stable
  checkSortOuts(qualified<Name>(), self, sortMeta<Name>(self, dim), values, indices);
}

template <FixedString Name>
void sortOutMeta(const Tensor& self, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  sortStableOutMeta<Name>(self, std::nullopt, dim, descending, values, indices);
}

template <FixedString Name>
SortPair sortStableFunctional(const Tensor& self, std::optional<bool> stable, int64_t dim, bool descending) {
  OutputMeta m = sortMeta<Name>(self, dim);
  Tensor values = allocate(m);
  Tensor indices = allocate(OutputMeta{m.sizes, ScalarType::Int64, m.device});
  return BP_STANDARD_OP("sort.values_stable", SortOutSig)
      .callSkippingMeta(self, stable, dim, descending, values, indices);
}

SortPair sortFunctional(const Tensor& self, int64_t dim, bool descending) {
  return sortStableFunctional<"sort">(self, false, dim, descending);
}

SortPair sortOutComposite(const Tensor& self, int64_t dim, bool descending, const Tensor& values,
                          const Tensor& indices) {
  return BP_STANDARD_OP("sort.values_stable", SortOutSig)
      .callSkippingMeta(self, false, dim, descending, values, indices);
}

template <FixedString Name>
OutputMeta topkMeta(const Tensor& self, int64_t k, int64_t dim) {
  const std::string& op = qualified<Name>();
  BP_CHECK(self.defined(), op, ": argument 'self' is undefined");
  checkDtypes(op, standardOp<Name>(), {{"self", &self}});
  const int64_t d = wrapDim(op, dim, self.dim());
  const int64_t size = self.dim() == 0 ? 1 : self.size(d);
  BP_CHECK(k >= 0 && k <= size, op, ": selected index k = ", k, " is out of range for dimension ", d, " of size ", size,
           "; pass 0 <= k <= ", size);
  Shape sizes(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) sizes[static_cast<size_t>(d)] = k;
  return OutputMeta{std::move(sizes), self.dtype(), self.device()};
}

void topkOutMeta(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted, const Tensor& values,
                 const Tensor& indices) {
  (void)largest, (void)sorted;
  checkSortOuts(qualified<"topk.values">(), self, topkMeta<"topk.values">(self, k, dim), values, indices);
}

SortPair topkFunctional(const Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  OutputMeta m = topkMeta<"topk">(self, k, dim);
  Tensor values = allocate(m);
  Tensor indices = allocate(OutputMeta{m.sizes, ScalarType::Int64, m.device});
  return BP_STANDARD_OP("topk.values", TopkOutSig).callSkippingMeta(self, k, dim, largest, sorted, values, indices);
}

void addProductLogicalSortScanOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "reduction"});
  };
  add("prod(Tensor self, *, ScalarType? dtype=None) -> Tensor", {}, fn<&prodAllFunctional>());
  add("prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", {},
      fn<&prodDimFunctional>());
  add("prod.int_out(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> "
      "Tensor(a!)",
      fn<&prodDimOutMeta<"prod.int_out">>());
  add("prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
      fn<&prodAllOutMeta<"prod.out">>());

  add("all(Tensor self) -> Tensor", {}, fn<&logicalAllFunctional<"all", "all.dims_out">>());
  add("all.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", {},
      fn<&logicalDimFunctional<"all.dim", "all.dims_out">>());
  add("all.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor", {},
      fn<&logicalDimsFunctional<"all.dims", "all.dims_out">>());
  add("all.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&logicalDimOutMeta<"all.out">>(), fn<&logicalDimOutComposite<"all.dims_out">>());
  add("all.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&logicalDimsOutMeta<"all.dims_out">>());
  add("all.all_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", fn<&logicalAllOutMeta<"all.all_out">>(),
      fn<&logicalAllOutComposite<"all.dims_out">>());
  add("any(Tensor self) -> Tensor", {}, fn<&logicalAllFunctional<"any", "any.dims_out">>());
  add("any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor", {},
      fn<&logicalDimFunctional<"any.dim", "any.dims_out">>());
  add("any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor", {},
      fn<&logicalDimsFunctional<"any.dims", "any.dims_out">>());
  add("any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&logicalDimOutMeta<"any.out">>(), fn<&logicalDimOutComposite<"any.dims_out">>());
  add("any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&logicalDimsOutMeta<"any.dims_out">>());
  add("any.all_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", fn<&logicalAllOutMeta<"any.all_out">>(),
      fn<&logicalAllOutComposite<"any.dims_out">>());

  add("cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", {},
      fn<&cumsumFunctional<"cumsum", "cumsum.out">>());
  add("cumsum_(Tensor(a!) self, int dim, *, ScalarType? dtype=None) -> Tensor(a!)", {},
      fn<&cumsumInplace<"cumsum_", "cumsum.out">>());
  add("cumsum.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
      fn<&cumsumOutMeta<"cumsum.out">>());
  add("cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor", {},
      fn<&cumsumFunctional<"cumprod", "cumprod.out">>());
  add("cumprod_(Tensor(a!) self, int dim, *, ScalarType? dtype=None) -> Tensor(a!)", {},
      fn<&cumsumInplace<"cumprod_", "cumprod.out">>());
  add("cumprod.out(Tensor self, int dim, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
      fn<&cumsumOutMeta<"cumprod.out">>());

  add("sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)", {},
      fn<&sortFunctional>());
  add("sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor "
      "indices)",
      {}, fn<&sortStableFunctional<"sort.stable">>());
  add("sort.values(Tensor self, int dim=-1, bool descending=False, *, Tensor(a!) values, Tensor(b!) indices) -> "
      "(Tensor(a!) values, Tensor(b!) indices)",
      fn<&sortOutMeta<"sort.values">>(), fn<&sortOutComposite>());
  add("sort.values_stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False, Tensor(a!) values, "
      "Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)",
      fn<&sortStableOutMeta<"sort.values_stable">>());

  // argsort: sort's indices (PyTorch's argsort and argsort.stable; every
  // Backplane sort is stable, so both give the stable order).
  add("argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor", {}, fn<&argsortComposite>());
  add("argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False) -> Tensor", {},
      fn<&argsortStableComposite>());

  const size_t first_topk = ops.size();
  add("topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor "
      "indices)",
      {}, fn<&topkFunctional>());
  add("topk.values(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True, *, Tensor(a!) values, "
      "Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)",
      fn<&topkOutMeta>());
  for (size_t i = first_topk; i < ops.size(); ++i) ops[i].dtypes = {{"self", ScalarTypeSet::allBut(ScalarType::Bool)}};
}

}  // namespace

void addReductionOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "reduction"});
  };
  // sum, mean: reduce-all and over dims; the out= form is the kernel.
  add("sum(Tensor self, *, ScalarType? dtype=None) -> Tensor", {},
      fn<&sumAllFunctional<"sum", "sum.IntList_out", SumKind::Sum>>());
  add("sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", {},
      fn<&sumDimFunctional<"sum.dim_IntList", "sum.IntList_out", SumKind::Sum>>());
  add("sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> "
      "Tensor(a!)",
      fn<&sumOutMeta<"sum.IntList_out", SumKind::Sum>>());
  add("mean(Tensor self, *, ScalarType? dtype=None) -> Tensor", {},
      fn<&sumAllFunctional<"mean", "mean.out", SumKind::Mean>>());
  add("mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", {},
      fn<&sumDimFunctional<"mean.dim", "mean.out", SumKind::Mean>>());
  add("mean.out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, Tensor(a!) out) -> "
      "Tensor(a!)",
      fn<&sumOutMeta<"mean.out", SumKind::Mean>>());

  // amax, amin.
  add("amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", {}, fn<&amaxFunctional<"amax", "amax.out">>());
  add("amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&amaxOutMeta<"amax.out">>());
  add("amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", {}, fn<&amaxFunctional<"amin", "amin.out">>());
  add("amin.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&amaxOutMeta<"amin.out">>());

  // argmax, argmin.
  add("argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", {},
      fn<&argmaxFunctional<"argmax", "argmax.out">>());
  add("argmax.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&argmaxOutMeta<"argmax.out">>());
  add("argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor", {},
      fn<&argmaxFunctional<"argmin", "argmin.out">>());
  add("argmin.out(Tensor self, int? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&argmaxOutMeta<"argmin.out">>());

  // max, min: the whole tensor, along a dim with indices, or of two tensors.
  add("max(Tensor self) -> Tensor", fn<&maxAllMeta<"max">>(), fn<&maxAll<"max", true>>());
  add("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
      fn<&maxDimMeta<"max.dim">>(), fn<&maxDim<"max.dim", true>>());
  add("max.other(Tensor self, Tensor other) -> Tensor", {}, fn<&maxOther<true>>());
  add("min(Tensor self) -> Tensor", fn<&maxAllMeta<"min">>(), fn<&maxAll<"min", false>>());
  add("min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
      fn<&maxDimMeta<"min.dim">>(), fn<&maxDim<"min.dim", false>>());
  add("min.other(Tensor self, Tensor other) -> Tensor", {}, fn<&maxOther<false>>());

  // var, std: floating inputs only.
  const size_t first_var = ops.size();
  add("var(Tensor self, bool unbiased=True) -> Tensor", {}, fn<&varUnbiasedFunctional<"var", "var.correction_out">>());
  add("var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", {},
      fn<&varDimFunctional<"var.dim", "var.correction_out">>());
  add("var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor", {},
      fn<&varCorrectionFunctional<"var.correction", "var.correction_out">>());
  add("var.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False, "
      "Tensor(a!) out) -> Tensor(a!)",
      fn<&varOutMeta<"var.correction_out">>());
  add("std(Tensor self, bool unbiased=True) -> Tensor", {}, fn<&varUnbiasedFunctional<"std", "std.correction_out">>());
  add("std.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor", {},
      fn<&varDimFunctional<"std.dim", "std.correction_out">>());
  add("std.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor", {},
      fn<&varCorrectionFunctional<"std.correction", "std.correction_out">>());
  add("std.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False, "
      "Tensor(a!) out) -> Tensor(a!)",
      fn<&varOutMeta<"std.correction_out">>());
  for (size_t i = first_var; i < ops.size(); ++i) ops[i].dtypes = {{"self", ScalarTypeSet::floating()}};
  add("norm(Tensor self, float p=2, int[1]? dim=None, bool keepdim=False) -> Tensor", {}, fn<&normComposite>());
  ops.back().dtypes = {{"self", ScalarTypeSet::floating()}};

  // softmax, log_softmax.
  add("softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", {},
      fn<&softmaxFunctional<"softmax.int", "softmax.int_out">>());
  add("softmax.int_out(Tensor self, int dim, ScalarType? dtype=None, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&softmaxOutMeta<"softmax.int_out">>());
  add("log_softmax.int(Tensor self, int dim, ScalarType? dtype=None) -> Tensor", {},
      fn<&softmaxFunctional<"log_softmax.int", "log_softmax.int_out">>());
  add("log_softmax.int_out(Tensor self, int dim, ScalarType? dtype=None, *, Tensor(a!) out) -> Tensor(a!)",
      fn<&softmaxOutMeta<"log_softmax.int_out">>());

  addProductLogicalSortScanOps(ops);
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(derivedOut("sum.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)", "sum"));
  ops.push_back(
      derivedOut("mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)", "mean"));
  for (const std::string name : {"std", "var"}) {
    ops.push_back(derivedOut(
        name +
            ".out(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
        name + ".dim"));
  }
  ops.push_back(derivedOut("max.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", "max"));
  ops.push_back(
      derivedOut("max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values) -> "
                 "(Tensor(a!) values, Tensor(b!) indices)",
                 "max.dim"));
  ops.push_back(derivedOut("max.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", "max.other"));
  ops.push_back(derivedOut("min.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", "min"));
  ops.push_back(
      derivedOut("min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min, Tensor(b!) min_indices) -> "
                 "(Tensor(a!) values, Tensor(b!) indices)",
                 "min.dim"));
  ops.push_back(derivedOut("min.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)", "min.other"));
  ops.push_back(derivedOut(
      "norm.out(Tensor self, float p=2, int[1]? dim=None, bool keepdim=False, *, Tensor(a!) out) -> Tensor(a!)",
      "norm"));
  ops.push_back(
      derivedOut("argsort.stable_out(Tensor self, *, bool stable, int dim=-1, bool descending=False, Tensor(a!) out) "
                 "-> Tensor(a!)",
                 "argsort.stable"));
}

}  // namespace backplane::ops
