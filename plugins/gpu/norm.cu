// layer_norm on the GPU plugins (the functional op; the host's meta kernel
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

#include "block_reduce.cuh"
#include "kernel_args.h"
#include "kernels.h"

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

// t contiguous and of `dtype`: t itself, or a converted/packed copy kept in `holder`.
const bp::Tensor& dense(const char* op, const bp::Tensor& t, ScalarType dtype, bp::Tensor& holder) {
  if (t.dtype() == dtype && t.is_contiguous()) return t;
  holder = bp::Tensor::empty(t.sizes(), dtype, t.device());
  copyCast(op, holder, t);
  return holder;
}

bp::Tensor layer_norm(const bp::Tensor& input, bp::IntList normalized_shape, const std::optional<bp::Tensor>& weight,
                      const std::optional<bp::Tensor>& bias, double eps, bool /*cudnn_enable*/) {
  static constexpr const char* kOp = "bp::layer_norm";
  static const std::initializer_list<ScalarType> kFloatDtypes = {ScalarType::Float16, ScalarType::BFloat16,
                                                                 ScalarType::Float32, ScalarType::Float64};
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
  bp::Tensor out = bp::Tensor::empty(input.sizes(), input.dtype(), device);
  if (rows == 0) return out;
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
  return out;
}

}  // namespace

void registerNormKernels(bp::Library& m, int32_t type) { m.impl("layer_norm", type, &layer_norm); }

}  // namespace bp_gpu
