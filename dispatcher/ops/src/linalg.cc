// The linear-algebra standard operators: mm, bmm, addmm (structured: plugins
// implement `op.out`), and matmul, linear and _addmm_activation, composites
// over them. addmm.out
// also has a composite (mm, mul, add) so that a device plugin with only mm.out
// gets it without a CPU round trip; a native kernel (the CPU plugin's) beats
// it (Note [Kernel precedence]). linear has a meta kernel (its argument
// checks) so that a native kernel, such as the CPU plugin's fused
// product-plus-bias, gets checked arguments on every device. einsum is a
// composite over bmm, sum and views (Note [einsum]).
#include <algorithm>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/ops/ops.h"
#include "families.h"
#include "structured.h"

namespace backplane::ops {

namespace {

using MmOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&);
using MmSig = Tensor(const Tensor&, const Tensor&);
using AddmmOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&, const Tensor&);
using AddmmSig = Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&);

Shape toShape(IntArrayRef s) { return Shape(s.begin(), s.end()); }
IntArrayRef asRef(const Shape& s) { return IntArrayRef(s.data(), s.size()); }
// All but the last `drop` sizes (the batch dimensions of a matrix operand).
IntArrayRef leading(IntArrayRef s, size_t drop) { return IntArrayRef(s.data(), s.size() > drop ? s.size() - drop : 0); }

// t must have exactly `dims` dimensions (2: a matrix, 3: a batch of matrices).
void checkRank(std::string_view op, const Tensor& t, const char* name, int64_t dims) {
  checkDefined(op, t, name);
  BP_CHECK(t.dim() == dims, op, ": ", name, " must be ", dims == 2 ? "a matrix (2-D)" : "a batch of matrices (3-D)",
           ", but got a ", t.dim(), "-D tensor of shape ", shapeString(t.sizes()));
}

// Matrix products do not promote (as PyTorch): the operands' dtypes must match.
void checkSameDtype(std::string_view op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  BP_CHECK(a.dtype() == b.dtype(), op, ": expected ", an, " and ", bn, " to have the same dtype, but got ", a.dtype(),
           " and ", b.dtype(), "; convert one with .to()");
}

// Matrix products take every dtype but bool (as PyTorch), on every operand
// (Note [Dtype rules live in metas]).
constexpr ScalarTypeSet kProductDtypes = ScalarTypeSet::allBut(ScalarType::Bool);

// Integral products take integral alpha/beta (as PyTorch).
void checkScalars(std::string_view op, ScalarType dtype, const Scalar& beta, const Scalar& alpha) {
  if (isFloatingType(dtype)) return;
  BP_CHECK(!beta.isFloatingPoint() && !alpha.isFloatingPoint(), op, ": for integral inputs (here ", dtype,
           "), beta and alpha must be integers, but got beta=", beta.toDouble(), " and alpha=", alpha.toDouble());
}

// out= of a matrix product: the result's dtype exactly (no casting, as
// PyTorch), the right shape (an empty out is resized), and no memory shared
// with the operands (the product reads them while writing out). `allowed`
// may be out itself (addmm's self, element for element: addmm_).
void checkProductOut(std::string_view op, const Tensor& out, const OutputMeta& m, std::initializer_list<Arg> operands,
                     std::initializer_list<Arg> allowed = {}) {
  checkDefined(op, out, "out");
  BP_CHECK(out.dtype() == m.dtype, op, ": argument 'out' has dtype ", out.dtype(), " but the result has dtype ",
           m.dtype, "; pass a tensor of dtype ", m.dtype);
  checkOut(op, out, m, allowed);
  if (out.numel() == 0) return;
  for (const Arg& a : operands) {
    BP_CHECK(!a.tensor->defined() || a.tensor->numel() == 0 || !a.tensor->is_alias_of(out), op,
             ": argument 'out' shares memory with input '", a.name, "'; write the product into a separate tensor");
  }
}

// A 0-d tensor holding `s` as `dtype` on `device` (a factor for mul).
Tensor scalarTensor(const Scalar& s, ScalarType dtype, Device device) {
  return visitScalarType(dtype, [&]<typename T>() { return tensorFromVector<T>({s.to<T>()}, {}, device); });
}

// --- mm

OutputMeta mmRule(const Tensor& self, const Tensor& mat2) {
  const std::string& op = qualified<"mm">();
  checkRank(op, self, "self", 2);
  checkRank(op, mat2, "mat2", 2);
  BP_CHECK(self.size(1) == mat2.size(0), op, ": self is ", shapeString(self.sizes()), " and mat2 is ",
           shapeString(mat2.sizes()), "; self.size(1) must equal mat2.size(0)");
  checkSameDtype(op, self, "self", mat2, "mat2");
  checkDtypes(op, standardOp<"mm">(), {{"self", &self}, {"mat2", &mat2}});
  Device d = commonDevice(op, {{"self", &self}, {"mat2", &mat2}});
  return OutputMeta{Shape{self.size(0), mat2.size(1)}, self.dtype(), d};
}

void mmOutMeta(const Tensor& self, const Tensor& mat2, const Tensor& out) {
  checkProductOut(qualified<"mm">(), out, mmRule(self, mat2), {{"self", &self}, {"mat2", &mat2}});
}

Tensor mmFunctional(const Tensor& self, const Tensor& mat2) {
  Tensor out = allocate(mmRule(self, mat2));
  return BP_STANDARD_OP("mm.out", MmOutSig).callSkippingMeta(self, mat2, out);
}

// --- bmm

OutputMeta bmmRule(const Tensor& self, const Tensor& mat2) {
  const std::string& op = qualified<"bmm">();
  checkRank(op, self, "self", 3);
  checkRank(op, mat2, "mat2", 3);
  BP_CHECK(self.size(0) == mat2.size(0), op, ": self is ", shapeString(self.sizes()), " and mat2 is ",
           shapeString(mat2.sizes()), "; the batch sizes self.size(0) and mat2.size(0) must be equal");
  BP_CHECK(self.size(2) == mat2.size(1), op, ": self is ", shapeString(self.sizes()), " and mat2 is ",
           shapeString(mat2.sizes()), "; self.size(2) must equal mat2.size(1)");
  checkSameDtype(op, self, "self", mat2, "mat2");
  checkDtypes(op, standardOp<"bmm">(), {{"self", &self}, {"mat2", &mat2}});
  Device d = commonDevice(op, {{"self", &self}, {"mat2", &mat2}});
  return OutputMeta{Shape{self.size(0), self.size(1), mat2.size(2)}, self.dtype(), d};
}

void bmmOutMeta(const Tensor& self, const Tensor& mat2, const Tensor& out) {
  checkProductOut(qualified<"bmm">(), out, bmmRule(self, mat2), {{"self", &self}, {"mat2", &mat2}});
}

Tensor bmmFunctional(const Tensor& self, const Tensor& mat2) {
  Tensor out = allocate(bmmRule(self, mat2));
  return BP_STANDARD_OP("bmm.out", MmOutSig).callSkippingMeta(self, mat2, out);
}

// --- addmm: beta * self + alpha * (mat1 @ mat2), self broadcast to the product.

template <FixedString Name>
OutputMeta addmmRule(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                     const Scalar& alpha) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkRank(op, mat1, "mat1", 2);
  checkRank(op, mat2, "mat2", 2);
  BP_CHECK(mat1.size(1) == mat2.size(0), op, ": mat1 is ", shapeString(mat1.sizes()), " and mat2 is ",
           shapeString(mat2.sizes()), "; mat1.size(1) must equal mat2.size(0)");
  checkSameDtype(op, mat1, "mat1", mat2, "mat2");
  checkSameDtype(op, self, "self", mat1, "mat1");
  checkDtypes(op, standardOp<Name>(), {{"self", &self}, {"mat1", &mat1}, {"mat2", &mat2}});
  checkScalars(op, mat1.dtype(), beta, alpha);
  Device d = commonDevice(op, {{"self", &self}, {"mat1", &mat1}, {"mat2", &mat2}});
  Shape product{mat1.size(0), mat2.size(1)};
  BP_CHECK(self.dim() <= 2 && broadcastShapes(op, self.sizes(), asRef(product)) == product, op, ": self of shape ",
           shapeString(self.sizes()), " cannot be broadcast to the product's shape ", shapeString(asRef(product)));
  return OutputMeta{product, mat1.dtype(), d};
}

void addmmOutMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha,
                  const Tensor& out) {
  checkProductOut(qualified<"addmm">(), out, addmmRule<"addmm">(self, mat1, mat2, beta, alpha),
                  {{"mat1", &mat1}, {"mat2", &mat2}}, {{"self", &self}});
}

// The backend-agnostic addmm.out: mm, then out = beta * self + alpha * product
// with elementwise ops. beta == 0 ignores self (NaN in it does not propagate).
Tensor addmmOutComposite(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                         const Scalar& alpha, const Tensor& out) {
  using BinaryOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&);
  using AddOutSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);
  using MulSig = Tensor(const Tensor&, const Tensor&);
  const Tensor product = BP_STANDARD_OP("mm", MmSig).callSkippingMeta(mat1, mat2);
  if (beta.toDouble() == 0) {
    return BP_STANDARD_OP("mul.out", BinaryOutSig)
        .callSkippingMeta(product, scalarTensor(alpha, out.dtype(), out.device()), out);
  }
  const Tensor base =
      beta.toDouble() == 1
          ? self
          : BP_STANDARD_OP("mul.Tensor", MulSig).callSkippingMeta(self, scalarTensor(beta, out.dtype(), out.device()));
  return BP_STANDARD_OP("add.out", AddOutSig).callSkippingMeta(base, product, alpha, out);
}

Tensor addmmFunctional(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                       const Scalar& alpha) {
  Tensor out = allocate(addmmRule<"addmm">(self, mat1, mat2, beta, alpha));
  return BP_STANDARD_OP("addmm.out", AddmmOutSig).callSkippingMeta(self, mat1, mat2, beta, alpha, out);
}

Tensor addmmInplace(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                    const Scalar& alpha) {
  const std::string& op = qualified<"addmm_">();
  OutputMeta m = addmmRule<"addmm_">(self, mat1, mat2, beta, alpha);
  BP_CHECK(self.sizes() == asRef(m.sizes), op, ": self has shape ", shapeString(self.sizes()),
           " but the product has shape ", shapeString(asRef(m.sizes)),
           "; in place, self must have the product's shape (use addmm to broadcast self)");
  checkProductOut(op, self, m, {{"mat1", &mat1}, {"mat2", &mat2}});
  return BP_STANDARD_OP("addmm.out", AddmmOutSig).callSkippingMeta(self, mat1, mat2, beta, alpha, self);
}

// --- _addmm_activation (PyTorch's aten::_addmm_activation): relu, or gelu
// with use_gelu, of addmm(self, mat1, mat2, beta, alpha).
//
// Note [Fused activation products]
// A feed-forward layer's first dense layer is a product, a bias and an
// activation: three passes over the result where the product could add the
// bias and apply the activation as it writes it. _addmm_activation is that
// op in one call, so a plugin can fuse it (the CPU plugin runs gelu's as
// oneDNN's matmul with its bias argument and a gelu post-op: the separate
// pass of a BERT-base layer's gelu over its result is gone). Its composite, on every
// device without a kernel of its own and wherever autograd records, is
// addmm then relu or gelu, and it is differentiated through them. gelu is
// the exact form (approximate="none") on every device: PyTorch's CUDA
// build applies cuBLASLt's tanh-form epilogue instead, so results there
// differ from this op's by gelu's approximation error.
OutputMeta addmmActivationRule(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                               const Scalar& alpha, bool use_gelu) {
  OutputMeta m = addmmRule<"_addmm_activation">(self, mat1, mat2, beta, alpha);
  BP_CHECK(!use_gelu || isFloatingType(m.dtype), qualified<"_addmm_activation">(),
           ": use_gelu=True needs a floating dtype (gelu), got ", scalarTypeName(m.dtype),
           "; pass use_gelu=False (relu) or convert the operands with .to(dtype)");
  return m;
}

void addmmActivationMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                         const Scalar& alpha, bool use_gelu) {
  addmmActivationRule(self, mat1, mat2, beta, alpha, use_gelu);
}

Tensor addmmActivationComposite(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                                const Scalar& alpha, bool use_gelu) {
  const Tensor r = BP_STANDARD_OP("addmm", AddmmSig).callSkippingMeta(self, mat1, mat2, beta, alpha);
  using GeluSig = Tensor(const Tensor&, std::string_view);
  using ReluSig = Tensor(const Tensor&);
  if (use_gelu) return BP_STANDARD_OP("gelu", GeluSig).call(r, "none");
  return BP_STANDARD_OP("relu", ReluSig).call(r);
}

// --- matmul (torch.matmul): 1-D operands are a vector (a row on the left, a
// column on the right, the dimension removed from the result); batch
// dimensions broadcast.

int64_t numelOf(IntArrayRef s) {
  int64_t p = 1;
  for (int64_t v : s) p *= v;
  return p;
}

OutputMeta matmulRule(const Tensor& self, const Tensor& other) {
  const std::string& op = qualified<"matmul">();
  checkDefined(op, self, "self");
  checkDefined(op, other, "other");
  BP_CHECK(self.dim() >= 1 && other.dim() >= 1, op, ": both arguments need at least 1 dimension, but self is ",
           self.dim(), "-D and other is ", other.dim(), "-D; use mul for scalars");
  const int64_t k_self = self.size(-1);
  const int64_t k_other = other.dim() == 1 ? other.size(0) : other.size(-2);
  BP_CHECK(k_self == k_other, op, ": self is ", shapeString(self.sizes()), " and other is ", shapeString(other.sizes()),
           "; self.size(-1) must equal ", other.dim() == 1 ? "other.size(0)" : "other.size(-2)");
  checkSameDtype(op, self, "self", other, "other");
  checkDtypes(op, standardOp<"matmul">(), {{"self", &self}, {"other", &other}});
  Device d = commonDevice(op, {{"self", &self}, {"other", &other}});
  IntArrayRef batch_self = leading(self.sizes(), 2);
  IntArrayRef batch_other = leading(other.sizes(), 2);
  Shape sizes = broadcastShapes(op, batch_self, batch_other);
  if (self.dim() >= 2) sizes.push_back(self.size(-2));
  if (other.dim() >= 2) sizes.push_back(other.size(-1));
  return OutputMeta{sizes, self.dtype(), d};
}

// Note [Heads without copies]
// A batched product flattens its batch dimensions into one for bmm, which
// needs one batch stride per operand. Attention's heads are views of a
// [B, S, heads, d] projection as [B, heads, S, d] (and k's transposed):
// their two batch dimensions have no common stride, so the flattening
// copies each operand (about 2 ms of a BERT-base layer on 2 cores). On a
// host-accessible device a call costs no launch, so there the product runs
// one bmm.out per index of the outer batch dimensions instead, each on a
// 3-D view ([heads, S, d] with its own strides, which the CPU plugin's
// oneDNN product reads as they are), writing its slice of the result. On
// other devices one launch of a copy beats a launch per outer index, and
// the copies stay. Not where an operand requires grad (out= forms refuse
// those; the functional ops record the graph).

// The first batch dimension from which all later ones of `t` (its first
// `nb` dimensions) merge into one: each has size 1, or a stride that is the
// merged block's (the stride of its innermost dimension of size above 1)
// times the block's size.
size_t firstMergeable(const Tensor& t, size_t nb) {
  size_t first = nb;
  int64_t block_stride = 0, block_size = 1;
  while (first > 0) {
    const int64_t i = static_cast<int64_t>(first) - 1, size = t.size(i), stride = t.stride(i);
    if (size != 1) {
      if (block_size == 1)
        block_stride = stride;
      else if (stride != block_stride * block_size)
        break;
      block_size *= size;
    }
    first = static_cast<size_t>(i);
  }
  return first;
}

// Whether a batched product runs per outer batch index (Note [Heads without
// copies]): the batch does not flatten as a view, the device takes calls
// without launches, and no operand requires grad.
// Not when the product is empty, nor when the calls would be many and
// small (one dispatch per outer index costs about a microsecond: below
// 32K multiply-adds per call, more than 16 calls copy instead).
bool slicedBatches(const Tensor& a, const Tensor& b) {
  const size_t nb = static_cast<size_t>(a.dim()) - 2;
  if (a.requires_grad() || b.requires_grad() || a.numel() == 0 || b.numel() == 0) return false;
  const size_t outer = std::max(firstMergeable(a, nb), firstMergeable(b, nb));
  if (outer == 0) return false;  // one bmm, no copy
  int64_t calls = 1, per_call = a.size(-2) * a.size(-1) * b.size(-1);
  for (size_t i = 0; i < nb; ++i) (i < outer ? calls : per_call) *= a.size(static_cast<int64_t>(i));
  if (calls > 16 && per_call < (int64_t{1} << 15)) return false;
  return DeviceTypeRegistry::global().interfaceOrThrow(a.device().type).isHostAccessible();
}

// out[i...] = a[i...] @ b[i...] for every index i of the batch dimensions
// before the ones that merge (Note [Heads without copies]); `out` is
// contiguous, of the product's shape; a and b are expanded to its batch.
void bmmPerOuterBatch(const Tensor& a, const Tensor& b, const Tensor& out, size_t nb) {
  const auto& bmm_out = BP_STANDARD_OP("bmm.out", MmOutSig);
  const size_t outer = std::max(firstMergeable(a, nb), firstMergeable(b, nb));
  int64_t inner = 1;
  for (size_t i = outer; i < nb; ++i) inner *= out.size(static_cast<int64_t>(i));
  // A 3-D view of t at the outer index `index`: [inner, rows, cols]; the
  // inner batch's stride is that of its innermost dimension of size above 1.
  auto slice = [&](const Tensor& t, const std::vector<int64_t>& index) {
    int64_t offset = t.storage_offset(), inner_stride = 0;
    for (size_t i = 0; i < outer; ++i) offset += index[i] * t.stride(static_cast<int64_t>(i));
    for (size_t i = nb; i-- > outer;) {
      if (t.size(static_cast<int64_t>(i)) != 1) {
        inner_stride = t.stride(static_cast<int64_t>(i));
        break;
      }
    }
    return t.as_strided({inner, t.size(-2), t.size(-1)}, {inner_stride, t.stride(-2), t.stride(-1)}, offset);
  };
  std::vector<int64_t> index(outer, 0);
  for (;;) {
    bmm_out.callSkippingMeta(slice(a, index), slice(b, index), slice(out, index));
    size_t d = outer;
    while (d > 0 && ++index[d - 1] == out.size(static_cast<int64_t>(d - 1))) index[--d] = 0;
    if (d == 0) break;
  }
}

// Computes matmul(self, other) (rule already applied; result shape `m`)
// with mm or bmm, into `out` when given (then contiguous, of shape m.sizes,
// as it is written through a [batch, rows, columns] view).
Tensor matmulCompute(const Tensor& self, const Tensor& other, const OutputMeta& m, const Tensor* out) {
  const auto& mm = BP_STANDARD_OP("mm", MmSig);
  const auto& mm_out = BP_STANDARD_OP("mm.out", MmOutSig);
  const int64_t k = self.size(-1);
  // Vectors as a 1-row / 1-column matrix.
  const Tensor a = self.dim() == 1 ? self.view({1, k}) : self;
  const Tensor b = other.dim() == 1 ? other.view({k, 1}) : other;
  const int64_t p = b.size(-1);
  if (b.dim() == 2) {
    // Fold self's batch into rows: one mm.
    const int64_t rows = numelOf(leading(a.sizes(), 1));
    const Tensor a2 = a.dim() == 2 ? a : a.reshape({rows, k});
    if (out) {
      mm_out.callSkippingMeta(a2, b, out->view({rows, p}));
      return *out;
    }
    return mm.callSkippingMeta(a2, b).view(asRef(m.sizes));
  }
  // Batched: broadcast the batch dimensions, flatten them, one bmm.
  const auto& bmm = BP_STANDARD_OP("bmm", MmSig);
  const auto& bmm_out = BP_STANDARD_OP("bmm.out", MmOutSig);
  IntArrayRef batch_a = leading(a.sizes(), 2);
  IntArrayRef batch_b = leading(b.sizes(), 2);
  Shape batch = broadcastShapes(qualified<"matmul">(), batch_a, batch_b);
  const int64_t n = a.size(-2), batches = numelOf(asRef(batch));
  Shape a_sizes = batch, b_sizes = batch;
  a_sizes.insert(a_sizes.end(), {n, k});
  b_sizes.insert(b_sizes.end(), {k, p});
  const Tensor ae = a.expand(asRef(a_sizes)), be = b.expand(asRef(b_sizes));
  if (batch.size() >= 2 && slicedBatches(ae, be)) {
    const Tensor result = out ? *out : Tensor(emptyTensor(asRef(m.sizes), a.dtype(), a.device()));
    Shape o_sizes = batch;  // the result with a vector operand's dimension kept
    o_sizes.insert(o_sizes.end(), {n, p});
    bmmPerOuterBatch(ae, be, result.view(asRef(o_sizes)), batch.size());
    return result;
  }
  const Tensor a3 = ae.reshape({batches, n, k});
  const Tensor b3 = be.reshape({batches, k, p});
  if (out) {
    bmm_out.callSkippingMeta(a3, b3, out->view({batches, n, p}));
    return *out;
  }
  return bmm.callSkippingMeta(a3, b3).view(asRef(m.sizes));
}

Tensor matmulFunctional(const Tensor& self, const Tensor& other) {
  return matmulCompute(self, other, matmulRule(self, other), nullptr);
}

void matmulOutMeta(const Tensor& self, const Tensor& other, const Tensor& out) {
  const std::string& op = qualified<"matmul">();
  checkProductOut(op, out, matmulRule(self, other), {{"self", &self}, {"other", &other}});
}

// A strided `out` is written directly where mm.out can take it (a matrix
// product); otherwise the product goes to a temporary that is copied into
// out (out cannot in general be viewed as [batch, rows, columns]).
Tensor matmulOut(const Tensor& self, const Tensor& other, const Tensor& out) {
  const OutputMeta m = matmulRule(self, other);
  if (out.is_contiguous()) return matmulCompute(self, other, m, &out);
  if (self.dim() == 2 && other.dim() == 2) return BP_STANDARD_OP("mm.out", MmOutSig).callSkippingMeta(self, other, out);
  using CopySig = Tensor(const Tensor&, const Tensor&, bool);
  BP_STANDARD_OP("copy_", CopySig).callSkippingMeta(out, matmulCompute(self, other, m, nullptr), false);
  return out;
}

// --- linear: input @ weight.T + bias, over any leading dimensions of input.

// The result: input's leading dimensions, then out_features (none for a 1-D
// weight). bias is added to it in place (as PyTorch), so it must broadcast
// to the result's shape without growing it.
OutputMeta linearRule(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const std::string& op = qualified<"linear">();
  checkDefined(op, input, "input");
  checkDefined(op, weight, "weight");
  BP_CHECK(input.dim() >= 1, op, ": input must have at least 1 dimension, but it is 0-d");
  BP_CHECK(weight.dim() == 1 || weight.dim() == 2, op, ": weight must be [out_features, in_features] (2-D) or ",
           "[in_features] (1-D), but got shape ", shapeString(weight.sizes()));
  BP_CHECK(input.size(-1) == weight.size(-1), op, ": input is ", shapeString(input.sizes()), " and weight is ",
           shapeString(weight.sizes()), "; input.size(-1) must equal weight.size(-1) (in_features)");
  checkSameDtype(op, input, "input", weight, "weight");
  if (bias.defined()) checkSameDtype(op, input, "input", bias, "bias");
  checkDtypes(op, standardOp<"linear">(), {{"input", &input}, {"weight", &weight}, {"bias", &bias}});
  Device d = commonDevice(op, {{"input", &input}, {"weight", &weight}, {"bias", &bias}});
  Shape sizes = toShape(leading(input.sizes(), 1));
  if (weight.dim() == 2) sizes.push_back(weight.size(0));
  auto broadcasts = [&] {  // bias's trailing dimensions are 1 or the result's
    const size_t bd = static_cast<size_t>(bias.dim());
    if (bd > sizes.size()) return false;
    for (size_t i = 0; i < bd; ++i) {
      const int64_t b = bias.size(static_cast<int64_t>(bd - 1 - i));
      if (b != 1 && b != sizes[sizes.size() - 1 - i]) return false;
    }
    return true;
  };
  BP_CHECK(!bias.defined() || broadcasts(), op, ": bias of shape ",
           bias.defined() ? shapeString(bias.sizes()) : std::string(), " cannot be broadcast to the result's shape ",
           shapeString(asRef(sizes)), "; pass a bias of shape [out_features] (or one that broadcasts to the result)");
  return OutputMeta{sizes, input.dtype(), d};
}

void linearMeta(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  linearRule(input, weight, bias.value_or(Tensor()));
}

// The backend-agnostic linear: one addmm over the rows of input where bias
// is a row, else matmul then add. The arguments were checked (linearMeta).
Tensor linearComposite(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias_opt) {
  const Tensor bias = bias_opt.value_or(Tensor());
  const Tensor wt = weight.dim() == 2 ? weight.t() : weight;
  if (bias.defined() && weight.dim() == 2 && bias.dim() <= 1) {
    // One fused addmm over the rows of input (the common case).
    const int64_t in = input.size(-1), out_features = weight.size(0);
    const int64_t rows = numelOf(leading(input.sizes(), 1));
    const Tensor x = input.dim() == 2 ? input : input.reshape({rows, in});
    Tensor r = BP_STANDARD_OP("addmm", AddmmSig).callSkippingMeta(bias, x, wt, Scalar(1), Scalar(1));
    if (input.dim() == 2) return r;
    Shape sizes = toShape(leading(input.sizes(), 1));
    sizes.push_back(out_features);
    return r.view(asRef(sizes));
  }
  Tensor r = BP_STANDARD_OP("matmul", MmSig).callSkippingMeta(input, wt);
  if (!bias.defined()) return r;
  using AddSig = Tensor(const Tensor&, const Tensor&, const Scalar&);
  return BP_STANDARD_OP("add.Tensor", AddSig).callSkippingMeta(r, bias, Scalar(1));
}

// --- einsum (Note [einsum])
// Note [einsum]
// torch.einsum's equation: operands' subscripts (letters, and at most one
// "..." each, which stands for their leading broadcast dims), then
// optionally "->" and the output's. Without "->" the output is "..." and the
// letters that appear once, in alphabetical order. A letter repeated within
// one operand takes its diagonal. The operands are combined left to right,
// each pair as one bmm: the letters both have and a later operand or the
// output needs are the batch, the ones only they have are summed in the
// product, and a letter no one else needs is summed out first. Size-1 dims
// broadcast. All operands must have one dtype.

struct Subscripts {
  std::vector<int> labels;  // per dim: a letter (0..51) or an ellipsis dim (52 + k)
};

constexpr int kEllipsisLabel = 52;

int letterLabel(const std::string& op, char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  BP_CHECK(false, op, ": '", std::string(1, c), "' is not a subscript; use letters a-z, A-Z and '...'");
  return -1;
}

// One operand's (or the output's) subscripts; `ndim` < 0 for the output,
// whose ellipsis takes `ellipsis_dims`.
Subscripts parseSubscripts(const std::string& op, std::string_view text, int64_t ndim, int64_t ellipsis_dims,
                           const std::string& which) {
  Subscripts s;
  int64_t letters = 0;
  bool ellipsis = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ' ') continue;
    if (text[i] == '.') {
      BP_CHECK(text.substr(i, 3) == "..." && !ellipsis, op, ": ", which,
               " has a '.' that is not one '...' (at most one ellipsis per operand)");
      ellipsis = true;
      i += 2;
      continue;
    }
    letterLabel(op, text[i]);
    ++letters;
  }
  const int64_t dots = ndim < 0 ? (ellipsis ? ellipsis_dims : 0) : ndim - letters;
  if (ndim >= 0) {
    BP_CHECK(ellipsis ? dots >= 0 : dots == 0, op, ": ", which, " has ", letters, " subscripts",
             ellipsis ? " and '...'" : "", " but the tensor has ", ndim, " dimensions");
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ' ') continue;
    if (text[i] == '.') {
      // Ellipsis dims align to the right across operands.
      for (int64_t k = 0; k < dots; ++k)
        s.labels.push_back(kEllipsisLabel + static_cast<int>(ellipsis_dims - dots + k));
      i += 2;
      continue;
    }
    s.labels.push_back(letterLabel(op, text[i]));
  }
  return s;
}

// An operand with one label per dim (after diagonals).
struct Labeled {
  Tensor t;
  std::vector<int> labels;
};

// Takes the diagonal of each label repeated within the operand.
Labeled diagonals(Labeled x) {
  for (size_t i = 0; i < x.labels.size(); ++i) {
    for (size_t j = i + 1; j < x.labels.size(); ++j) {
      if (x.labels[j] != x.labels[i]) continue;
      const int64_t di = static_cast<int64_t>(i), dj = static_cast<int64_t>(j);
      BP_CHECK(x.t.size(di) == x.t.size(dj), "bp::einsum: a subscript repeated in one operand names dims of sizes ",
               x.t.size(di), " and ", x.t.size(dj), "; its diagonal needs them equal");
      std::vector<int64_t> sizes, strides;
      for (int64_t d = 0; d < x.t.dim(); ++d) {
        if (d == dj) continue;
        sizes.push_back(x.t.size(d));
        strides.push_back(d == di ? x.t.stride(di) + x.t.stride(dj) : x.t.stride(d));
      }
      x.t = x.t.as_strided(sizes, strides, x.t.storage_offset());
      x.labels.erase(x.labels.begin() + static_cast<std::ptrdiff_t>(j));
      --j;
    }
  }
  return x;
}

// Sums out the labels of x that `needed` does not hold.
Labeled sumUnneeded(Labeled x, const std::vector<int>& needed) {
  std::vector<int64_t> dims;
  std::vector<int> kept;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (std::find(needed.begin(), needed.end(), x.labels[i]) == needed.end())
      dims.push_back(static_cast<int64_t>(i));
    else
      kept.push_back(x.labels[i]);
  }
  if (!dims.empty()) x.t = x.t.sum(dims);
  x.labels = kept;
  return x;
}

int64_t sizeOf(const Labeled& x, int label) {
  for (size_t i = 0; i < x.labels.size(); ++i)
    if (x.labels[i] == label) return x.t.size(static_cast<int64_t>(i));
  return 1;
}

// a and b as one bmm: [batch, a-only, contracted] x [batch, contracted, b-only].
Labeled contract(const Labeled& a, const Labeled& b, const std::vector<int>& needed) {
  auto has = [](const Labeled& x, int l) { return std::find(x.labels.begin(), x.labels.end(), l) != x.labels.end(); };
  auto need = [&](int l) { return std::find(needed.begin(), needed.end(), l) != needed.end(); };
  std::vector<int> batch, a_only, b_only, summed;
  for (int l : a.labels) (has(b, l) ? (need(l) ? batch : summed) : a_only).push_back(l);
  for (int l : b.labels)
    if (!has(a, l)) b_only.push_back(l);
  auto arrange = [&](const Labeled& x, const std::vector<std::vector<int>*>& groups) {
    std::vector<int64_t> order, sizes;
    std::vector<int64_t> shape;
    for (std::vector<int>* g : groups) {
      int64_t n = 1;
      for (int l : *g) {
        const int64_t size = std::max(sizeOf(a, l), sizeOf(b, l));
        n *= size;
        sizes.push_back(size);
      }
      shape.push_back(n);
    }
    // Missing labels (the other operand's) enter as size-1 dims, then broadcast.
    Tensor t = x.t;
    std::vector<int> labels = x.labels;
    for (std::vector<int>* g : groups) {
      for (int l : *g) {
        if (std::find(labels.begin(), labels.end(), l) == labels.end()) {
          t = t.unsqueeze(t.dim());
          labels.push_back(l);
        }
      }
    }
    for (std::vector<int>* g : groups) {
      for (int l : *g) {
        order.push_back(std::find(labels.begin(), labels.end(), l) - labels.begin());
      }
    }
    return t.permute(order).expand(sizes).reshape(shape);
  };
  std::vector<int> none;
  const Tensor lhs = arrange(a, {&batch, &a_only, &summed});
  const Tensor rhs = arrange(b, {&batch, &summed, &b_only});
  Labeled r;
  r.t = lhs.bmm(rhs);
  Shape result;
  for (const std::vector<int>* g : {&batch, &a_only, &b_only}) {
    for (int l : *g) {
      result.push_back(std::max(sizeOf(a, l), sizeOf(b, l)));
      r.labels.push_back(l);
    }
  }
  r.t = r.t.reshape(result);
  return r;
}

Tensor einsumComposite(std::string_view equation, TensorList tensors, std::optional<IntArrayRef> path) {
  const std::string& op = qualified<"einsum">();
  BP_CHECK(!tensors.empty(), op, ": needs at least one operand");
  for (size_t i = 0; i < tensors.size(); ++i) {
    checkDefined(op, tensors[i], "tensors");
    BP_CHECK(tensors[i].dtype() == tensors[0].dtype(), op, ": operand ", i, " has dtype ", tensors[i].dtype(),
             " but operand 0 has ", tensors[0].dtype(), "; convert them to one dtype");
    BP_CHECK(tensors[i].device() == tensors[0].device(), op, ": operand ", i, " is on ", tensors[i].device(),
             " but operand 0 is on ", tensors[0].device());
  }
  const size_t arrow = equation.find("->");
  const std::string_view inputs = equation.substr(0, arrow);
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    parts.push_back(inputs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  BP_CHECK(parts.size() == tensors.size(), op, ": the equation '", std::string(equation), "' has ", parts.size(),
           " operands but ", tensors.size(), " tensors were given");
  // The ellipsis covers as many dims as the widest operand's.
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t letters = 0;
    for (char c : parts[i]) letters += c != ' ' && c != '.';
    if (parts[i].find("...") != std::string_view::npos)
      ellipsis_dims = std::max(ellipsis_dims, tensors[i].dim() - letters);
  }
  std::vector<Labeled> operands;
  for (size_t i = 0; i < parts.size(); ++i) {
    Subscripts s = parseSubscripts(op, parts[i], tensors[i].dim(), ellipsis_dims, "operand " + std::to_string(i));
    operands.push_back(diagonals(Labeled{tensors[i], s.labels}));
  }
  std::vector<int> output;
  if (arrow != std::string_view::npos) {
    output = parseSubscripts(op, equation.substr(arrow + 2), -1, ellipsis_dims, "the output").labels;
    for (size_t i = 0; i < output.size(); ++i) {
      BP_CHECK(std::find(output.begin() + static_cast<std::ptrdiff_t>(i) + 1, output.end(), output[i]) == output.end(),
               op, ": the output names a subscript twice");
      bool found = output[i] >= kEllipsisLabel;
      for (const Labeled& x : operands)
        found |= std::find(x.labels.begin(), x.labels.end(), output[i]) != x.labels.end();
      BP_CHECK(found, op, ": the output has a subscript that no operand has");
    }
  } else {
    for (int64_t k = 0; k < ellipsis_dims; ++k) output.push_back(kEllipsisLabel + static_cast<int>(k));
    std::vector<int> counts(kEllipsisLabel, 0);
    for (size_t i = 0; i < parts.size(); ++i)
      for (char c : parts[i])
        if (c != ' ' && c != '.') ++counts[static_cast<size_t>(letterLabel(op, c))];
    // Alphabetical: PyTorch orders upper case before lower case.
    for (int l = 26; l < kEllipsisLabel; ++l)
      if (counts[static_cast<size_t>(l)] == 1) output.push_back(l);
    for (int l = 0; l < 26; ++l)
      if (counts[static_cast<size_t>(l)] == 1) output.push_back(l);
  }
  // Left to right; what a step keeps is what the output or a later operand needs.
  auto neededAfter = [&](size_t i) {
    std::vector<int> needed = output;
    for (size_t j = i + 1; j < operands.size(); ++j)
      needed.insert(needed.end(), operands[j].labels.begin(), operands[j].labels.end());
    return needed;
  };
  Labeled acc = operands[0];
  for (size_t i = 1; i < operands.size(); ++i) {
    const std::vector<int> needed = neededAfter(i);
    std::vector<int> for_a = needed, for_b = needed;
    for_a.insert(for_a.end(), operands[i].labels.begin(), operands[i].labels.end());
    for_b.insert(for_b.end(), acc.labels.begin(), acc.labels.end());
    acc = contract(sumUnneeded(acc, for_a), sumUnneeded(operands[i], for_b), needed);
  }
  acc = sumUnneeded(acc, output);
  // Ellipsis dims an operand did not have come in as size 1.
  std::vector<int64_t> order;
  for (int l : output) {
    auto it = std::find(acc.labels.begin(), acc.labels.end(), l);
    if (it == acc.labels.end()) {
      acc.t = acc.t.unsqueeze(acc.t.dim());
      acc.labels.push_back(l);
      it = acc.labels.end() - 1;
    }
    order.push_back(it - acc.labels.begin());
  }
  (void)path;  // the contraction order is always left to right
  return acc.t.permute(order).contiguous();
}

}  // namespace

void addLinalgOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "linalg"});
  };
  // Every form of a product declares the same rule for its operands.
  auto products = [&](size_t first, std::initializer_list<const char*> operands) {
    for (size_t i = first; i < ops.size(); ++i)
      for (const char* a : operands) ops[i].dtypes.push_back({a, kProductDtypes});
  };
  size_t first = ops.size();
  add("mm(Tensor self, Tensor mat2) -> Tensor", {}, KernelFunction::makeFromFunction(BP_FN(mmFunctional)));
  add("mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(mmOutMeta)));
  products(first, {"self", "mat2"});
  first = ops.size();
  add("bmm(Tensor self, Tensor mat2) -> Tensor", {}, KernelFunction::makeFromFunction(BP_FN(bmmFunctional)));
  add("bmm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(bmmOutMeta)));
  products(first, {"self", "mat2"});
  first = ops.size();
  add("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(addmmFunctional)));
  add("addmm_(Tensor(a!) self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN(addmmInplace)));
  add("addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, Tensor(a!) out) -> "
      "Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(addmmOutMeta)),
      KernelFunction::makeFromFunction(BP_FN(addmmOutComposite)));
  products(first, {"self", "mat1", "mat2"});
  first = ops.size();
  add("matmul(Tensor self, Tensor other) -> Tensor", {}, KernelFunction::makeFromFunction(BP_FN(matmulFunctional)));
  add("matmul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(matmulOutMeta)), KernelFunction::makeFromFunction(BP_FN(matmulOut)));
  products(first, {"self", "other"});
  first = ops.size();
  add("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(linearMeta)), KernelFunction::makeFromFunction(BP_FN(linearComposite)));
  products(first, {"input", "weight", "bias"});
  first = ops.size();
  add("_addmm_activation(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, "
      "bool use_gelu=False) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(addmmActivationMeta)),
      KernelFunction::makeFromFunction(BP_FN(addmmActivationComposite)));
  products(first, {"self", "mat1", "mat2"});
  add("einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(einsumComposite)));
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(derivedOut(
      "linear.out(Tensor input, Tensor weight, Tensor? bias=None, *, Tensor(a!) out) -> Tensor(a!)", "linear"));
  ops.push_back(
      derivedOut("_addmm_activation.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, "
                 "Scalar alpha=1, bool use_gelu=False, Tensor(a!) out) -> Tensor(a!)",
                 "_addmm_activation"));
}

}  // namespace backplane::ops
