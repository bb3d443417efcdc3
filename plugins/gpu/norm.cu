// layer_norm and batch_norm on the GPU plugins (batch_norm: see its
// kernel below). layer_norm.out (the host's meta kernel
// has checked normalized_shape, the parameters' shapes and dtypes, and eps).
// Each row (the trailing normalized_shape dims collapsed) is one row of
// Note [GPU row reductions]: its mean, then the mean of squared deviations
// from it (two passes over the row less its first element: accurate for
// rows with a large mean), then
// (x - mean) / sqrt(var + eps) * weight + bias. A row that fits in shared
// memory is read from global memory once and the passes run over the
// cached copy (Note [One-pass rows] in block_reduce.cuh). Arithmetic in the input's
// opmath type (float for float32 and narrower, double for float64); the
// parameters are read in that type whatever their own floating dtype (a
// bfloat16 input may come with float32 parameters), as the CPU plugin does.
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "block_reduce.cuh"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"
#if defined(BP_CUDA_CUDNN)
#include "cuda/cudnn_norm_pool.h"
#endif

namespace bp_gpu {
namespace {

// x and y are [rows, m], contiguous; weight and bias [m] or null. kCached:
// the block's rows are read once into dynamic shared memory and every pass
// reads them there (Note [One-pass rows] in block_reduce.cuh).
template <class T, bool kCached>
__global__ void layerNormKernel(const T* x, T* y, const opmath_t<T>* weight, const opmath_t<T>* bias, int64_t rows,
                                int64_t m, double eps) {
  using V = opmath_t<T>;
  __shared__ V shared[kReduceThreads];
  const RowLane t = rowLane(false);
  V* cache = kCached ? dynamicShared<V>() + static_cast<int64_t>(t.slot) * m : nullptr;
  for (int64_t first = firstRow(t); first < rows; first += rowStep(t)) {
    const int64_t r = first + t.slot;
    const bool valid = r < rows;
    const T* xr = x + (valid ? r * m : 0);
    // Element j of the row less the row's first element, from the cache
    // once the first pass has filled it. The shift keeps a large common
    // offset out of the sums (x - shift is exact for values within a factor
    // 2 of each other): in float a row of 1000 + 0.01 * u would otherwise
    // lose its spread to the rounding of the mean.
    const V shift = valid ? load(xr[0]) : V(0);
    auto element = [&](int64_t j) -> V { return kCached ? cache[j] : load(xr[j]) - shift; };
    V sum = 0;
    if (valid) {
      for (int64_t j = t.lane; j < m; j += t.lanes) {
        const V v = load(xr[j]) - shift;
        if constexpr (kCached) cache[j] = v;
        sum += v;
      }
    }
    const V mean = blockCombine(sum, shared, t, SumOf<V>{}) / static_cast<V>(m);  // the mean less the shift
    V squares = 0;
    if (valid) {
      for (int64_t j = t.lane; j < m; j += t.lanes) {
        const V d = element(j) - mean;
        squares += d * d;
      }
    }
    const V var = blockCombine(squares, shared, t, SumOf<V>{}) / static_cast<V>(m);
    if (!valid) continue;
    const V rstd = V(1) / math::sqrt(var + static_cast<V>(eps));
    T* yr = y + r * m;
    for (int64_t j = t.lane; j < m; j += t.lanes) {
      V v = (element(j) - mean) * rstd;
      if (weight != nullptr) v *= weight[j];
      if (bias != nullptr) v += bias[j];
      yr[j] = store<T>(v);
    }
  }
}

// layer_norm.out: `result` has the input's shape, dtype and device (the
// host's meta); a strided one gets the rows through a contiguous temporary.
bp::Tensor layer_norm_out(const bp::Tensor& input, bp::IntList normalized_shape,
                          const std::optional<bp::Tensor>& weight, const std::optional<bp::Tensor>& bias, double eps,
                          bool /*cudnn_enable*/, const bp::Tensor& result) {
  static constexpr const char* kOp = "bp::layer_norm.out";
  checkDtype(kOp, input, "input", kFloatDtypes);
  const bp::Device device = input.device();
  // The parameters in the input's opmath dtype.
  const ScalarType param_dtype = input.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  bp::Tensor holders[3];
  const bp::Tensor* params[2] = {nullptr, nullptr};
  const std::optional<bp::Tensor>* given[2] = {&weight, &bias};
  const char* names[2] = {"weight", "bias"};
  for (int i = 0; i < 2; ++i) {
    if (!*given[i] || !(*given[i])->defined()) continue;
    checkOnDevice(kOp, **given[i], names[i], device);
    checkDtype(kOp, **given[i], names[i], kFloatDtypes);
    params[i] = &dense(kOp, **given[i], param_dtype, holders[i]);
  }
  int64_t m = 1;
  for (int64_t s : normalized_shape) m *= s;
  const int64_t rows = m == 0 ? 0 : input.numel() / m;
  checkOnDevice(kOp, result, "out", device);
  if (rows == 0) return result;
  const bp::Tensor out = result.is_contiguous() ? result : bp::Tensor::empty(input.sizes(), input.dtype(), device);
  const bp::Tensor& x = dense(kOp, input, input.dtype(), holders[2]);
  visitDtype(input.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloating<T>) {
      using V = opmath_t<T>;
      auto data = [](const bp::Tensor* p) { return p == nullptr ? nullptr : static_cast<const V*>(p->data_ptr()); };
      const int lanes = lanesFor(m);
      const size_t cache = rowCacheBytes(m, lanes, sizeof(V), limits(device.index).shared_mem_per_block);
      launchRows(cache > 0 ? &layerNormKernel<T, true> : &layerNormKernel<T, false>, rows, lanes, false, cache,
                 device.index, static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), data(params[0]),
                 data(params[1]), rows, m, eps);
    }
  });
  if (!result.is_contiguous()) copyCast(kOp, result, out);
  return result;
}

// a * b rounded, never fused with the add or subtract that reads it: nvcc
// and hipcc contract `a * b - c` into one fma, which skips the product's
// rounding, so a value computed twice (a sum's term, then the term itself)
// would differ by that rounding. In layer_norm_backward a row of one element
// has g - mean(g) = 0 exactly only if both g are the same rounded product;
// rstd (1 / sqrt(eps) there) scales any difference up. The simulator's host
// compiler does not contract these.
template <class V>
__device__ inline V roundedProduct(V a, V b) {
#if defined(BP_GPU_SIM)
  return a * b;
#else
  if constexpr (std::is_same_v<V, double>) {
    return __dmul_rn(a, b);
  } else {
    return __fmul_rn(a, b);
  }
#endif
}

// layer_norm_backward's rows (Note [Backward ops] in dispatcher/ops/src/
// backward.cc): the forward's mean and variance passes over the row less its
// first element, then the sums of g = grad * weight and g * xhat, then the
// input's gradient rstd * (g - mean(g) - xhat * mean(g * xhat)). Each row's
// (shift, mean, rstd) goes to `stats` for the parameters' kernel.
template <class T, bool kCached>
__global__ void layerNormBackwardKernel(const T* grad, const T* x, T* grad_input, const opmath_t<T>* weight,
                                        opmath_t<T>* stats, int64_t rows, int64_t m, double eps) {
  using V = opmath_t<T>;
  __shared__ V shared[kReduceThreads];
  const RowLane t = rowLane(false);
  V* cache = kCached ? dynamicShared<V>() + static_cast<int64_t>(t.slot) * m : nullptr;
  for (int64_t first = firstRow(t); first < rows; first += rowStep(t)) {
    const int64_t r = first + t.slot;
    const bool valid = r < rows;
    const T* xr = x + (valid ? r * m : 0);
    const T* gr = grad + (valid ? r * m : 0);
    const V shift = valid ? load(xr[0]) : V(0);
    auto element = [&](int64_t j) -> V { return kCached ? cache[j] : load(xr[j]) - shift; };
    auto scaled = [&](int64_t j) -> V {
      return weight != nullptr ? roundedProduct(load(gr[j]), weight[j]) : load(gr[j]);
    };
    V sum = 0;
    if (valid) {
      for (int64_t j = t.lane; j < m; j += t.lanes) {
        const V v = load(xr[j]) - shift;
        if constexpr (kCached) cache[j] = v;
        sum += v;
      }
    }
    const V mean = blockCombine(sum, shared, t, SumOf<V>{}) / static_cast<V>(m);
    V squares = 0;
    if (valid) {
      for (int64_t j = t.lane; j < m; j += t.lanes) {
        const V d = element(j) - mean;
        squares += d * d;
      }
    }
    const V var = blockCombine(squares, shared, t, SumOf<V>{}) / static_cast<V>(m);
    const V rstd = V(1) / math::sqrt(var + static_cast<V>(eps));
    V sum_g = 0, sum_gx = 0;
    if (valid) {
      for (int64_t j = t.lane; j < m; j += t.lanes) {
        const V g = scaled(j);
        sum_g += g;
        sum_gx += g * (element(j) - mean) * rstd;
      }
    }
    const V mean_g = blockCombine(sum_g, shared, t, SumOf<V>{}) / static_cast<V>(m);
    const V mean_gx = blockCombine(sum_gx, shared, t, SumOf<V>{}) / static_cast<V>(m);
    if (!valid) continue;
    if (t.lane == 0) {
      stats[3 * r] = shift;
      stats[3 * r + 1] = mean;
      stats[3 * r + 2] = rstd;
    }
    T* out = grad_input + r * m;
    for (int64_t j = t.lane; j < m; j += t.lanes)
      out[j] = store<T>(rstd * (scaled(j) - mean_g - (element(j) - mean) * rstd * mean_gx));
  }
}

// The parameters' gradients, a sum over the rows for each of the m columns:
// sum(grad * xhat) and sum(grad), with the rows' statistics from
// layerNormBackwardKernel. Columns vary fastest across a warp (Note [GPU
// row reductions]), so each read of a row's neighbouring columns coalesces.
// Few columns of many rows are split as a reduction's are (Note [Split
// reductions]): block (x, y) sums rows [y * chunk, (y + 1) * chunk) into
// part y of grad_weight and grad_bias ([gridDim.y, m] each), and
// layerNormParamCombineKernel adds the parts in order. BERT-base's 768
// columns of 1024 rows: 24 blocks with 128 reads per lane unsplit, 384 with
// 8 split, on an H100's 132 multiprocessors.
template <class T>
__global__ void layerNormParamGradKernel(const T* grad, const T* x, const opmath_t<T>* stats, opmath_t<T>* grad_weight,
                                         opmath_t<T>* grad_bias, int64_t rows, int64_t m, int64_t chunk) {
  using V = opmath_t<T>;
  __shared__ V shared[kReduceThreads];
  const RowLane t = rowLane(true);
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t end = rows - begin < chunk ? rows : begin + chunk;
  grad_weight += static_cast<int64_t>(blockIdx.y) * m;
  grad_bias += static_cast<int64_t>(blockIdx.y) * m;
  for (int64_t first = firstRow(t); first < m; first += rowStep(t)) {
    const int64_t j = first + t.slot;
    const bool valid = j < m;
    V sum_w = 0, sum_b = 0;
    if (valid) {
      for (int64_t r = begin + t.lane; r < end; r += t.lanes) {
        const V g = load(grad[r * m + j]);
        sum_w += g * ((load(x[r * m + j]) - stats[3 * r]) - stats[3 * r + 1]) * stats[3 * r + 2];
        sum_b += g;
      }
    }
    sum_w = blockCombine(sum_w, shared, t, SumOf<V>{});
    sum_b = blockCombine(sum_b, shared, t, SumOf<V>{});
    if (valid && t.lane == 0) {
      grad_weight[j] = sum_w;
      grad_bias[j] = sum_b;
    }
  }
}

// The split parameters' sums: column j of each of the two [splits, m]
// parts, added in part order (deterministic), one thread per column.
template <class V>
__global__ void layerNormParamCombineKernel(const V* parts, V* grad_weight, V* grad_bias, int64_t splits, int64_t m) {
  gridStride(m, [&](int64_t j) {
    V sum_w = 0, sum_b = 0;
    for (int64_t s = 0; s < splits; ++s) {
      sum_w += parts[s * m + j];
      sum_b += parts[(splits + s) * m + j];
    }
    grad_weight[j] = sum_w;
    grad_bias[j] = sum_b;
  });
}

std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> layer_norm_backward(const bp::Tensor& grad_output,
                                                                   const bp::Tensor& input,
                                                                   bp::IntList normalized_shape,
                                                                   const std::optional<bp::Tensor>& weight,
                                                                   double eps) {
  static constexpr const char* kOp = "bp::layer_norm_backward";
  checkDtype(kOp, input, "input", kFloatDtypes);
  checkDtype(kOp, grad_output, "grad_output", {input.dtype()});
  const bp::Device device = input.device();
  checkOnDevice(kOp, grad_output, "grad_output", device);
  const ScalarType opmath_dtype = input.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  bp::Tensor holders[3];
  const bp::Tensor* w = nullptr;
  if (weight && weight->defined()) {
    checkOnDevice(kOp, *weight, "weight", device);
    checkDtype(kOp, *weight, "weight", kFloatDtypes);
    w = &dense(kOp, *weight, opmath_dtype, holders[0]);
  }
  int64_t m = 1;
  for (int64_t s : normalized_shape) m *= s;
  const int64_t rows = m == 0 ? 0 : input.numel() / m;
  bp::Tensor grad_input = bp::Tensor::empty(input.sizes(), input.dtype(), device);
  bp::Tensor sums[2] = {bp::Tensor::empty(normalized_shape, opmath_dtype, device),
                        bp::Tensor::empty(normalized_shape, opmath_dtype, device)};
  // With no rows the parameters' kernel still runs: it writes zero sums.
  if (m > 0) {
    const bp::Tensor& x = dense(kOp, input, input.dtype(), holders[1]);
    const bp::Tensor& g = dense(kOp, grad_output, input.dtype(), holders[2]);
    const bp::Tensor stats = bp::Tensor::empty({3 * rows}, opmath_dtype, device);
    visitDtype(input.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kIsFloating<T>) {
        using V = opmath_t<T>;
        const int lanes = lanesFor(m);
        const size_t cache = rowCacheBytes(m, lanes, sizeof(V), limits(device.index).shared_mem_per_block);
        launchRows(cache > 0 ? &layerNormBackwardKernel<T, true> : &layerNormBackwardKernel<T, false>, rows, lanes,
                   false, cache, device.index, static_cast<const T*>(g.data_ptr()), static_cast<const T*>(x.data_ptr()),
                   static_cast<T*>(grad_input.data_ptr()),
                   w == nullptr ? nullptr : static_cast<const V*>(w->data_ptr()), static_cast<V*>(stats.data_ptr()),
                   rows, m, eps);
        // 32 columns by 8 lanes of rows per block; split when few columns
        // leave the device idle and the rows are long.
        constexpr int kLanes = 8;
        const int64_t splits =
            splitsFor(rowBlocks(m, kLanes, device.index), rows, kLanes, limits(device.index).sm_count);
        const int64_t chunk = (rows + splits - 1) / splits;
        V* grad_weight = static_cast<V*>(sums[0].data_ptr());
        V* grad_bias = static_cast<V*>(sums[1].data_ptr());
        bp::Tensor parts;
        if (splits > 1) {
          parts = bp::Tensor::empty({2 * splits * m}, opmath_dtype, device);
          grad_weight = static_cast<V*>(parts.data_ptr());
          grad_bias = grad_weight + splits * m;
        }
        launchRowsSplit(&layerNormParamGradKernel<T>, m, kLanes, true, 0, splits, device.index,
                        static_cast<const T*>(g.data_ptr()), static_cast<const T*>(x.data_ptr()),
                        static_cast<const V*>(stats.data_ptr()), grad_weight, grad_bias, rows, m, chunk);
        if (splits > 1)
          launchElements(&layerNormParamCombineKernel<V>, m, 1, device.index, static_cast<const V*>(parts.data_ptr()),
                         static_cast<V*>(sums[0].data_ptr()), static_cast<V*>(sums[1].data_ptr()), splits, m);
      }
    });
  }
  // The parameters' gradients in the weight's dtype (the input's without one).
  const ScalarType param_dtype = weight && weight->defined() ? weight->dtype() : input.dtype();
  for (bp::Tensor& s : sums) {
    if (s.dtype() == param_dtype) continue;
    bp::Tensor converted = bp::Tensor::empty(normalized_shape, param_dtype, device);
    copyCast(kOp, converted, s);
    s = std::move(converted);
  }
  return {std::move(grad_input), std::move(sums[0]), std::move(sums[1])};
}

// --- batch_norm: one block per channel (as batch_norm_backward in
// backward.cu) walks the channel's n * spatial values: in training, the
// batch's mean, then the mean of squared deviations from it (two passes,
// accurate for a large mean), and lane 0 updates the running statistics as
// PyTorch does (the variance with the unbiased estimate); in evaluation the
// running statistics. Then (x - mean) * (weight * rstd) + bias, the
// deviation first, as the CPU plugin computes it. Sums in the input's
// opmath type, combined in a fixed tree: deterministic, no atomics.
// Evaluation with running statistics reduces nothing: one thread per
// element (batchNormEvalKernel, the same arithmetic), so a few channels of
// many values (a ResNet's 64 of 100k) fill the device instead of 64 blocks.
struct BatchNormArgs {
  int64_t n, channels, spatial;
  double eps, momentum;
  bool training;
};

// R: the running statistics' type (float or double), read and written in place.
template <class T, class R>
__global__ void batchNormKernel(BatchNormArgs a, const T* x, T* y, const opmath_t<T>* weight, const opmath_t<T>* bias,
                                R* running_mean, R* running_var) {
  using V = opmath_t<T>;
  __shared__ V shared[kReduceThreads];
  const RowLane t = rowLane(false);
  const int64_t m = a.n * a.spatial;
  for (int64_t c = firstRow(t); c < a.channels; c += rowStep(t)) {
    auto at = [&](int64_t k) { return (k / a.spatial * a.channels + c) * a.spatial + k % a.spatial; };
    V mean, var;
    if (a.training) {
      V sum = 0;
      for (int64_t k = t.lane; k < m; k += t.lanes) sum += load(x[at(k)]);
      mean = blockCombine(sum, shared, t, SumOf<V>{}) / static_cast<V>(m);
      V squares = 0;
      for (int64_t k = t.lane; k < m; k += t.lanes) {
        const V dev = load(x[at(k)]) - mean;
        squares += dev * dev;
      }
      var = blockCombine(squares, shared, t, SumOf<V>{}) / static_cast<V>(m);
      if (running_mean != nullptr && t.lane == 0) {
        const double count = static_cast<double>(m);
        running_mean[c] = static_cast<R>((1 - a.momentum) * static_cast<double>(running_mean[c]) +
                                         a.momentum * static_cast<double>(mean));
        running_var[c] = static_cast<R>((1 - a.momentum) * static_cast<double>(running_var[c]) +
                                        a.momentum * static_cast<double>(var) * count / (count - 1));
      }
    } else {
      mean = static_cast<V>(running_mean[c]);
      var = static_cast<V>(running_var[c]);
    }
    const V scale = (weight != nullptr ? weight[c] : V(1)) / math::sqrt(var + static_cast<V>(a.eps));
    const V shift = bias != nullptr ? bias[c] : V(0);
    for (int64_t k = t.lane; k < m; k += t.lanes) y[at(k)] = store<T>((load(x[at(k)]) - mean) * scale + shift);
  }
}

// Evaluation with running statistics: element e of channel (e / spatial) % channels.
template <class T, class R>
__global__ void batchNormEvalKernel(BatchNormArgs a, int64_t n, const T* x, T* y, const opmath_t<T>* weight,
                                    const opmath_t<T>* bias, const R* running_mean, const R* running_var) {
  using V = opmath_t<T>;
  gridStride(n, [&](int64_t e) {
    const int64_t c = e / a.spatial % a.channels;
    const V mean = static_cast<V>(running_mean[c]), var = static_cast<V>(running_var[c]);
    const V scale = (weight != nullptr ? weight[c] : V(1)) / math::sqrt(var + static_cast<V>(a.eps));
    const V shift = bias != nullptr ? bias[c] : V(0);
    y[e] = store<T>((load(x[e]) - mean) * scale + shift);
  });
}

bp::Tensor batch_norm(const bp::Tensor& input, const std::optional<bp::Tensor>& weight,
                      const std::optional<bp::Tensor>& bias, const std::optional<bp::Tensor>& running_mean,
                      const std::optional<bp::Tensor>& running_var, bool training, double momentum, double eps,
                      bool /*cudnn_enabled*/) {
  static constexpr const char* kOp = "bp::batch_norm";
  checkDtype(kOp, input, "input", kFloatDtypes);
  const bp::Device device = callDevice(kOp, input, "input");
  const ScalarType dtype = input.dtype();
  const ScalarType param_dtype = dtype == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  const bp::Tensor* params[4] = {optionalOnDevice(kOp, weight, "weight", device),
                                 optionalOnDevice(kOp, bias, "bias", device),
                                 optionalOnDevice(kOp, running_mean, "running_mean", device),
                                 optionalOnDevice(kOp, running_var, "running_var", device)};
  const int64_t n = input.size(0), channels = input.size(1);
  const int64_t spatial = n * channels == 0 ? 0 : input.numel() / (n * channels);
  bp::Tensor out = bp::Tensor::empty(input.sizes(), dtype, device);
  // An empty batch has no statistics: the running ones stay as they are.
  if (out.numel() == 0) return out;
  bp::Tensor holders[5];
  const bp::Tensor& x = dense(kOp, input, dtype, holders[0]);
  const void* w = params[0] != nullptr ? dense(kOp, *params[0], param_dtype, holders[1]).data_ptr() : nullptr;
  const void* b = params[1] != nullptr ? dense(kOp, *params[1], param_dtype, holders[2]).data_ptr() : nullptr;
  // The running statistics, updated in place: in float64 if either is,
  // else float32; a converted or packed copy is written back after.
  const bool has_running = params[2] != nullptr && params[3] != nullptr;
  const ScalarType running_dtype =
      has_running && (params[2]->dtype() == ScalarType::Float64 || params[3]->dtype() == ScalarType::Float64)
          ? ScalarType::Float64
          : ScalarType::Float32;
  const bp::Tensor* running[2] = {nullptr, nullptr};
  if (has_running) {
    running[0] = &dense(kOp, *params[2], running_dtype, holders[3]);
    running[1] = &dense(kOp, *params[3], running_dtype, holders[4]);
  }
  const BatchNormArgs args{n, channels, spatial, eps, momentum, training};
  bool done = false;
#if defined(BP_CUDA_CUDNN)
  // Note [cuDNN batch norm and pooling] (plugins/cuda/cudnn_norm_pool.cu).
  if (!has_running || running_dtype == param_dtype) {
    done = cudnnBatchNorm(x, out, w, b, has_running ? running[0]->data_ptr() : nullptr,
                          has_running ? running[1]->data_ptr() : nullptr, training, momentum, eps);
  }
#endif
  if (!done)
    visitDtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kIsFloating<T>) {
        using V = opmath_t<T>;
        auto launchWith = [&](auto running_tag) {
          using R = decltype(running_tag);
          auto stat = [&](int i) { return running[i] != nullptr ? static_cast<R*>(running[i]->data_ptr()) : nullptr; };
          if (!training && has_running) {
            launchElements(&batchNormEvalKernel<T, R>, out.numel(), 1, device.index, args, out.numel(),
                           static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()),
                           static_cast<const V*>(w), static_cast<const V*>(b), stat(0), stat(1));
            return;
          }
          launchRows(&batchNormKernel<T, R>, channels, kReduceThreads, false, 0, device.index, args,
                     static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), static_cast<const V*>(w),
                     static_cast<const V*>(b), stat(0), stat(1));
        };
        if (running_dtype == ScalarType::Float64)
          launchWith(double{});
        else
          launchWith(float{});
      }
    });
  if (training && has_running) {
    for (int i = 0; i < 2; ++i)
      if (running[i] != params[2 + i]) copyCast(kOp, *params[2 + i], *running[i]);
  }
  return out;
}

}  // namespace

void registerNormKernels(bp::Library& m, int32_t type) {
  m.impl("layer_norm.out", type, &layer_norm_out);
  m.impl("layer_norm_backward", type, &layer_norm_backward);
  m.impl("batch_norm", type, &batch_norm);
}

}  // namespace bp_gpu
