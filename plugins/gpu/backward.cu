// The GPU plugins' kernels for the backward ops that derivative formulas
// call (Note [Backward ops] in dispatcher/ops/src/backward.cc): gelu_backward
// as one elementwise pass, _softmax_backward_data and
// _log_softmax_backward_data as one row kernel (Note [GPU row reductions]),
// embedding_dense_backward as one column-per-thread pass, max_pool2d_backward
// and avg_pool2d_backward as one gather per input element, batch_norm_backward
// as one block per channel.
// The host's meta kernels have checked that the gradient and the other
// operand have one shape, dtype and device; each kernel computes in the
// dtype's opmath type (float for float16, bfloat16 and float32), as the
// forward kernels do. (layer_norm_backward is in norm.cu, beside
// layer_norm.)
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "block_reduce.cuh"
#include "index_check.cuh"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"
#include "pool_args.h"
#if defined(BP_CUDA_CUDNN)
#include "cuda/cudnn_norm_pool.h"
#endif

namespace bp_gpu {
namespace {

// grad * d/dx gelu(x): cdf(x) + x * pdf(x), or the derivative of the tanh form.
template <class T>
struct GeluBackwardFn {
  bool tanh_form;
  BP_GPU_HD T operator()(T grad, T self) const {
    using M = opmath_t<T>;
    const M g = load(grad), x = load(self);
    if (tanh_form) {
      const M beta = M(0.7978845608028654), kappa = M(0.044715);
      const M x2 = x * x;
      const M t = math::tanh(beta * (x + kappa * x2 * x));
      return store<T>(g * (M(0.5) * (M(1) + t) + M(0.5) * x * (M(1) - t * t) * beta * (M(1) + M(3) * kappa * x2)));
    }
    const M cdf = M(0.5) * (M(1) + math::erf(x * M(0.7071067811865476)));
    const M pdf = math::exp(M(-0.5) * x * x) * M(0.3989422804014327);
    return store<T>(g * (cdf + x * pdf));
  }
};

bp::Tensor gelu_backward(const bp::Tensor& grad_output, const bp::Tensor& self, std::string_view approximate) {
  static constexpr const char* kOp = "bp::gelu_backward";
  checkDtype(kOp, grad_output, "grad_output", kFloatDtypes);
  const bp::Device device = callDevice(kOp, grad_output, "grad_output");
  checkOnDevice(kOp, self, "self", device);
  bp::Tensor out = bp::Tensor::empty(grad_output.sizes(), grad_output.dtype(), device);
  if (out.numel() == 0) return out;
  const bool tanh_form = approximate == "tanh";
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloating<T>) {
      launchElementwise(makeOffsetCalculator<3>(kOp, out.sizes(), {&out, &grad_output, &self}), out.numel(),
                        device.index, static_cast<T*>(out.data_ptr()), GeluBackwardFn<T>{tanh_form},
                        Operand<T>{static_cast<const T*>(grad_output.data_ptr()), {}},
                        Operand<T>{static_cast<const T*>(self.data_ptr()), {}});
    }
  });
  return out;
}

// One row of (log_)softmax's input gradient along `dim`: the row's
// sum(grad * y) (softmax) or sum(grad) (log_softmax), then
// (grad - sum) * y or grad - exp(y) * sum. `grad` and `y` are contiguous
// and of one shape, so the rows' offsets in both are the first of each pair.
struct SoftmaxBackwardArgs {
  OffsetCalculator<2> rows;  // {grad and y offset, out offset} of row r's first element
  int64_t num_rows, n, in_stride, out_stride;
  bool log, slots_fastest;
};

template <class T>
__global__ void softmaxBackwardKernel(SoftmaxBackwardArgs args, const T* grad, const T* y, T* out) {
  using V = opmath_t<T>;
  __shared__ V shared[kReduceThreads];
  const RowLane t = rowLane(args.slots_fastest);
  for (int64_t first = firstRow(t); first < args.num_rows; first += rowStep(t)) {
    const int64_t r = first + t.slot;
    const bool valid = r < args.num_rows;
    const Offsets<2> at = valid ? args.rows.get(r) : Offsets<2>{};
    const T* g = grad + at.v[0];
    const T* yr = y + at.v[0];
    V sum = 0;
    if (valid) {
      for (int64_t j = t.lane; j < args.n; j += t.lanes) {
        const int64_t k = j * args.in_stride;
        sum += args.log ? load(g[k]) : load(g[k]) * load(yr[k]);
      }
    }
    sum = blockCombine(sum, shared, t, SumOf<V>{});
    if (!valid) continue;
    T* o = out + at.v[1];
    for (int64_t j = t.lane; j < args.n; j += t.lanes) {
      const int64_t k = j * args.in_stride;
      const V gv = load(g[k]), yv = load(yr[k]);
      o[j * args.out_stride] = store<T>(args.log ? gv - math::exp(yv) * sum : (gv - sum) * yv);
    }
  }
}

bp::Tensor softmaxBackward(const char* op, bool log, const bp::Tensor& grad_output, const bp::Tensor& output,
                           int64_t dim, ScalarType input_dtype) {
  checkDtype(op, grad_output, "grad_output", kFloatDtypes);
  const bp::Device device = callDevice(op, grad_output, "grad_output");
  checkOnDevice(op, output, "output", device);
  const bp::Tensor& g = grad_output;
  const bp::Tensor& y = output;
  // Both dense, so that one offset addresses an element of either.
  bp::Tensor g_holder, y_holder;
  const bp::Tensor& gd = dense(op, g, g.dtype(), g_holder);
  const bp::Tensor& yd = dense(op, y, y.dtype(), y_holder);
  bp::Tensor out = bp::Tensor::empty(g.sizes(), g.dtype(), device);
  if (out.numel() > 0) {
    const int64_t nd = g.dim();
    const int64_t d = nd == 0 ? 0 : (dim < 0 ? dim + nd : dim);
    const LinesAlong l = linesAlong(op, gd, out, d);
    SoftmaxBackwardArgs args{l.lines, l.count, l.len, l.in_step, l.out_step, log, false};
    const RowLayout layout = rowLayoutFor(args.n, args.in_stride == 1, args.rows.strides[0][0], args.rows.sizes[0]);
    args.slots_fastest = layout.slots_fastest;
    const int lanes = layout.lanes;
    visitDtype(out.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kIsFloating<T>) {
        launchRows(&softmaxBackwardKernel<T>, args.num_rows, lanes, args.slots_fastest, 0, device.index, args,
                   static_cast<const T*>(gd.data_ptr()), static_cast<const T*>(yd.data_ptr()),
                   static_cast<T*>(out.data_ptr()));
      }
    });
  }
  // The gradient in the forward's input dtype (a softmax over dtype= differentiates back to it).
  if (input_dtype == out.dtype()) return out;
  bp::Tensor converted = bp::Tensor::empty(out.sizes(), input_dtype, device);
  copyCast(op, converted, out);
  return converted;
}

bp::Tensor softmax_backward_data(const bp::Tensor& grad_output, const bp::Tensor& output, int64_t dim,
                                 ScalarType input_dtype) {
  return softmaxBackward("bp::_softmax_backward_data", false, grad_output, output, dim, input_dtype);
}
bp::Tensor log_softmax_backward_data(const bp::Tensor& grad_output, const bp::Tensor& output, int64_t dim,
                                     ScalarType input_dtype) {
  return softmaxBackward("bp::_log_softmax_backward_data", true, grad_output, output, dim, input_dtype);
}

// embedding's weight gradient: row i of the result is the sum of
// grad_output's rows whose index is i (none for padding_idx), each divided
// by how often i occurs with scale_grad_by_freq. One thread owns column j
// of every row and adds the gradient's rows in order, so each sum is made
// in the CPU plugin's order: deterministic, with no float atomics (the
// composite's scatter_add adds with atomics, in no fixed order). The counts
// are integer atomics first. An out-of-range index is recorded and its row
// skipped (Note [Index checks on the device]).
BP_GPU_INDEX_SITE(kEmbeddingBackwardSite, "bp::embedding_dense_backward", "the weight");

template <class I>
__global__ void countIndicesKernel(const I* index, int64_t rows, int32_t* counts, IndexCheck check) {
  gridStride(rows, [&](int64_t r) {
    if (indexInRange(check, index[r], r)) atomicAdd(counts + static_cast<int64_t>(index[r]), 1);
  });
}

template <class T, class I>
__global__ void embeddingBackwardKernel(const T* grad, const I* index, T* out, int64_t rows, int64_t dim,
                                        int64_t padding_idx, const int32_t* counts, IndexCheck check) {
  gridStride(dim, [&](int64_t j) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = static_cast<int64_t>(index[r]);
      if (!indexInRange(check, i, r) || i == padding_idx) continue;
      T add = grad[r * dim + j];
      if (counts != nullptr) add *= T(1) / static_cast<T>(counts[i]);  // as the CPU plugin scales
      out[i * dim + j] += add;
    }
  });
}

bp::Tensor embedding_dense_backward(const bp::Tensor& grad_output, const bp::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  static constexpr const char* kOp = "bp::embedding_dense_backward";
  checkDtype(kOp, grad_output, "grad_output", {ScalarType::Float32, ScalarType::Float64});
  checkDtype(kOp, indices, "indices", {ScalarType::Int32, ScalarType::Int64});
  const bp::Device device = callDevice(kOp, grad_output, "grad_output");
  checkOnDevice(kOp, indices, "indices", device);
  bp::Tensor g_holder, i_holder;
  const bp::Tensor& g = dense(kOp, grad_output, grad_output.dtype(), g_holder);
  const bp::Tensor& idx = dense(kOp, indices, indices.dtype(), i_holder);
  const int64_t dim = g.dim() == 0 ? 1 : g.size(g.dim() - 1);
  const int64_t rows = idx.numel();
  bp::Tensor out = bp::Tensor::empty({num_weights, dim}, g.dtype(), device);
  if (out.numel() == 0) return out;
  {
    DeviceGuard guard(device.index);
    check(gpuMemsetAsync(out.data_ptr(), 0, static_cast<size_t>(out.numel()) * out.element_size(),
                         currentStream(device.index)),
          kOp);
  }
  if (rows == 0) return out;
  auto run = [&](auto index_tag) {
    using I = decltype(index_tag);
    // The forward checked these indices; a direct call gets the CPU's
    // error, at the next synchronization.
    const IndexCheck in_range = indexCheck(device.index, kEmbeddingBackwardSite, num_weights, 0);
    const I* ip = static_cast<const I*>(idx.data_ptr());
    bp::Tensor counts;
    if (scale_grad_by_freq) {
      counts = bp::Tensor::empty({num_weights}, ScalarType::Int32, device);
      {
        DeviceGuard guard(device.index);
        check(gpuMemsetAsync(counts.data_ptr(), 0, static_cast<size_t>(num_weights) * sizeof(int32_t),
                             currentStream(device.index)),
              kOp);
      }
      launchElements(&countIndicesKernel<I>, rows, 1, device.index, ip, rows, static_cast<int32_t*>(counts.data_ptr()),
                     in_range);
    }
    const int32_t* cp = counts.defined() ? static_cast<const int32_t*>(counts.data_ptr()) : nullptr;
    if (g.dtype() == ScalarType::Float32)
      launchElements(&embeddingBackwardKernel<float, I>, dim, 1, device.index, static_cast<const float*>(g.data_ptr()),
                     ip, static_cast<float*>(out.data_ptr()), rows, dim, padding_idx, cp, in_range);
    else
      launchElements(&embeddingBackwardKernel<double, I>, dim, 1, device.index,
                     static_cast<const double*>(g.data_ptr()), ip, static_cast<double*>(out.data_ptr()), rows, dim,
                     padding_idx, cp, in_range);
  };
  if (idx.dtype() == ScalarType::Int32)
    run(int32_t{});
  else
    run(int64_t{});
  return out;
}

// --- max_pool2d_backward and avg_pool2d_backward (Note [Window op
// gradients] in the dispatcher's backward_nn.cc). One thread per input
// element gathers the gradient of every window that holds it, so no two
// threads write one element and the sums need no atomics: max_pool2d's
// windows whose pick (found again, as the CPU plugin's loop finds it: the
// first greater than every earlier one, or the first NaN) is this element,
// avg_pool2d's each with its share (the window's gradient over the
// forward's divisor).
PoolArgs poolBackwardArgs(const bp::Tensor& self, const bp::Tensor& grad, bp::IntList kernel, bp::IntList stride,
                          bp::IntList padding, bp::IntList dilation) {
  return poolArgs(self, grad.size(-2), grad.size(-1), kernel, stride, padding, dilation);
}

// The output positions [lo, hi] along one dim whose window may hold input
// position i: o * s - p + k * d == i for some k in [0, kernel).
BP_GPU_HD inline void windowsHolding(int64_t i, int64_t p, int64_t s, int64_t kernel, int64_t d, int64_t outs,
                                     int64_t* lo, int64_t* hi) {
  const int64_t first = i + p - (kernel - 1) * d;  // o * s >= first
  *lo = first <= 0 ? 0 : (first + s - 1) / s;
  *hi = (i + p) / s < outs - 1 ? (i + p) / s : outs - 1;
}

template <class T>
__global__ void maxPoolBackwardKernel(PoolArgs a, int64_t n, const T* self, const T* grad, T* out) {
  gridStride(n, [&](int64_t e) {
    const int64_t plane = e / (a.h * a.w), iy = e / a.w % a.h, ix = e % a.w;
    const T* in = self + (plane / a.channels) * a.stride_n + (plane % a.channels) * a.stride_c;
    const T* g = grad + plane * a.oh * a.ow;
    int64_t oy0, oy1, ox0, ox1;
    windowsHolding(iy, a.ph, a.sh, a.kh, a.dh, a.oh, &oy0, &oy1);
    windowsHolding(ix, a.pw, a.sw, a.kw, a.dw, a.ow, &ox0, &ox1);
    using M = opmath_t<T>;
    M sum = 0;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      if ((iy + a.ph - oy * a.sh) % a.dh != 0) continue;
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        if ((ix + a.pw - ox * a.sw) % a.dw != 0) continue;
        // This window's pick, in the forward's order.
        int64_t at_y, at_x;
        windowMax(a, in, oy, ox, &at_y, &at_x);
        if (at_y == iy && at_x == ix) sum += load(g[oy * a.ow + ox]);
      }
    }
    out[e] = store<T>(sum);
  });
}

template <class T>
__global__ void avgPoolBackwardKernel(PoolArgs a, int64_t n, const T* grad, T* out) {
  gridStride(n, [&](int64_t e) {
    const int64_t plane = e / (a.h * a.w), iy = e / a.w % a.h, ix = e % a.w;
    const T* g = grad + plane * a.oh * a.ow;
    int64_t oy0, oy1, ox0, ox1;
    windowsHolding(iy, a.ph, a.sh, a.kh, 1, a.oh, &oy0, &oy1);
    windowsHolding(ix, a.pw, a.sw, a.kw, 1, a.ow, &ox0, &ox1);
    using M = opmath_t<T>;
    M sum = 0;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      int64_t y0 = oy * a.sh - a.ph;
      int64_t y1 = y0 + a.kh < a.h + a.ph ? y0 + a.kh : a.h + a.ph;
      const int64_t padded_h = y1 - y0;
      y0 = y0 > 0 ? y0 : 0;
      y1 = y1 < a.h ? y1 : a.h;
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        int64_t x0 = ox * a.sw - a.pw;
        int64_t x1 = x0 + a.kw < a.w + a.pw ? x0 + a.kw : a.w + a.pw;
        const int64_t padded_w = x1 - x0;
        x0 = x0 > 0 ? x0 : 0;
        x1 = x1 < a.w ? x1 : a.w;
        const int64_t divisor = a.divisor != 0        ? a.divisor
                                : a.count_include_pad ? padded_h * padded_w
                                                      : (y1 - y0) * (x1 - x0);
        if (divisor != 0) sum += load(g[oy * a.ow + ox]) / M(divisor);
      }
    }
    out[e] = store<T>(sum);
  });
}

template <bool kMax>
bp::Tensor poolBackward(const char* op, const bp::Tensor& grad_output, const bp::Tensor& self, const PoolArgs& args) {
  checkDtype(op, self, "self", {ScalarType::Float32, ScalarType::Float64});
  const bp::Device device = callDevice(op, grad_output, "grad_output");
  checkOnDevice(op, self, "self", device);
  bp::Tensor g_holder;
  const bp::Tensor& g = dense(op, grad_output, grad_output.dtype(), g_holder);
  bp::Tensor out = bp::Tensor::empty(self.sizes(), self.dtype(), device);
  const int64_t n = out.numel();
  if (n == 0) return out;
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if constexpr (kMax)
        launchElements(&maxPoolBackwardKernel<T>, n, 1, device.index, args, n, static_cast<const T*>(self.data_ptr()),
                       static_cast<const T*>(g.data_ptr()), static_cast<T*>(out.data_ptr()));
      else
        launchElements(&avgPoolBackwardKernel<T>, n, 1, device.index, args, n, static_cast<const T*>(g.data_ptr()),
                       static_cast<T*>(out.data_ptr()));
    }
  });
  return out;
}

bp::Tensor max_pool2d_backward(const bp::Tensor& grad_output, const bp::Tensor& self, bp::IntList kernel_size,
                               bp::IntList stride, bp::IntList padding, bp::IntList dilation, bool /*ceil_mode*/) {
  // ceil_mode is in grad_output's size, which the host's rule checked.
  return poolBackward<true>("bp::max_pool2d_backward", grad_output, self,
                            poolBackwardArgs(self, grad_output, kernel_size, stride, padding, dilation));
}

bp::Tensor avg_pool2d_backward(const bp::Tensor& grad_output, const bp::Tensor& self, bp::IntList kernel_size,
                               bp::IntList stride, bp::IntList padding, bool /*ceil_mode*/, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
  PoolArgs args = poolBackwardArgs(self, grad_output, kernel_size, stride, padding, {});
  args.count_include_pad = count_include_pad;
  args.divisor = divisor_override ? *divisor_override : 0;
  return poolBackward<false>("bp::avg_pool2d_backward", grad_output, self, args);
}

// --- batch_norm_backward (Note [batch_norm's backward] in the dispatcher's
// backward_nn.cc): one block per channel reduces over the batch and every
// spatial position (lanes stride through the channel's n * spatial
// elements): the statistics (two passes, or the running ones), sum(grad)
// and sum(grad * xhat), then writes the input's gradient. Block sums in a
// fixed tree: deterministic, no atomics.
struct BatchNormBackwardArgs {
  int64_t n, channels, spatial;
  double eps;
  bool batch_stats;
};

template <class T>
__global__ void batchNormBackwardKernel(BatchNormBackwardArgs a, const T* grad, const T* x, const T* weight,
                                        const T* running_mean, const T* running_var, T* gi, T* gw, T* gb) {
  using V = opmath_t<T>;
  __shared__ V shared[kReduceThreads];
  const RowLane t = rowLane(false);
  const int64_t m = a.n * a.spatial;
  for (int64_t c = firstRow(t); c < a.channels; c += rowStep(t)) {
    auto at = [&](int64_t k) { return (k / a.spatial * a.channels + c) * a.spatial + k % a.spatial; };
    V mean = 0, var = 0;
    if (a.batch_stats) {
      V s = 0;
      for (int64_t k = t.lane; k < m; k += t.lanes) s += load(x[at(k)]);
      mean = m > 0 ? blockCombine(s, shared, t, SumOf<V>{}) / static_cast<V>(m) : V(0);
      V q = 0;
      for (int64_t k = t.lane; k < m; k += t.lanes) {
        const V d = load(x[at(k)]) - mean;
        q += d * d;
      }
      var = m > 0 ? blockCombine(q, shared, t, SumOf<V>{}) / static_cast<V>(m) : V(0);
    } else {
      mean = load(running_mean[c]);
      var = load(running_var[c]);
    }
    const V rstd = V(1) / math::sqrt(var + static_cast<V>(a.eps));
    V sg = 0, sgx = 0;
    for (int64_t k = t.lane; k < m; k += t.lanes) {
      const V gv = load(grad[at(k)]);
      sg += gv;
      sgx += gv * (load(x[at(k)]) - mean) * rstd;
    }
    sg = blockCombine(sg, shared, t, SumOf<V>{});
    sgx = blockCombine(sgx, shared, t, SumOf<V>{});
    if (t.lane == 0) {
      if (gw != nullptr) gw[c] = store<T>(sgx);
      if (gb != nullptr) gb[c] = store<T>(sg);
    }
    if (gi == nullptr) continue;
    const V scale = (weight != nullptr ? load(weight[c]) : V(1)) * rstd;
    const V mean_g = m > 0 ? sg / static_cast<V>(m) : V(0), mean_gx = m > 0 ? sgx / static_cast<V>(m) : V(0);
    for (int64_t k = t.lane; k < m; k += t.lanes) {
      const V gv = load(grad[at(k)]);
      gi[at(k)] = a.batch_stats ? store<T>(scale * (gv - mean_g - (load(x[at(k)]) - mean) * rstd * mean_gx))
                                : store<T>(gv * scale);
    }
  }
}

std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> batch_norm_backward(
    const bp::Tensor& grad_output, const bp::Tensor& input, const std::optional<bp::Tensor>& weight,
    const std::optional<bp::Tensor>& running_mean, const std::optional<bp::Tensor>& running_var, bool training,
    double eps, bp::BoolList output_mask) {
  static constexpr const char* kOp = "bp::batch_norm_backward";
  checkDtype(kOp, input, "input", {ScalarType::Float32, ScalarType::Float64});
  BP_PLUGIN_CHECK(output_mask.size() == 3, kOp, ": output_mask must have 3 values (input, weight, bias), got ",
                  output_mask.size());
  const bp::Device device = callDevice(kOp, input, "input");
  checkOnDevice(kOp, grad_output, "grad_output", device);
  const ScalarType dtype = input.dtype();
  // Dense operands, the per-channel ones in the input's dtype.
  bp::Tensor holders[6];
  const bp::Tensor& g = dense(kOp, grad_output, dtype, holders[0]);
  const bp::Tensor& x = dense(kOp, input, dtype, holders[1]);
  auto perChannel = [&](const std::optional<bp::Tensor>& t, const char* name, bp::Tensor& holder) -> const void* {
    const bp::Tensor* given = optionalOnDevice(kOp, t, name, device);
    return given != nullptr ? dense(kOp, *given, dtype, holder).data_ptr() : nullptr;
  };
  const void* w = perChannel(weight, "weight", holders[2]);
  const void* rm = perChannel(running_mean, "running_mean", holders[3]);
  const void* rv = perChannel(running_var, "running_var", holders[4]);
  const int64_t n = input.size(0), channels = input.size(1);
  const int64_t spatial = n * channels == 0 ? 0 : input.numel() / (n * channels);
  bp::Tensor gi, gw, gb;
  if (output_mask[0]) gi = bp::Tensor::empty(input.sizes(), dtype, device);
  if (output_mask[1]) gw = bp::Tensor::empty({channels}, dtype, device);
  if (output_mask[2]) gb = bp::Tensor::empty({channels}, dtype, device);
  const BatchNormBackwardArgs args{n, channels, spatial, eps, training || rm == nullptr || rv == nullptr};
  bool done = false;
#if defined(BP_CUDA_CUDNN)
  // Note [cuDNN batch norm and pooling] (plugins/cuda/cudnn_norm_pool.cu).
  done = args.batch_stats && cudnnBatchNormBackward(g, x, w, eps, gi, gw, gb);
#endif
  if (!done)
    visitDtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        auto ptr = [](const bp::Tensor& t) { return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr; };
        launchRows(&batchNormBackwardKernel<T>, channels, kReduceThreads, false, 0, device.index, args,
                   static_cast<const T*>(g.data_ptr()), static_cast<const T*>(x.data_ptr()), static_cast<const T*>(w),
                   static_cast<const T*>(rm), static_cast<const T*>(rv), ptr(gi), ptr(gw), ptr(gb));
      }
    });
  // The parameters' gradients in the weight's dtype (the input's without one).
  const ScalarType param_dtype = weight ? weight->dtype() : dtype;
  auto inParamDtype = [&](const bp::Tensor& t) {
    if (!t.defined() || param_dtype == dtype) return t;
    bp::Tensor converted = bp::Tensor::empty(t.sizes(), param_dtype, device);
    copyCast(kOp, converted, t);
    return converted;
  };
  return {std::move(gi), inParamDtype(gw), inParamDtype(gb)};
}

}  // namespace

void registerBackwardKernels(bp::Library& m, int32_t type) {
  m.impl("gelu_backward", type, &gelu_backward);
  m.impl("_softmax_backward_data", type, &softmax_backward_data);
  m.impl("_log_softmax_backward_data", type, &log_softmax_backward_data);
  // A declared set covers every tensor argument (Note [Declared dtypes]):
  // the gradient's float32/float64 and the indices' int32/int64; float16
  // and bfloat16 gradients take the composite.
  m.impl("embedding_dense_backward", type, &embedding_dense_backward,
         bp::Dtypes{ScalarType::Float32, ScalarType::Float64, ScalarType::Int32, ScalarType::Int64});
  const bp::Dtypes kFloat32And64{ScalarType::Float32, ScalarType::Float64};
  m.impl("max_pool2d_backward", type, &max_pool2d_backward, kFloat32And64);
  m.impl("avg_pool2d_backward", type, &avg_pool2d_backward, kFloat32And64);
  m.impl("batch_norm_backward", type, &batch_norm_backward, kFloat32And64);
}

}  // namespace bp_gpu
