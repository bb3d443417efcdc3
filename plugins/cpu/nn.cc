// "nn" kernels of the CPU plugin: conv2d, max/avg pooling, batch_norm and
// layer_norm, and their backward ops. float32 runs on oneDNN wherever its semantics are PyTorch's
// (see each kernel for the exceptions; layer_norm's forward runs its own rows, Note [float32
// layer_norm rows]); other dtypes and the exceptions run
// loops that compute in the dtype's compute type (or double). The
// dispatcher's meta kernels have validated every argument (shapes, channel
// and group counts, kernel/stride/padding values), so these kernels only
// check what is specific to the CPU: device and dtype.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bp_common/windows.h"
#include "cpu_common.h"
#include "dnnl_util.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

// Below this many output elements (times the work per element) a loop runs
// on the calling thread: waking the OpenMP team costs more than it saves.
constexpr int64_t kParallelWork = 1 << 15;

const std::initializer_list<ScalarType> kNnDtypes = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                                     ScalarType::BFloat16};

// Copies `n` elements of `bytes` bytes each with element strides.
template <size_t kBytes>
void copyRow(const char* src, int64_t src_stride, char* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * kBytes, src + i * src_stride * kBytes, kBytes);
}

// `t` itself if it is contiguous, else a contiguous copy (any dtype).
bp::Tensor contiguous(const bp::Tensor& t) {
  if (t.is_contiguous()) return t;
  bp::Tensor out = bp::Tensor::empty(t.sizes(), t.dtype(), t.device());
  if (t.numel() == 0) return out;
  const size_t es = t.element_size();
  const auto* src = static_cast<const char*>(t.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  const int64_t nd = t.dim();
  const int64_t inner = nd == 0 ? 1 : t.size(nd - 1);
  const int64_t inner_stride = nd == 0 ? 1 : t.stride(nd - 1);
  std::vector<int64_t> index(static_cast<size_t>(std::max<int64_t>(nd - 1, 0)), 0);
  for (int64_t done = 0; done < t.numel(); done += inner) {
    int64_t offset = 0;
    for (int64_t d = 0; d + 1 < nd; ++d) offset += index[static_cast<size_t>(d)] * t.stride(d);
    const char* s = src + offset * static_cast<int64_t>(es);
    char* o = dst + done * static_cast<int64_t>(es);
    switch (es) {
      case 1: copyRow<1>(s, inner_stride, o, inner); break;
      case 2: copyRow<2>(s, inner_stride, o, inner); break;
      case 4: copyRow<4>(s, inner_stride, o, inner); break;
      default: copyRow<8>(s, inner_stride, o, inner); break;
    }
    for (int64_t d = nd - 1; d-- > 0;) {
      if (++index[static_cast<size_t>(d)] < t.size(d)) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
  return out;
}

// The elements of a (small) parameter tensor in row-major order as doubles;
// empty for an absent one.
std::vector<double> readDoubles(const std::optional<bp::Tensor>& t) {
  if (!t) return {};
  const bp::Tensor c = contiguous(*t);
  return visitDtype(c.dtype(), [&]<class T>(T) {
    std::vector<double> v(static_cast<size_t>(c.numel()));
    const T* p = static_cast<const T*>(c.data_ptr());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(load(p[i]));
    return v;
  });
}

void checkParam(const char* op, const std::optional<bp::Tensor>& t, const char* name) {
  if (!t) return;
  checkCpu(op, *t, name);
  checkDtype(op, *t, name, kNnDtypes);
}

// A (small) parameter tensor as float32 values for oneDNN, which takes
// scale, shift and statistics in f32 whatever the parameters' dtype.
std::vector<float> readFloats(const std::optional<bp::Tensor>& t) {
  const std::vector<double> d = readDoubles(t);
  return std::vector<float>(d.begin(), d.end());
}

// Creates and runs a oneDNN primitive (make() returns it with its
// arguments) on this thread's stream, turning oneDNN's errors into ours.
// oneDNN's primitive cache makes re-creating a repeated shape cheap.
template <class Make>
void runOneDnn(const char* op, Make&& make) {
  try {
    auto [primitive, args] = make();
    dnnl::stream& stream = dnnl_util::stream();
    primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    bp::fail(BP_INTERNAL, std::string(op) + " on cpu: oneDNN failed: " + e.what());
  }
}

// A oneDNN float32 memory over `data` (not owned), dense and row-major.
dnnl::memory plainMemory(const dnnl::memory::dims& dims, const void* data) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return dnnl::memory(dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides), dnnl_util::engine(),
                      const_cast<void*>(data));
}

// --- conv2d

using bp_common::ConvGeometry;

// conv2d in float32 with oneDNN: plain NCHW activations and (g)oihw
// weights, the layouts the tensors already have, so no reorders are needed.
// The engine and stream are created once (dnnl_util); oneDNN's primitive
// cache makes the primitive creation of a repeated shape cheap.
void convOneDnn(const ConvGeometry& g, const bp::Tensor& x, const bp::Tensor& w, const std::optional<bp::Tensor>& b,
                const bp::Tensor& out) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const memory::desc src_md({g.n, g.c, g.h, g.w}, f32, tag::nchw);
  const memory::desc dst_md({g.n, g.oc, g.oh, g.ow}, f32, tag::nchw);
  const memory::desc w_md =
      g.groups == 1 ? memory::desc({g.oc, g.c, g.kh, g.kw}, f32, tag::oihw)
                    : memory::desc({g.groups, g.oc / g.groups, g.c / g.groups, g.kh, g.kw}, f32, tag::goihw);
  const memory::dims strides{g.stride[0], g.stride[1]};
  const memory::dims dilates{g.dilation[0] - 1, g.dilation[1] - 1};  // oneDNN counts the gaps
  const memory::dims pad{g.padding[0], g.padding[1]};
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::engine& engine = dnnl_util::engine();
  try {
    std::optional<dnnl::convolution_forward::desc> desc;
    if (b) {
      desc.emplace(prop, algo, src_md, w_md, memory::desc({g.oc}, f32, tag::x), dst_md, strides, dilates, pad, pad);
    } else {
      desc.emplace(prop, algo, src_md, w_md, dst_md, strides, dilates, pad, pad);
    }
    const dnnl::convolution_forward::primitive_desc pd(*desc, engine);
    const dnnl::convolution_forward conv(pd);
    memory src(src_md, engine, x.data_ptr()), weights(w_md, engine, w.data_ptr()), dst(dst_md, engine, out.data_ptr());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (b) args.emplace(DNNL_ARG_BIAS, memory({{g.oc}, f32, tag::x}, engine, b->data_ptr()));
    dnnl::stream& stream = dnnl_util::stream();
    conv.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    bp::fail(BP_INTERNAL, std::string("bp::conv2d on cpu: oneDNN failed: ") + e.what());
  }
}

// acc + x * y in compute type M; integers wrap around (two's complement,
// as PyTorch's int64 convolution and pooling do) instead of overflowing.
template <class M>
M mulAdd(M acc, M x, M y) {
  if constexpr (std::is_same_v<M, bool>) {
    return acc || (x && y);  // instantiated by the dtype dispatch only
  } else if constexpr (std::is_integral_v<M>) {
    // Unsigned and at least int's width: a narrower unsigned type would be
    // promoted to int, whose product can overflow (int16 -1 * -1 as 65535^2).
    using U = std::make_unsigned_t<decltype(M{} * M{})>;
    return static_cast<M>(static_cast<U>(acc) + static_cast<U>(x) * static_cast<U>(y));
  } else {
    return acc + x * y;
  }
}

// conv2d by direct loops, for dtypes oneDNN does not take here (float64,
// int64): accumulates in the dtype's compute type.
template <class T>
void convDirect(const ConvGeometry& g, const bp::Tensor& x, const bp::Tensor& w, const std::optional<bp::Tensor>& b,
                const bp::Tensor& out) {
  const T* xp = static_cast<const T*>(x.data_ptr());
  const T* wp = static_cast<const T*>(w.data_ptr());
  const T* bp_ = b ? static_cast<const T*>(b->data_ptr()) : nullptr;
  T* op = static_cast<T*>(out.data_ptr());
  const int64_t ocg = g.oc / g.groups, icg = g.c / g.groups;
  const int64_t planes = g.n * g.oc;
  const int64_t work = planes * g.oh * g.ow * icg * g.kh * g.kw;
#pragma omp parallel for if (work > kParallelWork)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const int64_t n = plane / g.oc, oc = plane % g.oc, first_ic = (oc / ocg) * icg;
    T* o = op + plane * g.oh * g.ow;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        opmath_t<T> acc = bp_ ? load(bp_[oc]) : opmath_t<T>(0);
        for (int64_t ic = 0; ic < icg; ++ic) {
          const T* xc = xp + (n * g.c + first_ic + ic) * g.h * g.w;
          const T* wc = wp + (oc * icg + ic) * g.kh * g.kw;
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            const int64_t iy = oy * g.stride[0] - g.padding[0] + ky * g.dilation[0];
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const int64_t ix = ox * g.stride[1] - g.padding[1] + kx * g.dilation[1];
              if (ix < 0 || ix >= g.w) continue;
              acc = mulAdd<opmath_t<T>>(acc, load(xc[iy * g.w + ix]), load(wc[ky * g.kw + kx]));
            }
          }
        }
        o[oy * g.ow + ox] = store<T>(acc);
      }
    }
  }
}

// float16 and bfloat16 convolve in float32: toFloat32 gives a contiguous
// tensor's elements as a new float32 tensor, storeFloat32 rounds a float32
// tensor's into `out` (contiguous, of its shape and a floating dtype).
bp::Tensor toFloat32(const bp::Tensor& t) {
  bp::Tensor f = bp::Tensor::empty(t.sizes(), ScalarType::Float32, kCpuDevice);
  float* o = static_cast<float*>(f.data_ptr());
  visitDtype(t.dtype(), [&]<class T>(T) {
    const T* p = static_cast<const T*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i) o[i] = static_cast<float>(load(p[i]));
  });
  return f;
}
void storeFloat32(const bp::Tensor& f, const bp::Tensor& out) {
  const float* p = static_cast<const float*>(f.data_ptr());
  visitDtype(out.dtype(), [&]<class T>(T) {
    T* o = static_cast<T*>(out.data_ptr());
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = store<T>(p[i]);
  });
}

bp::Tensor conv2d(const bp::Tensor& input, const bp::Tensor& weight, const std::optional<bp::Tensor>& bias,
                  bp::IntList stride, bp::IntList padding, bp::IntList dilation, int64_t groups) {
  static constexpr const char* kOp = "bp::conv2d";
  checkCpu(kOp, input, "input");
  checkCpu(kOp, weight, "weight");
  checkDtype(kOp, input, "input",
             {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::UInt8,
              ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64});
  if (bias) checkCpu(kOp, *bias, "bias");
  ThreadScope threads;
  const bool batched = input.dim() == 4;
  const ConvGeometry g = bp_common::convGeometry(input, weight, stride, padding, dilation, groups);
  const bp::Tensor out = batched ? bp::Tensor::empty({g.n, g.oc, g.oh, g.ow}, input.dtype(), kCpuDevice)
                                 : bp::Tensor::empty({g.oc, g.oh, g.ow}, input.dtype(), kCpuDevice);
  if (out.numel() == 0) return out;
  const bp::Tensor x = contiguous(input), w = contiguous(weight);
  const std::optional<bp::Tensor> b = bias ? std::optional<bp::Tensor>(contiguous(*bias)) : std::nullopt;
  if (input.dtype() == ScalarType::Float32 && g.c > 0) {
    convOneDnn(g, x, w, b, out);
  } else if (input.dtype() == ScalarType::Float16 || input.dtype() == ScalarType::BFloat16) {
    // In float32, as PyTorch's CPU kernels compute 16-bit convolutions, and
    // rounded once at the end.
    const bp::Tensor xf = toFloat32(x), wf = toFloat32(w);
    const std::optional<bp::Tensor> bf = b ? std::optional<bp::Tensor>(toFloat32(*b)) : std::nullopt;
    const bp::Tensor of = bp::Tensor::empty(out.sizes(), ScalarType::Float32, kCpuDevice);
    if (g.c > 0)
      convOneDnn(g, xf, wf, bf, of);
    else
      convDirect<float>(g, xf, wf, bf, of);
    storeFloat32(of, out);
  } else {
    // float64, the integers (wrapping, as PyTorch's), and the degenerate
    // no-input-channel case oneDNN rejects (the output is then just the bias).
    visitDtype(input.dtype(), [&]<class T>(T) {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    (std::is_integral_v<T> && !std::is_same_v<T, bool>))
        convDirect<T>(g, x, w, b, out);
    });
  }
  return out;
}

// --- pooling

struct PoolGeometry {
  int64_t planes, c, h, w, oh, ow;
  std::array<int64_t, 2> kernel, stride, padding, dilation;
  // Strides of the input's (n, c, h, w) in elements; n's is unused when unbatched.
  int64_t sn, sc, sh, sw;
};

PoolGeometry poolGeometry(const bp::Tensor& self, bp::IntList kernel_size, bp::IntList stride, bp::IntList padding,
                          std::array<int64_t, 2> dilation, bool ceil_mode) {
  PoolGeometry g;
  const bool batched = self.dim() == 4;
  g.c = self.size(-3);
  g.h = self.size(-2);
  g.w = self.size(-1);
  g.planes = (batched ? self.size(0) : 1) * g.c;
  g.kernel = bp_common::windowPair(kernel_size);
  g.stride = stride.empty() ? g.kernel : bp_common::windowPair(stride);
  g.padding = bp_common::windowPair(padding);
  g.dilation = dilation;
  g.oh = bp_common::poolOutputSize(g.h, g.kernel[0], g.padding[0], g.stride[0], g.dilation[0], ceil_mode);
  g.ow = bp_common::poolOutputSize(g.w, g.kernel[1], g.padding[1], g.stride[1], g.dilation[1], ceil_mode);
  g.sn = batched ? self.stride(0) : 0;
  g.sc = self.stride(-3);
  g.sh = self.stride(-2);
  g.sw = self.stride(-1);
  return g;
}

bp::Tensor poolOutput(const bp::Tensor& self, const PoolGeometry& g) {
  if (self.dim() == 4) return bp::Tensor::empty({self.size(0), g.c, g.oh, g.ow}, self.dtype(), kCpuDevice);
  return bp::Tensor::empty({g.c, g.oh, g.ow}, self.dtype(), kCpuDevice);
}

// The right/bottom padding that makes oneDNN's (floor-mode) output size
// PyTorch's `out`, ceil_mode included; never negative. The ceil_mode rule
// (the last window starts inside the input or left padding) keeps it below
// the kernel size, as oneDNN requires.
int64_t rightPadding(int64_t in, int64_t out, int64_t kernel, int64_t pad, int64_t stride) {
  return std::max<int64_t>((out - 1) * stride + kernel - in - pad, 0);
}

// Pooling of a contiguous float32 input with oneDNN (forward inference: no
// workspace). An unbatched input is a batch of one.
void poolOneDnn(const char* op, dnnl::algorithm algo, const bp::Tensor& self, const PoolGeometry& g,
                const bp::Tensor& out) {
  runOneDnn(op, [&] {
    const int64_t n = g.planes / g.c;
    const dnnl::memory src = plainMemory({n, g.c, g.h, g.w}, self.data_ptr());
    const dnnl::memory dst = plainMemory({n, g.c, g.oh, g.ow}, out.data_ptr());
    const dnnl::memory::dims pad_r{rightPadding(g.h, g.oh, g.kernel[0], g.padding[0], g.stride[0]),
                                   rightPadding(g.w, g.ow, g.kernel[1], g.padding[1], g.stride[1])};
    const dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algo, src.get_desc(), dst.get_desc(),
                                           {g.stride[0], g.stride[1]}, {g.kernel[0], g.kernel[1]},
                                           {g.padding[0], g.padding[1]}, pad_r);
    return std::pair{dnnl::pooling_forward({desc, dnnl_util::engine()}),
                     std::unordered_map<int, dnnl::memory>{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}};
  });
}

// True when one of `n` float32 values is NaN or -inf. oneDNN's max pooling
// does not propagate NaN as PyTorch does (a NaN in a window is its maximum),
// and it starts each window from the lowest finite float, so an all -inf
// window would not give -inf: such inputs take the loop. One vectorized
// pass, cheap next to the pooling's reads.
bool hasNanOrNegInf(const float* p, int64_t n) {
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  int bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) bad |= !(p[i] >= kLowest);
  return bad != 0;
}

// Runs body(input plane, output plane) for every (n, c) plane, in parallel
// when there is enough work. The input is read through its strides.
template <class T, class Body>
void forEachPlane(const bp::Tensor& self, const bp::Tensor& out, const PoolGeometry& g, Body&& body) {
  const T* in = static_cast<const T*>(self.data_ptr());
  T* o = static_cast<T*>(out.data_ptr());
  const int64_t work = g.planes * g.oh * g.ow * g.kernel[0] * g.kernel[1];
#pragma omp parallel for if (work > kParallelWork)
  for (int64_t p = 0; p < g.planes; ++p) body(in + (p / g.c) * g.sn + (p % g.c) * g.sc, o + p * g.oh * g.ow);
}

// Max pooling: oneDNN for a contiguous float32 input without dilation
// (oneDNN's pooling_forward has none) and without NaN or -inf
// (hasNanOrNegInf); loops otherwise.
bp::Tensor max_pool2d(const bp::Tensor& self, bp::IntList kernel_size, bp::IntList stride, bp::IntList padding,
                      bp::IntList dilation, bool ceil_mode) {
  static constexpr const char* kOp = "bp::max_pool2d";
  checkCpu(kOp, self, "self");
  checkDtype(kOp, self, "self", kNnDtypes);
  ThreadScope threads;
  const PoolGeometry g = poolGeometry(self, kernel_size, stride, padding, bp_common::windowPair(dilation), ceil_mode);
  const bp::Tensor out = poolOutput(self, g);
  if (out.numel() == 0) return out;
  if (self.dtype() == ScalarType::Float32 && self.is_contiguous() && g.dilation == std::array<int64_t, 2>{1, 1} &&
      !hasNanOrNegInf(self.data_ptr<const float>(), self.numel())) {
    poolOneDnn(kOp, dnnl::algorithm::pooling_max, self, g, out);
    return out;
  }
  visitDtype(self.dtype(), [&]<class T>(T) {
    forEachPlane<T>(self, out, g, [&](const T* in, T* o) {
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          opmath_t<T> best = -std::numeric_limits<opmath_t<T>>::infinity();
          for (int64_t ky = 0; ky < g.kernel[0]; ++ky) {
            const int64_t iy = oy * g.stride[0] - g.padding[0] + ky * g.dilation[0];
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
              const int64_t ix = ox * g.stride[1] - g.padding[1] + kx * g.dilation[1];
              if (ix < 0 || ix >= g.w) continue;
              const opmath_t<T> v = load(in[iy * g.sh + ix * g.sw]);
              if (v > best || std::isnan(v)) best = v;
              if (std::isnan(best)) break;
            }
          }
          o[oy * g.ow + ox] = store<T>(best);
        }
      }
    });
  });
  return out;
}

// Average pooling: oneDNN for a contiguous float32 input without
// divisor_override, when its divisor is PyTorch's: always for
// count_include_pad=False (both divide by the in-bounds count); for
// count_include_pad=True only when no window hangs past the padded input.
// PyTorch divides such a ceil_mode window by its part inside the padded
// input, oneDNN's include-padding mode by the full kernel. Loops otherwise.
bp::Tensor avg_pool2d(const bp::Tensor& self, bp::IntList kernel_size, bp::IntList stride, bp::IntList padding,
                      bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  static constexpr const char* kOp = "bp::avg_pool2d";
  checkCpu(kOp, self, "self");
  checkDtype(kOp, self, "self",
             {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Int64});
  ThreadScope threads;
  const PoolGeometry g = poolGeometry(self, kernel_size, stride, padding, {1, 1}, ceil_mode);
  const bp::Tensor out = poolOutput(self, g);
  if (out.numel() == 0) return out;
  if (self.dtype() == ScalarType::Float32 && self.is_contiguous() && !divisor_override) {
    const bool within_padding = rightPadding(g.h, g.oh, g.kernel[0], g.padding[0], g.stride[0]) <= g.padding[0] &&
                                rightPadding(g.w, g.ow, g.kernel[1], g.padding[1], g.stride[1]) <= g.padding[1];
    if (!count_include_pad || within_padding) {
      poolOneDnn(kOp,
                 count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                   : dnnl::algorithm::pooling_avg_exclude_padding,
                 self, g, out);
      return out;
    }
  }
  visitDtype(self.dtype(), [&]<class T>(T) {
    forEachPlane<T>(self, out, g, [&](const T* in, T* o) {
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        int64_t y0 = oy * g.stride[0] - g.padding[0];
        int64_t y1 = std::min(y0 + g.kernel[0], g.h + g.padding[0]);
        const int64_t padded_h = y1 - y0;
        y0 = std::max<int64_t>(y0, 0);
        y1 = std::min(y1, g.h);
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          int64_t x0 = ox * g.stride[1] - g.padding[1];
          int64_t x1 = std::min(x0 + g.kernel[1], g.w + g.padding[1]);
          const int64_t padded_w = x1 - x0;
          x0 = std::max<int64_t>(x0, 0);
          x1 = std::min(x1, g.w);
          using M = opmath_t<T>;
          M sum = 0;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) sum = mulAdd<M>(sum, load(in[iy * g.sh + ix * g.sw]), M(1));
          int64_t divisor;
          if (divisor_override)
            divisor = *divisor_override;
          else if (count_include_pad)
            divisor = padded_h * padded_w;
          else
            divisor = (y1 - y0) * (x1 - x0);
          if constexpr (std::is_integral_v<M>) {
            // int64 divides with truncation, as PyTorch's; the one quotient
            // that overflows (the lowest value by -1) wraps.
            o[oy * g.ow + ox] = divisor == -1 ? mulAdd<M>(M(0), sum, M(-1)) : static_cast<T>(sum / divisor);
          } else {
            o[oy * g.ow + ox] = store<T>(sum / static_cast<M>(divisor));
          }
        }
      }
    });
  });
  return out;
}

// --- normalization

// Mean and biased variance of `n` values (two passes in double, so that
// large means do not cancel the variance).
template <class T>
std::pair<double, double> moments(const T* p, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(load(p[i]));
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(load(p[i])) - mean;
    sq += d * d;
  }
  return {mean, n > 0 ? sq / static_cast<double>(n) : 0};
}

// Stores `values` into a 1-D tensor of any floating dtype and stride.
void writeDoubles(const bp::Tensor& t, const std::vector<double>& values) {
  visitDtype(t.dtype(), [&]<class T>(T) {
    T* p = static_cast<T*>(t.data_ptr());
    for (size_t i = 0; i < values.size(); ++i) p[static_cast<int64_t>(i) * t.stride(0)] = store<T>(values[i]);
  });
}

// batch_norm inference in float32 with oneDNN: the input as [n, c, spatial,
// 1] (trailing dims collapsed), normalized with the running statistics
// (use_global_stats).
void batchNormOneDnn(const bp::Tensor& x, int64_t n, int64_t c, int64_t spatial,
                     const std::optional<bp::Tensor>& weight, const std::optional<bp::Tensor>& bias,
                     const std::optional<bp::Tensor>& running_mean, const std::optional<bp::Tensor>& running_var,
                     double eps, const bp::Tensor& out) {
  const std::vector<float> scale = readFloats(weight), shift = readFloats(bias), mean = readFloats(running_mean),
                           var = readFloats(running_var);
  runOneDnn("bp::batch_norm", [&] {
    const dnnl::memory src = plainMemory({n, c, spatial, 1}, x.data_ptr());
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src},
                                               {DNNL_ARG_DST, plainMemory({n, c, spatial, 1}, out.data_ptr())},
                                               {DNNL_ARG_MEAN, plainMemory({c}, mean.data())},
                                               {DNNL_ARG_VARIANCE, plainMemory({c}, var.data())}};
    auto flags = dnnl::normalization_flags::use_global_stats;
    if (weight) {
      flags |= dnnl::normalization_flags::use_scale;
      args.emplace(DNNL_ARG_SCALE, plainMemory({c}, scale.data()));
    }
    if (bias) {
      flags |= dnnl::normalization_flags::use_shift;
      args.emplace(DNNL_ARG_SHIFT, plainMemory({c}, shift.data()));
    }
    const dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, src.get_desc(),
                                                       static_cast<float>(eps), flags);
    return std::pair{dnnl::batch_normalization_forward({desc, dnnl_util::engine()}), std::move(args)};
  });
}

bp::Tensor batch_norm(const bp::Tensor& input, const std::optional<bp::Tensor>& weight,
                      const std::optional<bp::Tensor>& bias, const std::optional<bp::Tensor>& running_mean,
                      const std::optional<bp::Tensor>& running_var, bool training, double momentum, double eps,
                      bool /*cudnn_enabled*/) {
  static constexpr const char* kOp = "bp::batch_norm";
  checkCpu(kOp, input, "input");
  checkDtype(kOp, input, "input", kNnDtypes);
  checkParam(kOp, weight, "weight");
  checkParam(kOp, bias, "bias");
  checkParam(kOp, running_mean, "running_mean");
  checkParam(kOp, running_var, "running_var");
  ThreadScope threads;
  const int64_t n = input.size(0), c = input.size(1);
  const int64_t spatial = c == 0 || n == 0 ? 0 : input.numel() / (n * c);
  const bp::Tensor x = contiguous(input);
  const bp::Tensor out = bp::Tensor::empty(input.sizes(), input.dtype(), kCpuDevice);
  // An empty batch has no statistics: the running ones stay as they are.
  if (out.numel() == 0) return out;
  // Inference (the rule has required the running statistics) on oneDNN;
  // training computes batch statistics and updates the running ones, in
  // double, by loops.
  if (!training && input.dtype() == ScalarType::Float32 && out.numel() > 0) {
    batchNormOneDnn(x, n, c, spatial, weight, bias, running_mean, running_var, eps, out);
    return out;
  }
  const std::vector<double> w = readDoubles(weight), b = readDoubles(bias);
  std::vector<double> mean(static_cast<size_t>(c)), var(static_cast<size_t>(c));
  visitDtype(input.dtype(), [&]<class T>(T) {
    if constexpr (std::is_floating_point_v<opmath_t<T>>) {
      const T* xp = static_cast<const T*>(x.data_ptr());
      T* op = static_cast<T*>(out.data_ptr());
      if (training) {
        // Per-channel batch statistics; a channel's values are n runs of
        // `spatial` contiguous elements.
#pragma omp parallel for if (input.numel() > kParallelWork)
        for (int64_t ch = 0; ch < c; ++ch) {
          double sum = 0;
          for (int64_t i = 0; i < n; ++i)
            for (int64_t s = 0; s < spatial; ++s) sum += static_cast<double>(load(xp[(i * c + ch) * spatial + s]));
          const double count = static_cast<double>(n * spatial);
          const double m = sum / count;
          double sq = 0;
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t s = 0; s < spatial; ++s) {
              const double d = static_cast<double>(load(xp[(i * c + ch) * spatial + s])) - m;
              sq += d * d;
            }
          }
          mean[static_cast<size_t>(ch)] = m;
          var[static_cast<size_t>(ch)] = sq / count;
        }
      } else {
        mean = readDoubles(running_mean);
        var = readDoubles(running_var);
      }
      // out = (x - mean) * scale + bias per channel, in double: the
      // deviation first, so that a large mean does not cancel in the
      // rounding of x * scale (x * scale + (bias - mean * scale) in float
      // loses the spread of data like 1000 + 0.01 * u).
      std::vector<double> scale(static_cast<size_t>(c));
      for (size_t ch = 0; ch < scale.size(); ++ch) scale[ch] = (w.empty() ? 1.0 : w[ch]) / std::sqrt(var[ch] + eps);
#pragma omp parallel for if (input.numel() > kParallelWork)
      for (int64_t row = 0; row < n * c; ++row) {
        const size_t ch = static_cast<size_t>(row % c);
        const double m = mean[ch], sc = scale[ch], bias = b.empty() ? 0.0 : b[ch];
        for (int64_t s = 0; s < spatial; ++s)
          op[row * spatial + s] = store<T>((static_cast<double>(load(xp[row * spatial + s])) - m) * sc + bias);
      }
    }
  });
  if (training && running_mean) {
    // PyTorch's update: the running variance takes the unbiased estimate.
    const double count = static_cast<double>(n * spatial);
    std::vector<double> rm = readDoubles(running_mean), rv = readDoubles(running_var);
    for (size_t ch = 0; ch < rm.size(); ++ch) {
      rm[ch] = (1 - momentum) * rm[ch] + momentum * mean[ch];
      rv[ch] = (1 - momentum) * rv[ch] + momentum * var[ch] * count / (count - 1);
    }
    writeDoubles(*running_mean, rm);
    writeDoubles(*running_var, rv);
  }
  return out;
}

// Note [float32 layer_norm rows]
// A float32 row (a transformer's 768 or 1024 values: a few KiB, in L1 after
// its first read) is normalized in three passes over it, each vectorised:
// its sum in double, then the sum of squared deviations from the mean in
// double (two passes, so a large common offset does not cancel the
// variance), then (x - mean) * rstd * weight + bias in double, rounded once
// to float32. No temporary and no oneDNN call: oneDNN's primitive needed
// the row shifted by its first element first (its own variance lost the
// spread of 1000 + 0.01 * u), a whole extra pass over the input and a
// buffer the size of it. Compiled per instruction set (the build has no
// -march flags); each row is computed the same way whatever the thread.
__attribute__((target_clones("avx512f", "avx2", "default"))) void layerNormRowF32(const float* x, int64_t m,
                                                                                  const float* w, const float* b,
                                                                                  double eps, float* out) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < m; ++j) sum += static_cast<double>(x[j]);
  const double mean = sum / static_cast<double>(m);
  double sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < m; ++j) {
    const double d = static_cast<double>(x[j]) - mean;
    sq += d * d;
  }
  const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(m) + eps);
  if (w != nullptr && b != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < m; ++j)
      out[j] = static_cast<float>((static_cast<double>(x[j]) - mean) * rstd * static_cast<double>(w[j]) +
                                  static_cast<double>(b[j]));
  } else {
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) {
      double v = (static_cast<double>(x[j]) - mean) * rstd;
      if (w != nullptr) v *= static_cast<double>(w[j]);
      if (b != nullptr) v += static_cast<double>(b[j]);
      out[j] = static_cast<float>(v);
    }
  }
}

// A parameter as a dense float32 row: its own data when it is one, else a
// converted copy in `buf`; nullptr for none.
const float* denseFloats(const std::optional<bp::Tensor>& t, std::vector<float>& buf) {
  if (!t) return nullptr;
  if (t->dtype() == ScalarType::Float32 && t->is_contiguous()) return static_cast<const float*>(t->data_ptr());
  buf = readFloats(t);
  return buf.data();
}

// layer_norm.out: the host's meta has checked the arguments and given `out`
// the input's shape and dtype. A strided `out` gets the result through a
// contiguous temporary.
bp::Tensor layer_norm_out(const bp::Tensor& input, bp::IntList normalized_shape,
                          const std::optional<bp::Tensor>& weight, const std::optional<bp::Tensor>& bias, double eps,
                          bool /*cudnn_enable*/, const bp::Tensor& result) {
  static constexpr const char* kOp = "bp::layer_norm.out";
  checkCpu(kOp, input, "input");
  checkCpu(kOp, result, "out");
  checkDtype(kOp, input, "input", kNnDtypes);
  checkParam(kOp, weight, "weight");
  checkParam(kOp, bias, "bias");
  ThreadScope threads;
  int64_t m = 1;
  for (int64_t s : normalized_shape) m *= s;
  const int64_t rows = m == 0 ? 0 : input.numel() / m;
  const bp::Tensor x = contiguous(input);
  const bp::Tensor out = result.is_contiguous() ? result : bp::Tensor::empty(input.sizes(), input.dtype(), kCpuDevice);
  auto finish = [&]() -> bp::Tensor {
    if (!result.is_contiguous()) {
      static const bp::Operator copy = bp::Operator::find("_copy_on_device_");
      copy.call(result, out);
    }
    return result;
  };
  if (input.dtype() == ScalarType::Float32 && rows > 0) {  // Note [float32 layer_norm rows]
    std::vector<float> w_buf, b_buf;
    const float* w = denseFloats(weight, w_buf);
    const float* b = denseFloats(bias, b_buf);
    const float* xp = static_cast<const float*>(x.data_ptr());
    float* op = static_cast<float*>(out.data_ptr());
#pragma omp parallel for if (input.numel() > kParallelWork)
    for (int64_t r = 0; r < rows; ++r) layerNormRowF32(xp + r * m, m, w, b, eps, op + r * m);
    return finish();
  }
  const std::vector<double> w = readDoubles(weight), b = readDoubles(bias);
  visitDtype(input.dtype(), [&]<class T>(T) {
    if constexpr (std::is_floating_point_v<opmath_t<T>>) {
      const T* xp = static_cast<const T*>(x.data_ptr());
      T* op = static_cast<T*>(out.data_ptr());
#pragma omp parallel for if (input.numel() > kParallelWork)
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = xp + r * m;
        const auto [mean, var] = moments(row, m);
        const double rstd = 1.0 / std::sqrt(var + eps);
        for (int64_t j = 0; j < m; ++j) {
          double v = (static_cast<double>(load(row[j])) - mean) * rstd;
          if (!w.empty()) v *= w[static_cast<size_t>(j)];
          if (!b.empty()) v += b[static_cast<size_t>(j)];
          op[r * m + j] = store<T>(v);
        }
      }
    }
  });
  return finish();
}

// --- Backward ops (Note [Backward ops] in dispatcher/ops/src/backward.cc):
// one pass over contiguous float32 or float64 data each, where the host's
// composites take several; other dtypes take the composites (the kernels
// declare theirs).

constexpr int64_t kBackwardParallelNumel = 32768;

// A contiguous tensor seen as [outer, n, inner] around `dim`.
struct RowGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};
RowGeometry rowsAround(const bp::Tensor& t, int64_t dim) {
  RowGeometry g;
  const int64_t nd = t.dim();
  if (nd == 0) return g;
  if (dim < 0) dim += nd;
  for (int64_t d = 0; d < dim; ++d) g.outer *= t.size(d);
  g.n = t.size(dim);
  for (int64_t d = dim + 1; d < nd; ++d) g.inner *= t.size(d);
  return g;
}

// The result in `input_dtype` (the grad's when they are the same): a
// softmax over dtype= differentiates back to its input's dtype.
bp::Tensor inDtype(const bp::Tensor& t, ScalarType input_dtype) {
  if (t.dtype() == input_dtype) return t;
  static const bp::Operator to = bp::Operator::find("to.dtype");
  return to.call(t, input_dtype, false, false);
}

template <typename T, bool kLog>
void softmaxBackwardRows(const T* g, const T* y, T* out, RowGeometry r) {
  const int64_t count = r.outer * r.inner;
#pragma omp parallel for schedule(static) if (count * r.n >= kBackwardParallelNumel)
  for (int64_t k = 0; k < count; ++k) {
    const int64_t base = (k / r.inner) * r.n * r.inner + k % r.inner;
    double sum = 0;
    for (int64_t j = 0; j < r.n; ++j) {
      const int64_t i = base + j * r.inner;
      sum += kLog ? static_cast<double>(g[i]) : static_cast<double>(g[i]) * static_cast<double>(y[i]);
    }
    const T s = static_cast<T>(sum);
    for (int64_t j = 0; j < r.n; ++j) {
      const int64_t i = base + j * r.inner;
      out[i] = kLog ? g[i] - std::exp(y[i]) * s : (g[i] - s) * y[i];
    }
  }
}

template <bool kLog>
bp::Tensor softmaxBackward(const char* op, const bp::Tensor& grad_output, const bp::Tensor& output, int64_t dim,
                           ScalarType input_dtype) {
  checkCpu(op, grad_output, "grad_output");
  checkCpu(op, output, "output");
  ThreadScope threads;
  const bp::Tensor g = contiguous(grad_output), y = contiguous(output);
  bp::Tensor out = bp::Tensor::empty(g.sizes(), g.dtype(), kCpuDevice);
  if (out.numel() == 0) return inDtype(out, input_dtype);
  const RowGeometry r = rowsAround(g, dim);
  if (g.dtype() == ScalarType::Float32)
    softmaxBackwardRows<float, kLog>(g.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), r);
  else
    softmaxBackwardRows<double, kLog>(g.data_ptr<double>(), y.data_ptr<double>(), out.data_ptr<double>(), r);
  return inDtype(out, input_dtype);
}

bp::Tensor softmax_backward_data(const bp::Tensor& grad_output, const bp::Tensor& output, int64_t dim,
                                 ScalarType input_dtype) {
  return softmaxBackward<false>("bp::_softmax_backward_data", grad_output, output, dim, input_dtype);
}
bp::Tensor log_softmax_backward_data(const bp::Tensor& grad_output, const bp::Tensor& output, int64_t dim,
                                     ScalarType input_dtype) {
  return softmaxBackward<true>("bp::_log_softmax_backward_data", grad_output, output, dim, input_dtype);
}

// grad * d/dx gelu(x), in T (as the forward's loop): cdf(x) + x * pdf(x), or
// the derivative of the tanh form.
template <typename T>
void geluBackwardLoop(const T* g, const T* x, T* out, int64_t n, bool tanh_form) {
  constexpr T kHalf = T(0.5), kSqrt1_2 = T(0.70710678118654752440), kPdf = T(0.39894228040143267794);
  constexpr T kBeta = T(0.79788456080286535588), kKappa = T(0.044715);
#pragma omp parallel for schedule(static) if (n >= kBackwardParallelNumel)
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    if (tanh_form) {
      const T v2 = v * v;
      const T t = std::tanh(kBeta * (v + kKappa * v2 * v));
      const T d = kBeta * (T(1) + T(3) * kKappa * v2);
      out[i] = g[i] * (kHalf * (T(1) + t) + kHalf * v * (T(1) - t * t) * d);
    } else {
      out[i] = g[i] * (kHalf * (T(1) + std::erf(v * kSqrt1_2)) + v * kPdf * std::exp(-kHalf * v * v));
    }
  }
}

bp::Tensor gelu_backward(const bp::Tensor& grad_output, const bp::Tensor& self, std::string_view approximate) {
  static constexpr const char* kOp = "bp::gelu_backward";
  checkCpu(kOp, grad_output, "grad_output");
  checkCpu(kOp, self, "self");
  ThreadScope threads;
  const bp::Tensor g = contiguous(grad_output), x = contiguous(self);
  bp::Tensor out = bp::Tensor::empty(g.sizes(), g.dtype(), kCpuDevice);
  const bool tanh_form = approximate == "tanh";
  if (geluBackwardDnnl(tanh_form, g, x, out)) return out;
  if (g.dtype() == ScalarType::Float32)
    geluBackwardLoop<float>(g.data_ptr<float>(), x.data_ptr<float>(), out.data_ptr<float>(), out.numel(), tanh_form);
  else
    geluBackwardLoop<double>(g.data_ptr<double>(), x.data_ptr<double>(), out.data_ptr<double>(), out.numel(),
                             tanh_form);
  return out;
}

// embedding's weight gradient in one pass over grad_output's rows: each
// thread owns a slice of the embedding dim, so rows with the same index add
// without races and without the composite's zeros-then-scatter of an
// expanded index.
template <typename T, typename I>
void embeddingBackwardRows(const T* g, const I* idx, T* out, int64_t rows, int64_t dim, int64_t num_weights,
                           int64_t padding_idx, const std::vector<int64_t>& counts) {
  const int64_t work = rows * dim;
#pragma omp parallel if (work >= kBackwardParallelNumel)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = dim * t / threads, end = dim * (t + 1) / threads;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = static_cast<int64_t>(idx[r]);
      if (i == padding_idx || i < 0 || i >= num_weights) continue;  // the host's rule and embedding checked the range
      const T scale = counts.empty() ? T(1) : T(1) / static_cast<T>(counts[static_cast<size_t>(i)]);
      const T* src = g + r * dim;
      T* dst = out + i * dim;
      for (int64_t j = begin; j < end; ++j) dst[j] += src[j] * scale;
    }
  }
}

bp::Tensor embedding_dense_backward(const bp::Tensor& grad_output, const bp::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  static constexpr const char* kOp = "bp::embedding_dense_backward";
  checkCpu(kOp, grad_output, "grad_output");
  checkCpu(kOp, indices, "indices");
  checkDtype(kOp, indices, "indices", {ScalarType::Int32, ScalarType::Int64});
  checkDtype(kOp, grad_output, "grad_output", {ScalarType::Float32, ScalarType::Float64});
  ThreadScope threads;
  const bp::Tensor g = contiguous(grad_output), idx = contiguous(indices);
  const int64_t dim = g.dim() == 0 ? 1 : g.size(g.dim() - 1);
  const int64_t rows = idx.numel();
  bp::Tensor out = bp::Tensor::empty({num_weights, dim}, g.dtype(), kCpuDevice);
  if (out.numel() > 0) std::memset(out.data_ptr(), 0, static_cast<size_t>(out.numel()) * out.element_size());
  auto run = [&](auto index_tag) {
    using I = decltype(index_tag);
    const I* ip = idx.data_ptr<I>();
    for (int64_t r = 0; r < rows; ++r)
      BP_PLUGIN_CHECK(ip[r] >= 0 && ip[r] < num_weights, kOp, ": index ", static_cast<int64_t>(ip[r]), " (element ", r,
                      " of 'indices') is out of range for ", num_weights, " rows");
    std::vector<int64_t> counts;
    if (scale_grad_by_freq) {
      counts.assign(static_cast<size_t>(num_weights), 0);
      for (int64_t r = 0; r < rows; ++r) ++counts[static_cast<size_t>(ip[r])];
    }
    if (g.dtype() == ScalarType::Float32)
      embeddingBackwardRows<float, I>(g.data_ptr<float>(), ip, out.data_ptr<float>(), rows, dim, num_weights,
                                      padding_idx, counts);
    else
      embeddingBackwardRows<double, I>(g.data_ptr<double>(), ip, out.data_ptr<double>(), rows, dim, num_weights,
                                       padding_idx, counts);
  };
  if (idx.dtype() == ScalarType::Int32)
    run(int32_t{});
  else
    run(int64_t{});
  return out;
}

// layer_norm_backward: per row its mean and rstd in double (two passes, as
// the forward's), then g = grad * weight, the row's mean(g) and
// mean(g * xhat), and the input's gradient rstd * (g - mean(g) - xhat *
// mean(g * xhat)). The parameters' sums over rows accumulate per thread over
// its block of rows and are added in thread order at the end.
template <typename T>
void layerNormBackwardRows(const T* g, const T* x, const std::vector<double>& w, T* gi, int64_t rows, int64_t m,
                           double eps, std::vector<double>& sums) {
  const int threads = rows * m >= kBackwardParallelNumel ? omp_get_max_threads() : 1;
  std::vector<double> part(static_cast<size_t>(threads) * 2 * static_cast<size_t>(m), 0.0);
  const double inv_m = 1.0 / static_cast<double>(m);
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    double* pw = part.data() + t * 2 * m;  // sum(grad * xhat), then sum(grad)
    double* pb = pw + m;
    for (int64_t r = rows * t / n; r < rows * (t + 1) / n; ++r) {
      const T* xr = x + r * m;
      const T* gr = g + r * m;
      const auto [mean, var] = moments(xr, m);
      const double rstd = 1.0 / std::sqrt(var + eps);
      double sum_g = 0, sum_gx = 0;
      for (int64_t j = 0; j < m; ++j) {
        const double xhat = (static_cast<double>(xr[j]) - mean) * rstd, gj = static_cast<double>(gr[j]);
        const double gw = w.empty() ? gj : gj * w[static_cast<size_t>(j)];
        sum_g += gw;
        sum_gx += gw * xhat;
        pw[j] += gj * xhat;
        pb[j] += gj;
      }
      const double mean_g = sum_g * inv_m, mean_gx = sum_gx * inv_m;
      T* out = gi + r * m;
      for (int64_t j = 0; j < m; ++j) {
        const double xhat = (static_cast<double>(xr[j]) - mean) * rstd, gj = static_cast<double>(gr[j]);
        const double gw = w.empty() ? gj : gj * w[static_cast<size_t>(j)];
        out[j] = static_cast<T>(rstd * (gw - mean_g - xhat * mean_gx));
      }
    }
  }
  sums.assign(2 * static_cast<size_t>(m), 0.0);
  for (size_t i = 0; i < part.size(); ++i) sums[i % sums.size()] += part[i];
}

std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> layer_norm_backward(const bp::Tensor& grad_output,
                                                                   const bp::Tensor& input,
                                                                   bp::IntList normalized_shape,
                                                                   const std::optional<bp::Tensor>& weight,
                                                                   double eps) {
  static constexpr const char* kOp = "bp::layer_norm_backward";
  checkCpu(kOp, grad_output, "grad_output");
  checkCpu(kOp, input, "input");
  checkParam(kOp, weight, "weight");
  ThreadScope threads;
  int64_t m = 1;
  for (int64_t s : normalized_shape) m *= s;
  const int64_t rows = m == 0 ? 0 : input.numel() / m;
  const bp::Tensor g = contiguous(grad_output), x = contiguous(input);
  bp::Tensor grad_input = bp::Tensor::empty(input.sizes(), input.dtype(), kCpuDevice);
  std::vector<double> sums(2 * static_cast<size_t>(m), 0.0);
  const std::vector<double> w = readDoubles(weight);
  if (rows > 0) {
    if (input.dtype() == ScalarType::Float32)
      layerNormBackwardRows<float>(g.data_ptr<float>(), x.data_ptr<float>(), w, grad_input.data_ptr<float>(), rows, m,
                                   eps, sums);
    else
      layerNormBackwardRows<double>(g.data_ptr<double>(), x.data_ptr<double>(), w, grad_input.data_ptr<double>(), rows,
                                    m, eps, sums);
  }
  // The parameters' gradients in the weight's dtype (the input's without one).
  const ScalarType param_dtype = weight ? weight->dtype() : input.dtype();
  bp::Tensor grads[2];
  for (int k = 0; k < 2; ++k) {
    grads[k] = bp::Tensor::empty(normalized_shape, param_dtype, kCpuDevice);
    visitDtype(param_dtype, [&]<class T>(T) {
      T* p = static_cast<T*>(grads[k].data_ptr());
      for (int64_t j = 0; j < m; ++j) p[j] = store<T>(sums[static_cast<size_t>(k * m + j)]);
    });
  }
  return {std::move(grad_input), std::move(grads[0]), std::move(grads[1])};
}

// --- conv2d_backward, max_pool2d_backward, avg_pool2d_backward (Note
// [Window op gradients] in the dispatcher's backward_nn.cc). float32 and
// float64; the host's composites serve the other dtypes.

// The input's and the weight's (and the bias's) gradients of a float32
// convolution with oneDNN's backward-data and backward-weights primitives,
// over the plain layouts the tensors have (as the forward). `gi` and `gw`
// may be undefined (not asked for); `gb` is only computed with `gw`.
void convBackwardOneDnn(const ConvGeometry& g, const bp::Tensor& go, const bp::Tensor& x, const bp::Tensor& w,
                        const bp::Tensor& gi, const bp::Tensor& gw, const bp::Tensor& gb) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const memory::desc src_md({g.n, g.c, g.h, g.w}, f32, tag::nchw);
  const memory::desc dst_md({g.n, g.oc, g.oh, g.ow}, f32, tag::nchw);
  const memory::desc w_md =
      g.groups == 1 ? memory::desc({g.oc, g.c, g.kh, g.kw}, f32, tag::oihw)
                    : memory::desc({g.groups, g.oc / g.groups, g.c / g.groups, g.kh, g.kw}, f32, tag::goihw);
  const memory::desc b_md({g.oc}, f32, tag::x);
  const memory::dims strides{g.stride[0], g.stride[1]};
  const memory::dims dilates{g.dilation[0] - 1, g.dilation[1] - 1};  // oneDNN counts the gaps
  const memory::dims pad_l{g.padding[0], g.padding[1]};
  // The right padding that makes oneDNN's output size the forward's (the
  // forward's last rows may leave some of the padded input unread).
  const memory::dims pad_r{(g.oh - 1) * g.stride[0] + g.dilation[0] * (g.kh - 1) + 1 - g.h - g.padding[0],
                           (g.ow - 1) * g.stride[1] + g.dilation[1] * (g.kw - 1) + 1 - g.w - g.padding[1]};
  const auto algo = dnnl::algorithm::convolution_direct;
  const dnnl::engine& engine = dnnl_util::engine();
  dnnl::stream& stream = dnnl_util::stream();
  try {
    const dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind::forward_training, algo, src_md, w_md, b_md, dst_md,
                                                   strides, dilates, pad_l, pad_r);
    const dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, engine);
    memory diff_dst(dst_md, engine, go.data_ptr());
    if (gi.defined()) {
      const dnnl::convolution_backward_data::desc desc(algo, src_md, w_md, dst_md, strides, dilates, pad_l, pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(desc, engine, fwd_pd);
      memory weights(w_md, engine, w.data_ptr()), diff_src(src_md, engine, gi.data_ptr());
      dnnl::convolution_backward_data(pd).execute(
          stream, {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DIFF_SRC, diff_src}});
    }
    if (gw.defined()) {
      std::optional<dnnl::convolution_backward_weights::desc> desc;
      if (gb.defined())
        desc.emplace(algo, src_md, w_md, b_md, dst_md, strides, dilates, pad_l, pad_r);
      else
        desc.emplace(algo, src_md, w_md, dst_md, strides, dilates, pad_l, pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(*desc, engine, fwd_pd);
      memory src(src_md, engine, x.data_ptr()), diff_weights(w_md, engine, gw.data_ptr());
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_weights}};
      if (gb.defined()) args.emplace(DNNL_ARG_DIFF_BIAS, memory(b_md, engine, gb.data_ptr()));
      dnnl::convolution_backward_weights(pd).execute(stream, args);
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    bp::fail(BP_INTERNAL, std::string("bp::conv2d_backward on cpu: oneDNN failed: ") + e.what());
  }
}

// The same gradients by direct loops (float64, and float32 where oneDNN
// has no input channels to work with). Each thread owns whole input planes
// (the input's gradient) or whole output channels (the weight's and the
// bias's), so nothing is written by two threads.
template <class T>
void convBackwardDirect(const ConvGeometry& g, const T* go, const T* x, const T* w, T* gi, T* gw, T* gb) {
  const int64_t ocg = g.oc / g.groups, icg = g.c / g.groups;
  const int64_t work = g.n * g.oc * g.oh * g.ow * icg * g.kh * g.kw;
  auto inputRow = [&](int64_t oy, int64_t ky) { return oy * g.stride[0] - g.padding[0] + ky * g.dilation[0]; };
  auto inputCol = [&](int64_t ox, int64_t kx) { return ox * g.stride[1] - g.padding[1] + kx * g.dilation[1]; };
  if (gi != nullptr) {
#pragma omp parallel for if (work > kParallelWork)
    for (int64_t plane = 0; plane < g.n * g.c; ++plane) {
      const int64_t n = plane / g.c, ic = plane % g.c, group = ic / icg;
      T* out = gi + plane * g.h * g.w;
      std::fill(out, out + g.h * g.w, T(0));
      for (int64_t oc = group * ocg; oc < (group + 1) * ocg; ++oc) {
        const T* gp = go + (n * g.oc + oc) * g.oh * g.ow;
        const T* wp = w + (oc * icg + ic % icg) * g.kh * g.kw;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            const int64_t iy = inputRow(oy, ky);
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t ox = 0; ox < g.ow; ++ox) {
              const T gv = gp[oy * g.ow + ox];
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t ix = inputCol(ox, kx);
                if (ix >= 0 && ix < g.w) out[iy * g.w + ix] += gv * wp[ky * g.kw + kx];
              }
            }
          }
        }
      }
    }
  }
  if (gw == nullptr && gb == nullptr) return;
#pragma omp parallel for if (work > kParallelWork)
  for (int64_t oc = 0; oc < g.oc; ++oc) {
    const int64_t first_ic = (oc / ocg) * icg;
    if (gb != nullptr) {
      T sum = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const T* gp = go + (n * g.oc + oc) * g.oh * g.ow;
        for (int64_t i = 0; i < g.oh * g.ow; ++i) sum += gp[i];
      }
      gb[oc] = sum;
    }
    if (gw == nullptr) continue;
    for (int64_t ic = 0; ic < icg; ++ic) {
      for (int64_t ky = 0; ky < g.kh; ++ky) {
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          T sum = 0;
          for (int64_t n = 0; n < g.n; ++n) {
            const T* gp = go + (n * g.oc + oc) * g.oh * g.ow;
            const T* xp = x + (n * g.c + first_ic + ic) * g.h * g.w;
            for (int64_t oy = 0; oy < g.oh; ++oy) {
              const int64_t iy = inputRow(oy, ky);
              if (iy < 0 || iy >= g.h) continue;
              for (int64_t ox = 0; ox < g.ow; ++ox) {
                const int64_t ix = inputCol(ox, kx);
                if (ix >= 0 && ix < g.w) sum += gp[oy * g.ow + ox] * xp[iy * g.w + ix];
              }
            }
          }
          gw[((oc * icg + ic) * g.kh + ky) * g.kw + kx] = sum;
        }
      }
    }
  }
}

std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> conv2d_backward(const bp::Tensor& grad_output, const bp::Tensor& input,
                                                               const bp::Tensor& weight, bp::IntList stride,
                                                               bp::IntList padding, bp::IntList dilation,
                                                               int64_t groups, bp::BoolList output_mask) {
  static constexpr const char* kOp = "bp::conv2d_backward";
  checkCpu(kOp, grad_output, "grad_output");
  checkCpu(kOp, input, "input");
  checkCpu(kOp, weight, "weight");
  checkDtype(kOp, input, "input", {ScalarType::Float32, ScalarType::Float64});
  BP_PLUGIN_CHECK(output_mask.size() == 3, kOp, ": output_mask must have 3 values (input, weight, bias), got ",
                  output_mask.size());
  ThreadScope threads;
  const ConvGeometry g = bp_common::convGeometry(input, weight, stride, padding, dilation, groups);
  bp::Tensor gi, gw, gb;
  if (output_mask[0]) gi = bp::Tensor::empty(input.sizes(), input.dtype(), kCpuDevice);
  if (output_mask[1]) gw = bp::Tensor::empty(weight.sizes(), weight.dtype(), kCpuDevice);
  if (output_mask[2]) gb = bp::Tensor::empty({g.oc}, weight.dtype(), kCpuDevice);
  const bp::Tensor go = contiguous(grad_output), x = contiguous(input), w = contiguous(weight);
  auto zero = [](const bp::Tensor& t) {
    if (t.defined() && t.numel() > 0) std::memset(t.data_ptr(), 0, static_cast<size_t>(t.numel()) * t.element_size());
  };
  if (go.numel() == 0 || x.numel() == 0 || w.numel() == 0) {
    // Nothing flows back to the input or the weight; the bias's gradient is
    // still the output gradient's sum (no input channels: the output is the
    // bias).
    zero(gi), zero(gw), zero(gb);
    if (gb.defined() && go.numel() > 0) {
      if (input.dtype() == ScalarType::Float32)
        convBackwardDirect<float>(g, go.data_ptr<float>(), nullptr, nullptr, nullptr, nullptr, gb.data_ptr<float>());
      else
        convBackwardDirect<double>(g, go.data_ptr<double>(), nullptr, nullptr, nullptr, nullptr, gb.data_ptr<double>());
    }
    return {std::move(gi), std::move(gw), std::move(gb)};
  }
  if (input.dtype() == ScalarType::Float32) {
    // oneDNN's backward-weights gives the bias's gradient with the weight's;
    // the bias's alone is one sum.
    const bool dnn_weights = gw.defined();
    convBackwardOneDnn(g, go, x, w, gi, gw, dnn_weights ? gb : bp::Tensor());
    if (gb.defined() && !dnn_weights)
      convBackwardDirect<float>(g, go.data_ptr<float>(), nullptr, nullptr, nullptr, nullptr, gb.data_ptr<float>());
  } else {
    auto ptr = [](const bp::Tensor& t) { return t.defined() ? t.data_ptr<double>() : nullptr; };
    convBackwardDirect<double>(g, go.data_ptr<double>(), x.data_ptr<double>(), w.data_ptr<double>(), ptr(gi), ptr(gw),
                               ptr(gb));
  }
  return {std::move(gi), std::move(gw), std::move(gb)};
}

// Runs body(input plane, grad_output plane, grad_input plane) for every
// (n, c) plane, each zeroed first, in parallel when there is enough work.
// The input is read through its strides; the gradients are contiguous.
template <class T, class Body>
void forEachGradPlane(const bp::Tensor& self, const bp::Tensor& go, const bp::Tensor& gi, const PoolGeometry& g,
                      Body&& body) {
  const T* in = static_cast<const T*>(self.data_ptr());
  const T* gp = static_cast<const T*>(go.data_ptr());
  T* out = static_cast<T*>(gi.data_ptr());
  const int64_t work = g.planes * g.oh * g.ow * g.kernel[0] * g.kernel[1];
#pragma omp parallel for if (work > kParallelWork)
  for (int64_t p = 0; p < g.planes; ++p) {
    T* o = out + p * g.h * g.w;
    std::fill(o, o + g.h * g.w, T(0));
    body(in + (p / g.c) * g.sn + (p % g.c) * g.sc, gp + p * g.oh * g.ow, o);
  }
}

// Each window's gradient goes to the element the forward's loop picks: the
// first (in ky, kx order) greater than every earlier one, or the first NaN;
// an all -inf window's first element.
bp::Tensor max_pool2d_backward(const bp::Tensor& grad_output, const bp::Tensor& self, bp::IntList kernel_size,
                               bp::IntList stride, bp::IntList padding, bp::IntList dilation, bool ceil_mode) {
  static constexpr const char* kOp = "bp::max_pool2d_backward";
  checkCpu(kOp, grad_output, "grad_output");
  checkCpu(kOp, self, "self");
  checkDtype(kOp, self, "self", {ScalarType::Float32, ScalarType::Float64});
  ThreadScope threads;
  const PoolGeometry g = poolGeometry(self, kernel_size, stride, padding, bp_common::windowPair(dilation), ceil_mode);
  bp::Tensor gi = bp::Tensor::empty(self.sizes(), self.dtype(), kCpuDevice);
  if (gi.numel() == 0) return gi;
  const bp::Tensor go = contiguous(grad_output);
  visitDtype(self.dtype(), [&]<class T>(T) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      forEachGradPlane<T>(self, go, gi, g, [&](const T* in, const T* gp, T* o) {
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t at = -1;
            T best = -std::numeric_limits<T>::infinity();
            for (int64_t ky = 0; ky < g.kernel[0]; ++ky) {
              const int64_t iy = oy * g.stride[0] - g.padding[0] + ky * g.dilation[0];
              if (iy < 0 || iy >= g.h) continue;
              for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
                const int64_t ix = ox * g.stride[1] - g.padding[1] + kx * g.dilation[1];
                if (ix < 0 || ix >= g.w) continue;
                const T v = in[iy * g.sh + ix * g.sw];
                if (at < 0 || v > best || std::isnan(v)) {
                  at = iy * g.w + ix;
                  best = v;
                }
                if (std::isnan(best)) break;
              }
              if (std::isnan(best)) break;
            }
            if (at >= 0) o[at] += gp[oy * g.ow + ox];
          }
        }
      });
    }
  });
  return gi;
}

// Each window's gradient divided by the forward's divisor goes to each of
// its elements inside the input.
bp::Tensor avg_pool2d_backward(const bp::Tensor& grad_output, const bp::Tensor& self, bp::IntList kernel_size,
                               bp::IntList stride, bp::IntList padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
  static constexpr const char* kOp = "bp::avg_pool2d_backward";
  checkCpu(kOp, grad_output, "grad_output");
  checkCpu(kOp, self, "self");
  checkDtype(kOp, self, "self", {ScalarType::Float32, ScalarType::Float64});
  ThreadScope threads;
  const PoolGeometry g = poolGeometry(self, kernel_size, stride, padding, {1, 1}, ceil_mode);
  bp::Tensor gi = bp::Tensor::empty(self.sizes(), self.dtype(), kCpuDevice);
  if (gi.numel() == 0) return gi;
  const bp::Tensor go = contiguous(grad_output);
  visitDtype(self.dtype(), [&]<class T>(T) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      forEachGradPlane<T>(self, go, gi, g, [&](const T*, const T* gp, T* o) {
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t y0 = oy * g.stride[0] - g.padding[0];
          int64_t y1 = std::min(y0 + g.kernel[0], g.h + g.padding[0]);
          const int64_t padded_h = y1 - y0;
          y0 = std::max<int64_t>(y0, 0);
          y1 = std::min(y1, g.h);
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t x0 = ox * g.stride[1] - g.padding[1];
            int64_t x1 = std::min(x0 + g.kernel[1], g.w + g.padding[1]);
            const int64_t padded_w = x1 - x0;
            x0 = std::max<int64_t>(x0, 0);
            x1 = std::min(x1, g.w);
            const int64_t divisor = divisor_override    ? *divisor_override
                                    : count_include_pad ? padded_h * padded_w
                                                        : (y1 - y0) * (x1 - x0);
            if (divisor == 0) continue;  // a window with no element inside the input
            const T share = gp[oy * g.ow + ox] / static_cast<T>(divisor);
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) o[iy * g.w + ix] += share;
          }
        }
      });
    }
  });
  return gi;
}

// batch_norm_backward (Note [batch_norm's backward] in the dispatcher's
// backward_nn.cc): per channel, in parallel over channels, its statistics in
// double (two passes, as the forward's; the running ones in evaluation),
// then one pass for sum(grad) and sum(grad * xhat) and one writing the
// input's gradient.
template <typename T>
void batchNormBackwardChannels(const T* g, const T* x, T* gi, int64_t n, int64_t channels, int64_t spatial,
                               const std::vector<double>& w, const std::vector<double>& rm,
                               const std::vector<double>& rv, bool batch_stats, double eps, std::vector<double>& sum_g,
                               std::vector<double>& sum_gx) {
  const int64_t m = n * spatial;
#pragma omp parallel for schedule(static) if (m * channels >= kBackwardParallelNumel)
  for (int64_t c = 0; c < channels; ++c) {
    auto forEach = [&](auto&& f) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t base = (i * channels + c) * spatial;
        for (int64_t s = 0; s < spatial; ++s) f(base + s);
      }
    };
    double mean = 0, var = 0;
    if (!batch_stats) {
      mean = rm[static_cast<size_t>(c)];
      var = rv[static_cast<size_t>(c)];
    } else if (m > 0) {
      forEach([&](int64_t k) { mean += static_cast<double>(x[k]); });
      mean /= static_cast<double>(m);
      forEach([&](int64_t k) {
        const double d = static_cast<double>(x[k]) - mean;
        var += d * d;
      });
      var /= static_cast<double>(m);
    }
    const double rstd = 1.0 / std::sqrt(var + eps);
    double sg = 0, sgx = 0;
    forEach([&](int64_t k) {
      const double gv = static_cast<double>(g[k]);
      sg += gv;
      sgx += gv * (static_cast<double>(x[k]) - mean) * rstd;
    });
    sum_g[static_cast<size_t>(c)] = sg;
    sum_gx[static_cast<size_t>(c)] = sgx;
    if (gi == nullptr) continue;
    const double scale = (w.empty() ? 1.0 : w[static_cast<size_t>(c)]) * rstd;
    if (!batch_stats) {
      forEach([&](int64_t k) { gi[k] = static_cast<T>(static_cast<double>(g[k]) * scale); });
    } else {
      const double mean_g = sg / static_cast<double>(m), mean_gx = sgx / static_cast<double>(m);
      forEach([&](int64_t k) {
        const double xhat = (static_cast<double>(x[k]) - mean) * rstd;
        gi[k] = static_cast<T>(scale * (static_cast<double>(g[k]) - mean_g - xhat * mean_gx));
      });
    }
  }
}

std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> batch_norm_backward(
    const bp::Tensor& grad_output, const bp::Tensor& input, const std::optional<bp::Tensor>& weight,
    const std::optional<bp::Tensor>& running_mean, const std::optional<bp::Tensor>& running_var, bool training,
    double eps, bp::BoolList output_mask) {
  static constexpr const char* kOp = "bp::batch_norm_backward";
  checkCpu(kOp, grad_output, "grad_output");
  checkCpu(kOp, input, "input");
  checkDtype(kOp, input, "input", {ScalarType::Float32, ScalarType::Float64});
  checkParam(kOp, weight, "weight");
  checkParam(kOp, running_mean, "running_mean");
  checkParam(kOp, running_var, "running_var");
  BP_PLUGIN_CHECK(output_mask.size() == 3, kOp, ": output_mask must have 3 values (input, weight, bias), got ",
                  output_mask.size());
  ThreadScope threads;
  const int64_t n = input.size(0), channels = input.size(1);
  const int64_t spatial = n * channels == 0 ? 0 : input.numel() / (n * channels);
  const bool batch_stats = training || !running_mean || !running_var;
  const bp::Tensor g = contiguous(grad_output), x = contiguous(input);
  bp::Tensor gi;
  if (output_mask[0]) gi = bp::Tensor::empty(input.sizes(), input.dtype(), kCpuDevice);
  std::vector<double> sum_g(static_cast<size_t>(channels), 0.0), sum_gx(static_cast<size_t>(channels), 0.0);
  const std::vector<double> w = readDoubles(weight), rm = readDoubles(running_mean), rv = readDoubles(running_var);
  if (input.dtype() == ScalarType::Float32)
    batchNormBackwardChannels<float>(g.data_ptr<float>(), x.data_ptr<float>(),
                                     gi.defined() ? gi.data_ptr<float>() : nullptr, n, channels, spatial, w, rm, rv,
                                     batch_stats, eps, sum_g, sum_gx);
  else
    batchNormBackwardChannels<double>(g.data_ptr<double>(), x.data_ptr<double>(),
                                      gi.defined() ? gi.data_ptr<double>() : nullptr, n, channels, spatial, w, rm, rv,
                                      batch_stats, eps, sum_g, sum_gx);
  // The parameters' gradients in the weight's dtype (the input's without one).
  const ScalarType param_dtype = weight ? weight->dtype() : input.dtype();
  auto param = [&](bool wanted, const std::vector<double>& sums) {
    if (!wanted) return bp::Tensor();
    bp::Tensor t = bp::Tensor::empty({channels}, param_dtype, kCpuDevice);
    visitDtype(param_dtype, [&]<class T>(T) {
      T* p = static_cast<T*>(t.data_ptr());
      for (int64_t c = 0; c < channels; ++c) p[c] = store<T>(sums[static_cast<size_t>(c)]);
    });
    return t;
  };
  return {std::move(gi), param(output_mask[1], sum_gx), param(output_mask[2], sum_g)};
}

}  // namespace

namespace bp_cpu {

void registerNNKernels(bp::Library& m) {
  // The backward ops serve float32 and float64; the host's composites the rest.
  const bp::Dtypes kFloat32And64{ScalarType::Float32, ScalarType::Float64};
  m.impl("gelu_backward", kCpu, &gelu_backward, kFloat32And64);
  m.impl("_softmax_backward_data", kCpu, &softmax_backward_data, kFloat32And64);
  m.impl("_log_softmax_backward_data", kCpu, &log_softmax_backward_data, kFloat32And64);
  // A declared set covers every tensor argument (Note [Declared dtypes]):
  // the gradient's float32/float64 and the indices' int32/int64 (the kernel
  // checks which is which).
  m.impl("embedding_dense_backward", kCpu, &embedding_dense_backward,
         bp::Dtypes{ScalarType::Float32, ScalarType::Float64, ScalarType::Int32, ScalarType::Int64});
  m.impl("layer_norm_backward", kCpu, &layer_norm_backward, kFloat32And64);
  m.impl("conv2d_backward", kCpu, &conv2d_backward, kFloat32And64);
  m.impl("max_pool2d_backward", kCpu, &max_pool2d_backward, kFloat32And64);
  m.impl("avg_pool2d_backward", kCpu, &avg_pool2d_backward, kFloat32And64);
  m.impl("batch_norm_backward", kCpu, &batch_norm_backward, kFloat32And64);
  m.impl("conv2d", kCpu, &conv2d);
  m.impl("max_pool2d", kCpu, &max_pool2d);
  m.impl("avg_pool2d", kCpu, &avg_pool2d);
  m.impl("batch_norm", kCpu, &batch_norm);
  m.impl("layer_norm.out", kCpu, &layer_norm_out);
}

}  // namespace bp_cpu
