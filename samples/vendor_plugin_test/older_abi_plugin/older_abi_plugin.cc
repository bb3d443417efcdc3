// A device plugin as a vendor wrote it against plugin ABI 1.2: a device
// "olderabi" whose memory is host memory and three kernels (neg.out, abs.out,
// relu.out) that declare no dtypes (1.2 had no BP_KernelDesc.dtypes): each
// switches on the dtype, covers every dtype 1.2 has, and raises "unknown
// dtype" for anything else. Built unchanged against a newer SDK it must
// still pass conformance: see CMakeLists.txt for the three builds.
#include <backplane/plugin.hpp>

#include <type_traits>

namespace {

struct OlderAbiBackend final : bp::HostMemoryBackend {
  int deviceCount() override { return 1; }
};

// Runs fn(T{}) for the tensor's dtype: the nine dtypes of ABI 1.2.
template <class Fn>
void switchOnDtype(bp::ScalarType t, const char* what, Fn&& fn) {
  switch (t) {
    case bp::ScalarType::Bool: return fn(bool{});
    case bp::ScalarType::UInt8: return fn(uint8_t{});
    case bp::ScalarType::Int8: return fn(int8_t{});
    case bp::ScalarType::Int32: return fn(int32_t{});
    case bp::ScalarType::Int64: return fn(int64_t{});
    case bp::ScalarType::Float16: return fn(bp::Half{});
    case bp::ScalarType::BFloat16: return fn(bp::BFloat16{});
    case bp::ScalarType::Float32: return fn(float{});
    case bp::ScalarType::Float64: return fn(double{});
    default:
#ifdef OLDER_ABI_TYPED_ERROR
      bp::unsupportedDtype(t, what);
#else
      bp::fail(BP_INVALID_ARGUMENT, std::string(what) + ": unknown dtype");
#endif
  }
}

// out = f(self) elementwise, computed in float for the 16-bit floats and in
// unsigned arithmetic for the integers (negating INT_MIN wraps, as on the
// CPU).
template <class Op>
bp::Tensor unaryOut(const bp::Tensor& self, const bp::Tensor& out, const char* what, Op op) {
  switchOnDtype(out.dtype(), what, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      bp::forEach<bool>(out, self, [&](bool x) { return op(x); });
    } else if constexpr (std::is_same_v<T, bp::Half> || std::is_same_v<T, bp::BFloat16>) {
      bp::forEach<T>(out, self, [&](T x) { return T(op(static_cast<float>(x))); });
    } else if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      bp::forEach<T>(out, self, [&](T x) { return static_cast<T>(op(static_cast<U>(x), x)); });
    } else {
      bp::forEach<T>(out, self, [&](T x) { return op(x); });
    }
  });
  return out;
}

// Each op on a float or bool, and on an integer as (its unsigned bits, its value).
struct Neg {
  template <class F>
  F operator()(F x) const {
    return -x;
  }
  template <class U, class T>
  U operator()(U bits, T) const {
    return static_cast<U>(U{0} - bits);
  }
};
struct Abs {
  bool operator()(bool x) const { return x; }
  template <class F>
  F operator()(F x) const {
    return x < 0 ? -x : x;
  }
  template <class U, class T>
  U operator()(U bits, T x) const {
    return x < 0 ? static_cast<U>(U{0} - bits) : bits;
  }
};
struct Relu {
  template <class F>
  F operator()(F x) const {
    return x < 0 ? F(0) : x;
  }  // NaN stays NaN
  template <class U, class T>
  U operator()(U bits, T x) const {
    return x < 0 ? U{0} : bits;
  }
};

bp::Tensor negOut(const bp::Tensor& self, const bp::Tensor& out) { return unaryOut(self, out, "neg.out", Neg{}); }
bp::Tensor absOut(const bp::Tensor& self, const bp::Tensor& out) { return unaryOut(self, out, "abs.out", Abs{}); }
bp::Tensor reluOut(const bp::Tensor& self, const bp::Tensor& out) { return unaryOut(self, out, "relu.out", Relu{}); }

void init(bp::Library& m) {
  static OlderAbiBackend backend;
  const int32_t dev = m.registerDevice("olderabi", &backend);
  m.impl("neg.out", dev, &negOut);
  m.impl("abs.out", dev, &absOut);
  m.impl("relu.out", dev, &reluOut);
}

}  // namespace

BACKPLANE_PLUGIN("older_abi", "1.0.0", init)
