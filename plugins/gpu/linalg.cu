// Matrix-product kernels of the GPU plugins: mm.out, bmm.out, addmm.out and
// linear, as the CPU plugin registers them (the host's rules have checked
// shapes, dtypes and `out`; matmul and the functional forms are composites
// over these). Every product is C[b] = alpha * A[b] @ B[b] (+ beta * C[b])
// over batches of strided matrices (gemm.cuh's MatrixView). The CUDA plugin
// runs float32, float16, bfloat16 and float64 on cuBLAS when C is in a BLAS
// layout (plugins/cuda/cublas_gemm.h); everything else, and every product of
// the HIP plugin and the simulator, runs our tiled kernel (Note [Tiled
// GEMM]).
//
// Note [TF32 matrix products]
// Ampere and later GPUs can run float32 products on tensor cores in TF32
// (10-bit mantissa inputs, float32 accumulation): several times faster,
// with about 1e-3 relative error instead of float32's 1e-7. As in PyTorch it
// is off by default and opted into, process-wide, with
//   <ns>::set_allow_tf32(bool allow) -> ()    (ns: cuda, hip, gpusim)
//   <ns>::allow_tf32() -> bool
// or BACKPLANE_CUDA_ALLOW_TF32=1 in the environment when the plugin loads.
// Only the CUDA plugin's cuBLAS products (CUBLAS_COMPUTE_32F_FAST_TF32) and
// cuDNN convolutions (tensor-op algorithms, Note [cuDNN convolutions]) use it;
// the HIP plugin and the simulator keep the setting, so scripts run
// unchanged, but always compute in float32. The ops take no tensor, so they
// dispatch to the CPU key and are registered there.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "gemm.cuh"
#include "kernel_args.h"
#include "kernels.h"
#if defined(BP_GPU_CUDA)
#include "cuda/cublas_gemm.h"
#endif

namespace bp_gpu {
namespace {

std::atomic<bool> g_allow_tf32{false};

void setAllowTf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }

}  // namespace

bool allowTf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

namespace {

const std::initializer_list<ScalarType> kSupported = {ScalarType::UInt8,    ScalarType::Int8,    ScalarType::Int16,
                                                      ScalarType::Int32,    ScalarType::Int64,   ScalarType::Float16,
                                                      ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};

// A 2-D tensor as a batch of one; a 3-D tensor as is.
MatrixView viewOf(const bp::Tensor& t) {
  if (t.dim() == 2) return MatrixView{t.data_ptr(), 1, t.size(0), t.size(1), 0, t.stride(0), t.stride(1)};
  const int64_t batch = t.size(0);
  return MatrixView{t.data_ptr(), batch, t.size(1), t.size(2), batch == 1 ? 0 : t.stride(0), t.stride(1), t.stride(2)};
}

#if defined(BP_GPU_CUDA)
// The operand packed into a contiguous [batch, rows, cols] copy (for cuBLAS,
// which takes only row- or column-major matrices with a leading dimension).
GemmOperand packed(const char* op, const GemmOperand& x, ScalarType dtype) {
  const MatrixView& v = x.view;
  const bp::Tensor src = x.tensor.as_strided({v.batch, v.rows, v.cols}, {v.sb, v.sr, v.sc}, x.tensor.storage_offset());
  bp::Tensor dst = bp::Tensor::empty({v.batch, v.rows, v.cols}, dtype, x.tensor.device());
  copyCast(op, dst, src);
  return GemmOperand{
      dst, MatrixView{dst.data_ptr(), v.batch, v.rows, v.cols, v.batch == 1 ? 0 : v.rows * v.cols, v.cols, 1}};
}
#endif

}  // namespace

// gemm.cuh.
void gemm(const char* op, const GemmOperand& a, const GemmOperand& b, const MatrixView& c, ScalarType dtype,
          const bp::Scalar& alpha, const bp::Scalar& beta, bool use_beta, int device) {
  if (c.batch == 0 || c.rows == 0 || c.cols == 0) return;
  GemmScalars s{};
  s.use_beta = use_beta;
  if (isFloating(dtype)) {
    s.alpha = alpha.toDouble();
    s.beta = use_beta ? beta.toDouble() : 0.0;
  } else {
    s.alpha_int = alpha.to<int64_t>();
    s.beta_int = use_beta ? beta.to<int64_t>() : 0;
  }
#if defined(BP_GPU_CUDA)
  MatrixView cv = c;
  if (a.view.cols > 0 && cublasTakes(dtype) && blasLayout(cv)) {
    GemmOperand pa = a, pb = b;
    if (!blasLayout(pa.view)) pa = packed(op, a, dtype);
    if (!blasLayout(pb.view)) pb = packed(op, b, dtype);
    if (cublasGemm(pa.view, pb.view, cv, dtype, s, allowTf32(), device)) return;
  }
#endif
  visitDtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>)
      bp::fail(BP_INVALID_ARGUMENT, std::string(op) + ": bool is not supported");
    else
      gemmTiled<T>(a.view, b.view, c, s, device);
  });
}

namespace {

void checkArgs(const char* op, bp::Device device,
               std::initializer_list<std::pair<const bp::Tensor*, const char*>> args) {
  for (auto [t, name] : args) {
    checkOnDevice(op, *t, name, device);
    checkDtype(op, *t, name, kSupported);
  }
}

bp::Tensor mmOrBmm(const char* op, const bp::Tensor& self, const bp::Tensor& mat2, const bp::Tensor& out) {
  checkArgs(op, out.device(), {{&self, "self"}, {&mat2, "mat2"}, {&out, "out"}});
  gemm(op, GemmOperand{self, viewOf(self)}, GemmOperand{mat2, viewOf(mat2)}, viewOf(out), out.dtype(),
       bp::Scalar(int64_t{1}), bp::Scalar(int64_t{0}), false, out.device().index);
  return out;
}

bp::Tensor mm_out(const bp::Tensor& self, const bp::Tensor& mat2, const bp::Tensor& out) {
  return mmOrBmm("bp::mm.out", self, mat2, out);
}
bp::Tensor bmm_out(const bp::Tensor& self, const bp::Tensor& mat2, const bp::Tensor& out) {
  return mmOrBmm("bp::bmm.out", self, mat2, out);
}

// out = beta * self + alpha * mat1 @ mat2: self (broadcast) is copied into
// out, then the product accumulates onto it with scale beta. beta == 0
// ignores self entirely (NaN in it does not propagate), as PyTorch.
bp::Tensor addmm_out(const bp::Tensor& self, const bp::Tensor& mat1, const bp::Tensor& mat2, const bp::Scalar& beta,
                     const bp::Scalar& alpha, const bp::Tensor& out) {
  static constexpr const char* kOp = "bp::addmm.out";
  checkArgs(kOp, out.device(), {{&self, "self"}, {&mat1, "mat1"}, {&mat2, "mat2"}, {&out, "out"}});
  if (out.numel() == 0) return out;
  const bool use_beta = beta.toDouble() != 0;
  const bool in_place =
      self.data_ptr() == out.data_ptr() && self.sizes() == out.sizes() && self.strides() == out.strides();
  if (use_beta && !in_place) copyCast(kOp, out, self);
  gemm(kOp, GemmOperand{mat1, viewOf(mat1)}, GemmOperand{mat2, viewOf(mat2)}, viewOf(out), out.dtype(), alpha, beta,
       use_beta, out.device().index);
  return out;
}

// input ([..., in]) as one [rows, in] matrix through its strides, when its
// leading dimensions collapse into a single row stride (as a view would);
// false when they do not (e.g. a permuted batch).
bool rowsView(const bp::Tensor& x, int64_t rows, MatrixView& m) {
  const std::optional<int64_t> row_stride = bp_common::collapsedRowStride(x);
  if (!row_stride) return false;
  m = MatrixView{x.data_ptr(), 1, rows, x.size(-1), 0, *row_stride, x.stride(-1)};
  return true;
}

// linear(input, weight, bias) (the host's linearMeta has checked shapes,
// dtypes and devices): bias broadcast into the result, then input @ weight.T
// accumulated onto it. weight is read transposed through its strides; input
// as [rows, in_features] through its strides where they allow, else from a
// contiguous copy.
bp::Tensor linear(const bp::Tensor& input, const bp::Tensor& weight, const std::optional<bp::Tensor>& bias_opt) {
  static constexpr const char* kOp = "bp::linear";
  const bp::Device device = input.device();
  checkArgs(kOp, device, {{&input, "input"}, {&weight, "weight"}});
  const bp::Tensor* bias = bias_opt && bias_opt->defined() ? &*bias_opt : nullptr;
  if (bias != nullptr) checkArgs(kOp, device, {{bias, "bias"}});
  const ScalarType dtype = input.dtype();
  const bool matrix_weight = weight.dim() == 2;
  const bp_common::LinearShape shape = bp_common::linearShape(input, weight);
  const int64_t in = shape.in, n = shape.n, rows = shape.rows;
  bp::Tensor out = bp::Tensor::empty(shape.sizes, dtype, device);
  if (rows * n == 0) return out;

  GemmOperand a{input, {}};
  if (!rowsView(input, rows, a.view)) {
    a.tensor = bp::Tensor::empty(input.sizes(), dtype, device);
    copyCast(kOp, a.tensor, input);
    a.view = MatrixView{a.tensor.data_ptr(), 1, rows, in, 0, in, 1};
  }
  // weight.T: [in, n] (a 1-d weight: [in, 1]).
  const MatrixView wt{weight.data_ptr(), 1, in, n, 0, weight.stride(-1), matrix_weight ? weight.stride(0) : 1};
  if (bias != nullptr) copyCast(kOp, out, *bias);
  gemm(kOp, a, GemmOperand{weight, wt}, MatrixView{out.data_ptr(), 1, rows, n, 0, n, 1}, dtype, bp::Scalar(int64_t{1}),
       bp::Scalar(int64_t{1}), bias != nullptr, device.index);
  return out;
}

}  // namespace

void registerLinalgKernels(bp::Library& m, int32_t type) {
  BP_REGISTER_LINALG_KERNELS(m, type);

  // Note [TF32 matrix products].
#if defined(BP_GPU_CUDA)
  const char* env = std::getenv("BACKPLANE_CUDA_ALLOW_TF32");
  setAllowTf32(env != nullptr && std::strcmp(env, "1") == 0);
#endif
  const std::string ns = BP_GPU_NAME "::";
  m.def((ns + "set_allow_tf32(bool allow) -> ()").c_str());
  m.def((ns + "allow_tf32() -> bool").c_str());
  m.impl((ns + "set_allow_tf32").c_str(), kCpuType, &setAllowTf32);
  m.impl((ns + "allow_tf32").c_str(), kCpuType, &allowTf32);
}

}  // namespace bp_gpu
