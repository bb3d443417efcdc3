// Creation kernels of the GPU plugins: fill_, arange.start_out, the Philox
// draws (_philox_uniform_, _philox_normal_, _philox_bernoulli_) and the
// same-device copy _copy_on_device_, which every dtype conversion of the
// other kernel families goes through (copyCast). The host has validated
// every argument and sized every output when a kernel runs. Every kernel
// takes any strides (Note [GPU elementwise loops]) and computes each
// element on its own, so values match the CPU plugin's whatever the split.
#include <cstring>
#include <type_traits>

#include "backplane/philox.h"
#include "bp_common/registration.h"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

OffsetCalculator<1> walkOf(const char* op, const bp::Tensor& t) {
  return makeOffsetCalculator<1>(op, t.sizes(), {t.strides().data()});
}

// --- fill_: element bits of the value, per element size.

template <class E>
struct FillFn {
  E value;
  BP_GPU_HD E operator()() const { return value; }
};

// Fills t (any strides) with the element whose bits are `value` (T's storage).
template <class T>
void fillWith(const char* op, const bp::Tensor& t, T value) {
  visitItemSize(sizeof(T), [&](auto tag) {
    using E = decltype(tag);
    E bits;
    std::memcpy(&bits, &value, sizeof(E));
    launchElementwise(walkOf(op, t), t.numel(), t.device().index, static_cast<E*>(t.data_ptr()), FillFn<E>{bits});
  });
}

bp::Tensor fill_(const bp::Tensor& self, const bp::Scalar& value) {
  const char* op = "bp::fill_.Scalar";
  callDevice(op, self, "self");
  checkDtype(op, self, "self", kAnyDtype);
  visitAnyDtype(self.dtype(), [&](auto tag) { fillWith<decltype(tag)>(op, self, scalarTo<decltype(tag)>(value)); });
  return self;
}

// --- arange: out[i] = start + i * step, in int64 for integral dtypes and
// double otherwise (PyTorch's accumulate types, as the CPU plugin).

template <class T>
using ArangeAcc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <class T>
__global__ void arangeKernel(OffsetCalculator<1> walk, int64_t n, T* out, ArangeAcc<T> start, ArangeAcc<T> step) {
  gridStride(n, [&](int64_t i) { out[walk.get(i).v[0]] = store<T>(start + static_cast<ArangeAcc<T>>(i) * step); });
}

bp::Tensor arange_out(const bp::Scalar& start, const bp::Scalar& end, const bp::Scalar& step, const bp::Tensor& out) {
  const char* op = "bp::arange.start_out";
  (void)end;  // the host sized `out` from it
  callDevice(op, out, "out");
  checkDtype(op, out, "out", bp::kNumericScalarTypes);
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using Acc = ArangeAcc<T>;
      const Acc s = std::is_integral_v<T> ? static_cast<Acc>(start.toInt()) : static_cast<Acc>(start.toDouble());
      const Acc d = std::is_integral_v<T> ? static_cast<Acc>(step.toInt()) : static_cast<Acc>(step.toDouble());
      launchElements(&arangeKernel<T>, out.numel(), 1, out.device().index, walkOf(op, out), out.numel(),
                     static_cast<T*>(out.data_ptr()), s, d);
    }
  });
  return out;
}

// --- Philox draws (Note [The Philox stream] in backplane/philox.h): one
// thread per Philox block, writing the block's K elements (row-major
// indices block * K ...), exactly the CPU plugin's counter-to-element map.

enum class Draw : int32_t { Uniform, Normal, Bernoulli };

struct DrawArgs {
  Draw draw;
  uint64_t seed;
  uint64_t offset;  // in blocks
  double a, b;      // from, to | mean, std | p
};

// A value in [from, to) stored as T: rounding into T may reach `to`, which
// is then replaced by `from` so that the range stays half-open.
template <class T, class M>
BP_GPU_HD T inRange(M u, M from, M to) {
  const T v = store<T>(from + u * (to - from));
  return load(v) >= to && from < to ? store<T>(from) : v;
}

template <class T>
__global__ void philoxKernel(OffsetCalculator<1> walk, int64_t n, T* out, DrawArgs args) {
  namespace px = bp::philox;
  // float64 uniforms and normals use 64 bits per element: 2 per block.
  const bool wide = std::is_same_v<T, double> && args.draw != Draw::Bernoulli;
  const int k = wide ? 2 : 4;
  gridStride((n + k - 1) / k, [&](int64_t block) {
    const px::Words w = px::streamBlock(args.seed, args.offset + static_cast<uint64_t>(block));
    T v[4];
    if (args.draw == Draw::Bernoulli) {
      for (int lane = 0; lane < 4; ++lane) v[lane] = store<T>(px::uniformWord(w.w[lane]) < args.b ? 1 : 0);
    } else if constexpr (std::is_same_v<T, double>) {
      if (args.draw == Draw::Uniform) {
        for (int lane = 0; lane < 2; ++lane) v[lane] = inRange<T>(px::wideUniform(w, lane), args.a, args.b);
      } else {
        double z[2];
        px::wideNormals(w, z);
        for (int lane = 0; lane < 2; ++lane) v[lane] = args.a + args.b * z[lane];
      }
    } else if constexpr (kIsFloating<T>) {
      const float a = static_cast<float>(args.a), b = static_cast<float>(args.b);
      if (args.draw == Draw::Uniform) {
        for (int lane = 0; lane < 4; ++lane) v[lane] = inRange<T>(px::narrowUniform(w, lane), a, b);
      } else {
        float z[4];
        px::narrowNormals(w, z);
        for (int lane = 0; lane < 4; ++lane) v[lane] = store<T>(a + b * z[lane]);
      }
    }
    for (int lane = 0; lane < k && block * k + lane < n; ++lane) out[walk.get(block * k + lane).v[0]] = v[lane];
  });
}

bp::Tensor philoxDraw(const char* op, const bp::Tensor& self, std::initializer_list<ScalarType> supported,
                      DrawArgs args) {
  callDevice(op, self, "self");
  checkDtype(op, self, "self", supported);
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    launchElements(&philoxKernel<T>, self.numel(), 1, self.device().index, walkOf(op, self), self.numel(),
                   static_cast<T*>(self.data_ptr()), args);
  });
  return self;
}

bp::Tensor philox_uniform_(const bp::Tensor& self, double from, double to, int64_t seed, int64_t offset) {
  return philoxDraw("bp::_philox_uniform_", self, bp::kFloatingScalarTypes,
                    {Draw::Uniform, static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), from, to});
}

bp::Tensor philox_normal_(const bp::Tensor& self, double mean, double std, int64_t seed, int64_t offset) {
  return philoxDraw("bp::_philox_normal_", self, bp::kFloatingScalarTypes,
                    {Draw::Normal, static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), mean, std});
}

bp::Tensor philox_bernoulli_(const bp::Tensor& self, double p, int64_t seed, int64_t offset) {
  return philoxDraw("bp::_philox_bernoulli_", self, bp::kAllScalarTypes,
                    {Draw::Bernoulli, static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), 0.0, p});
}

// --- copies with conversion: one kernel per destination type and path
// (vectorized or strided: Note [Contiguous elementwise loops]); the source
// type is a uniform switch inside.

template <class O, class I>
struct ConvertFn {
  BP_GPU_HD O operator()(I v) const { return convert<O>(v); }
};

template <LoopPath kPath, class O, class I>
__device__ void copyElements(const OffsetCalculator<2>& walk, int64_t n, O* out, const void* in) {
  elementwiseLoop<kPath>(walk, n, out, ConvertFn<O, I>{}, Operand<I>{static_cast<const I*>(in), I{}});
}

template <LoopPath kPath, class O>
__global__ void copyKernel(OffsetCalculator<2> walk, int64_t n, O* out, const void* in, ScalarType in_type) {
  switch (in_type) {
    case ScalarType::Bool: return copyElements<kPath, O, bool>(walk, n, out, in);
    case ScalarType::UInt8: return copyElements<kPath, O, uint8_t>(walk, n, out, in);
    case ScalarType::Int8: return copyElements<kPath, O, int8_t>(walk, n, out, in);
    case ScalarType::Int32: return copyElements<kPath, O, int32_t>(walk, n, out, in);
    case ScalarType::Int64: return copyElements<kPath, O, int64_t>(walk, n, out, in);
    case ScalarType::Float16: return copyElements<kPath, O, Half>(walk, n, out, in);
    case ScalarType::BFloat16: return copyElements<kPath, O, BFloat16>(walk, n, out, in);
    case ScalarType::Float32: return copyElements<kPath, O, float>(walk, n, out, in);
    case ScalarType::Float64: return copyElements<kPath, O, double>(walk, n, out, in);
    case ScalarType::Int16: return copyElements<kPath, O, int16_t>(walk, n, out, in);
    case ScalarType::UInt16: return copyElements<kPath, O, uint16_t>(walk, n, out, in);
    case ScalarType::UInt32: return copyElements<kPath, O, uint32_t>(walk, n, out, in);
    case ScalarType::UInt64: return copyElements<kPath, O, uint64_t>(walk, n, out, in);
  }
}

bp::Tensor copy_on_device_(const bp::Tensor& self, const bp::Tensor& src) {
  const char* op = "bp::_copy_on_device_";
  const bp::Device device = callDevice(op, self, "self");
  if (isCpuScalar(src)) {  // a cpu scalar broadcast into self
    visitAnyDtype(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      fillWith<T>(op, self, cpuScalarAs<T>(src));
    });
    return self;
  }
  checkOnDevice(op, src, "src", device);
  copyCast(op, self, src);
  return self;
}

}  // namespace

void copyCast(const char* op, const bp::Tensor& dst, const bp::Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int device = dst.device().index;
  // The common case, one buffer into another of the same layout: a plain copy.
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && src.numel() == n) {
    if (dst.data_ptr() == src.data_ptr()) return;  // two views of the same elements
    DeviceGuard guard(device);
    check(gpuMemcpyAsync(dst.data_ptr(), src.data_ptr(), static_cast<size_t>(n) * dst.element_size(),
                         gpuMemcpyDeviceToDevice, currentStream(device)),
          op);
    return;
  }
  const OffsetCalculator<2> walk = makeOffsetCalculator<2>(op, dst.sizes(), {&dst, &src});
  visitAnyDtype(dst.dtype(), [&](auto out_tag) {
    using O = decltype(out_tag);
    visitAnyDtype(src.dtype(), [&](auto in_tag) {
      using I = decltype(in_tag);
      // A misaligned dense copy takes the strided path (the Note says why).
      const LoopPath path = chooseLoopPath(walk, static_cast<const O*>(dst.data_ptr()),
                                           Operand<I>{static_cast<const I*>(src.data_ptr()), I{}});
      auto* kernel =
          path == LoopPath::kVectorized ? &copyKernel<LoopPath::kVectorized, O> : &copyKernel<LoopPath::kStrided, O>;
      launchElements(kernel, n, path == LoopPath::kVectorized ? kUnroll * kVecOf<O, I> : 1, device, walk, n,
                     static_cast<O*>(dst.data_ptr()), static_cast<const void*>(src.data_ptr()), src.dtype());
    });
  });
}

void registerCreationKernels(bp::Library& m, int32_t type) { BP_REGISTER_CREATION_KERNELS(m, type); }

}  // namespace bp_gpu
