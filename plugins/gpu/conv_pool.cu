// The GPU plugins' convolution and pooling: conv2d, max_pool2d and
// avg_pool2d, value for value what the CPU plugin computes (plugins/cpu/
// nn.cc). The host's meta kernels have checked shapes, groups, windows and
// dtypes (Note [Window geometry overflow]), so these kernels check devices
// and dtypes only.
//
// Note [conv2d on the GPU]
// A convolution is a matrix product per group: out[n, g] (ocg x P, P = oh *
// ow output positions) = W[g] (ocg x K, K = icg * kh * kw) @ cols[n, g]
// (K x P), where column p of cols holds the input values under output p's
// window (zero in the padding: im2col). The product runs on gemm (gemm.cuh:
// cuBLAS on CUDA, our tiled kernel elsewhere), batched over the images, with
// W broadcast; the bias is broadcast into the output first and the product
// accumulates onto it (beta = 1). A 1x1 convolution with stride 1 and no
// padding reads the input itself as cols. cols for a whole batch may not
// fit: the images go through in chunks of at most kColsBytes of cols.
// Grouped convolutions whose groups are small (depthwise: K of a few
// values) take a direct kernel instead, one thread per output element,
// since a product per group would launch `groups` tiny GEMMs. Both
// accumulate as gemm does: float for float16, bfloat16 and float32 (the
// 16-bit dtypes are rounded once, at the end, as the CPU plugin's), double
// for float64, wrapping uint64 for the integers (whose low bits are
// PyTorch's wrapping arithmetic in the dtype).
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "bp_common/windows.h"
#include "gemm.cuh"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"
#include "pool_args.h"
#if defined(BP_CUDA_CUDNN)
#include "cuda/cudnn_conv.h"
#include "cuda/cudnn_norm_pool.h"
#endif

namespace bp_gpu {
namespace {

// --- conv2d

using bp_common::ConvGeometry;

// cols[n][ci][ky][kx][p] for the chunk's images (Note [conv2d on the GPU]).
template <class T>
__global__ void im2colKernel(ConvGeometry a, int64_t n, const T* x, T* cols) {
  gridStride(n, [&](int64_t e) {
    const int64_t p = e % (a.oh * a.ow), oy = p / a.ow, ox = p % a.ow;
    int64_t rest = e / (a.oh * a.ow);
    const int64_t kx = rest % a.kw;
    rest /= a.kw;
    const int64_t ky = rest % a.kh;
    const int64_t plane = rest / a.kh;  // image * c + channel
    const int64_t iy = oy * a.stride[0] - a.padding[0] + ky * a.dilation[0],
                  ix = ox * a.stride[1] - a.padding[1] + kx * a.dilation[1];
    cols[e] = iy >= 0 && iy < a.h && ix >= 0 && ix < a.w ? x[(plane * a.h + iy) * a.w + ix] : store<T>(0);
  });
}

// One output element per thread, for convolutions with many small groups.
template <class T>
__global__ void convDirectKernel(ConvGeometry a, int64_t n, const T* x, const T* w, const T* bias, T* out) {
  using Acc = gemm_acc_t<T>;
  const int64_t ocg = a.oc / a.groups, icg = a.c / a.groups;
  gridStride(n, [&](int64_t e) {
    const int64_t ox = e % a.ow, oy = e / a.ow % a.oh, oc = e / (a.oh * a.ow) % a.oc, img = e / (a.oh * a.ow * a.oc);
    Acc acc = bias != nullptr ? static_cast<Acc>(load(bias[oc])) : Acc(0);
    for (int64_t ic = 0; ic < icg; ++ic) {
      const T* xc = x + (img * a.c + oc / ocg * icg + ic) * a.h * a.w;
      const T* wc = w + (oc * icg + ic) * a.kh * a.kw;
      for (int64_t ky = 0; ky < a.kh; ++ky) {
        const int64_t iy = oy * a.stride[0] - a.padding[0] + ky * a.dilation[0];
        if (iy < 0 || iy >= a.h) continue;
        for (int64_t kx = 0; kx < a.kw; ++kx) {
          const int64_t ix = ox * a.stride[1] - a.padding[1] + kx * a.dilation[1];
          if (ix < 0 || ix >= a.w) continue;
          acc += static_cast<Acc>(load(xc[iy * a.w + ix])) * static_cast<Acc>(load(wc[ky * a.kw + kx]));
        }
      }
    }
    out[e] = store<T>(acc);
  });
}

// Bytes of im2col columns one chunk of images may take. The simulator's
// chunks are small, so that its tests take the loop over chunks.
#if defined(BP_GPU_SIM)
constexpr int64_t kColsBytes = int64_t{64} << 10;
#else
constexpr int64_t kColsBytes = int64_t{256} << 20;
#endif

const std::initializer_list<ScalarType> kConvDtypes = {ScalarType::Float32,  ScalarType::Float64, ScalarType::Float16,
                                                       ScalarType::BFloat16, ScalarType::UInt8,   ScalarType::Int8,
                                                       ScalarType::Int16,    ScalarType::Int32,   ScalarType::Int64};

// An element offset into a tensor's memory, as a pointer.
void* at(const bp::Tensor& t, int64_t elements) {
  return static_cast<char*>(t.data_ptr()) + elements * static_cast<int64_t>(t.element_size());
}

bp::Tensor conv2d(const bp::Tensor& input, const bp::Tensor& weight, const std::optional<bp::Tensor>& bias_opt,
                  bp::IntList stride, bp::IntList padding, bp::IntList dilation, int64_t groups) {
  static constexpr const char* kOp = "bp::conv2d";
  checkDtype(kOp, input, "input", kConvDtypes);
  const bp::Device device = callDevice(kOp, input, "input");
  checkOnDevice(kOp, weight, "weight", device);
  const bp::Tensor* bias = bias_opt && bias_opt->defined() ? &*bias_opt : nullptr;
  if (bias != nullptr) checkOnDevice(kOp, *bias, "bias", device);
  const ScalarType dtype = input.dtype();
  const bool batched = input.dim() == 4;
  const ConvGeometry a = bp_common::convGeometry(input, weight, stride, padding, dilation, groups);
  const int64_t images = a.n;
  bp::Tensor out = batched ? bp::Tensor::empty({images, a.oc, a.oh, a.ow}, dtype, device)
                           : bp::Tensor::empty({a.oc, a.oh, a.ow}, dtype, device);
  if (out.numel() == 0) return out;
  bp::Tensor holders[3];
  const bp::Tensor& x = dense(kOp, input, dtype, holders[0]);
  const bp::Tensor& w = dense(kOp, weight, dtype, holders[1]);
  const bp::Tensor* b = bias != nullptr ? &dense(kOp, *bias, dtype, holders[2]) : nullptr;
  const int64_t ocg = a.oc / groups, icg = a.c / groups, positions = a.oh * a.ow, k = icg * a.kh * a.kw;
  // The bias broadcast into every image and position; the products add onto it.
  auto fillBias = [&] {
    copyCast(kOp, out.as_strided({images, a.oc, positions}, {a.oc * positions, positions, 1}, out.storage_offset()),
             b->as_strided({images, a.oc, positions}, {0, 1, 0}, b->storage_offset()));
  };

#if defined(BP_CUDA_CUDNN)
  // Note [cuDNN convolutions] (plugins/cuda/cudnn_conv.cu).
  if (const CudnnConvPlan* plan = a.c > 0 ? cudnnConv2dPlan(a, dtype, device) : nullptr) {
    if (b != nullptr) fillBias();
    cudnnConv2d(plan, device, x.data_ptr(), w.data_ptr(), out.data_ptr(), b != nullptr);
    return out;
  }
#endif

  if (groups > 1 && k < 64) {
    visitDtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        launchElements(&convDirectKernel<T>, out.numel(), 1, device.index, a, out.numel(),
                       static_cast<const T*>(x.data_ptr()), static_cast<const T*>(w.data_ptr()),
                       b != nullptr ? static_cast<const T*>(b->data_ptr()) : nullptr, static_cast<T*>(out.data_ptr()));
      }
    });
    return out;
  }

  if (b != nullptr) fillBias();
  const bool direct_cols =
      a.kh == 1 && a.kw == 1 && a.stride[0] == 1 && a.stride[1] == 1 && a.padding[0] == 0 && a.padding[1] == 0;
  const int64_t cols_per_image = a.c * a.kh * a.kw * positions;
  const int64_t chunk =
      direct_cols ? images
                  : std::clamp<int64_t>(kColsBytes / std::max<int64_t>(1, cols_per_image * int64_t(out.element_size())),
                                        1, images);
  bp::Tensor cols;
  if (!direct_cols) cols = bp::Tensor::empty({chunk * cols_per_image}, dtype, device);
  for (int64_t first = 0; first < images; first += chunk) {
    const int64_t count = std::min(chunk, images - first);
    const bp::Tensor* src = &x;
    int64_t src_first = first;  // the chunk's first image in src
    if (!direct_cols) {
      visitDtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        const int64_t n = count * cols_per_image;
        launchElements(&im2colKernel<T>, n, 1, device.index, a, n,
                       static_cast<const T*>(at(x, first * a.c * a.h * a.w)), static_cast<T*>(cols.data_ptr()));
      });
      src = &cols;
      src_first = 0;
    }
    for (int64_t g = 0; g < groups; ++g) {
      const GemmOperand wa{w, MatrixView{at(w, g * ocg * k), 1, ocg, k, 0, k, 1}};
      const GemmOperand colsb{*src, MatrixView{at(*src, src_first * cols_per_image + g * k * positions), count, k,
                                               positions, cols_per_image, positions, 1}};
      const MatrixView c{
          at(out, (first * a.oc + g * ocg) * positions), count, ocg, positions, a.oc * positions, positions, 1};
      gemm(kOp, wa, colsb, c, dtype, bp::Scalar(int64_t{1}), bp::Scalar(int64_t{1}), b != nullptr, device.index);
    }
  }
  return out;
}

// --- max_pool2d and avg_pool2d: one thread per output element walks its
// window, reading the input through its strides.

template <class T>
__global__ void maxPoolKernel(PoolArgs a, int64_t n, const T* self, T* out) {
  gridStride(n, [&](int64_t e) {
    const int64_t plane = e / (a.oh * a.ow), oy = e / a.ow % a.oh, ox = e % a.ow;
    int64_t y, x;
    out[e] = store<T>(
        windowMax(a, self + (plane / a.channels) * a.stride_n + (plane % a.channels) * a.stride_c, oy, ox, &y, &x));
  });
}

// The window's mean: its in-bounds sum over divisor_override, or over the
// window's size within the padded input (count_include_pad), or over its
// in-bounds count. int64 sums wrap and divide with truncation, as the CPU
// plugin's (the one overflowing quotient, the lowest value by -1, wraps).
template <class T>
__global__ void avgPoolKernel(PoolArgs a, int64_t n, const T* self, T* out) {
  using M = opmath_t<T>;
  gridStride(n, [&](int64_t e) {
    const int64_t plane = e / (a.oh * a.ow), oy = e / a.ow % a.oh, ox = e % a.ow;
    const T* in = self + (plane / a.channels) * a.stride_n + (plane % a.channels) * a.stride_c;
    int64_t y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
    int64_t y1 = y0 + a.kh < a.h + a.ph ? y0 + a.kh : a.h + a.ph;
    int64_t x1 = x0 + a.kw < a.w + a.pw ? x0 + a.kw : a.w + a.pw;
    const int64_t padded = (y1 - y0) * (x1 - x0);
    y0 = y0 > 0 ? y0 : 0;
    x0 = x0 > 0 ? x0 : 0;
    y1 = y1 < a.h ? y1 : a.h;
    x1 = x1 < a.w ? x1 : a.w;
    using Acc = std::conditional_t<std::is_integral_v<M>, uint64_t, M>;
    Acc sum = 0;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) sum += static_cast<Acc>(load(in[iy * a.stride_h + ix * a.stride_w]));
    const int64_t divisor = a.divisor != 0 ? a.divisor : a.count_include_pad ? padded : (y1 - y0) * (x1 - x0);
    if constexpr (std::is_integral_v<M>) {
      const int64_t s = static_cast<int64_t>(sum);  // modulo 2^64
      out[e] = divisor == -1 ? static_cast<T>(uint64_t{0} - sum) : static_cast<T>(s / divisor);
    } else {
      out[e] = store<T>(sum / static_cast<M>(divisor));
    }
  });
}

bp::Tensor poolOutput(const bp::Tensor& self, int64_t oh, int64_t ow, bp::Device device) {
  if (self.dim() == 4) return bp::Tensor::empty({self.size(0), self.size(1), oh, ow}, self.dtype(), device);
  return bp::Tensor::empty({self.size(0), oh, ow}, self.dtype(), device);
}

// The pooled size along each spatial dim (the host's rule has checked it).
std::array<int64_t, 2> pooledSize(const bp::Tensor& self, bp::IntList kernel_size, bp::IntList stride,
                                  bp::IntList padding, bp::IntList dilation, bool ceil_mode) {
  const auto k = bp_common::windowPair(kernel_size);
  const auto s = bp_common::windowPair(stride, k), p = bp_common::windowPair(padding),
             d = bp_common::windowPair(dilation, {1, 1});
  return {bp_common::poolOutputSize(self.size(-2), k[0], p[0], s[0], d[0], ceil_mode),
          bp_common::poolOutputSize(self.size(-1), k[1], p[1], s[1], d[1], ceil_mode)};
}

template <bool kMax>
bp::Tensor pool(const char* op, const bp::Tensor& self, const PoolArgs& args) {
  const bp::Device device = callDevice(op, self, "self");
  bp::Tensor out = poolOutput(self, args.oh, args.ow, device);
  const int64_t n = out.numel();
  if (n == 0) return out;
#if defined(BP_CUDA_CUDNN)
  if (cudnnPool2d(args, kMax, self, out)) return out;  // Note [cuDNN batch norm and pooling]
#endif
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kMax && kIsFloating<T>) {
      launchElements(&maxPoolKernel<T>, n, 1, device.index, args, n, static_cast<const T*>(self.data_ptr()),
                     static_cast<T*>(out.data_ptr()));
    } else if constexpr (!kMax && (kIsFloating<T> || std::is_same_v<T, int64_t>)) {
      launchElements(&avgPoolKernel<T>, n, 1, device.index, args, n, static_cast<const T*>(self.data_ptr()),
                     static_cast<T*>(out.data_ptr()));
    }
  });
  return out;
}

bp::Tensor max_pool2d(const bp::Tensor& self, bp::IntList kernel_size, bp::IntList stride, bp::IntList padding,
                      bp::IntList dilation, bool ceil_mode) {
  static constexpr const char* kOp = "bp::max_pool2d";
  checkDtype(kOp, self, "self", kFloatDtypes);
  const auto out = pooledSize(self, kernel_size, stride, padding, dilation, ceil_mode);
  return pool<true>(kOp, self, poolArgs(self, out[0], out[1], kernel_size, stride, padding, dilation));
}

bp::Tensor avg_pool2d(const bp::Tensor& self, bp::IntList kernel_size, bp::IntList stride, bp::IntList padding,
                      bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  static constexpr const char* kOp = "bp::avg_pool2d";
  checkDtype(kOp, self, "self",
             {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Int64});
  const auto out = pooledSize(self, kernel_size, stride, padding, {}, ceil_mode);
  PoolArgs args = poolArgs(self, out[0], out[1], kernel_size, stride, padding, {});
  args.count_include_pad = count_include_pad;
  args.divisor = divisor_override ? *divisor_override : 0;
  return pool<false>(kOp, self, args);
}

}  // namespace

void registerConvPoolKernels(bp::Library& m, int32_t type) {
  m.impl("conv2d", type, &conv2d);
  m.impl("max_pool2d", type, &max_pool2d);
  m.impl("avg_pool2d", type, &avg_pool2d);
}

}  // namespace bp_gpu
