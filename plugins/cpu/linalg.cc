// Matrix-product kernels of the CPU plugin: mm.out, bmm.out, addmm.out and
// linear (the host's rules have checked shapes, dtypes and `out`; matmul
// and the functional forms are composites over these).
//
// Note [CPU matrix products]
// Every product is C[b] = alpha * A[b] @ B[b] + beta * C[b] over a batch of
// strided matrices (mm is a batch of one). float32 runs oneDNN's matmul
// primitive; bfloat16 and float16 too where this oneDNN has an optimised
// (non-reference) implementation on this CPU (probed once), else they are computed in
// float32 and rounded once. Operands go to oneDNN with their own strides
// when its GEMM accepts them (row- or column-major with a leading dimension,
// i.e. transposed views need no copy; a broadcast batch is passed as a
// batch of 1); other layouts are copied to contiguous buffers first.
// Primitives are cached per thread by shape, layout, dtype and alpha/beta,
// so a repeated product skips descriptor creation. float64 and the integer
// dtypes use a row-blocked loop (integers wrap, as in PyTorch), as does
// any product with an empty inner dimension (C = beta * C).
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "cpu_common.h"
#include "dnnl_util.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

constexpr std::initializer_list<ScalarType> kSupported = {
    ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,  ScalarType::Int64,
    ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};

// A batch of strided matrices (strides in elements).
struct Mat {
  char* data;
  int64_t batch, rows, cols;
  int64_t sb, sr, sc;
};

// A 2-D tensor as a batch of one; a 3-D tensor as is.
Mat matOf(const bp::Tensor& t) {
  char* p = static_cast<char*>(t.data_ptr());
  if (t.dim() == 2) return Mat{p, 1, t.size(0), t.size(1), 0, t.stride(0), t.stride(1)};
  return Mat{p, t.size(0), t.size(1), t.size(2), t.stride(0), t.stride(1), t.stride(2)};
}

template <class T>
T& at(const Mat& m, int64_t b, int64_t r, int64_t c) {
  return reinterpret_cast<T*>(m.data)[b * m.sb + r * m.sr + c * m.sc];
}

// --- the loop: float64, integers, empty inner dimension

// Integers accumulate in uint64 (wrapping, no UB); the low bits are what
// PyTorch's wrapping int arithmetic gives.
template <class T>
using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, opmath_t<T>>;

template <class T>
Acc<T> accOf(const bp::Scalar& s) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<uint64_t>(s.to<int64_t>());
  else
    return static_cast<Acc<T>>(s.toDouble());
}

template <class T>
void gemmLoop(const Mat& A, const Mat& B, const Mat& C, const bp::Scalar& alpha_s, const bp::Scalar& beta_s,
              bool use_beta) {
  const Acc<T> alpha = accOf<T>(alpha_s), beta = accOf<T>(beta_s);
  const int64_t K = A.cols, N = C.cols, rows = C.batch * C.rows;
  ThreadScope threads;
#pragma omp parallel if (rows * N * std::max <int64_t>(K, 1) > (int64_t{1} << 16))
  {
    // One row of C accumulated at a time, walking B row by row so that the
    // inner loop is contiguous in B and C's row buffer (vectorisable).
    std::vector<Acc<T>> acc(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t b = row / C.rows, i = row % C.rows;
      const int64_t ba = A.batch == 1 ? 0 : b, bb = B.batch == 1 ? 0 : b;
      std::fill(acc.begin(), acc.end(), Acc<T>(0));
      for (int64_t l = 0; l < K; ++l) {
        const Acc<T> a = static_cast<Acc<T>>(load(at<T>(A, ba, i, l)));
        const T* brow = &at<T>(B, bb, l, 0);
        if (B.sc == 1) {
          for (int64_t j = 0; j < N; ++j) acc[j] += a * static_cast<Acc<T>>(load(brow[j]));
        } else {
          for (int64_t j = 0; j < N; ++j) acc[j] += a * static_cast<Acc<T>>(load(brow[j * B.sc]));
        }
      }
      for (int64_t j = 0; j < N; ++j) {
        T& c = at<T>(C, b, i, j);
        Acc<T> v = alpha * acc[j];
        if (use_beta) v += beta * static_cast<Acc<T>>(load(c));
        c = store<T>(v);
      }
    }
  }
}

// --- oneDNN

using dt = dnnl::memory::data_type;

// A layout oneDNN's GEMM takes as is: row-major or column-major with a
// leading dimension. Size-1 dimensions get the stride that makes them so.
bool gemmLayout(Mat& m) {
  if (m.rows == 1) m.sr = m.sc == 1 ? m.cols : 1;
  if (m.cols == 1) m.sc = m.sr == 1 ? m.rows : 1;
  if (m.rows == 1 && m.cols == 1) m.sr = m.sc = 1;
  return (m.sc == 1 && m.sr >= m.cols) || (m.sr == 1 && m.sc >= m.rows);
}

// oneDNN dims/strides of m; a broadcast batch (stride 0) is a batch of 1,
// which oneDNN broadcasts.
void describe(const Mat& m, int64_t* out) {
  const bool bcast = m.batch == 1 || m.sb == 0;
  out[0] = bcast ? 1 : m.batch;
  out[1] = m.rows;
  out[2] = m.cols;
  out[3] = bcast ? m.rows * m.cols : m.sb;
  out[4] = m.sr;
  out[5] = m.sc;
}

// An eltwise post-op applied to the product as oneDNN writes it
// (_addmm_activation, Note [Fused activation products]): gelu only, since
// oneDNN's relu post-op (a max with 0) turns NaN into 0, where relu keeps it.
enum class Activation : int64_t { kNone, kGelu };

// Cache key: dtype, alpha, beta, dims/strides of A, B, C, the bias's length
// (0: none) and the activation.
using Key = std::array<int64_t, 23>;
struct Cached {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c, bias;
  bool reference;  // oneDNN picked its (slow) reference implementation
};

dnnl::memory::desc descOf(const int64_t* d, dt type) {
  return dnnl::memory::desc({d[0], d[1], d[2]}, type, {d[3], d[4], d[5]});
}

// bias_cols > 0: a contiguous bias row of that length (1 or C.cols) added
// to every row of the product, oneDNN's bias argument (one pass over C).
const Cached& primitive(const Mat& A, const Mat& B, const Mat& C, dt type, float alpha, float beta,
                        int64_t bias_cols = 0, Activation activation = Activation::kNone) {
  Key key{};
  key[0] = static_cast<int64_t>(type);
  std::memcpy(&key[1], &alpha, sizeof alpha);
  std::memcpy(&key[2], &beta, sizeof beta);
  describe(A, &key[3]);
  describe(B, &key[9]);
  describe(C, &key[15]);
  key[21] = bias_cols;
  key[22] = static_cast<int64_t>(activation);
  // Primitives are cheap to keep.
  return dnnl_util::cachedPerThread(key, 256, [&] {
    dnnl::memory::desc a = descOf(&key[3], type), b = descOf(&key[9], type), c = descOf(&key[15], type);
    dnnl::memory::desc bias;
    if (bias_cols > 0) bias = dnnl::memory::desc({1, 1, bias_cols}, type, {bias_cols, bias_cols, 1});
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    dnnl::post_ops ops;
    if (beta != 0.0f) ops.append_sum(beta);
    if (activation == Activation::kGelu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    if (ops.len() > 0) attr.set_post_ops(ops);
    const dnnl::matmul::desc desc = bias_cols > 0 ? dnnl::matmul::desc(a, b, bias, c) : dnnl::matmul::desc(a, b, c);
    dnnl::matmul::primitive_desc pd(desc, attr, dnnl_util::engine());
    return Cached{dnnl::matmul(pd), a, b, c, bias, dnnl_util::isReference(pd)};
  });
}

// Copies m to a contiguous buffer of the same element size; returns the
// buffer (kept alive by the caller) and points `m` at it.
bp::Tensor contiguousCopy(Mat& m, ScalarType dtype) {
  bp::Tensor buf = bp::Tensor::empty({m.batch, m.rows, m.cols}, dtype, kCpuDevice);
  const size_t es = bp::elementSize(dtype);
  char* dst = static_cast<char*>(buf.data_ptr());
  for (int64_t b = 0; b < m.batch; ++b)
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c, dst += es)
        std::memcpy(dst, m.data + (b * m.sb + r * m.sr + c * m.sc) * static_cast<int64_t>(es), es);
  m = Mat{static_cast<char*>(buf.data_ptr()), m.batch, m.rows, m.cols, m.rows * m.cols, m.cols, 1};
  return buf;
}

// Copies contiguous `from` back into the strided `to` (same shape).
void copyBack(const Mat& from, const Mat& to, size_t es) {
  for (int64_t b = 0; b < to.batch; ++b)
    for (int64_t r = 0; r < to.rows; ++r)
      for (int64_t c = 0; c < to.cols; ++c)
        std::memcpy(to.data + (b * to.sb + r * to.sr + c * to.sc) * static_cast<int64_t>(es),
                    from.data + (b * from.sb + r * from.sr + c * from.sc) * static_cast<int64_t>(es), es);
}

void execute(const Cached& p, const Mat& A, const Mat& B, const Mat& C, void* bias) {
  const dnnl::engine& eng = dnnl_util::engine();
  dnnl::memory a(p.a, eng, A.data), b(p.b, eng, B.data), c(p.c, eng, C.data);
  ThreadScope threads;
  dnnl::stream& s = dnnl_util::stream();
  if (bias != nullptr) {
    dnnl::memory m(p.bias, eng, bias);
    p.prim.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_BIAS, m}, {DNNL_ARG_DST, c}});
  } else {
    p.prim.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
  }
  s.wait();
}

// C = alpha * A @ B + beta * C (+ the row `bias` of length bias_cols, 1 or
// C.cols, contiguous, when given) with oneDNN in `dtype` (the tensors' dtype).
void gemmDnnl(Mat A, Mat B, Mat C, ScalarType dtype, float alpha, float beta, void* bias = nullptr,
              int64_t bias_cols = 0, Activation activation = Activation::kNone) {
  const dt type = dnnl_util::dataType(dtype);
  const Mat C_user = C;
  bp::Tensor a_buf, b_buf, c_buf;
  if (!gemmLayout(A)) a_buf = contiguousCopy(A, dtype);
  if (!gemmLayout(B)) b_buf = contiguousCopy(B, dtype);
  // A broadcast (stride 0) batch of C would be written by several batches.
  if (!gemmLayout(C) || (C.batch > 1 && C.sb == 0)) c_buf = contiguousCopy(C, dtype);
  const Cached* p = nullptr;
  try {
    p = &primitive(A, B, C, type, alpha, beta, bias_cols, activation);
  } catch (const dnnl::error&) {
    // oneDNN refused the strides outright; dense copies below.
  }
  if ((p == nullptr || p->reference) && !(a_buf.defined() && b_buf.defined() && c_buf.defined())) {
    // GEMM refused this layout (e.g. its batch strides): dense copies.
    if (!a_buf.defined()) a_buf = contiguousCopy(A, dtype);
    if (!b_buf.defined()) b_buf = contiguousCopy(B, dtype);
    if (!c_buf.defined()) c_buf = contiguousCopy(C, dtype);
    p = nullptr;
  }
  if (p == nullptr) p = &primitive(A, B, C, type, alpha, beta, bias_cols, activation);
  execute(*p, A, B, C, bias);
  if (c_buf.defined()) copyBack(C, C_user, bp::elementSize(dtype));
}

// Whether oneDNN has an optimised (non-reference) matmul for `dtype` on this
// CPU, probed once on a dense product.
bool dnnlOptimised(ScalarType dtype) {
  const dt type = dnnl_util::dataType(dtype);
  try {
    const Mat m{nullptr, 1, 64, 64, 64 * 64, 64, 1};
    return !primitive(m, m, m, type, 1.0f, 0.0f).reference;
  } catch (const dnnl::error&) {
    return false;  // no implementation at all
  }
}

// Half/BFloat16 through float32: copies in float, one product, rounded once.
template <class T>
void gemmViaFloat(const Mat& A, const Mat& B, const Mat& C, float alpha, float beta) {
  auto toFloat = [](const Mat& m, bool read) {
    bp::Tensor buf = bp::Tensor::empty({m.batch, m.rows, m.cols}, ScalarType::Float32, kCpuDevice);
    float* d = buf.data_ptr<float>();
    if (read)
      for (int64_t b = 0; b < m.batch; ++b)
        for (int64_t r = 0; r < m.rows; ++r)
          for (int64_t c = 0; c < m.cols; ++c) *d++ = load(at<T>(m, b, r, c));
    return buf;
  };
  auto matFor = [](const bp::Tensor& buf, const Mat& m) {
    return Mat{static_cast<char*>(buf.data_ptr()), m.batch, m.rows, m.cols, m.rows * m.cols, m.cols, 1};
  };
  bp::Tensor a = toFloat(A, true), b = toFloat(B, true), c = toFloat(C, beta != 0.0f);
  const Mat Cf = matFor(c, C);
  gemmDnnl(matFor(a, A), matFor(b, B), Cf, ScalarType::Float32, alpha, beta);
  const float* src = c.data_ptr<const float>();
  for (int64_t bi = 0; bi < C.batch; ++bi)
    for (int64_t r = 0; r < C.rows; ++r)
      for (int64_t col = 0; col < C.cols; ++col) at<T>(C, bi, r, col) = store<T>(*src++);
}

// Whether products in `dtype` run oneDNN in that dtype (float32 always;
// bfloat16/float16 where this CPU has an optimised implementation).
bool dnnlNative(ScalarType dtype) {
  static const bool bf16_native = dnnlOptimised(ScalarType::BFloat16);
  static const bool f16_native = dnnlOptimised(ScalarType::Float16);
  return dtype == ScalarType::Float32 || (dtype == ScalarType::BFloat16 && bf16_native) ||
         (dtype == ScalarType::Float16 && f16_native);
}

// C = alpha * A @ B (+ beta * C when use_beta), any supported dtype.
void gemm(const Mat& A, const Mat& B, const Mat& C, ScalarType dtype, const bp::Scalar& alpha, const bp::Scalar& beta,
          bool use_beta) {
  if (C.batch * C.rows * C.cols == 0) return;
  const bool dnnl_type = dtype == ScalarType::Float32 || dtype == ScalarType::BFloat16 || dtype == ScalarType::Float16;
  if (dnnl_type && A.cols > 0) {
    const float a = static_cast<float>(alpha.toDouble()), b = use_beta ? static_cast<float>(beta.toDouble()) : 0.0f;
    if (dnnlNative(dtype)) return gemmDnnl(A, B, C, dtype, a, b);
    if (dtype == ScalarType::BFloat16) return gemmViaFloat<bp::BFloat16>(A, B, C, a, b);
    return gemmViaFloat<bp::Half>(A, B, C, a, b);
  }
  visitDtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>)
      bp::fail(BP_INVALID_ARGUMENT, "matrix products do not support bool");
    else
      gemmLoop<T>(A, B, C, alpha, beta, use_beta);
  });
}

void checkMatrixArgs(const char* op, std::initializer_list<std::pair<const bp::Tensor*, const char*>> args) {
  for (auto [t, name] : args) {
    checkCpu(op, *t, name);
    checkDtype(op, *t, name, kSupported);
  }
}

bp::Tensor mm_out(const bp::Tensor& self, const bp::Tensor& mat2, const bp::Tensor& out) {
  checkMatrixArgs("bp::mm.out", {{&self, "self"}, {&mat2, "mat2"}, {&out, "out"}});
  gemm(matOf(self), matOf(mat2), matOf(out), out.dtype(), bp::Scalar(int64_t{1}), bp::Scalar(int64_t{0}), false);
  return out;
}

bp::Tensor bmm_out(const bp::Tensor& self, const bp::Tensor& mat2, const bp::Tensor& out) {
  checkMatrixArgs("bp::bmm.out", {{&self, "self"}, {&mat2, "mat2"}, {&out, "out"}});
  gemm(matOf(self), matOf(mat2), matOf(out), out.dtype(), bp::Scalar(int64_t{1}), bp::Scalar(int64_t{0}), false);
  return out;
}

// out = beta * self + alpha * mat1 @ mat2: self (broadcast) is copied into
// out, then the product accumulates onto it with scale beta. beta == 0
// ignores self entirely (NaN in it does not propagate), as PyTorch.
bp::Tensor addmm_out(const bp::Tensor& self, const bp::Tensor& mat1, const bp::Tensor& mat2, const bp::Scalar& beta,
                     const bp::Scalar& alpha, const bp::Tensor& out) {
  checkMatrixArgs("bp::addmm.out", {{&self, "self"}, {&mat1, "mat1"}, {&mat2, "mat2"}, {&out, "out"}});
  const Mat C = matOf(out);
  if (C.rows * C.cols == 0) return out;
  const bool use_beta = beta.toDouble() != 0;
  const bool in_place =
      self.data_ptr() == out.data_ptr() && self.sizes() == out.sizes() && self.strides() == out.strides();
  // linear's form (alpha and beta 1, self a dense row or a scalar): oneDNN
  // adds self as its bias argument in the product's own pass over out,
  // instead of a copy of self into out first. (oneDNN's output scale would
  // scale the bias too, so another alpha takes the general path.)
  const bool row_bias =
      self.dtype() == out.dtype() &&
      (self.numel() == 1 || (self.size(-1) == C.cols && self.stride(-1) == 1 && self.numel() == C.cols));
  if (use_beta && !in_place && beta.toDouble() == 1.0 && alpha.toDouble() == 1.0 && row_bias && mat1.size(1) > 0 &&
      dnnlNative(out.dtype())) {
    gemmDnnl(matOf(mat1), matOf(mat2), C, out.dtype(), 1.0f, 0.0f, self.data_ptr(), self.numel());
    return out;
  }
  if (use_beta && !in_place) {
    // self broadcast to [rows, cols]: missing or size-1 dimensions get stride 0.
    auto strideOf = [&](int64_t d) {  // d: 0 rows, 1 cols
      const int64_t sd = d - (2 - self.dim());
      return sd < 0 || self.size(sd) == 1 ? int64_t{0} : self.stride(sd);
    };
    const Mat S{static_cast<char*>(self.data_ptr()), 1, C.rows, C.cols, 0, strideOf(0), strideOf(1)};
    copyBack(S, C, bp::elementSize(out.dtype()));
  }
  gemm(matOf(mat1), matOf(mat2), C, out.dtype(), alpha, beta, use_beta);
  return out;
}

// --- linear: input @ weight.T + bias

// Copies the strided `src` (strides in elements aligned with `sizes`, 0 for
// a broadcast dimension) into the dense row-major `dst`.
void denseCopy(const char* src, bp::IntList sizes, const std::vector<int64_t>& strides, char* dst, size_t es) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  const size_t dims = sizes.size();
  std::vector<int64_t> index(dims, 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i, dst += es) {
    std::memcpy(dst, src + offset * static_cast<int64_t>(es), es);
    for (size_t d = dims; d-- > 0;) {  // odometer step, last dimension fastest
      offset += strides[d];
      if (++index[d] < sizes[d]) break;
      offset -= strides[d] * sizes[d];
      index[d] = 0;
    }
  }
}

// input ([..., in]) as one [rows, in] matrix through its strides, when its
// leading dimensions collapse into a single row stride (as a view would);
// false when they do not (e.g. a permuted batch).
bool rowsView(const bp::Tensor& x, int64_t rows, Mat& m) {
  const std::optional<int64_t> row_stride = bp_common::collapsedRowStride(x);
  if (!row_stride) return false;
  m = Mat{static_cast<char*>(x.data_ptr()), 1, rows, x.size(-1), 0, *row_stride, x.stride(-1)};
  return true;
}

// The dense row of a bias of `cols` values (1 or cols), copied into `buf`
// when strided; nullptr for none.
void* denseBiasRow(const bp::Tensor* bias, int64_t cols, ScalarType dtype, bp::Tensor& buf) {
  if (bias == nullptr) return nullptr;
  void* data = bias->data_ptr();
  const int64_t stride = bias->dim() == 0 ? 1 : bias->stride(-1);
  if (cols > 1 && stride != 1) {  // oneDNN's bias is a dense row
    buf = bp::Tensor::empty({cols}, dtype, kCpuDevice);
    denseCopy(static_cast<const char*>(data), {cols}, {stride}, static_cast<char*>(buf.data_ptr()),
              bp::elementSize(dtype));
    data = buf.data_ptr();
  }
  return data;
}

// linear(input, weight, bias) (the host's linearMeta has checked shapes,
// dtypes and devices). The product reads weight transposed through its
// strides and input as [rows, in_features]. Where oneDNN computes in the
// dtype and bias is a row (or a scalar), bias is oneDNN's bias argument:
// one pass over the result. Otherwise (float64, integers, float16/bfloat16
// without a native oneDNN, a bias of another shape, in_features == 0) bias
// is broadcast into the result and the product accumulated onto it.
bp::Tensor linear(const bp::Tensor& input, const bp::Tensor& weight, const std::optional<bp::Tensor>& bias_opt) {
  static constexpr const char* kOp = "bp::linear";
  checkMatrixArgs(kOp, {{&input, "input"}, {&weight, "weight"}});
  const bp::Tensor* bias = bias_opt && bias_opt->defined() ? &*bias_opt : nullptr;
  if (bias != nullptr) checkMatrixArgs(kOp, {{bias, "bias"}});
  const ScalarType dtype = input.dtype();
  const size_t es = bp::elementSize(dtype);
  const bool matrix_weight = weight.dim() == 2;
  const bp_common::LinearShape shape = bp_common::linearShape(input, weight);
  const int64_t in = shape.in, n = shape.n, rows = shape.rows;
  bp::Tensor out = bp::Tensor::empty(shape.sizes, dtype, kCpuDevice);
  if (rows * n == 0) return out;

  char* w = static_cast<char*>(weight.data_ptr());
  const Mat B = matrix_weight ? Mat{w, 1, in, n, 0, weight.stride(1), weight.stride(0)}
                              : Mat{w, 1, in, 1, 0, weight.stride(0), 1};
  Mat A;
  bp::Tensor a_buf;
  if (!rowsView(input, rows, A)) {
    a_buf = bp::Tensor::empty(input.sizes(), dtype, kCpuDevice);
    denseCopy(static_cast<const char*>(input.data_ptr()), input.sizes(), input.strides().vec(),
              static_cast<char*>(a_buf.data_ptr()), es);
    A = Mat{static_cast<char*>(a_buf.data_ptr()), 1, rows, in, 0, in, 1};
  }
  const Mat C{static_cast<char*>(out.data_ptr()), 1, rows, n, 0, n, 1};

  const bool row_bias = bias == nullptr || (bias->dim() <= 1 && (bias->numel() == 1 || bias->size(0) == n));
  if (in > 0 && row_bias && dnnlNative(dtype)) {
    const int64_t bias_cols = bias != nullptr ? bias->numel() : 0;
    bp::Tensor bias_buf;
    gemmDnnl(A, B, C, dtype, 1.0f, 0.0f, denseBiasRow(bias, bias_cols, dtype, bias_buf), bias_cols);
    return out;
  }
  if (bias != nullptr) {
    // bias broadcast to out's shape: missing or size-1 dimensions get stride 0.
    const int64_t lead = out.dim() - bias->dim();
    std::vector<int64_t> strides(static_cast<size_t>(out.dim()), 0);
    for (int64_t d = 0; d < bias->dim(); ++d)
      strides[static_cast<size_t>(lead + d)] = bias->size(d) == 1 ? 0 : bias->stride(d);
    denseCopy(static_cast<const char*>(bias->data_ptr()), out.sizes(), strides, static_cast<char*>(out.data_ptr()), es);
  }
  gemm(A, B, C, dtype, bp::Scalar(int64_t{1}), bp::Scalar(int64_t{1}), bias != nullptr);
  return out;
}

// _addmm_activation (Note [Fused activation products] in
// dispatcher/ops/src/linalg.cc; the host's meta kernel has checked shapes,
// dtypes and devices): with use_gelu, where oneDNN computes in the dtype,
// beta and alpha are 1 and self is a row of the product's width (or one
// value), one oneDNN matmul with self as its bias argument and gelu as an
// eltwise post-op, reading mat1 and mat2 through their strides. Any other
// call is declined to the composite (addmm, then relu or gelu): relu
// among them, as oneDNN's relu post-op would turn NaN into 0.
bp::Tensor addmm_activation(const bp::Tensor& self, const bp::Tensor& mat1, const bp::Tensor& mat2,
                            const bp::Scalar& beta, const bp::Scalar& alpha, bool use_gelu) {
  checkMatrixArgs("bp::_addmm_activation", {{&self, "self"}, {&mat1, "mat1"}, {&mat2, "mat2"}});
  const ScalarType dtype = mat1.dtype();
  const int64_t rows = mat1.size(0), in = mat1.size(1), n = mat2.size(1);
  const bool row = self.numel() == 1 || (self.dim() == 1 && self.size(0) == n) ||
                   (self.dim() == 2 && self.size(0) == 1 && self.size(1) == n);
  if (!use_gelu || !row || beta.toDouble() != 1 || alpha.toDouble() != 1 || in == 0 || !dnnlNative(dtype))
    bp::decline("the fused kernel takes gelu, beta = alpha = 1, a row self, and a dtype oneDNN computes in");
  bp::Tensor out = bp::Tensor::empty({rows, n}, dtype, kCpuDevice);
  if (rows * n == 0) return out;
  const Mat A{static_cast<char*>(mat1.data_ptr()), 1, rows, in, 0, mat1.stride(0), mat1.stride(1)};
  const Mat B{static_cast<char*>(mat2.data_ptr()), 1, in, n, 0, mat2.stride(0), mat2.stride(1)};
  const Mat C{static_cast<char*>(out.data_ptr()), 1, rows, n, 0, n, 1};
  bp::Tensor bias_buf;
  void* bias = denseBiasRow(&self, self.numel(), dtype, bias_buf);
  gemmDnnl(A, B, C, dtype, 1.0f, 0.0f, bias, self.numel(), Activation::kGelu);
  return out;
}

}  // namespace

namespace bp_cpu {

void registerLinalgKernels(bp::Library& m) {
  BP_REGISTER_LINALG_KERNELS(m, kCpu);
  m.impl("_addmm_activation", kCpu, &addmm_activation);
}

}  // namespace bp_cpu
