// The host side of the plugin ABI that does not involve loading: errors,
// tensor and operator access for plugins, the device bridge, and the kernel
// adapters (boxed always; unboxed for signatures with a compiled adapter).
#include <cstring>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/runtime/process_group.h"
#include "backplane/runtime/store.h"
#include "loaded_plugin.h"
#include "typed_calls.h"

struct BP_Error {
  BP_ErrorCode code;
  std::string message;
};

namespace backplane::plugin_detail {

static_assert(sizeof(Tensor) == sizeof(BP_Tensor*), "TensorList is passed to plugins without copying");

// Note [ABI enum numbering]
// Dtypes, error codes, device types and dispatch keys cross the ABI by
// number (static_cast both ways), so every value is checked here: a swap in
// a host enum must not compile.
#define BP_SAME_DTYPE(host, abi)                                                                 \
  static_assert(static_cast<int>(ScalarType::host) == abi, "ScalarType::" #host " must be " #abi \
                                                           " in the ABI "                        \
                                                           "(Note [ABI enum numbering])")
BP_SAME_DTYPE(Bool, BP_BOOL);
BP_SAME_DTYPE(UInt8, BP_UINT8);
BP_SAME_DTYPE(Int8, BP_INT8);
BP_SAME_DTYPE(Int32, BP_INT32);
BP_SAME_DTYPE(Int64, BP_INT64);
BP_SAME_DTYPE(Float16, BP_FLOAT16);
BP_SAME_DTYPE(BFloat16, BP_BFLOAT16);
BP_SAME_DTYPE(Float32, BP_FLOAT32);
BP_SAME_DTYPE(Float64, BP_FLOAT64);
BP_SAME_DTYPE(Int16, BP_INT16);
BP_SAME_DTYPE(UInt16, BP_UINT16);
BP_SAME_DTYPE(UInt32, BP_UINT32);
BP_SAME_DTYPE(UInt64, BP_UINT64);
#undef BP_SAME_DTYPE
static_assert(kNumScalarTypes == BP_UINT64 + 1,
              "a new ScalarType needs a BP_ScalarType value in plugin_api.h (Note [ABI enum numbering])");

#define BP_SAME_CODE(host, abi)                                                                              \
  static_assert(static_cast<int>(absl::StatusCode::host) == abi, "absl::StatusCode::" #host " must be " #abi \
                                                                 " in the ABI "                              \
                                                                 "(Note [ABI enum numbering])")
BP_SAME_CODE(kOk, BP_OK);
BP_SAME_CODE(kCancelled, BP_CANCELLED);
BP_SAME_CODE(kUnknown, BP_UNKNOWN);
BP_SAME_CODE(kInvalidArgument, BP_INVALID_ARGUMENT);
BP_SAME_CODE(kDeadlineExceeded, BP_DEADLINE_EXCEEDED);
BP_SAME_CODE(kNotFound, BP_NOT_FOUND);
BP_SAME_CODE(kAlreadyExists, BP_ALREADY_EXISTS);
BP_SAME_CODE(kPermissionDenied, BP_PERMISSION_DENIED);
BP_SAME_CODE(kResourceExhausted, BP_RESOURCE_EXHAUSTED);
BP_SAME_CODE(kFailedPrecondition, BP_FAILED_PRECONDITION);
BP_SAME_CODE(kAborted, BP_ABORTED);
BP_SAME_CODE(kOutOfRange, BP_OUT_OF_RANGE);
BP_SAME_CODE(kUnimplemented, BP_UNIMPLEMENTED);
BP_SAME_CODE(kInternal, BP_INTERNAL);
BP_SAME_CODE(kUnavailable, BP_UNAVAILABLE);
BP_SAME_CODE(kDataLoss, BP_DATA_LOSS);
#undef BP_SAME_CODE

// Device type 0 is cpu (BP_Device); BP_KernelCall.dispatch_keys has device
// type t's backend key at bit 1 + t and functionality keys at bits 40 and up
// (BP_HostApi.op_redispatch).
static_assert(static_cast<int>(DeviceType::CPU) == 0, "device type 0 is cpu in the ABI (Note [ABI enum numbering])");
constexpr bool backendKeyBitsAsDocumented() {
  for (int t = 0; t < kMaxDeviceTypes; ++t) {
    if (DispatchKeySet(backendKey(static_cast<DeviceType>(t))).raw() != uint64_t{1} << (1 + t)) return false;
  }
  return static_cast<int>(DispatchKey::LastBackend) < 40 && static_cast<int>(DispatchKey::Autograd) >= 40;
}
static_assert(backendKeyBitsAsDocumented(), "the dispatch key layout differs from BP_HostApi.op_redispatch's");

namespace {

BP_Tensor* toBP(const Tensor& t) { return reinterpret_cast<BP_Tensor*>(t.unsafeGetImpl()); }
TensorImpl* implOf(const BP_Tensor* t) { return reinterpret_cast<TensorImpl*>(const_cast<BP_Tensor*>(t)); }
// A Tensor holding a new reference to `t`.
Tensor borrowTensor(const BP_Tensor* t) { return Tensor(IntrusivePtr<TensorImpl>(implOf(t))); }
// A Tensor taking over the reference the plugin handed us.
Tensor adoptTensor(BP_Tensor* t) { return Tensor(IntrusivePtr<TensorImpl>::reclaim(implOf(t))); }
// Gives the caller a new reference.
BP_Tensor* giveTensor(Tensor t) {
  IntrusivePtr<TensorImpl> p(t.unsafeGetImpl());
  return reinterpret_cast<BP_Tensor*>(p.release());
}

BP_Value noneValue() { return BP_Value{}; }

void releaseReturns(BP_Value* returns, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (returns[i].tag == BP_VALUE_TENSOR && returns[i].u.tensor) adoptTensor(returns[i].u.tensor);
    returns[i] = noneValue();
  }
}

// Arrays built for one call where an IValue's layout differs from the ABI's.
struct Scratch {
  std::vector<std::vector<BP_Tensor*>> tensors;
  std::vector<std::vector<uint8_t>> bytes;
};

// IValue -> BP_Value for a call into a plugin. Borrowed: the IValue (and
// `scratch`) must outlive the call.
BP_Value toValue(const IValue& v, Scratch& scratch) {
  BP_Value out{};
  switch (v.tag()) {
    case IValue::Tag::None: break;
    case IValue::Tag::Tensor:
      if (v.toTensor().defined()) {
        out.tag = BP_VALUE_TENSOR;
        out.u.tensor = toBP(v.toTensor());
      }
      break;
    case IValue::Tag::Int:
      out.tag = BP_VALUE_INT;
      out.u.i = v.toInt();
      break;
    case IValue::Tag::Double:
      out.tag = BP_VALUE_DOUBLE;
      out.u.d = v.toDouble();
      break;
    case IValue::Tag::Bool:
      out.tag = BP_VALUE_BOOL;
      out.u.b = v.toBool();
      break;
    case IValue::Tag::Scalar: {
      Scalar s = v.toScalar();
      if (s.isBool()) {
        out.tag = BP_VALUE_BOOL;
        out.u.b = s.toBool();
      } else if (s.isIntegral()) {
        out.tag = BP_VALUE_INT;
        out.u.i = s.toInt();
      } else {
        out.tag = BP_VALUE_DOUBLE;
        out.u.d = s.toDouble();
      }
      break;
    }
    case IValue::Tag::String:
      out.tag = BP_VALUE_STRING;
      out.u.str = {v.toString().data(), v.toString().size()};
      break;
    case IValue::Tag::ScalarType:
      out.tag = BP_VALUE_SCALAR_TYPE;
      out.u.scalar_type = static_cast<BP_ScalarType>(v.toScalarType());
      break;
    case IValue::Tag::Device:
      out.tag = BP_VALUE_DEVICE;
      out.u.device = {static_cast<int32_t>(v.toDevice().type), v.toDevice().resolved().index};
      break;
    case IValue::Tag::IntList:
      out.tag = BP_VALUE_INT_LIST;
      out.u.int_list = {v.toIntList().data(), v.toIntList().size()};
      break;
    case IValue::Tag::DoubleList:
      out.tag = BP_VALUE_DOUBLE_LIST;
      out.u.double_list = {v.toDoubleList().data(), v.toDoubleList().size()};
      break;
    case IValue::Tag::BoolList: {
      // std::vector<bool> has no data(): copy into bytes.
      auto& bytes = scratch.bytes.emplace_back(v.toBoolList().begin(), v.toBoolList().end());
      out.tag = BP_VALUE_BOOL_LIST;
      out.u.bool_list = {bytes.data(), bytes.size()};
      break;
    }
    case IValue::Tag::TensorList:
      out.tag = BP_VALUE_TENSOR_LIST;
      out.u.tensor_list = {reinterpret_cast<BP_Tensor* const*>(v.toTensorList().data()), v.toTensorList().size()};
      break;
    case IValue::Tag::OptionalTensorList: {
      auto& arr = scratch.tensors.emplace_back();
      for (const auto& t : v.toOptionalTensorList()) arr.push_back(t && t->defined() ? toBP(*t) : nullptr);
      out.tag = BP_VALUE_OPTIONAL_TENSOR_LIST;
      out.u.tensor_list = {arr.data(), arr.size()};
      break;
    }
  }
  return out;
}

// BP_Value -> IValue for values coming from a plugin or into the host. With
// `adopt`, a TENSOR's reference is taken over; otherwise it is borrowed.
IValue fromValue(const BP_Value& v, bool adopt) {
  switch (v.tag) {
    case BP_VALUE_NONE: return IValue();
    case BP_VALUE_TENSOR:
      if (!v.u.tensor) return IValue();
      return adopt ? IValue(adoptTensor(v.u.tensor)) : IValue(borrowTensor(v.u.tensor));
    case BP_VALUE_INT: return IValue(v.u.i);
    case BP_VALUE_DOUBLE: return IValue(v.u.d);
    case BP_VALUE_BOOL: return IValue(v.u.b != 0);
    case BP_VALUE_STRING: return IValue(std::string(v.u.str.data, v.u.str.size));
    case BP_VALUE_SCALAR_TYPE: {
      BP_CHECK(v.u.scalar_type >= 0 && v.u.scalar_type < kNumScalarTypes, "invalid scalar type ", v.u.scalar_type);
      return IValue(static_cast<ScalarType>(v.u.scalar_type));
    }
    case BP_VALUE_DEVICE:
      return IValue(Device(static_cast<DeviceType>(v.u.device.type), static_cast<DeviceIndex>(v.u.device.index)));
    case BP_VALUE_INT_LIST:
      return IValue(std::vector<int64_t>(v.u.int_list.data, v.u.int_list.data + v.u.int_list.size));
    case BP_VALUE_DOUBLE_LIST:
      return IValue(std::vector<double>(v.u.double_list.data, v.u.double_list.data + v.u.double_list.size));
    case BP_VALUE_BOOL_LIST:
      return IValue(std::vector<bool>(v.u.bool_list.data, v.u.bool_list.data + v.u.bool_list.size));
    case BP_VALUE_TENSOR_LIST: {
      std::vector<Tensor> list;
      for (size_t i = 0; i < v.u.tensor_list.size; ++i) {
        BP_CHECK(v.u.tensor_list.data[i] != nullptr, "a Tensor[] value holds a NULL tensor at index ", i);
        list.push_back(borrowTensor(v.u.tensor_list.data[i]));
      }
      return IValue(std::move(list));
    }
    case BP_VALUE_OPTIONAL_TENSOR_LIST: {
      std::vector<std::optional<Tensor>> list;
      for (size_t i = 0; i < v.u.tensor_list.size; ++i)
        list.push_back(v.u.tensor_list.data[i] ? std::optional<Tensor>(borrowTensor(v.u.tensor_list.data[i]))
                                               : std::nullopt);
      return IValue(std::move(list));
    }
  }
  BP_THROW(kInvalidArgument, "invalid BP_Value tag ", v.tag);
}

// ------------------------------------------------------------- kernels

struct PluginKernel final : OperatorKernel {
  LoadedPlugin* plugin;
  // plugin->slot and &plugin->gate, copied so that a call's entry (Note
  // [Plugin call tracking]) reads them from the kernel it already holds
  // instead of through the plugin: one dependent load fewer per call.
  int slot = -1;
  const PluginGate* gate = nullptr;
  BP_KernelFn fn;
  // The typed entry (ABI 1.14, Note [Typed kernel entries]), when the
  // plugin gave one and its signature has a compiled typed call here.
  BP_TypedKernelFn typed_fn = nullptr;
  void* ctx;
  const BP_Operator* op;  // null for a fallback: the op comes with each call
  std::string context;    // for messages
  // Built against ABI 1.0-1.4: must not see a later dtype (Note [Dtypes of
  // older plugins] in plugin_api.h).
  bool legacy_dtypes = false;
  // An impl kernel of a plugin built against ABI 1.7 or later: BP_DECLINED
  // declines the call (Note [Declined calls]); `handle` is its op.
  bool may_decline = false;
  std::optional<OperatorHandle> handle;
  // A plugin operator's meta (BP_HostApi.meta, Note [A plugin's own
  // operators]): called with the op's arguments and no returns; it returns
  // nothing and leaves the stack empty.
  bool meta = false;
};

// Note [Dtypes of older plugins]: a tensor the declared set let through can
// still reach a 1.0-1.4 plugin's backend fallback, and a dtype argument
// (zeros(dtype=int16)) reaches its kernel whatever the tensors are: refused
// here, naming the plugin's ABI version, before the plugin sees the value.
[[gnu::cold, gnu::noinline]] void checkLegacyDtypes(const PluginKernel& k, const OperatorHandle& op, const Stack& stack,
                                                    size_t n) {
  std::optional<ScalarType> bad = ::backplane::detail::firstRefusedDtype(kAbi14Dtypes.mask(), stack, n);
  const char* what = "a tensor of dtype ";
  for (size_t i = stack.size() - n; !bad && i < stack.size(); ++i) {
    if (stack[i].isScalarType() && static_cast<int>(stack[i].toScalarType()) >= kAbi14NumDtypes) {
      bad = stack[i].toScalarType();
      what = "the dtype argument ";
    }
  }
  if (!bad) return;
  BP_THROW(kInvalidArgument, op.operatorName().qualifiedName(), ": ", k.context, " cannot be handed ", what,
           scalarTypeName(*bad), ": plugin '", k.plugin->status.name, "' was built for plugin ABI ",
           k.plugin->status.abi_major, ".", k.plugin->status.abi_minor, ", which has no ", scalarTypeName(*bad),
           " (ABI 1.5 added int16, uint16, uint32 and uint64). Rebuild the plugin for ABI 1.5 or later (its "
           "BP_TARGET_ABI_MINOR, or this host's SDK), or use a dtype it knows (convert with .to(dtype))");
}

// "kernel of plugin 'P' for OP on DEVICE": what failed, for the error
// message (built on the error path only).
[[gnu::cold, gnu::noinline]] std::string kernelErrorContext(const PluginKernel& k, const BP_Operator* op,
                                                            DispatchKeySet ks) {
  const std::string device = dispatchKeyName(ks.highestBackendKey());
  return k.op ? strCat(k.context, " on ", device)
              : strCat(k.context, " (for ", reinterpret_cast<const OperatorEntry*>(op)->qualifiedName(), ") on ",
                       device);
}

// A kernel threw past the ABI, which plugins must not do (Note [Exceptions
// at the ABI boundary]; the SDK's adapters catch for them). The host catches
// what it can: an exception from C++ code with unwind tables. Call only
// inside a catch block.
[[noreturn, gnu::cold, gnu::noinline]] void throwKernelThrew(const PluginKernel& k, const BP_Operator* op,
                                                             DispatchKeySet ks) {
  const absl::Status s = statusFromCurrentException();
  BP_THROW(kInternal, kernelErrorContext(k, op, ks),
           " threw an exception (plugins must return errors, not throw): ", s.message());
}

// A kernel's error, thrown (Note [Declined calls]: BP_DECLINED from a
// fallback of an ABI 1.7 plugin is refused with its own message; from an
// older plugin the code means nothing and is an error like any other).
[[noreturn, gnu::cold, gnu::noinline]] void throwKernelError(const PluginKernel& k, BP_Error* err,
                                                             const BP_Operator* op, DispatchKeySet ks) {
  if (err->code == BP_DECLINED && k.op == nullptr && knowsAbi17Declines(*k.plugin)) {
    std::unique_ptr<BP_Error> owned(err);
    BP_THROW(kInternal, kernelErrorContext(k, op, ks), " returned BP_DECLINED (", owned->message,
             "), which only impl kernels may: a fallback serves every call it gets, or raises an error");
  }
  throwPluginError(*k.plugin, err, kernelErrorContext(k, op, ks));
}

// The reason of a decline (its message), taking the error.
[[gnu::cold, gnu::noinline]] std::string declineReason(BP_Error* err) {
  std::unique_ptr<BP_Error> owned(err);
  return owned->message.empty() ? std::string("no reason given") : std::move(owned->message);
}

[[noreturn, gnu::cold, gnu::noinline]] void throwUnloaded(const PluginKernel& k) {
  BP_THROW(kUnavailable, k.context, ": plugin '", k.plugin->status.name, "' has been unloaded");
}

// Runs `call` (the plugin kernel, through fn or typed_fn) inside the
// plugin; converts its error; `release` releases partial returns. Returns
// nullptr, or the BP_DECLINED error of a kernel that may decline (Note
// [Declined calls]): the caller then serves the call elsewhere.
template <typename Call, typename Release>
[[gnu::always_inline]] inline BP_Error* invokeWith(const PluginKernel& k, const BP_Operator* op, DispatchKeySet ks,
                                                   const Call& call, const Release& release) {
  BP_Error* err;
  {
    PluginCallScope scope(k.slot, *k.gate);
    if (!scope.entered()) [[unlikely]]
      throwUnloaded(k);
    try {
      err = call();
    } catch (...) {
      release();
      throwKernelThrew(k, op, ks);
    }
  }
  if (err) [[unlikely]] {
    release();
    if (err->code == BP_DECLINED && k.may_decline) return err;
    throwKernelError(k, err, op, ks);
  }
  return nullptr;
}

// invokeWith() through fn, with the arguments and returns as BP_Values.
[[gnu::always_inline]] inline BP_Error* invoke(const PluginKernel& k, const BP_Operator* op, DispatchKeySet ks,
                                               const BP_Value* args, size_t nargs, BP_Value* rets, size_t nrets) {
  BP_KernelCall call{BP_KernelCall_STRUCT_SIZE, op, ks.raw(), args, nargs, rets, nrets};
  return invokeWith(
      k, op, ks, [&] { return k.fn(k.ctx, &call); }, [&] { releaseReturns(rets, nrets); });
}

[[noreturn, gnu::cold, gnu::noinline]] void throwMissingReturn(const PluginKernel& k, size_t i) {
  BP_THROW(kInternal, k.context, " did not set return ", i,
           " (or set a value of the wrong kind; a tensor return may be left undefined only where the op's "
           "output_mask is false)");
}

// Note [Plugin returns]
// A plugin kernel's returns are NONE, TENSOR, INT, DOUBLE or BOOL (ABI 1.0,
// BP_Value), and each must be what its schema says: the host checks every
// return before it takes any (a bad one throws, naming the kernel and the
// return, after releasing the tensors the kernel did return), so no value
// of the wrong kind reaches the caller and no reference leaks. INT serves an
// int, float or Scalar return; DOUBLE a float or Scalar; BOOL a bool or
// Scalar. (Found by fuzz_plugin_abi: a bool return set to a tensor reached
// the caller.)
bool returnFits(const BP_Value& v, const SchemaType& t) {
  const bool single = !t.is_list;
  switch (v.tag) {
    case BP_VALUE_NONE: return t.is_optional;
    case BP_VALUE_TENSOR: return v.u.tensor ? single && t.base == BaseType::Tensor : t.is_optional;
    case BP_VALUE_INT:
      return single && (t.base == BaseType::Int || t.base == BaseType::Float || t.base == BaseType::Scalar);
    case BP_VALUE_DOUBLE: return single && (t.base == BaseType::Float || t.base == BaseType::Scalar);
    case BP_VALUE_BOOL: return single && (t.base == BaseType::Bool || t.base == BaseType::Scalar);
    default: return false;
  }
}

// Note [Masked returns]
// A backward op with an `output_mask` (bool[], as conv2d_backward's)
// computes only the returns its mask asks for, as PyTorch's do; the others
// come back undefined. So a plugin kernel may return NONE (or a NULL
// TENSOR) for a Tensor return whose mask value is false, and the caller gets
// an undefined tensor there. Any other missing return is still refused.
bool maskedOut(const FunctionSchema& s, const Stack& stack, size_t first_arg, size_t j) {
  const auto& args = s.arguments();
  if (s.returns()[j].type.base != BaseType::Tensor || s.returns()[j].type.is_list) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name != "output_mask") continue;
    const IValue& v = stack[first_arg + i];
    return v.isBoolList() && j < v.toBoolList().size() && !v.toBoolList()[j];
  }
  return false;
}

[[noreturn, gnu::cold]] void throwBadReturn(const PluginKernel& k, BP_Value* rets, size_t n, size_t i) {
  releaseReturns(rets, n);
  throwMissingReturn(k, i);
}

void pluginBoxed(OperatorKernel* functor, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  const auto& k = *static_cast<PluginKernel*>(functor);
  const FunctionSchema& s = op.schema();
  const size_t n = s.arguments().size(), m = k.meta ? 0 : s.returns().size();
  if (stack->size() < n) [[unlikely]]
    ::backplane::detail::throwBadArgumentCount(op, n, stack->size());
  if (k.legacy_dtypes) [[unlikely]]
    checkLegacyDtypes(k, op, *stack, n);
  Scratch scratch;
  absl::InlinedVector<BP_Value, 8> in;
  for (size_t i = stack->size() - n; i < stack->size(); ++i) in.push_back(toValue((*stack)[i], scratch));
  absl::InlinedVector<BP_Value, 2> out(m, noneValue());
  const BP_Operator* bop = k.op ? k.op : reinterpret_cast<const BP_Operator*>(&op.entry());
  if (BP_Error* declined = invoke(k, bop, ks, in.data(), n, out.data(), m)) [[unlikely]] {
    op.serveDeclinedBoxed(ks, &k, declineReason(declined), *stack);
    return;
  }
  uint64_t masked = 0;              // Note [Masked returns]
  for (size_t j = 0; j < m; ++j) {  // Note [Plugin returns]
    if (!returnFits(out[j], s.returns()[j].type)) [[unlikely]] {
      const bool empty = out[j].tag == BP_VALUE_NONE || (out[j].tag == BP_VALUE_TENSOR && !out[j].u.tensor);
      if (j < 64 && empty && maskedOut(s, *stack, stack->size() - n, j)) {
        masked |= uint64_t{1} << j;
        continue;
      }
      throwBadReturn(k, out.data(), m, j);
    }
  }
  stack->resize(stack->size() - n);
  for (size_t j = 0; j < m; ++j) {
    const SchemaType& t = s.returns()[j].type;
    if (masked >> j & 1) [[unlikely]] {
      stack->push_back(IValue(TensorBase()));
    } else if (out[j].tag == BP_VALUE_INT && t.base == BaseType::Float) {
      stack->push_back(IValue(static_cast<double>(out[j].u.i)));
    } else {
      stack->push_back(fromValue(out[j], /*adopt=*/true));
    }
  }
}

// Unboxed adapters, compiled for the signatures typed_calls.h lists.
template <typename T>
inline constexpr bool kIsOptional = false;
template <typename T>
inline constexpr bool kIsOptional<std::optional<T>> = true;

template <typename T>
BP_Value fastValue(const T& v) {
  BP_Value out{};
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor>) {
    if (v.defined()) {
      out.tag = BP_VALUE_TENSOR;
      out.u.tensor = toBP(v);
    }
  } else if constexpr (std::is_same_v<D, std::optional<Tensor>>) {
    if (v && v->defined()) {
      out.tag = BP_VALUE_TENSOR;
      out.u.tensor = toBP(*v);
    }
  } else if constexpr (std::is_same_v<D, TensorList>) {
    out.tag = BP_VALUE_TENSOR_LIST;
    out.u.tensor_list = {reinterpret_cast<BP_Tensor* const*>(v.data()), v.size()};
  } else if constexpr (std::is_same_v<D, int64_t>) {
    out.tag = BP_VALUE_INT;
    out.u.i = v;
  } else if constexpr (std::is_same_v<D, double>) {
    out.tag = BP_VALUE_DOUBLE;
    out.u.d = v;
  } else if constexpr (std::is_same_v<D, bool>) {
    out.tag = BP_VALUE_BOOL;
    out.u.b = v;
  } else if constexpr (std::is_same_v<D, Scalar>) {
    if (v.isBool()) {
      out.tag = BP_VALUE_BOOL;
      out.u.b = v.toBool();
    } else if (v.isIntegral()) {
      out.tag = BP_VALUE_INT;
      out.u.i = v.toInt();
    } else {
      out.tag = BP_VALUE_DOUBLE;
      out.u.d = v.toDouble();
    }
  } else if constexpr (std::is_same_v<D, IntArrayRef>) {
    out.tag = BP_VALUE_INT_LIST;
    out.u.int_list = {v.data(), v.size()};
  } else if constexpr (std::is_same_v<D, ScalarType>) {
    out.tag = BP_VALUE_SCALAR_TYPE;
    out.u.scalar_type = static_cast<BP_ScalarType>(v);
  } else if constexpr (std::is_same_v<D, Device>) {
    out.tag = BP_VALUE_DEVICE;
    out.u.device = {static_cast<int32_t>(v.type), v.resolved().index};
  } else if constexpr (std::is_same_v<D, std::string_view>) {
    out.tag = BP_VALUE_STRING;
    out.u.str = {v.data(), v.size()};
  } else if constexpr (kIsOptional<D>) {
    if (v) out = fastValue(*v);  // else NONE, as toValue() gives None
  } else {
    static_assert(sizeof(T) == 0, "no fast plugin conversion for this argument type");
  }
  return out;
}

template <typename R>
R fastReturn(const PluginKernel& k, BP_Value* rets, size_t i) {
  const BP_Value& v = rets[i];
  if constexpr (std::is_same_v<R, Tensor>) {
    if (v.tag != BP_VALUE_TENSOR || !v.u.tensor) throwMissingReturn(k, i);
    return adoptTensor(v.u.tensor);
  } else if constexpr (std::is_same_v<R, int64_t>) {
    if (v.tag != BP_VALUE_INT) throwMissingReturn(k, i);
    return v.u.i;
  } else if constexpr (std::is_same_v<R, double>) {
    if (v.tag != BP_VALUE_DOUBLE && v.tag != BP_VALUE_INT) throwMissingReturn(k, i);
    return v.tag == BP_VALUE_INT ? static_cast<double>(v.u.i) : v.u.d;
  } else if constexpr (std::is_same_v<R, bool>) {
    if (v.tag != BP_VALUE_BOOL) throwMissingReturn(k, i);
    return v.u.b != 0;
  } else {
    static_assert(sizeof(R) == 0, "no fast plugin conversion for this return type");
  }
}

// Whether fastReturn<R> takes `v` (Note [Plugin returns]).
template <typename R>
bool fastReturnFits(const BP_Value& v) {
  if constexpr (std::is_same_v<R, Tensor>)
    return v.tag == BP_VALUE_TENSOR && v.u.tensor;
  else if constexpr (std::is_same_v<R, int64_t>)
    return v.tag == BP_VALUE_INT;
  else if constexpr (std::is_same_v<R, double>)
    return v.tag == BP_VALUE_DOUBLE || v.tag == BP_VALUE_INT;
  else
    return v.tag == BP_VALUE_BOOL;
}

// take() after firstMisfit() found every return fitting: takes them all.
template <typename Ret>
struct FastReturns {
  static constexpr size_t count = 1;
  static size_t firstMisfit(const BP_Value* rets) { return fastReturnFits<Ret>(rets[0]) ? count : 0; }
  static Ret take(const PluginKernel& k, BP_Value* rets) { return fastReturn<Ret>(k, rets, 0); }
};
template <>
struct FastReturns<void> {
  [[maybe_unused]] static constexpr size_t count = 0;  // read only where void returns are instantiated
  static size_t firstMisfit(const BP_Value*) { return 0; }
  static void take(const PluginKernel&, BP_Value*) {}
};
template <typename... Ts>
struct FastReturns<std::tuple<Ts...>> {
  static constexpr size_t count = sizeof...(Ts);
  static size_t firstMisfit(const BP_Value* rets) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      size_t bad = count;
      ((bad == count && !fastReturnFits<Ts>(rets[I]) ? (void)(bad = I) : (void)0), ...);
      return bad;
    }
    (std::index_sequence_for<Ts...>());
  }
  static std::tuple<Ts...> take(const PluginKernel& k, BP_Value* rets) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<Ts...>(fastReturn<Ts>(k, rets, I)...); }
    (std::index_sequence_for<Ts...>());
  }
};

// Note [Declined calls], out of the hot adapter below.
template <typename Ret, typename... Args>
[[gnu::cold, gnu::noinline]] Ret serveDeclinedUnboxed(const PluginKernel& k, DispatchKeySet ks, BP_Error* declined,
                                                      Args... args) {
  return k.handle->serveDeclined<Ret, Args...>(ks, &k, declineReason(declined), args...);
}

template <typename Ret, typename... Args>
Ret pluginUnboxed(OperatorKernel* functor, DispatchKeySet ks, Args... args) {
  const auto& k = *static_cast<PluginKernel*>(functor);
  constexpr size_t n = sizeof...(Args), m = FastReturns<Ret>::count;
  BP_Value in[n > 0 ? n : 1] = {fastValue(args)...};
  BP_Value out[m > 0 ? m : 1] = {};
  if (BP_Error* declined = invoke(k, k.op, ks, in, n, out, m)) [[unlikely]]
    return serveDeclinedUnboxed<Ret, Args...>(k, ks, declined, args...);
  if constexpr (m > 0) {
    const size_t bad = FastReturns<Ret>::firstMisfit(out);
    if (bad != m) [[unlikely]]
      throwBadReturn(k, out, m, bad);
  }
  return FastReturns<Ret>::take(k, out);
}

// Note [Typed kernel entries] in plugin_api.h, the host's side: an
// argument held as the C type typed_calls.h maps it to. int, float and bool
// as themselves (converted to that type), tensors as BP_Tensor*, every other
// type as a pointer to its BP_Value (fastValue's), which the holder keeps
// for the call.
template <typename T, typename C = typename TypedCArg<T>::type>
struct TypedArg {
  explicit TypedArg(const T& v) : c(static_cast<C>(v)) {}
  C get() const { return c; }
  C c;
};
template <typename T>
struct TypedArg<T, const BP_Value*> {
  explicit TypedArg(const T& v) : value(fastValue(v)) {}
  const BP_Value* get() const { return &value; }
  BP_Value value;
};
template <>
struct TypedArg<Tensor, BP_Tensor*> {
  explicit TypedArg(const Tensor& v) : t(toBP(v)) {}  // NULL when undefined
  BP_Tensor* get() const { return t; }
  BP_Tensor* t;
};
template <>
struct TypedArg<std::optional<Tensor>, BP_Tensor*> {
  explicit TypedArg(const std::optional<Tensor>& v) : t(v && v->defined() ? toBP(*v) : nullptr) {}  // NULL: None
  BP_Tensor* get() const { return t; }
  BP_Tensor* t;
};
template <typename T>
using TypedArgOf = TypedArg<std::decay_t<T>>;

// A return's C slot, of the type typed_calls.h's pointer points to: what
// the kernel writes through it, set before the call to what the kernel
// leaves alone. An int, float or bool converts to R (a bool: nonzero is
// true, as a BOOL return through fn).
template <typename R>
struct TypedOut {
  std::remove_pointer_t<typename TypedCOut<R>::type> v{};
  auto* ptr() { return &v; }
  bool fits() const { return true; }
  R take() { return static_cast<R>(v); }
  void release() {}
};
template <>
struct TypedOut<Tensor> {
  BP_Tensor* t = nullptr;  // a new reference, adopted by take()
  BP_Tensor** ptr() { return &t; }
  bool fits() const { return t != nullptr; }
  Tensor take() { return adoptTensor(std::exchange(t, nullptr)); }
  void release() {
    if (t) adoptTensor(std::exchange(t, nullptr));
  }
};

// Every return of Ret: one slot each.
template <typename Ret>
struct TypedOuts {
  TypedOut<Ret> slot;
  template <typename F>
  decltype(auto) apply(F&& f) {
    return f(slot.ptr());
  }
  size_t firstMisfit() const { return slot.fits() ? 1 : 0; }
  void release() { slot.release(); }
  Ret take() { return slot.take(); }
};
template <>
struct TypedOuts<void> {
  template <typename F>
  decltype(auto) apply(F&& f) {
    return f();
  }
  size_t firstMisfit() const { return 0; }
  void release() {}
  void take() {}
};
template <typename... Ts>
struct TypedOuts<std::tuple<Ts...>> {
  std::tuple<TypedOut<Ts>...> slots;
  template <typename F>
  decltype(auto) apply(F&& f) {
    return std::apply([&](auto&... s) { return f(s.ptr()...); }, slots);
  }
  size_t firstMisfit() const {
    size_t i = 0;
    std::apply([&](const auto&... s) { (void)((s.fits() && ++i) && ...); }, slots);
    return i;
  }
  void release() {
    std::apply([](auto&... s) { (s.release(), ...); }, slots);
  }
  std::tuple<Ts...> take() {
    return std::apply([](auto&... s) { return std::tuple<Ts...>(s.take()...); }, slots);
  }
};

// The unboxed adapter through the kernel's typed entry: the arguments as C
// arguments, a pointer per return; no BP_Value array, no BP_KernelCall.
template <typename Ret, typename... Args>
Ret pluginTyped(OperatorKernel* functor, DispatchKeySet ks, Args... args) {
  const auto& k = *static_cast<PluginKernel*>(functor);
  using Outs = TypedOuts<Ret>;
  Outs outs;
  // Each holder built in place: a BP_Value copied after its fields were
  // stored would stall on the store forwarding (about 5 ns a call).
  const std::tuple<TypedArgOf<Args>...> c{args...};
  const auto call = [&] {
    return outs.apply([&](auto... out) {
      return std::apply(
          [&](const auto&... a) {
            // The C type typed_calls.h gives the signature (checked against
            // the SDK's in abi_rules_test.cc); each holder's get() and slot's
            // ptr() must be exactly its parameter's type.
            using Fn = TypedFn<Ret, Args...>;
            static_assert(std::is_same_v<Fn, BP_Error* (*)(void*, const BP_Operator*, uint64_t, decltype(a.get())...,
                                                           decltype(out)...)>,
                          "a TypedArg or TypedOut does not pass the C type typed_calls.h gives");
            return reinterpret_cast<Fn>(k.typed_fn)(k.ctx, k.op, ks.raw(), a.get()..., out...);
          },
          c);
    });
  };
  if (BP_Error* declined = invokeWith(k, k.op, ks, call, [&] { outs.release(); })) [[unlikely]]
    return serveDeclinedUnboxed<Ret, Args...>(k, ks, declined, args...);
  if constexpr (!std::is_void_v<Ret>) {
    constexpr size_t m = FastReturns<Ret>::count;
    if (const size_t bad = outs.firstMisfit(); bad != m) [[unlikely]] {
      outs.release();
      throwMissingReturn(k, bad);
    }
  }
  return outs.take();
}

// An unboxed adapter per compiled signature: through fn (BP_Values in a
// BP_KernelCall) and through typed_fn. (The typed call of each from a
// stack, for callAsTyped(), is in typed_calls_from_stack.cc: a translation
// unit of its own, so that the two compile in parallel.)
struct FastAdapters {
  void* boxed_values;
  void* typed;
};

template <typename Sig>
struct FastEntry;
template <typename Ret, typename... Args>
struct FastEntry<Ret(Args...)> {
  static FastAdapters value() {
    return {reinterpret_cast<void*>(&pluginUnboxed<Ret, Args...>), reinterpret_cast<void*>(&pluginTyped<Ret, Args...>)};
  }
};

// The unboxed adapters of typed_calls.h's signatures, by signature string.
const absl::flat_hash_map<std::string, FastAdapters>& fastTable() {
  static const auto* table =
      new absl::flat_hash_map<std::string, FastAdapters>(makeSignatureTable<FastAdapters, FastEntry>(FastSignatures{}));
  return *table;
}

}  // namespace

namespace {
// The state of a plugin kernel of `op` (null for a fallback), `context`
// naming it in messages; it may decline only where the caller says.
std::shared_ptr<PluginKernel> newPluginKernel(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle* op,
                                              std::string context) {
  auto k = std::make_shared<PluginKernel>();
  k->plugin = plugin;
  k->slot = plugin->slot;
  k->gate = &plugin->gate;
  k->fn = desc.fn;
  k->ctx = desc.ctx;
  k->op = op ? reinterpret_cast<const BP_Operator*>(&op->entry()) : nullptr;
  k->context = std::move(context);
  k->legacy_dtypes = predatesAbi15Dtypes(*plugin);
  return k;
}

// A plugin kernel adapted to `signature`: unboxed when a compiled adapter
// exists for it. It declares `signature` when unboxed, or when `declare`.
// A composite serves every device: there is nothing below it to decline to.
KernelFunction makeAdaptedPluginKernel(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op,
                                       std::string signature, bool declare, bool* typed_out, bool composite = false) {
  auto k = newPluginKernel(plugin, desc, &op,
                           strCat(composite ? "composite kernel" : "kernel", " of plugin '", plugin->status.name,
                                  "' for ", op.entry().qualifiedName()));
  k->may_decline = knowsAbi17Declines(*plugin) && !composite;
  k->handle = op;
  void* unboxed = nullptr;
  if (auto it = fastTable().find(signature); it != fastTable().end()) {
    // typed_fn's C type follows from cpp_signature, which registration
    // checked equals the schema's (Note [Typed kernel entries]); read from
    // a plugin of ABI 1.14 or newer only.
    const BP_TypedKernelFn typed_fn = typedEntryOf(*plugin, desc);
    const bool typed = typed_fn != nullptr && signature == desc.cpp_signature;
    unboxed = typed ? it->second.typed : it->second.boxed_values;
    if (typed) k->typed_fn = typed_fn;
  }
  // The declared set keeps later dtypes' tensors from an older plugin's
  // unboxed calls; a dtype argument is checked on the boxed path only.
  if (k->legacy_dtypes && signature.find("ScalarType") != std::string::npos) unboxed = nullptr;
  if (typed_out) *typed_out = unboxed != nullptr && k->typed_fn != nullptr;
  return KernelFunction::makeFromParts(std::move(k), &pluginBoxed, unboxed,
                                       unboxed || declare ? std::move(signature) : std::string());
}
}  // namespace

KernelFunction makePluginKernel(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op,
                                bool* typed) {
  return makeAdaptedPluginKernel(plugin, desc, op, cppSignatureForSchema(op.schema()), /*declare=*/false, typed);
}

KernelFunction makePluginKernelWhenDefined(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op,
                                           bool* typed) {
  if (op.hasSchema()) {  // registerKernel checked that a declared signature is the schema's
    return makeAdaptedPluginKernel(plugin, desc, op, cppSignatureForSchema(op.schema()),
                                   /*declare=*/desc.cpp_signature != nullptr, typed);
  }
  return makeAdaptedPluginKernel(plugin, desc, op, desc.cpp_signature ? desc.cpp_signature : "", /*declare=*/true,
                                 typed);
}

KernelFunction makePluginComposite(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op,
                                   bool* typed) {
  return makeAdaptedPluginKernel(plugin, desc, op, cppSignatureForSchema(op.schema()), /*declare=*/false, typed,
                                 /*composite=*/true);
}

KernelFunction makePluginMeta(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op) {
  auto k = newPluginKernel(
      plugin, desc, &op,
      strCat("the shape rule (meta) of plugin '", plugin->status.name, "' for ", op.entry().qualifiedName()));
  k->meta = true;
  return KernelFunction::makeFromParts(std::move(k), &pluginBoxed, nullptr, std::string());
}

KernelFunction makePluginReference(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op) {
  auto k = newPluginKernel(
      plugin, desc, &op,
      strCat("the conformance reference of plugin '", plugin->status.name, "' for ", op.entry().qualifiedName()));
  return KernelFunction::makeFromParts(std::move(k), &pluginBoxed, nullptr, std::string());
}

KernelFunction makePluginFallback(LoadedPlugin* plugin, const BP_KernelDesc& desc) {
  auto k = newPluginKernel(plugin, desc, nullptr, strCat("fallback kernel of plugin '", plugin->status.name, "'"));
  return KernelFunction::makeFromParts(std::move(k), &pluginBoxed, nullptr, std::string());
}

// -------------------------------------------------------------- errors

BP_Error* makeError(BP_ErrorCode code, std::string message) { return new BP_Error{code, std::move(message)}; }

BP_Error* errorFromCurrentException() {
  absl::Status s = statusFromCurrentException();
  return makeError(static_cast<BP_ErrorCode>(s.code()), std::string(s.message()));
}

void throwPluginError(const LoadedPlugin& plugin, BP_Error* error, const std::string& context) {
  std::unique_ptr<BP_Error> owned(error);
  absl::StatusCode code = static_cast<absl::StatusCode>(owned->code);
  if (owned->code <= BP_OK || owned->code > BP_DATA_LOSS) code = absl::StatusCode::kUnknown;
  throw Error(code, strCat(context, " failed: ", owned->message));
}

// --------------------------------------------------------- device bridge

PluginDeviceInterface::PluginDeviceInterface(LoadedPlugin* plugin, const BP_DeviceTypeDesc& desc, DeviceType type)
    : plugin_(plugin), desc_(desc), type_(type), name_(desc.name) {
  // Note [ABI rules]: the descriptor's strings are borrowed for the call
  // that registered it; the name lives on in name_.
  desc_.name = nullptr;
  slots_.reserve(256);
  for (int32_t i = 0; i < 256; ++i) slots_.push_back(DeviceSlot{this, i});
}

void PluginDeviceInterface::check(BP_Error* error, const char* what) const {
  if (error) throwPluginError(*plugin_, error, strCat("device type '", name_, "' ", what));
}

#define BP_ENTER_PLUGIN(what)                                                                          \
  PluginCallScope scope(plugin_->slot, plugin_->gate);                                                 \
  if (!scope.entered()) {                                                                              \
    BP_THROW(kUnavailable, "device type '", name_, "' ", what, ": its plugin '", plugin_->status.name, \
             "' has been unloaded");                                                                   \
  }

int PluginDeviceInterface::deviceCount() const {
  PluginCallScope scope(plugin_->slot, plugin_->gate);
  if (!scope.entered()) return 0;
  return std::min<int32_t>(std::max<int32_t>(desc_.device_count(desc_.ctx), 0), 256);
}

std::string PluginDeviceInterface::unavailableReason() const {
  PluginCallScope scope(plugin_->slot, plugin_->gate);
  if (!scope.entered()) return strCat("its plugin '", plugin_->status.name, "' has been unloaded");
  if (!desc_.unavailable_reason) return {};
  const char* r = desc_.unavailable_reason(desc_.ctx);
  return r ? std::string(r) : std::string();
}

DataPtr PluginDeviceInterface::allocate(size_t nbytes, Device device) {
  BP_ENTER_PLUGIN("allocate");
  void* p = nullptr;
  check(desc_.allocate(desc_.ctx, device.index, nbytes, &p), strCat("allocate(", nbytes, " bytes)").c_str());
  // Success without memory would hand out a tensor whose first access
  // crashes: refused here, naming the plugin (found by fuzz_plugin_abi).
  if (p == nullptr && nbytes != 0) [[unlikely]] {
    BP_THROW(kInternal, "device type '", name_, "' allocate(", nbytes, " bytes) of plugin '", plugin_->status.name,
             "' returned success but no memory (NULL); a plugin that cannot allocate must return an error "
             "(BP_RESOURCE_EXHAUSTED when out of memory)");
  }
  plugin_->live_allocations.fetch_add(1, std::memory_order_relaxed);
  return DataPtr(p, &slots_[static_cast<size_t>(device.index)], &PluginDeviceInterface::deallocate, device);
}

void PluginDeviceInterface::deallocate(void* ctx, void* ptr) {
  auto* slot = static_cast<DeviceSlot*>(ctx);
  PluginDeviceInterface* self = slot->owner;
  // Always enters: a plugin with live allocations is never closed, and an
  // unload in progress waits for this scope, then sees the count drop.
  PluginCallScope scope(self->plugin_->slot, self->plugin_->gate, /*always=*/true);
  self->desc_.deallocate(self->desc_.ctx, slot->index, ptr);
  self->plugin_->live_allocations.fetch_sub(1, std::memory_order_release);
}

void PluginDeviceInterface::copyHostToDevice(void* dst, Device d, const void* src, size_t n) {
  BP_ENTER_PLUGIN("copy_host_to_device");
  check(desc_.copy_host_to_device(desc_.ctx, d.index, dst, src, n), "copy_host_to_device");
}

void PluginDeviceInterface::copyDeviceToHost(void* dst, const void* src, Device s, size_t n) {
  BP_ENTER_PLUGIN("copy_device_to_host");
  check(desc_.copy_device_to_host(desc_.ctx, s.index, dst, src, n), "copy_device_to_host");
}

void PluginDeviceInterface::copyDeviceToDevice(void* dst, Device d, const void* src, Device s, size_t n) {
  if (!desc_.copy_device_to_device) {  // optional: go through the host
    std::vector<unsigned char> buf(n);
    copyDeviceToHost(buf.data(), src, s, n);
    copyHostToDevice(dst, d, buf.data(), n);
    return;
  }
  BP_ENTER_PLUGIN("copy_device_to_device");
  check(desc_.copy_device_to_device(desc_.ctx, d.index, dst, s.index, src, n), "copy_device_to_device");
}

void PluginDeviceInterface::memset(void* dst, Device d, uint8_t value, size_t n) {
  if (!desc_.memset) {  // optional: upload a filled buffer
    std::vector<unsigned char> buf(n, value);
    copyHostToDevice(dst, d, buf.data(), n);
    return;
  }
  BP_ENTER_PLUGIN("memset");
  check(desc_.memset(desc_.ctx, d.index, dst, value, n), "memset");
}

void PluginDeviceInterface::synchronize(Device d) {
  if (!desc_.synchronize) return;
  BP_ENTER_PLUGIN("synchronize");
  check(desc_.synchronize(desc_.ctx, d.index), "synchronize");
}

DeviceProperties PluginDeviceInterface::properties(Device d) const {
  if (!desc_.get_properties) return DeviceInterface::properties(d);
  BP_DeviceProperties props;
  std::memset(&props, 0, sizeof props);  // fields an older plugin does not write read as zero
  props.struct_size = BP_DeviceProperties_STRUCT_SIZE;
  {
    BP_ENTER_PLUGIN("get_properties");
    check(desc_.get_properties(desc_.ctx, d.resolved().index, &props), "get_properties");
  }
  DeviceProperties out;
  out.name.assign(props.name, strnlen(props.name, sizeof props.name));  // the plugin may omit the NUL
  if (out.name.empty()) out.name = name_;
  out.total_memory = props.total_memory;
  out.compute_major = props.compute_major;
  out.compute_minor = props.compute_minor;
  out.multiprocessor_count = props.multiprocessor_count;
  return out;
}

// Note [Plugin streams and events]
// BP_Stream*/BP_Event* pass through as the opaque handles of DeviceInterface.
// A group is present when its required functions are (hasStreams(),
// hasEvents()); get/set_current_stream, event_wait, event_query (ABI 1.3)
// and the timing pair event_create_timed/event_elapsed_ms (ABI 1.12) are
// optional within it. Every function of a missing group, or a
// missing optional one, throws kUnimplemented naming the device type.

DeviceCapabilities PluginDeviceInterface::capabilities() const {
  DeviceCapabilities c;
  c.streams = hasStreams();
  c.current_stream = c.streams && desc_.get_current_stream && desc_.set_current_stream;
  c.events = hasEvents();
  c.event_wait = c.events && desc_.event_wait;
  c.event_query = c.events && desc_.event_query;
  c.event_wait_device = c.events && desc_.event_wait_device;
  c.event_timing = c.events && desc_.event_create_timed && desc_.event_elapsed_ms;
  c.graphs =
      c.streams && desc_.graph_capture_begin && desc_.graph_capture_end && desc_.graph_replay && desc_.graph_destroy;
  c.host_accessible = isHostAccessible();
  c.dlpack = dlpackDeviceType() != 0;
  return c;
}

bool PluginDeviceInterface::hasStreams() const {
  return desc_.stream_create && desc_.stream_destroy && desc_.stream_synchronize;
}

bool PluginDeviceInterface::hasEvents() const {
  return desc_.event_create && desc_.event_destroy && desc_.event_record && desc_.event_synchronize;
}

namespace {
BP_Stream* toStream(DeviceInterface::StreamHandle s) { return static_cast<BP_Stream*>(s); }
BP_Event* toEvent(DeviceInterface::EventHandle e) { return static_cast<BP_Event*>(e); }
}  // namespace

DeviceInterface::StreamHandle PluginDeviceInterface::createStream(Device d) {
  if (!hasStreams()) noStreams(d, "createStream");
  BP_ENTER_PLUGIN("stream_create");
  BP_Stream* s = nullptr;
  check(desc_.stream_create(desc_.ctx, d.resolved().index, &s), "stream_create");
  return s;
}

void PluginDeviceInterface::destroyStream(Device d, StreamHandle s) {
  if (!hasStreams()) noStreams(d, "destroyStream");
  BP_ENTER_PLUGIN("stream_destroy");
  desc_.stream_destroy(desc_.ctx, d.resolved().index, toStream(s));
}

void PluginDeviceInterface::synchronizeStream(Device d, StreamHandle s) {
  if (!hasStreams()) noStreams(d, "synchronizeStream");
  BP_ENTER_PLUGIN("stream_synchronize");
  check(desc_.stream_synchronize(desc_.ctx, d.resolved().index, toStream(s)), "stream_synchronize");
}

DeviceInterface::StreamHandle PluginDeviceInterface::currentStream(Device d) {
  if (!hasStreams() || !desc_.get_current_stream) {
    BP_THROW(kUnimplemented, "currentStream: device type '", name_, "' has no ",
             hasStreams() ? "get_current_stream" : "streams");
  }
  BP_ENTER_PLUGIN("get_current_stream");
  BP_Stream* s = nullptr;
  check(desc_.get_current_stream(desc_.ctx, d.resolved().index, &s), "get_current_stream");
  return s;
}

void PluginDeviceInterface::setCurrentStream(Device d, StreamHandle s) {
  if (!hasStreams() || !desc_.set_current_stream) {
    BP_THROW(kUnimplemented, "setCurrentStream: device type '", name_, "' has no ",
             hasStreams() ? "set_current_stream" : "streams");
  }
  BP_ENTER_PLUGIN("set_current_stream");
  check(desc_.set_current_stream(desc_.ctx, d.resolved().index, toStream(s)), "set_current_stream");
}

DeviceInterface::EventHandle PluginDeviceInterface::createEvent(Device d) {
  if (!hasEvents()) noEvents(d, "createEvent");
  BP_ENTER_PLUGIN("event_create");
  BP_Event* e = nullptr;
  check(desc_.event_create(desc_.ctx, d.resolved().index, &e), "event_create");
  return e;
}

void PluginDeviceInterface::destroyEvent(Device d, EventHandle e) {
  if (!hasEvents()) noEvents(d, "destroyEvent");
  BP_ENTER_PLUGIN("event_destroy");
  desc_.event_destroy(desc_.ctx, d.resolved().index, toEvent(e));
}

void PluginDeviceInterface::recordEvent(Device d, EventHandle e, StreamHandle s) {
  if (!hasEvents()) noEvents(d, "recordEvent");
  BP_ENTER_PLUGIN("event_record");
  check(desc_.event_record(desc_.ctx, d.resolved().index, toEvent(e), toStream(s)), "event_record");
}

void PluginDeviceInterface::waitEventOnDevice(Device event_device, EventHandle e, Device stream_device,
                                              StreamHandle s) {
  if (event_device == stream_device || !hasEvents() || !desc_.event_wait_device)
    return DeviceInterface::waitEventOnDevice(event_device, e, stream_device, s);
  BP_ENTER_PLUGIN("event_wait_device");
  check(desc_.event_wait_device(desc_.ctx, event_device.resolved().index, toEvent(e), stream_device.resolved().index,
                                toStream(s)),
        "event_wait_device");
}

void PluginDeviceInterface::waitEvent(Device d, EventHandle e, StreamHandle s) {
  if (!hasEvents() || !desc_.event_wait) {
    BP_THROW(kUnimplemented, "waitEvent: device type '", name_, "' has no ", hasEvents() ? "event_wait" : "events");
  }
  BP_ENTER_PLUGIN("event_wait");
  check(desc_.event_wait(desc_.ctx, d.resolved().index, toEvent(e), toStream(s)), "event_wait");
}

void PluginDeviceInterface::synchronizeEvent(Device d, EventHandle e) {
  if (!hasEvents()) noEvents(d, "synchronizeEvent");
  BP_ENTER_PLUGIN("event_synchronize");
  check(desc_.event_synchronize(desc_.ctx, d.resolved().index, toEvent(e)), "event_synchronize");
}

bool PluginDeviceInterface::queryEvent(Device d, EventHandle e) {
  if (!hasEvents() || !desc_.event_query) {
    BP_THROW(kUnimplemented, "queryEvent: device type '", name_, "' has no ",
             hasEvents() ? "event_query (ABI 1.3; use synchronizeEvent)" : "events");
  }
  BP_ENTER_PLUGIN("event_query");
  uint8_t complete = 0;
  check(desc_.event_query(desc_.ctx, d.resolved().index, toEvent(e), &complete), "event_query");
  return complete != 0;
}

DeviceInterface::EventHandle PluginDeviceInterface::createTimedEvent(Device d) {
  if (!hasEvents() || !desc_.event_create_timed) {
    BP_THROW(kUnimplemented, "createTimedEvent: device type '", name_, "' has no ",
             hasEvents() ? "event timing (event_create_timed, ABI 1.12)" : "events");
  }
  BP_ENTER_PLUGIN("event_create_timed");
  BP_Event* e = nullptr;
  check(desc_.event_create_timed(desc_.ctx, d.resolved().index, &e), "event_create_timed");
  return e;
}

double PluginDeviceInterface::eventElapsedMs(Device d, EventHandle start, EventHandle end) {
  if (!hasEvents() || !desc_.event_elapsed_ms) {
    BP_THROW(kUnimplemented, "eventElapsedMs: device type '", name_, "' has no ",
             hasEvents() ? "event timing (event_elapsed_ms, ABI 1.12)" : "events");
  }
  BP_ENTER_PLUGIN("event_elapsed_ms");
  double ms = 0;
  check(desc_.event_elapsed_ms(desc_.ctx, d.resolved().index, toEvent(start), toEvent(end), &ms), "event_elapsed_ms");
  return ms;
}

// Note [Graphs] in plugin_api.h: the four slots, all present or none
// (registration refuses a part).
void PluginDeviceInterface::beginGraphCapture(Device d, StreamHandle s, size_t pool_bytes) {
  if (!capabilities().graphs) noGraphs(d, "beginGraphCapture");
  BP_ENTER_PLUGIN("graph_capture_begin");
  check(desc_.graph_capture_begin(desc_.ctx, d.resolved().index, toStream(s), pool_bytes), "graph_capture_begin");
}

DeviceInterface::GraphHandle PluginDeviceInterface::endGraphCapture(Device d, StreamHandle s) {
  if (!capabilities().graphs) noGraphs(d, "endGraphCapture");
  BP_ENTER_PLUGIN("graph_capture_end");
  BP_Graph* g = nullptr;
  check(desc_.graph_capture_end(desc_.ctx, d.resolved().index, toStream(s), &g), "graph_capture_end");
  return g;
}

void PluginDeviceInterface::replayGraph(Device d, GraphHandle g, StreamHandle s) {
  if (!capabilities().graphs) noGraphs(d, "replayGraph");
  BP_ENTER_PLUGIN("graph_replay");
  check(desc_.graph_replay(desc_.ctx, d.resolved().index, static_cast<BP_Graph*>(g), toStream(s)), "graph_replay");
}

void PluginDeviceInterface::destroyGraph(Device d, GraphHandle g) {
  if (!capabilities().graphs) noGraphs(d, "destroyGraph");
  BP_ENTER_PLUGIN("graph_destroy");
  desc_.graph_destroy(desc_.ctx, d.resolved().index, static_cast<BP_Graph*>(g));
}

#undef BP_ENTER_PLUGIN

// ------------------------------------------------ host table: no loading

namespace {

BP_Error* hostErrorNew(BP_ErrorCode code, const char* message) { return makeError(code, message ? message : ""); }
void hostErrorFree(BP_Error* e) { delete e; }
BP_ErrorCode hostErrorCode(const BP_Error* e) { return e ? e->code : BP_OK; }
const char* hostErrorMessage(const BP_Error* e) { return e ? e->message.c_str() : ""; }

void hostTensorInfo(const BP_Tensor* t, BP_TensorInfo* out) {
  const TensorImpl* impl = implOf(t);
  // The caller's struct_size is its buffer size (Note [ABI rules]): write
  // the whole fields that fit (Note [Reading ABI structs]) and say how far
  // in struct_size. A buffer too small for struct_size itself is a caller
  // bug; writing anything could overrun it.
  if (out == nullptr) return;
  const size_t want = out->struct_size >= BP_TensorInfo_STRUCT_SIZE
                          ? size_t{BP_TensorInfo_STRUCT_SIZE}
                          : coveredFieldsSize<BP_TensorInfo>(out->struct_size);
  if (want == 0) return;
  auto fill = [impl, want](BP_TensorInfo& info) {
    info.struct_size = want;
    info.data = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(impl->storage().data()) +
                                        static_cast<uintptr_t>(impl->storageOffset()) * elementSize(impl->dtype()));
    info.sizes = impl->sizes().data();
    info.strides = impl->strides().data();
    info.dim = static_cast<int64_t>(impl->sizes().size());
    info.numel = impl->numel();
    info.storage_offset = impl->storageOffset();
    info.dtype = static_cast<BP_ScalarType>(impl->dtype());
    info.device = {static_cast<int32_t>(impl->device().type), impl->device().index};
    info.is_contiguous = impl->isContiguous();
  };
  if (want == BP_TensorInfo_STRUCT_SIZE) {
    // The usual case: write the fields in place. (Building a local copy and
    // copying it out stalls on store forwarding; this is a hot path.)
    fill(*out);
  } else {
    BP_TensorInfo info{};
    fill(info);
    std::memcpy(out, &info, want);
  }
}

BP_Tensor* hostTensorRetain(BP_Tensor* t) {
  if (t) IntrusivePtr<TensorImpl>(implOf(t)).release();
  return t;
}
void hostTensorRelease(BP_Tensor* t) {
  if (t) adoptTensor(t);
}

Device toDevice(BP_Device d) {
  BP_CHECK(d.type >= 0 && d.type < kMaxDeviceTypes && d.index >= -1 && d.index < 32768, "invalid device {type ", d.type,
           ", index ", d.index, "}");
  return Device(static_cast<DeviceType>(d.type), static_cast<DeviceIndex>(d.index));
}

BP_Error* hostTensorEmpty(const int64_t* sizes, size_t ndim, const int64_t* strides, BP_ScalarType dtype,
                          BP_Device device, BP_Tensor** out) try {
  BP_CHECK(out != nullptr, "tensor_empty: out is NULL");
  BP_CHECK(dtype >= 0 && dtype < kNumScalarTypes, "tensor_empty: invalid dtype ", dtype);
  BP_CHECK(ndim == 0 || sizes != nullptr, "tensor_empty: sizes is NULL");
  IntArrayRef sz(sizes, ndim);
  Tensor t = strides
                 ? emptyStridedTensor(sz, IntArrayRef(strides, ndim), static_cast<ScalarType>(dtype), toDevice(device))
                 : emptyTensor(sz, static_cast<ScalarType>(dtype), toDevice(device));
  *out = giveTensor(std::move(t));
  return nullptr;
} catch (...) {
  return errorFromCurrentException();
}

BP_Error* hostTensorView(BP_Tensor* base, const int64_t* sizes, const int64_t* strides, size_t ndim,
                         int64_t storage_offset, BP_Tensor** out) try {
  BP_CHECK(base && out && (ndim == 0 || (sizes && strides)), "tensor_view: NULL argument");
  Tensor t = borrowTensor(base).as_strided(IntArrayRef(sizes, ndim), IntArrayRef(strides, ndim), storage_offset);
  *out = giveTensor(std::move(t));
  return nullptr;
} catch (...) {
  return errorFromCurrentException();
}

BP_Error* hostOpFind(const char* name, const BP_Operator** out) try {
  BP_CHECK(name && out, "op_find: NULL argument");
  // "name.overload" is short for the standard namespace, as in impl().
  std::string_view n(name);
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow(
      n.find("::") == std::string_view::npos ? strCat(kStandardNamespace, "::", n) : std::string(n));
  *out = reinterpret_cast<const BP_Operator*>(&op.entry());
  return nullptr;
} catch (...) {
  return errorFromCurrentException();
}

const char* hostOpName(const BP_Operator* op) {
  return op ? reinterpret_cast<const OperatorEntry*>(op)->qualifiedName().c_str() : "";
}

BP_Error* callOp(const BP_Operator* op, std::optional<uint64_t> keys, const BP_Value* args, size_t nargs,
                 BP_Value* returns, size_t nrets) try {
  BP_CHECK(op != nullptr && (nargs == 0 || args) && (nrets == 0 || returns), "op_call: NULL argument");
  for (size_t j = 0; j < nrets; ++j) returns[j] = noneValue();
  OperatorHandle handle =
      Dispatcher::singleton().findOpOrThrow(reinterpret_cast<const OperatorEntry*>(op)->qualifiedName());
  BP_CHECK(nrets >= handle.schema().returns().size(), handle.entry().qualifiedName(), " has ",
           handle.schema().returns().size(), " returns but op_call was given room for ", nrets);
  Stack stack;
  for (size_t i = 0; i < nargs; ++i) stack.push_back(fromValue(args[i], /*adopt=*/false));
  if (keys)
    handle.redispatchBoxed(DispatchKeySet::fromRaw(*keys), stack);
  else
    handle.callBoxed(stack);
  Scratch scratch;
  for (size_t j = 0; j < stack.size() && j < nrets; ++j) {
    if (stack[j].isTensor()) {
      returns[j].tag = BP_VALUE_TENSOR;
      returns[j].u.tensor = giveTensor(stack[j].toTensor());
    } else if (stack[j].isInt() || stack[j].isDouble() || stack[j].isBool() || stack[j].isNone()) {
      returns[j] = toValue(stack[j], scratch);
    } else {
      BP_THROW(kUnimplemented, "op_call: return ", j, " of ", handle.entry().qualifiedName(), " is a ",
               stack[j].tagName(), ", which ABI 1.0 cannot return to a plugin");
    }
  }
  return nullptr;
} catch (...) {
  releaseReturns(returns, nrets);
  return errorFromCurrentException();
}

BP_Error* hostOpCall(const BP_Operator* op, const BP_Value* args, size_t nargs, BP_Value* returns, size_t nrets) {
  return callOp(op, std::nullopt, args, nargs, returns, nrets);
}
BP_Error* hostOpRedispatch(const BP_Operator* op, uint64_t keys, const BP_Value* args, size_t nargs, BP_Value* returns,
                           size_t nrets) {
  return callOp(op, keys, args, nargs, returns, nrets);
}

// BP_HostApi.group_info (ABI 1.10; Note [Collective engines]).
BP_Error* hostGroupInfo(int64_t group, BP_GroupInfo* out) try {
  if (out == nullptr) return makeError(BP_INVALID_ARGUMENT, "group_info: out is NULL");
  const size_t want = out->struct_size >= BP_GroupInfo_STRUCT_SIZE ? size_t{BP_GroupInfo_STRUCT_SIZE}
                                                                   : coveredFieldsSize<BP_GroupInfo>(out->struct_size);
  if (want == 0)
    return makeError(BP_INVALID_ARGUMENT, strCat("group_info: out->struct_size ", out->struct_size,
                                                 " is too small; set it to BP_GroupInfo_STRUCT_SIZE"));
  absl::StatusOr<comm::Group> g = comm::findGroup(group);
  if (!g.ok()) return makeError(static_cast<BP_ErrorCode>(g.status().code()), std::string(g.status().message()));
  const comm::GroupRecord* r = comm::findGroupRecord(group);
  const comm::GroupRecord* w = comm::findGroupRecord(0);
  static_assert(sizeof(int) == sizeof(int32_t));
  BP_GroupInfo info{};
  info.struct_size = want;
  info.id = r->id;
  info.rank = r->rank;
  info.size = static_cast<int32_t>(r->world_ranks.size());
  info.world_ranks = reinterpret_cast<const int32_t*>(r->world_ranks.data());
  info.world_rank = w->rank;
  info.world_size = static_cast<int32_t>(w->world_ranks.size());
  info.timeout_seconds = r->timeout_seconds;
  std::memcpy(out, &info, want);
  return nullptr;
} catch (...) {
  return errorFromCurrentException();
}

// The store's key of `key` in `group` (Note [The world's store]), after
// checking that the group exists and this process is one of its members.
absl::StatusOr<std::string> groupStoreKey(int64_t group, const char* key, const char* slot) {
  if (key == nullptr) return absl::InvalidArgumentError(strCat(slot, ": key is NULL"));
  absl::StatusOr<comm::Group> g = comm::findGroup(group);
  if (!g.ok()) return g.status();
  if (!g->isMember())
    return absl::InvalidArgumentError(
        strCat(slot, ": this process is not a member of ", g->describe(), ", so it has no keys there"));
  return strCat("group", group, "/", key);
}

// BP_HostApi.store_set (ABI 1.11).
BP_Error* hostStoreSet(int64_t group, const char* key, const void* value, size_t size) try {
  if (value == nullptr && size != 0) return makeError(BP_INVALID_ARGUMENT, "store_set: value is NULL");
  absl::StatusOr<std::string> k = groupStoreKey(group, key, "store_set");
  if (!k.ok()) return makeError(static_cast<BP_ErrorCode>(k.status().code()), std::string(k.status().message()));
  comm::worldStore().set(*k, std::string_view(static_cast<const char*>(value), size));
  return nullptr;
} catch (...) {
  return errorFromCurrentException();
}

// BP_HostApi.store_get (ABI 1.11).
BP_Error* hostStoreGet(int64_t group, const char* key, void* out, size_t capacity, size_t* size) try {
  if (size == nullptr) return makeError(BP_INVALID_ARGUMENT, "store_get: size is NULL");
  if (out == nullptr && capacity != 0) return makeError(BP_INVALID_ARGUMENT, "store_get: out is NULL");
  absl::StatusOr<std::string> k = groupStoreKey(group, key, "store_get");
  if (!k.ok()) return makeError(static_cast<BP_ErrorCode>(k.status().code()), std::string(k.status().message()));
  const std::string value = comm::worldStore().get(*k, comm::findGroupRecord(group)->timeout_seconds);
  *size = value.size();
  if (value.size() > capacity)
    return makeError(BP_OUT_OF_RANGE,
                     strCat("store_get: the value of '", key, "' has ", value.size(), " bytes, more than the buffer's ",
                            capacity, "; call again with a buffer of *size bytes"));
  if (!value.empty()) std::memcpy(out, value.data(), value.size());
  return nullptr;
} catch (...) {
  return errorFromCurrentException();
}

}  // namespace

// Fills the slots that do not need the registry; plugin_registry.cc adds
// logging, registration and device-type lookup.
void fillHostApiCommon(BP_HostApi& api) {
  api.error_new = &hostErrorNew;
  api.error_free = &hostErrorFree;
  api.error_code = &hostErrorCode;
  api.error_message = &hostErrorMessage;
  api.tensor_info = &hostTensorInfo;
  api.tensor_retain = &hostTensorRetain;
  api.tensor_release = &hostTensorRelease;
  api.tensor_empty = &hostTensorEmpty;
  api.tensor_view = &hostTensorView;
  api.op_find = &hostOpFind;
  api.op_name = &hostOpName;
  api.op_call = &hostOpCall;
  api.op_redispatch = &hostOpRedispatch;
  api.group_info = &hostGroupInfo;
  api.store_set = &hostStoreSet;
  api.store_get = &hostStoreGet;
}

}  // namespace backplane::plugin_detail
