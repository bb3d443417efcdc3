#pragma once
// Boxing: how each C++ argument and return type of an unboxed kernel maps to
// a schema type and to an IValue on a Stack.
//
// Note [Canonical C++ signatures]
// Every schema has exactly one C++ signature that unboxed calls use, its
// canonical signature: Tensor and Scalar (and their optionals) by const
// reference, everything else by value, lists as ArrayRef, str as
// std::string_view. Tensor is the ops layer's (backplane/ops/tensor.h); this
// layer sees only TensorBase, and takes any class derived from it that
// adds no data as a tensor type (KernelTensor below). Kernels may declare parameters as the plain types
// (Tensor by value, std::string) and an adapter converts; typed call sites
// must spell the canonical signature, which typed<Sig>() checks. The table
// below is the single source of those mappings; the schema side lives in
// cppSignatureForSchema(). An argument's push() appends its IValue to any
// container of IValues: a Stack, or the inline argument list that a typed
// Autograd kernel saves in its node (Note [Typed Autograd kernels]).

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backplane/core/array_ref.h"
#include "backplane/core/error.h"
#include "backplane/dispatch/dispatch_key.h"
#include "backplane/dispatch/ivalue.h"

namespace backplane {

namespace detail {

constexpr uint64_t backendKeyBit(DeviceType t) { return uint64_t{2} << static_cast<int>(t); }
// A tensor's keys: its backend's, and Autograd when it requires grad (Note
// [Where the Autograd key sits]), without a branch.
inline void addTensorKeys(uint64_t& bits, const TensorBase& t) {
  if (const TensorImpl* impl = t.unsafeGetImpl())
    bits |= backendKeyBit(impl->device().type) |
            (static_cast<uint64_t>(impl->requiresGrad()) << static_cast<int>(DispatchKey::Autograd));
}

// The tensor types of kernel signatures: classes derived from TensorBase
// that add no data (Tensor, in the ops layer). Boxed, a tensor is a
// TensorBase (IValue); unboxing builds the declared type from it. TensorBase
// itself is no kernel type: a kernel declared with it and a call spelled
// with Tensor would share a signature string but not a C++ type.
template <typename T>
concept KernelTensor =
    std::is_base_of_v<TensorBase, T> && !std::is_same_v<T, TensorBase> && sizeof(T) == sizeof(TensorBase);

template <typename T>
struct ArgTraits {
  static constexpr bool supported = false;
};

// Types passed by value whose IValue holds them directly.
template <typename T, const char* Name>
struct ValueArg {
  static constexpr bool supported = true;
  using Canonical = T;
  static constexpr std::string_view name = Name;
  static void push(auto& s, T v) { s.emplace_back(v); }
  static void addKeys(uint64_t&, const T&) {}
};
template <typename T, const char* Name>
struct OptionalValueArg {
  static constexpr bool supported = true;
  using Canonical = std::optional<T>;
  static constexpr std::string_view name = Name;
  static void push(auto& s, const std::optional<T>& v) {
    if (v)
      s.emplace_back(*v);
    else
      s.emplace_back();
  }
  static void addKeys(uint64_t&, const std::optional<T>&) {}
};

inline constexpr char kIntName[] = "int", kOptIntName[] = "int?", kFloatName[] = "float", kOptFloatName[] = "float?",
                      kBoolName[] = "bool", kOptBoolName[] = "bool?", kScalarTypeName[] = "ScalarType",
                      kOptScalarTypeName[] = "ScalarType?";

// Unboxing takes the tensors out of the argument IValues, which the boxed
// adapter pops right after the call (KernelAdapter::boxedImpl).
template <KernelTensor T>
struct ArgTraits<T> {
  static constexpr bool supported = true;
  using Canonical = const T&;
  static constexpr std::string_view name = "Tensor";
  static T fromIValue(IValue& v) { return T(std::move(v.toTensor())); }
  static void push(auto& s, const T& t) { s.emplace_back(static_cast<const TensorBase&>(t)); }
  static void addKeys(uint64_t& bits, const T& t) { addTensorKeys(bits, t); }
};
template <KernelTensor T>
struct ArgTraits<std::optional<T>> {
  static constexpr bool supported = true;
  using Canonical = const std::optional<T>&;
  static constexpr std::string_view name = "Tensor?";
  static std::optional<T> fromIValue(IValue& v) {
    if (v.isNone()) return std::nullopt;
    TensorBase& t = v.toTensor();
    return t.defined() ? std::optional<T>(T(std::move(t))) : std::nullopt;
  }
  static void push(auto& s, const std::optional<T>& t) {
    if (t && t->defined())
      s.emplace_back(static_cast<const TensorBase&>(*t));
    else
      s.emplace_back();
  }
  static void addKeys(uint64_t& bits, const std::optional<T>& t) {
    if (t) addTensorKeys(bits, *t);
  }
};
// A list unboxes into a vector of the declared type, which the ArrayRef
// the kernel receives views for the duration of the call.
template <KernelTensor T>
struct ArgTraits<ArrayRef<T>> {
  static constexpr bool supported = true;
  using Canonical = ArrayRef<T>;
  static constexpr std::string_view name = "Tensor[]";
  static std::vector<T> fromIValue(IValue& v) {
    std::vector<TensorBase>& list = v.toTensorList();
    return std::vector<T>(std::make_move_iterator(list.begin()), std::make_move_iterator(list.end()));
  }
  static void push(auto& s, ArrayRef<T> l) { s.emplace_back(std::vector<TensorBase>(l.begin(), l.end())); }
  static void addKeys(uint64_t& bits, ArrayRef<T> l) {
    for (const T& t : l) addTensorKeys(bits, t);
  }
};
template <KernelTensor T>
struct ArgTraits<ArrayRef<std::optional<T>>> {
  static constexpr bool supported = true;
  using Canonical = ArrayRef<std::optional<T>>;
  static constexpr std::string_view name = "Tensor?[]";
  static std::vector<std::optional<T>> fromIValue(IValue& v) {
    std::vector<std::optional<TensorBase>>& list = v.toOptionalTensorList();
    std::vector<std::optional<T>> out;
    out.reserve(list.size());
    for (std::optional<TensorBase>& t : list) {
      if (t)
        out.emplace_back(T(std::move(*t)));
      else
        out.emplace_back();
    }
    return out;
  }
  static void push(auto& s, ArrayRef<std::optional<T>> l) {
    s.emplace_back(std::vector<std::optional<TensorBase>>(l.begin(), l.end()));
  }
  static void addKeys(uint64_t& bits, ArrayRef<std::optional<T>> l) {
    for (const auto& t : l)
      if (t) addTensorKeys(bits, *t);
  }
};
template <>
struct ArgTraits<int64_t> : ValueArg<int64_t, kIntName> {
  static int64_t fromIValue(IValue& v) { return v.toInt(); }
};
template <>
struct ArgTraits<std::optional<int64_t>> : OptionalValueArg<int64_t, kOptIntName> {
  static std::optional<int64_t> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<int64_t>(v.toInt());
  }
};
template <>
struct ArgTraits<double> : ValueArg<double, kFloatName> {
  static double fromIValue(IValue& v) { return v.toDouble(); }
};
template <>
struct ArgTraits<std::optional<double>> : OptionalValueArg<double, kOptFloatName> {
  static std::optional<double> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<double>(v.toDouble());
  }
};
template <>
struct ArgTraits<bool> : ValueArg<bool, kBoolName> {
  static bool fromIValue(IValue& v) { return v.toBool(); }
};
template <>
struct ArgTraits<std::optional<bool>> : OptionalValueArg<bool, kOptBoolName> {
  static std::optional<bool> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<bool>(v.toBool());
  }
};
template <>
struct ArgTraits<ScalarType> : ValueArg<ScalarType, kScalarTypeName> {
  static ScalarType fromIValue(IValue& v) { return v.toScalarType(); }
};
template <>
struct ArgTraits<std::optional<ScalarType>> : OptionalValueArg<ScalarType, kOptScalarTypeName> {
  static std::optional<ScalarType> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<ScalarType>(v.toScalarType());
  }
};
// A Device argument takes part in dispatch: a factory op with
// device="cuda:0" reaches the CUDA kernel.
template <>
struct ArgTraits<Device> {
  static constexpr bool supported = true;
  using Canonical = Device;
  static constexpr std::string_view name = "Device";
  static Device fromIValue(IValue& v) { return v.toDevice(); }
  static void push(auto& s, Device d) { s.emplace_back(d); }
  static void addKeys(uint64_t& bits, Device d) { bits |= backendKeyBit(d.type); }
};
template <>
struct ArgTraits<std::optional<Device>> {
  static constexpr bool supported = true;
  using Canonical = std::optional<Device>;
  static constexpr std::string_view name = "Device?";
  static std::optional<Device> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<Device>(v.toDevice());
  }
  static void push(auto& s, std::optional<Device> d) {
    if (d)
      s.emplace_back(*d);
    else
      s.emplace_back();
  }
  static void addKeys(uint64_t& bits, std::optional<Device> d) {
    if (d) bits |= backendKeyBit(d->type);
  }
};
template <>
struct ArgTraits<IntArrayRef> {
  static constexpr bool supported = true;
  using Canonical = IntArrayRef;
  static constexpr std::string_view name = "int[]";
  static IntArrayRef fromIValue(IValue& v) { return IntArrayRef(v.toIntList()); }
  static void push(auto& s, IntArrayRef l) { s.emplace_back(l.vec()); }
  static void addKeys(uint64_t&, IntArrayRef) {}
};
template <>
struct ArgTraits<std::optional<IntArrayRef>> {
  static constexpr bool supported = true;
  using Canonical = std::optional<IntArrayRef>;
  static constexpr std::string_view name = "int[]?";
  static std::optional<IntArrayRef> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<IntArrayRef>(IntArrayRef(v.toIntList()));
  }
  static void push(auto& s, std::optional<IntArrayRef> l) {
    if (l)
      s.emplace_back(l->vec());
    else
      s.emplace_back();
  }
  static void addKeys(uint64_t&, std::optional<IntArrayRef>) {}
};
// "bool[]" as a fixed-size mask (PyTorch's std::array<bool, N> output_mask):
// a list of another length is an error naming both lengths.
template <size_t N>
struct ArgTraits<std::array<bool, N>> {
  static constexpr bool supported = true;
  using Canonical = std::array<bool, N>;
  static constexpr std::string_view name = "bool[]";
  static std::array<bool, N> fromIValue(IValue& v) {
    const std::vector<bool>& l = v.toBoolList();
    BP_CHECK(l.size() == N, "a bool[] argument of ", l.size(), " values was passed where the kernel takes ", N,
             "; pass exactly ", N);
    std::array<bool, N> a{};
    for (size_t i = 0; i < N; ++i) a[i] = l[i];
    return a;
  }
  static void push(auto& s, const std::array<bool, N>& a) { s.emplace_back(std::vector<bool>(a.begin(), a.end())); }
  static void addKeys(uint64_t&, const std::array<bool, N>&) {}
};
template <>
struct ArgTraits<ArrayRef<double>> {
  static constexpr bool supported = true;
  using Canonical = ArrayRef<double>;
  static constexpr std::string_view name = "float[]";
  static ArrayRef<double> fromIValue(IValue& v) { return ArrayRef<double>(v.toDoubleList()); }
  static void push(auto& s, ArrayRef<double> l) { s.emplace_back(l.vec()); }
  static void addKeys(uint64_t&, ArrayRef<double>) {}
};
template <>
struct ArgTraits<std::string_view> {
  static constexpr bool supported = true;
  using Canonical = std::string_view;
  static constexpr std::string_view name = "str";
  static std::string_view fromIValue(IValue& v) { return v.toString(); }
  static void push(auto& s, std::string_view sv) { s.emplace_back(std::string(sv)); }
  static void addKeys(uint64_t&, std::string_view) {}
};
template <>
struct ArgTraits<std::optional<std::string_view>> {
  static constexpr bool supported = true;
  using Canonical = std::optional<std::string_view>;
  static constexpr std::string_view name = "str?";
  static std::optional<std::string_view> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<std::string_view>(v.toString());
  }
  static void push(auto& s, std::optional<std::string_view> sv) {
    if (sv)
      s.emplace_back(std::string(*sv));
    else
      s.emplace_back();
  }
  static void addKeys(uint64_t&, std::optional<std::string_view>) {}
};
template <>
struct ArgTraits<Scalar> {
  static constexpr bool supported = true;
  using Canonical = const Scalar&;
  static constexpr std::string_view name = "Scalar";
  static Scalar fromIValue(IValue& v) { return v.toScalar(); }
  static void push(auto& s, const Scalar& v) { s.emplace_back(v); }
  static void addKeys(uint64_t&, const Scalar&) {}
};
template <>
struct ArgTraits<std::optional<Scalar>> {
  static constexpr bool supported = true;
  using Canonical = const std::optional<Scalar>&;
  static constexpr std::string_view name = "Scalar?";
  static std::optional<Scalar> fromIValue(IValue& v) {
    return v.isNone() ? std::nullopt : std::optional<Scalar>(v.toScalar());
  }
  static void push(auto& s, const std::optional<Scalar>& v) {
    if (v)
      s.emplace_back(*v);
    else
      s.emplace_back();
  }
  static void addKeys(uint64_t&, const std::optional<Scalar>&) {}
};

// The ArgTraits key for a kernel parameter type as a user may write it.
template <typename P>
struct UserArg {
  using type = std::decay_t<P>;
};
template <>
struct UserArg<std::string> {
  using type = std::string_view;
};
template <>
struct UserArg<const std::string&> {
  using type = std::string_view;
};
template <>
struct UserArg<std::optional<std::string>> {
  using type = std::optional<std::string_view>;
};
template <>
struct UserArg<const std::optional<std::string>&> {
  using type = std::optional<std::string_view>;
};
template <typename P>
using arg_key_t = typename UserArg<P>::type;
template <typename P>
using canonical_t = typename ArgTraits<arg_key_t<P>>::Canonical;

// Converts a canonical argument to the parameter type the kernel declared.
template <typename P, typename C>
decltype(auto) toUserArg(C&& c) {
  using D = std::decay_t<P>;
  if constexpr (std::is_same_v<D, std::string>)
    return std::string(c);
  else if constexpr (std::is_same_v<D, std::optional<std::string>>)
    return c ? std::optional<std::string>(std::string(*c)) : std::nullopt;
  else
    return std::forward<C>(c);
}

template <typename R>
struct ReturnTraits {
  static constexpr bool supported = false;
};
template <>
struct ReturnTraits<void> {
  static constexpr bool supported = true;
  static constexpr size_t count = 0;
  static std::string name() { return "()"; }
};
template <typename T>
struct SingleReturn {
  static constexpr bool supported = true;
  static constexpr size_t count = 1;
  static void push(Stack& s, T v) { s.emplace_back(std::move(v)); }
};
template <KernelTensor T>
struct ReturnTraits<T> {
  static constexpr bool supported = true;
  static constexpr size_t count = 1;
  static std::string name() { return "Tensor"; }
  static void push(Stack& s, T v) { s.emplace_back(static_cast<TensorBase&&>(std::move(v))); }
  static T pop(IValue& v) { return T(std::move(v).toTensor()); }
};
template <>
struct ReturnTraits<int64_t> : SingleReturn<int64_t> {
  static std::string name() { return "int"; }
  static int64_t pop(IValue& v) { return v.toInt(); }
};
template <>
struct ReturnTraits<double> : SingleReturn<double> {
  static std::string name() { return "float"; }
  static double pop(IValue& v) { return v.toDouble(); }
};
template <>
struct ReturnTraits<bool> : SingleReturn<bool> {
  static std::string name() { return "bool"; }
  static bool pop(IValue& v) { return v.toBool(); }
};
template <>
struct ReturnTraits<Scalar> : SingleReturn<Scalar> {
  static std::string name() { return "Scalar"; }
  static Scalar pop(IValue& v) { return v.toScalar(); }
};
template <KernelTensor T>
struct ReturnTraits<std::vector<T>> {
  static constexpr bool supported = true;
  static constexpr size_t count = 1;
  static std::string name() { return "Tensor[]"; }
  static void push(Stack& s, std::vector<T> v) {
    s.emplace_back(std::vector<TensorBase>(std::make_move_iterator(v.begin()), std::make_move_iterator(v.end())));
  }
  static std::vector<T> pop(IValue& v) {
    std::vector<TensorBase>& list = v.toTensorList();
    return std::vector<T>(std::make_move_iterator(list.begin()), std::make_move_iterator(list.end()));
  }
};
template <typename... Ts>
struct ReturnTraits<std::tuple<Ts...>> {
  static constexpr bool supported = ((ReturnTraits<Ts>::supported && ReturnTraits<Ts>::count == 1) && ...);
  static constexpr size_t count = sizeof...(Ts);
  static std::string name() {
    std::string n = "(";
    ((n += (n.size() > 1 ? ", " : "") + ReturnTraits<Ts>::name()), ...);
    return n + ")";
  }
  static void push(Stack& s, std::tuple<Ts...> v) {
    std::apply([&](auto&... e) { (ReturnTraits<Ts>::push(s, std::move(e)), ...); }, v);
  }
};

// "(Tensor, Scalar) -> Tensor" for a kernel with these parameter types.
template <typename Ret, typename... Params>
std::string cppSignatureString() {
  std::string s = "(";
  ((s += (s.size() > 1 ? ", " : "") + std::string(ArgTraits<arg_key_t<Params>>::name)), ...);
  return s + ") -> " + ReturnTraits<Ret>::name();
}

// Whether every tensor among a call's arguments has a dtype in `mask` (bit i
// = ScalarType i): plain, optional (when present) and each list element
// (Note [Declared dtypes] in operator_entry.h). Other arguments pass.
inline bool tensorDtypeIn(uint64_t mask, const TensorBase& t) {
  const TensorImpl* impl = t.unsafeGetImpl();
  return impl == nullptr || ((mask >> static_cast<int>(impl->dtype())) & 1) != 0;
}
template <typename T>
bool argDtypesIn(uint64_t, const T&) {
  return true;
}
template <KernelTensor T>
bool argDtypesIn(uint64_t mask, const T& t) {
  return tensorDtypeIn(mask, t);
}
template <KernelTensor T>
bool argDtypesIn(uint64_t mask, const std::optional<T>& t) {
  return !t || tensorDtypeIn(mask, *t);
}
template <KernelTensor T>
bool argDtypesIn(uint64_t mask, const ArrayRef<T>& list) {
  for (const T& t : list)
    if (!tensorDtypeIn(mask, t)) return false;
  return true;
}
template <KernelTensor T>
bool argDtypesIn(uint64_t mask, const ArrayRef<std::optional<T>>& list) {
  for (const std::optional<T>& t : list)
    if (t && !tensorDtypeIn(mask, *t)) return false;
  return true;
}
template <typename... Args>
bool argsDtypesIn([[maybe_unused]] uint64_t mask, const Args&... args) {  // unused for ops without arguments
  return (argDtypesIn(mask, args) && ...);
}
// The same, skipping argument i where bit i of `exempt` is set (Note
// [Declared dtypes]: arguments whose dtype the op's rule fixes).
template <typename... Args>
bool argsDtypesIn([[maybe_unused]] uint64_t mask, [[maybe_unused]] uint64_t exempt, const Args&... args) {
  if (exempt == 0) return argsDtypesIn(mask, args...);
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return (((I < 64 && ((exempt >> I) & 1) != 0) || argDtypesIn(mask, args)) && ...);
  }
  (std::index_sequence_for<Args...>{});
}

template <typename... Args>
inline constexpr bool kAllArgsSupported = (ArgTraits<arg_key_t<Args>>::supported && ...);

}  // namespace detail
}  // namespace backplane
