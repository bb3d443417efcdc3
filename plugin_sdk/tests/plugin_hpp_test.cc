// Unit tests for plugin.hpp against a FAKE host table defined here: fake
// tensors are plain structs, errors are {code, message}, and every host call
// is counted or recorded, so the tests need no loader and no dispatcher.
//
// Build standalone, e.g.:
//   g++ -std=c++17 -Wall -Wextra -Werror -Iplugin_sdk/include
//       plugin_sdk/tests/plugin_hpp_test.cc -lgtest -lgtest_main -pthread
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backplane/plugin.hpp"
#include "float16_test_cases.h"

namespace {

// ------------------------------------------------------------- fake host

namespace fake {

struct Tensor {
  int refs = 1;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;
  BP_ScalarType dtype = BP_FLOAT32;
  BP_Device device{0, 0};
  std::shared_ptr<std::vector<unsigned char>> storage;
  int64_t numel = 1;
  bool contiguous = true;
};

struct Error {
  BP_ErrorCode code;
  std::string message;
};

struct Op {
  std::string name;
};

// What op_call / op_redispatch received, copied out of the BP_Values.
struct RecordedValue {
  BP_ValueTag tag = BP_VALUE_NONE;
  BP_Tensor* tensor = nullptr;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  BP_ScalarType scalar_type = -1;
  BP_Device device{-1, -1};
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<BP_Tensor*> tensors;
};

struct KernelRegistration {
  std::string op;
  int32_t device_type;
  BP_KernelFn fn;
  void* ctx;
  bool has_signature;
  std::string signature;
  uint64_t dtypes = 0;                  // BP_KernelDesc.dtypes as received
  uint64_t flags = 0;                   // BP_KernelDesc.flags as received
  BP_TypedKernelFn typed_fn = nullptr;  // BP_KernelDesc.typed_fn as received
};

struct State {
  std::deque<Tensor> tensors;  // never shrinks during a test: addresses stay valid
  int retains = 0, releases = 0, over_releases = 0, infos = 0;
  int errors_made = 0, errors_freed = 0;

  std::vector<std::string> defs;
  std::vector<KernelRegistration> impls, fallbacks, impls_when_defined;
  std::vector<std::tuple<std::string, int32_t, std::string>> derivatives;  // (op, device type, declaration)
  // ABI 1.9: (op, the rule's cpp_signature), (op, samples, reference
  // signature, atol, rtol), (op, forms).
  std::vector<std::pair<std::string, std::string>> metas;
  std::vector<std::tuple<std::string, std::string, std::string, double, double>> specs;
  std::vector<std::pair<std::string, uint32_t>> forms;
  // Copies of the registered descriptors and their names, as the real host
  // keeps them (Note [ABI rules]: descriptors are copied during the call).
  std::deque<BP_DeviceTypeDesc> device_copies;
  std::deque<std::string> device_names;
  std::vector<const BP_DeviceTypeDesc*> devices;  // into device_copies
  std::vector<std::pair<BP_LogLevel, std::string>> logs;
  BP_Error* (*fail_registration)() = nullptr;  // when set, def/impl/register fail with its error

  std::vector<RecordedValue> call_args;
  size_t call_num_returns = 0;
  bool redispatched = false;
  uint64_t redispatch_keys = 0;
  // Fills the returns of op_call; default: one new float tensor.
  std::function<BP_Error*(BP_Value*, size_t)> op_result;

  std::vector<int64_t> empty_sizes, empty_strides;
  bool empty_had_strides = false;
};

State g;
int g_plugin_tag;
BP_Plugin* const kPlugin = reinterpret_cast<BP_Plugin*>(&g_plugin_tag);

Tensor* impl(const BP_Tensor* t) { return reinterpret_cast<Tensor*>(const_cast<BP_Tensor*>(t)); }
BP_Tensor* handle(Tensor* t) { return reinterpret_cast<BP_Tensor*>(t); }

size_t bytesOf(BP_ScalarType t) { return bp::elementSize(static_cast<bp::ScalarType>(t)); }

// A new host tensor with one reference, owned by the caller.
BP_Tensor* makeTensor(std::vector<int64_t> sizes, BP_ScalarType dtype = BP_FLOAT32, BP_Device device = {0, 0},
                      const int64_t* strides = nullptr) {
  g.tensors.emplace_back();
  Tensor& t = g.tensors.back();
  t.sizes = std::move(sizes);
  t.dtype = dtype;
  t.device = device;
  t.numel = 1;
  for (int64_t s : t.sizes) t.numel *= s;
  t.strides.assign(t.sizes.size(), 1);
  if (strides) {
    t.strides.assign(strides, strides + t.sizes.size());
  } else {
    for (size_t i = t.sizes.size(); i-- > 1;) t.strides[i - 1] = t.strides[i] * t.sizes[i];
  }
  t.contiguous = strides == nullptr;
  t.storage = std::make_shared<std::vector<unsigned char>>(static_cast<size_t>(t.numel) * bytesOf(dtype) + 64);
  return handle(&t);
}

int liveTensors() {
  int n = 0;
  for (const Tensor& t : g.tensors) n += t.refs > 0;
  return n;
}

BP_Error* errorNew(BP_ErrorCode code, const char* message) {
  ++g.errors_made;
  return reinterpret_cast<BP_Error*>(new Error{code, message ? message : ""});
}
void errorFree(BP_Error* e) {
  if (!e) return;
  ++g.errors_freed;
  delete reinterpret_cast<Error*>(e);
}
BP_ErrorCode errorCode(const BP_Error* e) { return reinterpret_cast<const Error*>(e)->code; }
const char* errorMessage(const BP_Error* e) { return reinterpret_cast<const Error*>(e)->message.c_str(); }

void log(BP_Plugin*, BP_LogLevel level, const char* message) { g.logs.emplace_back(level, message); }

BP_Error* registerDeviceType(BP_Plugin* plugin, const BP_DeviceTypeDesc* desc, int32_t* out) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  if (g.fail_registration) return g.fail_registration();
  g.device_copies.push_back(*desc);
  g.device_names.emplace_back(desc->name);
  g.device_copies.back().name = g.device_names.back().c_str();
  g.devices.push_back(&g.device_copies.back());
  *out = static_cast<int32_t>(6 + g.devices.size());  // 7, 8, ...
  return nullptr;
}
BP_Error* def(BP_Plugin* plugin, const char* schema) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  if (g.fail_registration) return g.fail_registration();
  g.defs.emplace_back(schema);
  return nullptr;
}
BP_Error* implFn(BP_Plugin* plugin, const char* op, int32_t device_type, const BP_KernelDesc* k) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  if (g.fail_registration) return g.fail_registration();
  if (k->struct_size != BP_KernelDesc_STRUCT_SIZE) return errorNew(BP_INVALID_ARGUMENT, "bad struct_size");
  g.impls.push_back({op, device_type, k->fn, k->ctx, k->cpp_signature != nullptr,
                     k->cpp_signature ? k->cpp_signature : "", k->dtypes, k->flags, k->typed_fn});
  return nullptr;
}
#if BP_ABI_MINOR >= 4
BP_Error* implWhenDefinedFn(BP_Plugin* plugin, const char* op, int32_t device_type, const BP_KernelDesc* k) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  if (g.fail_registration) return g.fail_registration();
  if (k->struct_size != BP_KernelDesc_STRUCT_SIZE) return errorNew(BP_INVALID_ARGUMENT, "bad struct_size");
  g.impls_when_defined.push_back({op, device_type, k->fn, k->ctx, k->cpp_signature != nullptr,
                                  k->cpp_signature ? k->cpp_signature : "", k->dtypes, k->flags, k->typed_fn});
  return nullptr;
}
#endif
#if BP_ABI_MINOR >= 6
BP_Error* derivativeFn(BP_Plugin* plugin, const char* op, int32_t device_type, const char* declaration) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  if (g.fail_registration) return g.fail_registration();
  g.derivatives.emplace_back(op, device_type, declaration);
  return nullptr;
}
#endif
#if BP_ABI_MINOR >= 9
BP_Error* metaFn(BP_Plugin* plugin, const char* op, const BP_KernelDesc* k) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  if (g.fail_registration) return g.fail_registration();
  if (k->dtypes != 0) return errorNew(BP_INVALID_ARGUMENT, "a rule declares no dtypes");
  g.metas.emplace_back(op, k->cpp_signature ? k->cpp_signature : "");
  return nullptr;
}
BP_Error* specFn(BP_Plugin* plugin, const char* op, const BP_SpecDesc* d) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  if (d->struct_size != BP_SpecDesc_STRUCT_SIZE) return errorNew(BP_INVALID_ARGUMENT, "bad struct_size");
  g.specs.emplace_back(op, d->samples, d->reference ? d->reference->cpp_signature : "", d->atol, d->rtol);
  return nullptr;
}
BP_Error* deriveFormsFn(BP_Plugin* plugin, const char* op, uint32_t forms) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  g.forms.emplace_back(op, forms);
  return nullptr;
}
#endif
BP_Error* fallback(BP_Plugin* plugin, int32_t device_type, const BP_KernelDesc* k) {
  if (plugin != kPlugin) return errorNew(BP_INTERNAL, "wrong plugin handle");
  g.fallbacks.push_back({"", device_type, k->fn, k->ctx, k->cpp_signature != nullptr, "", k->dtypes});
  return nullptr;
}
#if BP_ABI_MINOR >= 1
const char* deviceTypeName(int32_t type) { return type == 0 ? "cpu" : type == 7 ? "toy" : nullptr; }
#endif
BP_Error* deviceTypeFind(const char* name, int32_t* out) {
  if (std::string(name) == "cpu")
    *out = 0;
  else if (std::string(name) == "toy")
    *out = 7;
  else
    return errorNew(BP_NOT_FOUND, (std::string("no device type ") + name).c_str());
  return nullptr;
}

void tensorInfo(const BP_Tensor* bt, BP_TensorInfo* out) {
  ++g.infos;
  Tensor* t = impl(bt);
  BP_TensorInfo info{};
  info.struct_size = out->struct_size;
  info.data = t->storage->data() + t->storage_offset * static_cast<int64_t>(bytesOf(t->dtype));
  info.sizes = t->sizes.data();
  info.strides = t->strides.data();
  info.dim = static_cast<int64_t>(t->sizes.size());
  info.numel = t->numel;
  info.storage_offset = t->storage_offset;
  info.dtype = t->dtype;
  info.device = t->device;
  info.is_contiguous = t->contiguous;
  std::memcpy(out, &info, std::min(out->struct_size, sizeof info));
}
BP_Tensor* tensorRetain(BP_Tensor* t) {
  ++g.retains;
  ++impl(t)->refs;
  return t;
}
void tensorRelease(BP_Tensor* t) {
  if (!t) return;
  ++g.releases;
  if (impl(t)->refs <= 0)
    ++g.over_releases;
  else
    --impl(t)->refs;
}
BP_Error* tensorEmpty(const int64_t* sizes, size_t ndim, const int64_t* strides, BP_ScalarType dtype, BP_Device device,
                      BP_Tensor** out) {
  g.empty_sizes.assign(sizes, sizes + ndim);
  g.empty_had_strides = strides != nullptr;
  g.empty_strides = strides ? std::vector<int64_t>(strides, strides + ndim) : std::vector<int64_t>{};
  if (dtype == BP_BOOL && ndim == 0) return errorNew(BP_RESOURCE_EXHAUSTED, "fake: no room");
  *out = makeTensor(std::vector<int64_t>(sizes, sizes + ndim), dtype, device, strides);
  return nullptr;
}
BP_Error* tensorView(BP_Tensor* base, const int64_t* sizes, const int64_t* strides, size_t ndim, int64_t offset,
                     BP_Tensor** out) {
  BP_Tensor* v = makeTensor(std::vector<int64_t>(sizes, sizes + ndim), impl(base)->dtype, impl(base)->device, strides);
  impl(v)->storage = impl(base)->storage;
  impl(v)->storage_offset = offset;
  *out = v;
  return nullptr;
}

const BP_Operator* opHandle(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Op>> ops;
  auto& slot = ops[name];
  if (!slot) slot.reset(new Op{name});
  return reinterpret_cast<const BP_Operator*>(slot.get());
}
BP_Error* opFind(const char* name, const BP_Operator** out) {
  if (std::string(name).rfind("test::", 0) != 0) {
    return errorNew(BP_NOT_FOUND, (std::string("operator ") + name + " not found").c_str());
  }
  *out = opHandle(name);
  return nullptr;
}
const char* opName(const BP_Operator* op) { return reinterpret_cast<const Op*>(op)->name.c_str(); }

BP_Error* record(const BP_Value* args, size_t nargs, BP_Value* returns, size_t nret) {
  g.call_args.clear();
  for (size_t i = 0; i < nargs; ++i) {
    const BP_Value& v = args[i];
    RecordedValue r;
    r.tag = v.tag;
    switch (v.tag) {
      case BP_VALUE_TENSOR: r.tensor = v.u.tensor; break;
      case BP_VALUE_INT: r.i = v.u.i; break;
      case BP_VALUE_DOUBLE: r.d = v.u.d; break;
      case BP_VALUE_BOOL: r.b = v.u.b != 0; break;
      case BP_VALUE_STRING: r.s.assign(v.u.str.data, v.u.str.size); break;
      case BP_VALUE_SCALAR_TYPE: r.scalar_type = v.u.scalar_type; break;
      case BP_VALUE_DEVICE: r.device = v.u.device; break;
      case BP_VALUE_INT_LIST: r.ints.assign(v.u.int_list.data, v.u.int_list.data + v.u.int_list.size); break;
      case BP_VALUE_DOUBLE_LIST:
        r.doubles.assign(v.u.double_list.data, v.u.double_list.data + v.u.double_list.size);
        break;
      case BP_VALUE_TENSOR_LIST:
      case BP_VALUE_OPTIONAL_TENSOR_LIST:
        r.tensors.assign(v.u.tensor_list.data, v.u.tensor_list.data + v.u.tensor_list.size);
        break;
      default: break;
    }
    g.call_args.push_back(r);
  }
  g.call_num_returns = nret;
  for (size_t j = 0; j < nret; ++j) {
    if (returns[j].tag != BP_VALUE_NONE) return errorNew(BP_INTERNAL, "returns not initialized to NONE");
  }
  if (g.op_result) return g.op_result(returns, nret);
  if (nret >= 1) {
    returns[0].tag = BP_VALUE_TENSOR;
    returns[0].u.tensor = makeTensor({2});
  }
  return nullptr;
}
BP_Error* opCall(const BP_Operator*, const BP_Value* args, size_t nargs, BP_Value* returns, size_t nret) {
  g.redispatched = false;
  return record(args, nargs, returns, nret);
}
BP_Error* opRedispatch(const BP_Operator*, uint64_t keys, const BP_Value* args, size_t nargs, BP_Value* returns,
                       size_t nret) {
  g.redispatched = true;
  g.redispatch_keys = keys;
  return record(args, nargs, returns, nret);
}

#if BP_ABI_MINOR >= 11
// A store in this process, keyed as the host keys it (the group, then the key).
std::map<std::string, std::string> g_store;
BP_Error* storeSet(int64_t group, const char* key, const void* value, size_t size) {
  g_store["group" + std::to_string(group) + "/" + key] = std::string(static_cast<const char*>(value), size);
  return nullptr;
}
BP_Error* storeGet(int64_t group, const char* key, void* out, size_t capacity, size_t* size) {
  auto it = g_store.find("group" + std::to_string(group) + "/" + key);
  if (it == g_store.end()) return errorNew(BP_DEADLINE_EXCEEDED, "the store's key was not set within 1 s");
  *size = it->second.size();
  if (it->second.size() > capacity) return errorNew(BP_OUT_OF_RANGE, "too small");
  std::memcpy(out, it->second.data(), it->second.size());
  return nullptr;
}
#endif

BP_HostApi table() {
  BP_HostApi h;
  std::memset(&h, 0, sizeof h);
  h.struct_size = BP_HostApi_STRUCT_SIZE;
  h.abi_major = BP_ABI_MAJOR;
  h.abi_minor = BP_ABI_MINOR;
  h.error_new = &errorNew;
  h.error_free = &errorFree;
  h.error_code = &errorCode;
  h.error_message = &errorMessage;
  h.log = &log;
  h.register_device_type = &registerDeviceType;
  h.def = &def;
  h.impl = &implFn;
  h.fallback = &fallback;
  h.device_type_find = &deviceTypeFind;
  h.tensor_info = &tensorInfo;
  h.tensor_retain = &tensorRetain;
  h.tensor_release = &tensorRelease;
  h.tensor_empty = &tensorEmpty;
  h.tensor_view = &tensorView;
  h.op_find = &opFind;
  h.op_name = &opName;
  h.op_call = &opCall;
  h.op_redispatch = &opRedispatch;
#if BP_ABI_MINOR >= 1
  h.device_type_name = &deviceTypeName;
#endif
#if BP_ABI_MINOR >= 4
  h.impl_when_defined = &implWhenDefinedFn;
#endif
#if BP_ABI_MINOR >= 6
  h.derivative = &derivativeFn;
#if BP_ABI_MINOR >= 9
  h.meta = &metaFn;
  h.spec = &specFn;
  h.derive_forms = &deriveFormsFn;
#endif
#endif
#if BP_ABI_MINOR >= 11
  h.store_set = &storeSet;
  h.store_get = &storeGet;
#endif
  return h;
}

// Code and message of a host error, which is then freed; {BP_OK, ""} for NULL.
std::pair<BP_ErrorCode, std::string> take(BP_Error* e) {
  if (!e) return {BP_OK, ""};
  std::pair<BP_ErrorCode, std::string> r{errorCode(e), errorMessage(e)};
  errorFree(e);
  return r;
}

}  // namespace fake

class PluginHpp : public ::testing::Test {
 protected:
  void SetUp() override {
    fake::g = fake::State{};
    BP_HostApi t = fake::table();
    bp::detail::installHost(t, fake::kPlugin);
  }
  void TearDown() override {
    // Every test gives back every reference and every error it was handed.
    EXPECT_EQ(fake::liveTensors(), 0) << "leaked tensor references";
    EXPECT_EQ(fake::g.over_releases, 0) << "released more references than were held";
    EXPECT_EQ(fake::g.errors_made, fake::g.errors_freed) << "leaked host errors";
  }
};

// --------------------------------------------------------- value helpers

BP_Value none() { return bp::detail::noneValue(); }
BP_Value vTensor(BP_Tensor* t) {
  BP_Value v = none();
  v.tag = BP_VALUE_TENSOR;
  v.u.tensor = t;
  return v;
}
BP_Value vInt(int64_t i) {
  BP_Value v = none();
  v.tag = BP_VALUE_INT;
  v.u.i = i;
  return v;
}
BP_Value vDouble(double d) {
  BP_Value v = none();
  v.tag = BP_VALUE_DOUBLE;
  v.u.d = d;
  return v;
}
BP_Value vBool(bool b) {
  BP_Value v = none();
  v.tag = BP_VALUE_BOOL;
  v.u.b = b;
  return v;
}
BP_Value vStr(const char* s) {
  BP_Value v = none();
  v.tag = BP_VALUE_STRING;
  v.u.str.data = s;
  v.u.str.size = std::strlen(s);
  return v;
}
BP_Value vScalarType(BP_ScalarType t) {
  BP_Value v = none();
  v.tag = BP_VALUE_SCALAR_TYPE;
  v.u.scalar_type = t;
  return v;
}
BP_Value vDevice(int32_t type, int32_t index) {
  BP_Value v = none();
  v.tag = BP_VALUE_DEVICE;
  v.u.device = BP_Device{type, index};
  return v;
}
BP_Value vInts(const std::vector<int64_t>& l) {
  BP_Value v = none();
  v.tag = BP_VALUE_INT_LIST;
  v.u.int_list.data = l.data();
  v.u.int_list.size = l.size();
  return v;
}
BP_Value vDoubles(const std::vector<double>& l) {
  BP_Value v = none();
  v.tag = BP_VALUE_DOUBLE_LIST;
  v.u.double_list.data = l.data();
  v.u.double_list.size = l.size();
  return v;
}
BP_Value vTensors(const std::vector<BP_Tensor*>& l, bool optional = false) {
  BP_Value v = none();
  v.tag = optional ? BP_VALUE_OPTIONAL_TENSOR_LIST : BP_VALUE_TENSOR_LIST;
  v.u.tensor_list.data = l.data();
  v.u.tensor_list.size = l.size();
  return v;
}

// A BP_KernelCall for op "test::k" with the given args and `nret` NONE returns.
struct Call {
  std::vector<BP_Value> args, rets;
  BP_KernelCall call;
  Call(std::vector<BP_Value> a, size_t nret, uint64_t keys = 0, const char* op = "test::k")
      : args(std::move(a)), rets(nret, none()) {
    call = BP_KernelCall{
        BP_KernelCall_STRUCT_SIZE, fake::opHandle(op), keys, args.data(), args.size(), rets.data(), rets.size()};
  }
  const BP_KernelCall* get() const { return &call; }
};

// An expected {code, message} pair, comparable with fake::take's result.
std::pair<BP_ErrorCode, std::string> err(BP_ErrorCode code, std::string message) { return {code, std::move(message)}; }

// Runs `k` on `c`; returns the error's code and message (freed).
std::pair<BP_ErrorCode, std::string> run(const bp::Kernel& k, const Call& c) {
  return fake::take(k.fn(k.ctx, c.get()));
}

// ------------------------------------------------------ kernels under test

bp::Tensor add(const bp::Tensor& a, const bp::Tensor&) { return a; }
bp::Tensor addScalar(const bp::Tensor& a, const bp::Tensor&, const bp::Scalar&) { return a; }
bp::Tensor byValue(bp::Tensor a, bp::Scalar) { return a; }
bp::Tensor noArgs() { return bp::Tensor::empty({1}, bp::ScalarType::Float32, bp::Device::cpu()); }
void nothing() {}
int64_t countIt(const std::vector<bp::Tensor>& l) { return static_cast<int64_t>(l.size()); }
double meanOf(const bp::Tensor&, std::optional<int64_t>, bool) { return 0.5; }
bool isSame(const bp::Tensor&, const bp::Tensor&) { return true; }
bp::Scalar item(const bp::Tensor&) { return bp::Scalar(2.5); }
std::tuple<bp::Tensor, bp::Tensor> split2(const bp::Tensor& a, bp::IntList, int64_t) { return {a, a}; }
std::tuple<bp::Tensor, bp::Tensor, bp::Tensor> three(bp::DispatchKeys, const bp::Tensor& a) { return {a, a, a}; }
bp::Tensor conv(const bp::Tensor& a, const std::optional<bp::Tensor>&, bp::IntList, std::optional<bp::IntList>,
                std::string_view, std::optional<std::string_view>) {
  return a;
}
bp::Tensor to(const bp::Tensor& a, std::optional<bp::ScalarType>, std::optional<bp::Device>, bp::ScalarType, bp::Device,
              std::optional<bool>, std::optional<double>, double, std::optional<bp::Scalar>) {
  return a;
}
bp::Tensor index(const bp::Tensor& a, const std::vector<std::optional<bp::Tensor>>&, bp::DoubleList) { return a; }
bp::Tensor withKeys(bp::DispatchKeys, const bp::Tensor& a, int64_t) { return a; }
bp::Tensor noexceptKernel(const bp::Tensor& a) noexcept { return a; }

TEST(PluginHppSignature, MatchesHostNotation) {
  EXPECT_EQ(bp::kernelSignature(&add), "(Tensor, Tensor) -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&addScalar), "(Tensor, Tensor, Scalar) -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&byValue), "(Tensor, Scalar) -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&noArgs), "() -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&nothing), "() -> ()");
  EXPECT_EQ(bp::kernelSignature(&countIt), "(Tensor[]) -> int");
  EXPECT_EQ(bp::kernelSignature(&meanOf), "(Tensor, int?, bool) -> float");
  EXPECT_EQ(bp::kernelSignature(&isSame), "(Tensor, Tensor) -> bool");
  EXPECT_EQ(bp::kernelSignature(&item), "(Tensor) -> Scalar");
  EXPECT_EQ(bp::kernelSignature(&split2), "(Tensor, int[], int) -> (Tensor, Tensor)");
  EXPECT_EQ(bp::kernelSignature(&three), "(Tensor) -> (Tensor, Tensor, Tensor)");
  EXPECT_EQ(bp::kernelSignature(&conv), "(Tensor, Tensor?, int[], int[]?, str, str?) -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&to),
            "(Tensor, ScalarType?, Device?, ScalarType, Device, bool?, float?, float, Scalar?) -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&index), "(Tensor, Tensor?[], float[]) -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&withKeys), "(Tensor, int) -> Tensor");
  EXPECT_EQ(bp::kernelSignature(&noexceptKernel), "(Tensor) -> Tensor");
  // The compile-time form agrees.
  EXPECT_EQ(bp::kernel<&to>().cpp_signature, bp::kernelSignature(&to));
  EXPECT_EQ(bp::kernel<&noexceptKernel>().cpp_signature, "(Tensor) -> Tensor");
}

// ----------------------------------------------------- adapter: arguments

struct Seen {
  int calls = 0;
  BP_Tensor *a = nullptr, *u = nullptr;
  bool b_present = false, t_present = true;
  BP_Tensor* b = nullptr;
  std::vector<BP_Tensor*> c;
  int64_t d = 0;
  std::vector<int64_t> e;
  bool f_present = true;
  double g = 0;
  std::optional<double> h;
  bool i = false;
  std::string j;
  bp::Scalar k;
  std::optional<bp::Scalar> l;
  std::optional<bp::ScalarType> m;
  std::optional<bp::Device> n;
  bp::ScalarType o = bp::ScalarType::Bool;
  bp::Device p{-1, -1};
  std::optional<int64_t> q;
  std::optional<bool> r;
  std::optional<std::string> s;
  std::vector<double> v;
  std::vector<BP_Tensor*> w;
  uint64_t keys = 0;
};
Seen g_seen;

std::tuple<bp::Tensor, bp::Tensor> everything(
    bp::DispatchKeys keys, const bp::Tensor& a, std::optional<bp::Tensor> b, const std::vector<bp::Tensor>& c,
    int64_t d, bp::IntList e, std::optional<bp::IntList> f, double g, std::optional<double> h, bool i,
    std::string_view j, const bp::Scalar& k, const std::optional<bp::Scalar>& l, std::optional<bp::ScalarType> m,
    std::optional<bp::Device> n, bp::ScalarType o, bp::Device p, std::optional<int64_t> q, std::optional<bool> r,
    std::optional<std::string_view> s, const std::optional<bp::Tensor>& t, bp::Tensor u, bp::DoubleList v,
    const std::vector<std::optional<bp::Tensor>>& w) {
  Seen& x = g_seen;
  ++x.calls;
  x.keys = keys.bits;
  x.a = a.get();
  x.b_present = b.has_value();
  x.b = b ? b->get() : nullptr;
  x.c.clear();
  for (const auto& ct : c) x.c.push_back(ct.get());
  x.d = d;
  x.e = e.vec();
  x.f_present = f.has_value();
  x.g = g;
  x.h = h;
  x.i = i;
  x.j = std::string(j);
  x.k = k;
  x.l = l;
  x.m = m;
  x.n = n;
  x.o = o;
  x.p = p;
  x.q = q;
  x.r = r;
  x.s = s ? std::optional<std::string>(std::string(*s)) : std::nullopt;
  x.t_present = t.has_value();
  x.u = u.get();
  x.v = v.vec();
  x.w.clear();
  for (const auto& wt : w) x.w.push_back(wt ? wt->get() : nullptr);
  return {u, a};
}

// The arguments AdapterConvertsEveryArgumentKind and
// TypedEntryConvertsEveryArgumentKindLikeTheAdapter pass everything(), and
// what it must have seen of them.
struct EverythingArgs {
  BP_Tensor* a = fake::makeTensor({2, 3});
  BP_Tensor* b = fake::makeTensor({1});
  BP_Tensor* c0 = fake::makeTensor({4});
  BP_Tensor* u = fake::makeTensor({5});
  std::vector<BP_Tensor*> c{c0, a};
  std::vector<int64_t> e{3, 1, 4};
  std::vector<double> v{0.5, -1.0};
  std::vector<BP_Tensor*> w{nullptr, b};
  ~EverythingArgs() {
    for (BP_Tensor* t : {a, b, c0, u}) fake::tensorRelease(t);
  }
  void expectSeen() const {
    const Seen& x = g_seen;
    EXPECT_EQ(x.calls, 1);
    EXPECT_EQ(x.keys, 0xF0F0u);
    EXPECT_EQ(x.a, a);
    EXPECT_TRUE(x.b_present);
    EXPECT_EQ(x.b, b);
    EXPECT_EQ(x.c, c);
    EXPECT_EQ(x.d, -7);
    EXPECT_EQ(x.e, e);
    EXPECT_FALSE(x.f_present);
    EXPECT_EQ(x.g, 3.0);
    EXPECT_EQ(x.h, std::optional<double>(1.25));
    EXPECT_TRUE(x.i);
    EXPECT_EQ(x.j, "mode");
    EXPECT_TRUE(x.k.isIntegral());
    EXPECT_EQ(x.k.toInt(), 9);
    ASSERT_TRUE(x.l.has_value());
    EXPECT_TRUE(x.l->isFloatingPoint());
    EXPECT_EQ(x.l->toDouble(), 0.5);
    EXPECT_EQ(x.m, std::optional<bp::ScalarType>(bp::ScalarType::BFloat16));
    ASSERT_TRUE(x.n.has_value());
    EXPECT_EQ(*x.n, (bp::Device{7, 2}));
    EXPECT_EQ(x.o, bp::ScalarType::Int32);
    EXPECT_EQ(x.p, bp::Device::cpu());
    EXPECT_EQ(x.q, std::optional<int64_t>(11));
    EXPECT_EQ(x.r, std::optional<bool>(false));
    EXPECT_EQ(x.s, std::optional<std::string>("s"));
    EXPECT_FALSE(x.t_present);
    EXPECT_EQ(x.u, u);
    EXPECT_EQ(x.v, v);
    EXPECT_EQ(x.w, w);
  }
};

TEST_F(PluginHpp, AdapterConvertsEveryArgumentKind) {
  g_seen = Seen{};
  const EverythingArgs args;
  BP_Tensor *a = args.a, *b = args.b, *u = args.u;
  const std::vector<BP_Tensor*>& c = args.c;
  const std::vector<int64_t>& e = args.e;
  const std::vector<double>& v = args.v;
  const std::vector<BP_Tensor*>& w = args.w;
  Call call({vTensor(a),
             vTensor(b),
             vTensors(c),
             vInt(-7),
             vInts(e),
             none(),
             vInt(3) /* int for float */,
             vDouble(1.25),
             vBool(true),
             vStr("mode"),
             vInt(9),
             vDouble(0.5),
             vScalarType(BP_BFLOAT16),
             vDevice(7, 2),
             vScalarType(BP_INT32),
             vDevice(0, 0),
             vInt(11),
             vBool(false),
             vStr("s"),
             none(),
             vTensor(u),
             vDoubles(v),
             vTensors(w, /*optional=*/true)},
            2, /*keys=*/0xF0F0);
  ASSERT_EQ(run(bp::kernel(&everything), call), err(BP_OK, std::string()));

  args.expectSeen();

  // Returns: new references, u then a, which the host (we) now owns.
  ASSERT_EQ(call.rets[0].tag, BP_VALUE_TENSOR);
  ASSERT_EQ(call.rets[1].tag, BP_VALUE_TENSOR);
  EXPECT_EQ(call.rets[0].u.tensor, u);
  EXPECT_EQ(call.rets[1].u.tensor, a);
  EXPECT_EQ(fake::impl(u)->refs, 2);
  EXPECT_EQ(fake::impl(a)->refs, 2);
  EXPECT_EQ(fake::impl(b)->refs, 1);  // borrowed for the call only
  for (BP_Value& r : call.rets) fake::tensorRelease(r.u.tensor);
}

TEST_F(PluginHpp, OptionalArgumentsAcceptNoneAndValues) {
  g_seen = Seen{};
  BP_Tensor* a = fake::makeTensor({1});
  std::vector<int64_t> f{2, 2};
  std::vector<BP_Tensor*> empty;
  Call call({vTensor(a),    none(),       vTensors(empty), vInt(0),      vInts(f),
             vInts(f),      vDouble(0),   none(),          vBool(false), vStr(""),
             vBool(true),   none(),       none(),          none(),       vScalarType(BP_FLOAT64),
             vDevice(0, 1), none(),       none(),          none(),       vTensor(a),
             vTensor(a),    vDoubles({}), vTensors(empty)},
            2);
  ASSERT_EQ(run(bp::kernel<&everything>(), call).first, BP_OK);
  const Seen& x = g_seen;
  EXPECT_FALSE(x.b_present);
  EXPECT_TRUE(x.c.empty());
  EXPECT_TRUE(x.f_present);
  EXPECT_FALSE(x.h.has_value());
  EXPECT_EQ(x.j, "");
  EXPECT_TRUE(x.k.isBool());
  EXPECT_TRUE(x.k.toBool());
  EXPECT_FALSE(x.l.has_value());
  EXPECT_FALSE(x.m.has_value());
  EXPECT_FALSE(x.n.has_value());
  EXPECT_FALSE(x.q.has_value());
  EXPECT_FALSE(x.r.has_value());
  EXPECT_FALSE(x.s.has_value());
  EXPECT_TRUE(x.t_present);
  for (BP_Value& r : call.rets) fake::tensorRelease(r.u.tensor);
  fake::tensorRelease(a);
}

// ------------------------------------------------------- adapter: returns

TEST_F(PluginHpp, AdapterStoresEveryReturnKind) {
  BP_Tensor* a = fake::makeTensor({3});
  {
    Call c({vTensor(a), vTensor(a)}, 1);
    ASSERT_EQ(run(bp::kernel(&add), c).first, BP_OK);
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_TENSOR);
    EXPECT_EQ(c.rets[0].u.tensor, a);
    EXPECT_EQ(fake::impl(a)->refs, 2);  // the return is a new reference
    fake::tensorRelease(c.rets[0].u.tensor);
  }
  {
    Call c({}, 0);
    EXPECT_EQ(run(bp::kernel(&nothing), c).first, BP_OK);
  }
  {
    std::vector<BP_Tensor*> l{a, a, a};
    Call c({vTensors(l)}, 1);
    ASSERT_EQ(run(bp::kernel(&countIt), c).first, BP_OK);
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_INT);
    EXPECT_EQ(c.rets[0].u.i, 3);
  }
  {
    Call c({vTensor(a), none(), vBool(true)}, 1);
    ASSERT_EQ(run(bp::kernel(&meanOf), c).first, BP_OK);
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_DOUBLE);
    EXPECT_EQ(c.rets[0].u.d, 0.5);
  }
  {
    Call c({vTensor(a), vTensor(a)}, 1);
    ASSERT_EQ(run(bp::kernel(&isSame), c).first, BP_OK);
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_BOOL);
    EXPECT_EQ(c.rets[0].u.b, 1);
  }
  {
    Call c({vTensor(a)}, 1);
    ASSERT_EQ(run(bp::kernel(&item), c).first, BP_OK);
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_DOUBLE);
    EXPECT_EQ(c.rets[0].u.d, 2.5);
  }
  {
    std::vector<int64_t> sizes{1};
    Call c({vTensor(a), vInts(sizes), vInt(0)}, 2);
    ASSERT_EQ(run(bp::kernel(&split2), c).first, BP_OK);
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_TENSOR);
    EXPECT_EQ(c.rets[1].tag, BP_VALUE_TENSOR);
    EXPECT_EQ(fake::impl(a)->refs, 3);
    for (BP_Value& r : c.rets) fake::tensorRelease(r.u.tensor);
  }
  {
    Call c({}, 1);
    ASSERT_EQ(run(bp::kernel(&noArgs), c).first, BP_OK);
    ASSERT_EQ(c.rets[0].tag, BP_VALUE_TENSOR);
    EXPECT_EQ(fake::impl(c.rets[0].u.tensor)->refs, 1);  // the kernel's tensor, handed over
    fake::tensorRelease(c.rets[0].u.tensor);
  }
  fake::tensorRelease(a);
}

bp::Tensor undefinedResult(const bp::Tensor&) { return bp::Tensor(); }
std::tuple<bp::Tensor, bp::Tensor> halfUndefined(const bp::Tensor& a) { return {a, bp::Tensor()}; }

// A single Tensor return must be defined. In a tuple an undefined tensor
// goes to the host as None: a backward op leaves the returns its
// output_mask does not ask for undefined, and the host refuses any other
// (Note [Masked returns], tested with the host in misbehaving_kernel_test).
TEST_F(PluginHpp, UndefinedTensorReturnIsAnErrorAndATuplesIsNone) {
  BP_Tensor* a = fake::makeTensor({1});
  {
    Call c({vTensor(a)}, 1);
    auto [code, msg] = run(bp::kernel(&undefinedResult), c);
    EXPECT_EQ(code, BP_INTERNAL);
    EXPECT_NE(msg.find("test::k"), std::string::npos) << msg;
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_NONE);
  }
  {
    Call c({vTensor(a)}, 2);
    EXPECT_EQ(run(bp::kernel(&halfUndefined), c).first, BP_OK);
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_TENSOR);
    EXPECT_EQ(c.rets[0].u.tensor, a);
    EXPECT_EQ(c.rets[1].tag, BP_VALUE_NONE);
    fake::tensorRelease(c.rets[0].u.tensor);
  }
  EXPECT_EQ(fake::impl(a)->refs, 1);
  fake::tensorRelease(a);
}

// -------------------------------------------- typed entries (ABI 1.14)
// Note [Typed kernel entries]: the same kernel called with C arguments and
// a pointer per return converts, checks and stores exactly as its adapter.

// Calls `k`'s typed entry for op `op` with keys `keys` and C arguments `c`
// (each of exactly the C type its parameter maps to); returns its error.
template <class... C>
std::pair<BP_ErrorCode, std::string> runTyped(const bp::Kernel& k, const char* op, uint64_t keys, C... c) {
  using Fn = BP_Error* (*)(void*, const BP_Operator*, uint64_t, C...);
  EXPECT_NE(k.typed_fn, nullptr);
  return fake::take(reinterpret_cast<Fn>(k.typed_fn)(k.ctx, fake::opHandle(op), keys, c...));
}

TEST_F(PluginHpp, TypedEntryConvertsEveryArgumentKindLikeTheAdapter) {
  const EverythingArgs args;
  BP_Tensor *a = args.a, *b = args.b, *u = args.u;
  // Everything but Tensor, Tensor?, int, float and bool goes as a BP_Value*.
  const BP_Value vc = vTensors(args.c), ve = vInts(args.e), vf = none(), vh = vDouble(1.25), vj = vStr("mode"),
                 vk = vInt(9), vl = vDouble(0.5), vm = vScalarType(BP_BFLOAT16), vn = vDevice(7, 2),
                 vo = vScalarType(BP_INT32), vp = vDevice(0, 0), vq = vInt(11), vr = vBool(false), vs = vStr("s"),
                 vv = vDoubles(args.v), vw = vTensors(args.w, /*optional=*/true);
  for (const bp::Kernel& k : {bp::kernel(&everything), bp::kernel<&everything>()}) {
    g_seen = Seen{};
    BP_Tensor *r0 = nullptr, *r1 = nullptr;
    ASSERT_EQ(runTyped(k, "test::k", uint64_t{0xF0F0}, a, b, &vc, int64_t{-7}, &ve, &vf, 3.0, &vh, uint8_t{1}, &vj, &vk,
                       &vl, &vm, &vn, &vo, &vp, &vq, &vr, &vs, static_cast<BP_Tensor*>(nullptr), u, &vv, &vw, &r0, &r1),
              err(BP_OK, std::string()));
    args.expectSeen();
    // Returns: new references through the pointers, u then a.
    EXPECT_EQ(r0, u);
    EXPECT_EQ(r1, a);
    EXPECT_EQ(fake::impl(u)->refs, 2);
    EXPECT_EQ(fake::impl(a)->refs, 2);
    EXPECT_EQ(fake::impl(b)->refs, 1);  // borrowed for the call only
    fake::tensorRelease(r0);
    fake::tensorRelease(r1);
  }
}

TEST_F(PluginHpp, TypedEntryStoresEachReturnThroughItsPointer) {
  BP_Tensor* a = fake::makeTensor({3});
  {
    BP_Tensor* r = nullptr;
    ASSERT_EQ(runTyped(bp::kernel(&add), "test::k", 0, a, a, &r).first, BP_OK);
    EXPECT_EQ(r, a);
    EXPECT_EQ(fake::impl(a)->refs, 2);  // a new reference
    fake::tensorRelease(r);
  }
  EXPECT_EQ(runTyped(bp::kernel<&nothing>(), "test::k", 0).first, BP_OK);
  {
    const std::vector<BP_Tensor*> l{a, a, a};
    const BP_Value vl = vTensors(l);
    int64_t r = 0;
    ASSERT_EQ(runTyped(bp::kernel(&countIt), "test::k", 0, &vl, &r).first, BP_OK);
    EXPECT_EQ(r, 3);
  }
  {
    const BP_Value vnone = none();
    double r = 0;
    ASSERT_EQ(runTyped(bp::kernel(&meanOf), "test::k", 0, a, &vnone, uint8_t{1}, &r).first, BP_OK);
    EXPECT_EQ(r, 0.5);
  }
  {
    uint8_t r = 9;
    ASSERT_EQ(runTyped(bp::kernel(&isSame), "test::k", 0, a, a, &r).first, BP_OK);
    EXPECT_EQ(r, 1);
  }
  {
    BP_Value r = none();
    ASSERT_EQ(runTyped(bp::kernel(&item), "test::k", 0, a, &r).first, BP_OK);
    EXPECT_EQ(r.tag, BP_VALUE_DOUBLE);
    EXPECT_EQ(r.u.d, 2.5);
  }
  {
    // A tuple's undefined tensor comes back NULL (Note [Masked returns]).
    BP_Tensor *r0 = nullptr, *r1 = a;
    ASSERT_EQ(runTyped(bp::kernel(&halfUndefined), "test::k", 0, a, &r0, &r1).first, BP_OK);
    EXPECT_EQ(r0, a);
    EXPECT_EQ(r1, nullptr);
    fake::tensorRelease(r0);
  }
  {
    // A single undefined return is an error naming the op; the pointer is
    // left as the host set it.
    BP_Tensor* r = nullptr;
    auto [code, msg] = runTyped(bp::kernel(&undefinedResult), "myns::undef", 0, a, &r);
    EXPECT_EQ(code, BP_INTERNAL);
    EXPECT_NE(msg.find("myns::undef"), std::string::npos) << msg;
    EXPECT_EQ(r, nullptr);
  }
  EXPECT_EQ(fake::impl(a)->refs, 1);
  fake::tensorRelease(a);
}

TEST_F(PluginHpp, TypedEntryRefusesWhatTheAdapterRefusesInTheSameWords) {
  BP_Tensor* a = fake::makeTensor({3});
  BP_Tensor* r = nullptr;
  // A NULL tensor for a Tensor parameter is the None the adapter refuses.
  EXPECT_EQ(runTyped(bp::kernel(&add), "myns::add", 0, static_cast<BP_Tensor*>(nullptr), a, &r),
            err(BP_INVALID_ARGUMENT, "argument 0 of myns::add: expected Tensor, got none"));
  {
    Call c({none(), vTensor(a)}, 1, 0, "myns::add");
    EXPECT_EQ(run(bp::kernel(&add), c).second, "argument 0 of myns::add: expected Tensor, got none");
  }
  // A BP_Value argument of the wrong kind.
  const BP_Value not_ints = vTensor(a);
  BP_Tensor* r1 = nullptr;
  EXPECT_EQ(runTyped(bp::kernel(&split2), "myns::split", 0, a, &not_ints, int64_t{0}, &r, &r1),
            err(BP_INVALID_ARGUMENT, "argument 1 of myns::split: expected int[], got tensor"));
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(r1, nullptr);
  // A kernel's exception is its error, as from fn.
  const bp::Kernel throwing = bp::kernel(+[](const bp::Tensor&) -> bp::Tensor { bp::fail(BP_DATA_LOSS, "lost it"); });
  EXPECT_EQ(runTyped(throwing, "test::k", 0, a, &r), err(BP_DATA_LOSS, "lost it"));
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(fake::impl(a)->refs, 1);
  fake::tensorRelease(a);
}

// ---------------------------------------------------- adapter: mismatches

TEST_F(PluginHpp, ArityMismatchIsInternalErrorNamingBothCounts) {
  BP_Tensor* a = fake::makeTensor({1});
  {
    Call c({vTensor(a)}, 1, 0, "test::add");
    auto [code, msg] = run(bp::kernel(&add), c);
    EXPECT_EQ(code, BP_INTERNAL);
    EXPECT_NE(msg.find("test::add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("takes 2 arguments"), std::string::npos) << msg;
    EXPECT_NE(msg.find("called with 1 arguments"), std::string::npos) << msg;
  }
  {
    Call c({vTensor(a), vTensor(a)}, 2);
    auto [code, msg] = run(bp::kernel(&add), c);
    EXPECT_EQ(code, BP_INTERNAL);
    EXPECT_NE(msg.find("returns 1 values"), std::string::npos) << msg;
    EXPECT_NE(msg.find("room for 2 returns"), std::string::npos) << msg;
  }
  {
    // DispatchKeys does not count as an argument.
    Call c({vTensor(a), vInt(1), vInt(2)}, 1);
    EXPECT_EQ(run(bp::kernel(&withKeys), c).first, BP_INTERNAL);
  }
  EXPECT_EQ(fake::take(bp::kernel(&add).fn(nullptr, nullptr)).first, BP_INTERNAL);
  fake::tensorRelease(a);
}

TEST_F(PluginHpp, WrongTagNamesArgumentIndexAndOperator) {
  BP_Tensor* a = fake::makeTensor({1});
  {
    Call c({vTensor(a), vTensor(a), vInt(0)}, 2, 0, "myns::split.dims");
    auto [code, msg] = run(bp::kernel(&split2), c);
    EXPECT_EQ(code, BP_INVALID_ARGUMENT);
    EXPECT_EQ(msg, "argument 1 of myns::split.dims: expected int[], got tensor");
  }
  {
    std::vector<int64_t> l{1};
    Call c({vTensor(a), vInts(l), vTensor(a)}, 2, 0, "myns::split");
    EXPECT_EQ(run(bp::kernel(&split2), c).second, "argument 2 of myns::split: expected int, got tensor");
  }
  {
    Call c({vInt(1), vTensor(a)}, 1, 0, "myns::add");
    EXPECT_EQ(run(bp::kernel(&add), c).second, "argument 0 of myns::add: expected Tensor, got int");
  }
  {
    // int? rejects a bool; float rejects a string; Scalar rejects a tensor.
    Call c({vTensor(a), vBool(true), vBool(true)}, 1, 0, "myns::mean");
    EXPECT_EQ(run(bp::kernel(&meanOf), c).second, "argument 1 of myns::mean: expected int?, got bool");
    Call d({vTensor(a), vTensor(a), vTensor(a)}, 1, 0, "myns::adds");
    EXPECT_EQ(run(bp::kernel(&addScalar), d).second, "argument 2 of myns::adds: expected Scalar, got tensor");
  }
  {
    // With DispatchKeys first, indices still count call->args.
    Call c({vTensor(a), vStr("x")}, 1, 0, "myns::k");
    EXPECT_EQ(run(bp::kernel(&withKeys), c).second, "argument 1 of myns::k: expected int, got str");
  }
  EXPECT_EQ(fake::impl(a)->refs, 1);  // arguments converted before the bad one were released
  fake::tensorRelease(a);
}

// ----------------------------------------------------- adapter: exceptions

int g_throw_kind = 0;
bp::Tensor thrower(const bp::Tensor& a) {
  switch (g_throw_kind) {
    case 0: throw bp::Error(BP_NOT_FOUND, "no such thing");
    case 1: throw std::bad_alloc();
    case 2: throw std::runtime_error("boom");
    case 3: throw 42;
    case 4: BP_PLUGIN_CHECK(a.dim() == 7, "expected 7 dims, got ", a.dim());
  }
  return a;
}

TEST_F(PluginHpp, ExceptionsBecomeErrorsWithTheRightCodes) {
  BP_Tensor* a = fake::makeTensor({1, 2});
  const std::vector<std::pair<BP_ErrorCode, std::string>> want = {
      {BP_NOT_FOUND, "no such thing"},
      {BP_RESOURCE_EXHAUSTED, std::bad_alloc().what()},
      {BP_INTERNAL, "boom"},
      {BP_UNKNOWN, "unknown exception (not derived from std::exception)"},
      {BP_INVALID_ARGUMENT, "expected 7 dims, got 2"},
  };
  for (int kind = 0; kind < 5; ++kind) {
    g_throw_kind = kind;
    Call c({vTensor(a)}, 1);
    EXPECT_EQ(run(bp::kernel(&thrower), c), want[static_cast<size_t>(kind)]) << "kind " << kind;
    EXPECT_EQ(c.rets[0].tag, BP_VALUE_NONE);
  }
  EXPECT_EQ(fake::impl(a)->refs, 1);
  fake::tensorRelease(a);
}

// A kernel written before ABI 1.5 switches on the dtype; its default case
// through the SDK's typed error declines (Note [The ABI a plugin's source
// targets]): a dtype added since reaches the CPU fallback, not an error.
void switchesOnDtype(const bp::Tensor& self) {
  switch (self.dtype()) {
    case bp::ScalarType::Float32: return;
    default: bp::unsupportedDtype(self.dtype(), "toy neg.out");
  }
}

TEST_F(PluginHpp, UnsupportedDtypeDeclinesNamingTheKernelAndTheDtype) {
  BP_Tensor* a = fake::makeTensor({1, 2}, BP_INT16);
  Call c({vTensor(a)}, 0);
  EXPECT_EQ(run(bp::kernel(&switchesOnDtype), c),
            std::make_pair(BP_ErrorCode{BP_DECLINED}, std::string("toy neg.out has no code for dtype int16")));
  fake::tensorRelease(a);
  BP_Tensor* b = fake::makeTensor({1, 2}, BP_FLOAT32);
  Call ok({vTensor(b)}, 0);
  EXPECT_EQ(run(bp::kernel(&switchesOnDtype), ok).first, BP_OK);
  fake::tensorRelease(b);
}

// ------------------------------------------------------------ Tensor RAII

TEST_F(PluginHpp, TensorCopyRetainsMoveTransfersDestructorReleases) {
  BP_Tensor* raw = fake::makeTensor({2});
  {
    bp::Tensor t = bp::Tensor::borrow(raw);
    EXPECT_EQ(fake::g.retains, 1);
    EXPECT_EQ(fake::impl(raw)->refs, 2);
    bp::Tensor copy = t;
    EXPECT_EQ(fake::g.retains, 2);
    bp::Tensor moved = std::move(copy);
    EXPECT_FALSE(copy.defined());  // NOLINT(bugprone-use-after-move): moved-from is undefined
    EXPECT_EQ(fake::g.retains, 2);
    bp::Tensor assigned;
    assigned = t;
    EXPECT_EQ(fake::g.retains, 3);
    assigned = std::move(moved);  // releases what `assigned` held
    EXPECT_EQ(fake::g.releases, 1);
    bp::Tensor& alias = assigned;
    assigned = alias;  // self-assignment is a no-op
    EXPECT_EQ(fake::impl(raw)->refs, 3);
    assigned.reset();
    EXPECT_FALSE(assigned.defined());
    EXPECT_EQ(fake::g.releases, 2);
  }
  EXPECT_EQ(fake::g.retains, fake::g.releases);
  EXPECT_EQ(fake::impl(raw)->refs, 1);
  fake::tensorRelease(raw);
}

TEST_F(PluginHpp, BorrowAdoptRelease) {
  BP_Tensor* raw = fake::makeTensor({2});
  {
    bp::Tensor t = bp::Tensor::adopt(raw);  // takes the test's reference
    EXPECT_EQ(fake::g.retains, 0);
    EXPECT_EQ(t.get(), raw);
  }
  EXPECT_EQ(fake::impl(raw)->refs, 0);
  EXPECT_EQ(fake::g.releases, 1);

  BP_Tensor* raw2 = fake::makeTensor({2});
  bp::Tensor t = bp::Tensor::borrow(raw2);
  BP_Tensor* given = t.release();  // now ours
  EXPECT_EQ(given, raw2);
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.get(), nullptr);
  EXPECT_EQ(fake::impl(raw2)->refs, 2);
  fake::tensorRelease(given);
  fake::tensorRelease(raw2);

  EXPECT_FALSE(bp::Tensor::borrow(nullptr).defined());
  EXPECT_FALSE(bp::Tensor::adopt(nullptr).defined());
  EXPECT_EQ(fake::g.retains, 1);
}

// A host whose BP_TensorInfo ends before `dtype` (as an older minor's
// shorter struct would): it says so in struct_size, and the SDK reads the
// fields it did not write as zero, not as whatever the buffer held.
void shortTensorInfo(const BP_Tensor* bt, BP_TensorInfo* out) {
  const size_t limit = offsetof(BP_TensorInfo, dtype);
  BP_TensorInfo full;
  full.struct_size = sizeof full;
  fake::tensorInfo(bt, &full);
  full.struct_size = limit;
  std::memcpy(out, &full, std::min(out->struct_size, limit));
}

TEST_F(PluginHpp, MetadataFieldsTheHostDidNotWriteReadAsZero) {
  BP_HostApi t = fake::table();
  t.tensor_info = &shortTensorInfo;
  bp::detail::installHost(t, fake::kPlugin);
  // Placement-new over bytes that are all ones, so that an unwritten field
  // would show up as garbage rather than as a lucky zero.
  alignas(bp::Tensor) unsigned char buffer[sizeof(bp::Tensor)];
  std::memset(buffer, 0xff, sizeof buffer);
  auto* tensor = new (buffer) bp::Tensor(bp::Tensor::adopt(fake::makeTensor({2, 3}, BP_INT64, {7, 1})));
  EXPECT_EQ(tensor->numel(), 6);  // written by the host
  EXPECT_EQ(tensor->dim(), 2);
  EXPECT_EQ(tensor->info().struct_size, offsetof(BP_TensorInfo, dtype));  // what the host filled
  EXPECT_EQ(tensor->info().dtype, 0);                                     // past the host's struct_size
  EXPECT_EQ(tensor->info().device.type, 0);
  EXPECT_EQ(tensor->info().device.index, 0);
  EXPECT_EQ(tensor->info().is_contiguous, 0);
  tensor->~Tensor();
}

TEST_F(PluginHpp, MetadataComesFromOneCachedHostCall) {
  const int64_t strides[] = {1, 2};
  bp::Tensor t = bp::Tensor::adopt(fake::makeTensor({2, 3}, BP_INT64, {7, 1}, strides));
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.size(-2), 2);
  EXPECT_EQ(t.stride(1), 2);
  EXPECT_EQ(t.sizes(), (bp::IntList{2, 3}));
  EXPECT_EQ(t.strides(), (bp::IntList{1, 2}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dtype(), bp::ScalarType::Int64);
  EXPECT_EQ(t.element_size(), 8u);
  EXPECT_EQ(t.device(), (bp::Device{7, 1}));
  EXPECT_EQ(t.storage_offset(), 0);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(fake::g.infos, 1);
  bp::Tensor copy = t;  // a copy refills its own cache once
  EXPECT_EQ(copy.numel(), 6);
  EXPECT_EQ(copy.dim(), 2);
  EXPECT_EQ(fake::g.infos, 2);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(fake::g.infos, 2);

  for (int64_t bad : {2, 3, -3, -100}) {
    try {
      (void)t.size(bad);
      ADD_FAILURE() << "size(" << bad << ") did not throw";
    } catch (const bp::Error& e) {
      EXPECT_EQ(e.code(), BP_OUT_OF_RANGE);
      EXPECT_NE(e.message().find("2 dimensions"), std::string::npos) << e.message();
    }
  }
  EXPECT_THROW((void)t.stride(2), bp::Error);

  bp::Tensor undefined;
  try {
    (void)undefined.dim();
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_FAILED_PRECONDITION);
  }
}

TEST_F(PluginHpp, DataPtrChecksDtype) {
  bp::Tensor f = bp::Tensor::adopt(fake::makeTensor({4}, BP_FLOAT32));
  float* p = f.data_ptr<float>();
  const float* cp = f.data_ptr<const float>();
  EXPECT_EQ(static_cast<void*>(p), f.data_ptr());
  EXPECT_EQ(cp, p);
  try {
    (void)f.data_ptr<int64_t>();
    ADD_FAILURE() << "data_ptr<int64_t> on float32 did not throw";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "data_ptr<int64>() called on a tensor of dtype float32");
  }
  EXPECT_THROW((void)f.data_ptr<double>(), bp::Error);
  bp::Tensor h = bp::Tensor::adopt(fake::makeTensor({4}, BP_FLOAT16));
  EXPECT_NE(h.data_ptr<bp::Half>(), nullptr);
  EXPECT_THROW((void)h.data_ptr<bp::BFloat16>(), bp::Error);
  bp::Tensor b = bp::Tensor::adopt(fake::makeTensor({4}, BP_BOOL));
  EXPECT_NE(b.data_ptr<const bool>(), nullptr);
  EXPECT_THROW((void)b.data_ptr<uint8_t>(), bp::Error);
}

// A device whose memory the host must not read (its addresses are never
// dereferenced here: the tests only ask data_ptr<T>() for them).
struct OpaqueBackend final : bp::DeviceBackend {
  int deviceCount() override { return 1; }
  void* allocate(int, size_t) override { return nullptr; }
  void deallocate(int, void*) override {}
  void copyHostToDevice(int, void*, const void*, size_t) override {}
  void copyDeviceToHost(int, void*, const void*, size_t) override {}
  void copyDeviceToDevice(int, void*, int, const void*, size_t) override {}
  void memset(int, void*, uint8_t, size_t) override {}
};

// Note [Host and device addresses]: data_ptr<T>() hands out host pointers
// only for memory the plugin knows to be host memory; device_ptr<T>() is
// the unchecked device address.
TEST_F(PluginHpp, DataPtrRefusesMemoryNotKnownToBeHostMemory) {
  bp::Library m(fake::kPlugin);
  OpaqueBackend opaque;
  struct Host final : bp::HostMemoryBackend {
    int deviceCount() override { return 1; }
  } hostmem;
  const int32_t toy = m.registerDevice("toy", &opaque);         // 7: not host memory
  const int32_t shared = m.registerDevice("shared", &hostmem);  // 8: host memory
  bp::Tensor on_toy = bp::Tensor::adopt(fake::makeTensor({4}, BP_FLOAT32, {toy, 0}));
  bp::Tensor on_shared = bp::Tensor::adopt(fake::makeTensor({4}, BP_FLOAT32, {shared, 0}));
  bp::Tensor on_cpu = bp::Tensor::adopt(fake::makeTensor({4}, BP_FLOAT32));
  bp::Tensor elsewhere = bp::Tensor::adopt(fake::makeTensor({4}, BP_FLOAT32, {2, 0}));  // another plugin's type

  EXPECT_EQ(static_cast<void*>(on_cpu.data_ptr<float>()), on_cpu.device_ptr());
  EXPECT_EQ(static_cast<const void*>(on_shared.data_ptr<const float>()), on_shared.device_ptr());
  EXPECT_EQ(static_cast<void*>(on_toy.device_ptr<float>()), on_toy.data_ptr());  // the address, unchecked
  try {
    (void)on_toy.data_ptr<float>();
    ADD_FAILURE() << "data_ptr<float>() on a toy tensor returned";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_FAILED_PRECONDITION);
    EXPECT_EQ(e.message(),
              "data_ptr<float32>() called on a tensor on toy:0, whose memory this plugin does not know to be host "
              "memory; a host pointer to it would not be safe to dereference. Use device_ptr<float32>() for the "
              "device address (to pass to the device or translate), or register the device type with "
              "hostAccessible() true if the host may read it");
  }
  try {
    (void)elsewhere.data_ptr<const float>();
    ADD_FAILURE() << "data_ptr<float>() on another plugin's device returned";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_FAILED_PRECONDITION);
    EXPECT_NE(e.message().find("on device type 2:0"), std::string::npos) << e.message();
  }
  // The dtype is still checked first, under the accessor's own name.
  try {
    (void)on_toy.device_ptr<int32_t>();
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.message(), "device_ptr<int32>() called on a tensor of dtype float32");
  }

  // A raw descriptor says it too.
  BP_DeviceTypeDesc raw = *fake::g.devices[1];
  raw.name = "raw";
  const int32_t raw_type = m.registerDeviceType(raw);  // host_accessible = 1, copied from "shared"
  bp::Tensor on_raw = bp::Tensor::adopt(fake::makeTensor({1}, BP_INT64, {raw_type, 0}));
  EXPECT_NE(on_raw.data_ptr<int64_t>(), nullptr);
}

// Note [ABI rules]: the host copies a descriptor during register_device_type,
// so registerDevice builds it on its stack; the name is the caller's and is
// copied too.
TEST_F(PluginHpp, RegisterDeviceHandsTheHostADescriptorToCopy) {
  bp::Library m(fake::kPlugin);
  struct Host final : bp::HostMemoryBackend {
    int deviceCount() override { return 3; }
  } backend;
  std::string name = "scratch";
  m.registerDevice(name.c_str(), &backend);
  name = "changed";  // the SDK and the host keep their own copies
  ASSERT_EQ(fake::g.devices.size(), 1u);
  EXPECT_STREQ(fake::g.devices[0]->name, "scratch");
  EXPECT_EQ(backend.typeName(), "scratch");
  EXPECT_EQ(fake::g.devices[0]->device_count(fake::g.devices[0]->ctx), 3);
}

// bp::HostMemoryBackend: a device of host memory needs only deviceCount().
TEST_F(PluginHpp, HostMemoryBackendIsAWholeDevice) {
  bp::Library m(fake::kPlugin);
  struct Host final : bp::HostMemoryBackend {
    int deviceCount() override { return 1; }
  } backend;
  m.registerDevice("hostmem", &backend);
  const BP_DeviceTypeDesc& d = *fake::g.devices[0];
  EXPECT_EQ(d.host_accessible, 1);
  void* p = nullptr;
  ASSERT_EQ(fake::take(d.allocate(d.ctx, 0, 100, &p)).first, BP_OK);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % bp::HostMemoryBackend::kAlignment, 0u);
  const char text[] = "backplane";
  ASSERT_EQ(fake::take(d.copy_host_to_device(d.ctx, 0, p, text, sizeof text)).first, BP_OK);
  ASSERT_EQ(fake::take(d.memset(d.ctx, 0, static_cast<char*>(p) + 4, 'X', 2)).first, BP_OK);
  // Overlapping device-to-device copies are memmove.
  ASSERT_EQ(fake::take(d.copy_device_to_device(d.ctx, 0, static_cast<char*>(p) + 1, 0, p, 4)).first, BP_OK);
  char back[sizeof text] = {};
  ASSERT_EQ(fake::take(d.copy_device_to_host(d.ctx, 0, back, p, sizeof back)).first, BP_OK);
  EXPECT_STREQ(back, "bbackXane");
  d.deallocate(d.ctx, 0, p);
  // Out of memory is an error, not a crash.
  void* huge = nullptr;
  EXPECT_EQ(fake::take(d.allocate(d.ctx, 0, size_t{1} << 62, &huge)).first, BP_RESOURCE_EXHAUSTED);
  EXPECT_EQ(huge, nullptr);
}

// ------------------------------------------------------- strided loops

namespace loops {

// A float tensor of `sizes` on `device` holding start, start + 1, ...
// (contiguous; a fake tensor's memory is host memory on every device).
bp::Tensor iota(std::vector<int64_t> sizes, float start = 0, BP_Device device = {0, 0}) {
  bp::Tensor t = bp::Tensor::adopt(fake::makeTensor(std::move(sizes), BP_FLOAT32, device));
  float* p = t.device_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = start + static_cast<float>(i);
  return t;
}

// Element `index` of `t` (host memory), read through its strides.
float at(const bp::Tensor& t, const std::vector<int64_t>& index) {
  const float* p = static_cast<const float*>(t.data_ptr());
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * t.stride(static_cast<int64_t>(d));
  return p[off];
}

// Every index of `sizes`, row-major.
std::vector<std::vector<int64_t>> indices(const std::vector<int64_t>& sizes) {
  std::vector<std::vector<int64_t>> out;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> idx(sizes.size());
    int64_t rest = i;
    for (size_t d = sizes.size(); d-- > 0;) {
      idx[d] = rest % sizes[d];
      rest /= sizes[d];
    }
    out.push_back(idx);
  }
  return out;
}

// `index` of a loop of `shape` as seen by an operand of `sizes` (broadcast).
std::vector<int64_t> broadcastIndex(const std::vector<int64_t>& index, const bp::Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.dim()));
  const size_t lead = index.size() - out.size();
  for (size_t d = 0; d < out.size(); ++d) out[d] = t.size(static_cast<int64_t>(d)) == 1 ? 0 : index[lead + d];
  return out;
}

std::vector<int64_t> vec(bp::IntList l) { return l.vec(); }

}  // namespace loops

// out = a + 10 * b over every layout a kernel meets: the result at each
// index is the inputs' elements at that index, whatever the strides.
TEST_F(PluginHpp, ForEachWalksEveryLayoutWithBroadcasting) {
  using loops::iota;
  struct Case {
    const char* name;
    bp::Tensor out, a, b;
  };
  std::vector<Case> cases;
  cases.push_back({"contiguous", iota({3, 4}), iota({3, 4}), iota({3, 4}, 100)});
  cases.push_back({"broadcast [3,1] with [4]", iota({3, 4}), iota({3, 1}), iota({4}, 100)});
  cases.push_back({"broadcast [2,3,4] with [3,1]", iota({2, 3, 4}), iota({2, 3, 4}), iota({3, 1}, 100)});
  cases.push_back({"0-d with [2,3]", iota({2, 3}), iota({}), iota({2, 3}, 100)});
  cases.push_back({"0-d with 0-d", iota({}), iota({}, 5), iota({}, 7)});
  {  // a transposed input and a transposed (non-contiguous) out
    bp::Tensor base = iota({4, 3});
    bp::Tensor t = base.as_strided({3, 4}, {1, 3}, 0);
    bp::Tensor out_base = iota({4, 3});
    cases.push_back({"transposed", out_base.as_strided({3, 4}, {1, 3}, 0), t, iota({3, 4}, 100)});
  }
  {  // a sliced input with a storage offset (every other column, from 1)
    bp::Tensor base = iota({3, 8});
    cases.push_back({"sliced with offset", iota({3, 4}), base.as_strided({3, 4}, {8, 2}, 1), iota({3, 4}, 100)});
  }
  {  // an expanded input (stride 0)
    bp::Tensor row = iota({1, 4}, 100);
    cases.push_back({"expanded", iota({3, 4}), iota({3, 4}), row.as_strided({3, 4}, {0, 1}, 0)});
  }
  {  // a column of a matrix: a dimension of size 1 with an odd stride
    bp::Tensor base = iota({5, 6});
    cases.push_back({"column view", iota({5, 1}), base.as_strided({5, 1}, {6, 1}, 2), iota({5, 1}, 100)});
  }
  {  // more dimensions than the loop keeps inline (13), none mergeable
    std::vector<int64_t> sizes(13, 2);
    std::vector<int64_t> strides(13);
    int64_t s = 1;
    for (size_t d = 13; d-- > 0;) strides[d] = s, s *= 2;
    std::swap(strides[0], strides[12]);  // permuted, so no two neighbours merge
    bp::Tensor base = iota({int64_t{1} << 13});
    cases.push_back({"13 permuted dimensions", iota(sizes), base.as_strided(sizes, strides, 0), iota(sizes, 1e5f)});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    bp::forEach<float>(c.out, c.a, c.b, [](float x, float y) { return x + 10 * y; });
    for (const std::vector<int64_t>& i : loops::indices(loops::vec(c.out.sizes()))) {
      const float want =
          loops::at(c.a, loops::broadcastIndex(i, c.a)) + 10 * loops::at(c.b, loops::broadcastIndex(i, c.b));
      ASSERT_EQ(loops::at(c.out, i), want) << "at index " << bp::IntList(i);
    }
  }
}

TEST_F(PluginHpp, ForEachOnEmptyTensorsCallsNothing) {
  bp::Tensor out = loops::iota({0, 3}), a = loops::iota({0, 3}), b = loops::iota({3});
  int calls = 0;
  bp::forEach<float>(out, a, b, [&](float, float) { return static_cast<float>(++calls); });
  EXPECT_EQ(calls, 0);
  // A span with no memory at all is fine when there are no elements.
  bp::forEachElement(
      bp::IntList{4, 0}, [&](float&) { ++calls; }, bp::StridedSpan<float>{nullptr, {4, 0}, {0, 1}});
  EXPECT_EQ(calls, 0);
}

// In place: out is exactly an input (same address, sizes and strides).
TEST_F(PluginHpp, ForEachInPlaceReadsEachElementBeforeWritingIt) {
  bp::Tensor base = loops::iota({4, 3});
  bp::Tensor self = base.as_strided({3, 4}, {1, 3}, 0);  // transposed
  bp::Tensor other = loops::iota({4}, 1);
  bp::forEach<float>(self, self, other, [](float x, float y) { return x * y; });
  for (const std::vector<int64_t>& i : loops::indices({3, 4})) {
    const float original = static_cast<float>(i[1] * 3 + i[0]);
    EXPECT_EQ(loops::at(self, i), original * static_cast<float>(i[1] + 1));
  }
}

TEST_F(PluginHpp, ForEachUnaryAndTernary) {
  bp::Tensor x = loops::iota({2, 3}, -3);
  bp::Tensor y = loops::iota({2, 3});
  bp::forEach<float>(y, x, [](float v) { return v < 0 ? 0.0f : v; });
  EXPECT_EQ(loops::at(y, {0, 0}), 0.0f);
  EXPECT_EQ(loops::at(y, {1, 2}), 2.0f);
  bp::Tensor c = loops::iota({3}), lo = loops::iota({}, 1), hi = loops::iota({2, 1}, 1);
  bp::Tensor out = loops::iota({2, 3});
  bp::forEach<float>(out, c, lo, hi, [](float v, float l, float h) { return v < l ? l : v > h ? h : v; });
  EXPECT_EQ(loops::at(out, {0, 0}), 1.0f);  // clamp(0, 1, 1)
  EXPECT_EQ(loops::at(out, {1, 2}), 2.0f);  // clamp(2, 1, 2)
}

TEST_F(PluginHpp, ForEachReportsShapesThatDoNotBroadcastAndWrongDtypes) {
  bp::Tensor out = loops::iota({2, 3}), a = loops::iota({2, 3}), b = loops::iota({4});
  try {
    bp::forEach<float>(out, a, b, [](float x, float y) { return x + y; });
    ADD_FAILURE() << "a [4] operand was broadcast to [2, 3]";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "bp::forEach: operand 2 of shape [4] cannot be broadcast to the loop's shape [2, 3]");
  }
  bp::Tensor i64 = bp::Tensor::adopt(fake::makeTensor({2, 3}, BP_INT64));
  EXPECT_THROW(bp::forEach<float>(out, i64, [](float x) { return x; }), bp::Error);
  // Memory the host cannot read is refused by the Tensor form (data_ptr).
  bp::Library m(fake::kPlugin);
  OpaqueBackend opaque;
  const int32_t toy = m.registerDevice("toy", &opaque);
  bp::Tensor on_toy = loops::iota({2, 3}, 0, {toy, 0});
  try {
    bp::forEach<float>(on_toy, on_toy, [](float x) { return x; });
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_FAILED_PRECONDITION);
  }
  // ... while spans at the kernel's own pointers work (spanAt checks the dtype).
  float* mine = static_cast<float*>(on_toy.device_ptr());
  bp::forEach(bp::spanAt(on_toy, mine), bp::spanAt(on_toy, static_cast<const float*>(mine)),
              [](float x) { return 2 * x; });
  EXPECT_EQ(mine[5], 10.0f);
  EXPECT_THROW((void)bp::spanAt(on_toy, static_cast<double*>(nullptr)), bp::Error);
}

// A reduction: an accumulator span with stride 0 over the reduced dimension
// is visited once per element of it.
TEST_F(PluginHpp, ForEachElementSumsThroughABroadcastSpan) {
  bp::Tensor self = loops::iota({3, 4});  // row i holds 4i .. 4i + 3
  std::vector<double> acc(3, 0.0);
  const int64_t acc_strides[] = {1, 0};
  bp::forEachElement(
      self.sizes(), [](double& a, const float& x) { a += x; },
      bp::StridedSpan<double>{acc.data(), self.sizes(), acc_strides}, bp::hostSpan<const float>(self));
  EXPECT_EQ(acc, (std::vector<double>{6, 22, 38}));
}

TEST_F(PluginHpp, EmptyEmptyStridedAndAsStrided) {
  bp::Tensor t = bp::Tensor::empty({2, 3}, bp::ScalarType::Float64, bp::Device{7, 0});
  EXPECT_EQ(fake::g.empty_sizes, (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE(fake::g.empty_had_strides);
  EXPECT_EQ(t.sizes(), (bp::IntList{2, 3}));
  EXPECT_EQ(t.strides(), (bp::IntList{3, 1}));
  EXPECT_EQ(t.dtype(), bp::ScalarType::Float64);
  EXPECT_EQ(t.device(), (bp::Device{7, 0}));

  std::vector<int64_t> sizes{4, 5};
  bp::Tensor s = bp::Tensor::empty_strided(sizes, {1, 4}, bp::ScalarType::Int32, bp::Device::cpu());
  EXPECT_TRUE(fake::g.empty_had_strides);
  EXPECT_EQ(fake::g.empty_strides, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(s.stride(1), 4);

  bp::Tensor v = t.as_strided({3}, {2}, 1);
  EXPECT_EQ(v.sizes(), (bp::IntList{3}));
  EXPECT_EQ(v.storage_offset(), 1);
  EXPECT_EQ(static_cast<char*>(v.data_ptr()) - static_cast<char*>(t.data_ptr()), 8);

  try {
    (void)bp::Tensor::empty_strided({1, 2}, {1}, bp::ScalarType::Int32, bp::Device::cpu());
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INVALID_ARGUMENT);
  }
  try {  // the fake refuses 0-d bool tensors: the host's error comes through
    (void)bp::Tensor::empty({}, bp::ScalarType::Bool, bp::Device::cpu());
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_RESOURCE_EXHAUSTED);
    EXPECT_EQ(e.message(), "fake: no room");
  }
}

// --------------------------------------------------------------- Operator

TEST_F(PluginHpp, CallTensorPacksEveryArgumentKind) {
  bp::Operator op = bp::Operator::find("test::pack");
  EXPECT_STREQ(op.name(), "test::pack");
  bp::Tensor a = bp::Tensor::adopt(fake::makeTensor({2}));
  bp::Tensor b = bp::Tensor::adopt(fake::makeTensor({3}));
  std::vector<bp::Tensor> list{a, b};
  std::vector<std::optional<bp::Tensor>> optList{std::nullopt, b};
  std::vector<int64_t> dims{0, 1};
  std::optional<bp::Tensor> present = b;
  const int retains_before = fake::g.retains;

  bp::Tensor r =
      op.callTensor(a, std::optional<bp::Tensor>(), std::nullopt, present, int64_t{5}, 7, 2.5, true, bp::Scalar(3),
                    bp::Scalar(1.5), bp::Scalar(false), bp::IntList{1, 2, 3}, dims, bp::ScalarType::Float16,
                    bp::Device{7, 1}, "lit", std::string_view("sv"), std::string("ss"), list, optList,
                    std::vector<double>{0.25}, bp::Tensor(), std::optional<int64_t>(9));
  EXPECT_EQ(fake::g.retains, retains_before) << "packing borrows, it does not retain";
  ASSERT_TRUE(r.defined());
  EXPECT_EQ(r.sizes(), (bp::IntList{2}));
  EXPECT_EQ(fake::g.call_num_returns, 1u);
  EXPECT_FALSE(fake::g.redispatched);

  const auto& v = fake::g.call_args;
  ASSERT_EQ(v.size(), 23u);
  EXPECT_EQ(v[0].tag, BP_VALUE_TENSOR);
  EXPECT_EQ(v[0].tensor, a.get());
  EXPECT_EQ(v[1].tag, BP_VALUE_NONE);
  EXPECT_EQ(v[2].tag, BP_VALUE_NONE);
  EXPECT_EQ(v[3].tag, BP_VALUE_TENSOR);
  EXPECT_EQ(v[3].tensor, b.get());
  EXPECT_EQ(v[4].tag, BP_VALUE_INT);
  EXPECT_EQ(v[4].i, 5);
  EXPECT_EQ(v[5].tag, BP_VALUE_INT);
  EXPECT_EQ(v[5].i, 7);
  EXPECT_EQ(v[6].tag, BP_VALUE_DOUBLE);
  EXPECT_EQ(v[6].d, 2.5);
  EXPECT_EQ(v[7].tag, BP_VALUE_BOOL);
  EXPECT_TRUE(v[7].b);
  EXPECT_EQ(v[8].tag, BP_VALUE_INT);
  EXPECT_EQ(v[8].i, 3);
  EXPECT_EQ(v[9].tag, BP_VALUE_DOUBLE);
  EXPECT_EQ(v[9].d, 1.5);
  EXPECT_EQ(v[10].tag, BP_VALUE_BOOL);
  EXPECT_FALSE(v[10].b);
  EXPECT_EQ(v[11].tag, BP_VALUE_INT_LIST);
  EXPECT_EQ(v[11].ints, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(v[12].ints, dims);
  EXPECT_EQ(v[13].tag, BP_VALUE_SCALAR_TYPE);
  EXPECT_EQ(v[13].scalar_type, BP_FLOAT16);
  EXPECT_EQ(v[14].tag, BP_VALUE_DEVICE);
  EXPECT_EQ(v[14].device.type, 7);
  EXPECT_EQ(v[14].device.index, 1);
  EXPECT_EQ(v[15].tag, BP_VALUE_STRING);
  EXPECT_EQ(v[15].s, "lit");
  EXPECT_EQ(v[16].s, "sv");
  EXPECT_EQ(v[17].s, "ss");
  EXPECT_EQ(v[18].tag, BP_VALUE_TENSOR_LIST);
  EXPECT_EQ(v[18].tensors, (std::vector<BP_Tensor*>{a.get(), b.get()}));
  EXPECT_EQ(v[19].tag, BP_VALUE_OPTIONAL_TENSOR_LIST);
  EXPECT_EQ(v[19].tensors, (std::vector<BP_Tensor*>{nullptr, b.get()}));
  EXPECT_EQ(v[20].tag, BP_VALUE_DOUBLE_LIST);
  EXPECT_EQ(v[20].doubles, (std::vector<double>{0.25}));
  EXPECT_EQ(v[21].tag, BP_VALUE_NONE);  // an undefined Tensor is None
  EXPECT_EQ(v[22].tag, BP_VALUE_INT);
  EXPECT_EQ(v[22].i, 9);
}

TEST_F(PluginHpp, CallReturnsAndErrors) {
  bp::Operator op = bp::Operator::find("test::ret");
  bp::Tensor a = bp::Tensor::adopt(fake::makeTensor({2}));

  // A non-tensor return where a Tensor is expected: INTERNAL, nothing leaks.
  fake::g.op_result = [](BP_Value* r, size_t) -> BP_Error* {
    r[0].tag = BP_VALUE_INT;
    r[0].u.i = 4;
    return nullptr;
  };
  try {
    (void)op.callTensor(a);
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INTERNAL);
    EXPECT_EQ(e.message(), "test::ret return 0: expected Tensor, got int");
  }
  EXPECT_EQ(op.call<int64_t>(a), 4);
  EXPECT_EQ(op.call<double>(a), 4.0);  // float accepts int
  EXPECT_TRUE(op.call<bp::Scalar>(a).isIntegral());

  // Two tensors, the second read as int: the first is released, not leaked.
  fake::g.op_result = [](BP_Value* r, size_t n) -> BP_Error* {
    for (size_t i = 0; i < n; ++i) {
      r[i].tag = BP_VALUE_TENSOR;
      r[i].u.tensor = fake::makeTensor({static_cast<int64_t>(i + 1)});
    }
    return nullptr;
  };
  auto [x, y] = op.call<std::tuple<bp::Tensor, bp::Tensor>>(a);
  EXPECT_EQ(fake::g.call_num_returns, 2u);
  EXPECT_EQ(x.numel(), 1);
  EXPECT_EQ(y.numel(), 2);
  EXPECT_THROW(op.call<bool>(a), bp::Error);

  op.call<void>(a);
  EXPECT_EQ(fake::g.call_num_returns, 0u);

  // A host error becomes bp::Error with its code and message (and is freed).
  fake::g.op_result = [](BP_Value*, size_t) { return fake::errorNew(BP_UNIMPLEMENTED, "no kernel for toy"); };
  try {
    (void)op.callTensor(a);
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_UNIMPLEMENTED);
    EXPECT_EQ(e.message(), "no kernel for toy");
  }

  // Redispatch passes the keys through.
  fake::g.op_result = nullptr;
  bp::Tensor r = op.redispatchTensor(bp::DispatchKeys{0x1234}, a, 3);
  EXPECT_TRUE(fake::g.redispatched);
  EXPECT_EQ(fake::g.redispatch_keys, 0x1234u);
  EXPECT_EQ(fake::g.call_args.size(), 2u);

  // Raw form.
  BP_Value args[1] = {vTensor(a.get())};
  BP_Value rets[1] = {none()};
  op.callBoxed(args, 1, rets, 1);
  ASSERT_EQ(rets[0].tag, BP_VALUE_TENSOR);
  bp::Tensor::adopt(rets[0].u.tensor);
}

TEST_F(PluginHpp, OperatorFindFailures) {
  try {
    (void)bp::Operator::find("aten::nope");
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_NOT_FOUND);
    EXPECT_EQ(e.message(), "operator aten::nope not found");
  }
  bp::Operator empty;
  EXPECT_THROW((void)empty.callTensor(), bp::Error);
}

// ---------------------------------------------------------------- Library

BP_Error* rawKernel(void*, const BP_KernelCall*) { return nullptr; }

TEST_F(PluginHpp, LibraryImplPassesSignatureAndAdapter) {
  bp::Library m(fake::kPlugin);
  m.def("test::add(Tensor a, Tensor b) -> Tensor");
  m.impl("test::add", 7, &add);
  m.impl("test::add2", 0, bp::kernel<&addScalar>());
  m.impl("test::raw", 7, &rawKernel, &g_seen);
  m.impl("test::raw_sig", 7, &rawKernel, nullptr, "(Tensor) -> Tensor");
  m.impl("test::nx", 7, &noexceptKernel);
  m.impl(
      "test::lambda", 7, +[](const bp::Tensor& t, double) { return t; });
  m.fallback(7, &rawKernel, &g_seen);

  EXPECT_EQ(fake::g.defs, (std::vector<std::string>{"test::add(Tensor a, Tensor b) -> Tensor"}));
  ASSERT_EQ(fake::g.impls.size(), 6u);
  const auto& i0 = fake::g.impls[0];
  EXPECT_EQ(i0.op, "test::add");
  EXPECT_EQ(i0.device_type, 7);
  EXPECT_TRUE(i0.has_signature);
  EXPECT_EQ(i0.signature, "(Tensor, Tensor) -> Tensor");
  EXPECT_EQ(i0.ctx, reinterpret_cast<void*>(&add));
  EXPECT_EQ(i0.fn, (&bp::detail::kernelAdapter<bp::Tensor, const bp::Tensor&, const bp::Tensor&>));
  EXPECT_EQ(i0.typed_fn, bp::kernel(&add).typed_fn);
  EXPECT_NE(i0.typed_fn, nullptr);
  EXPECT_EQ(fake::g.impls[1].typed_fn, bp::kernel<&addScalar>().typed_fn);
  EXPECT_EQ(fake::g.impls[2].typed_fn, nullptr) << "a raw kernel has no typed entry unless given one";
  EXPECT_EQ(fake::g.impls[1].signature, "(Tensor, Tensor, Scalar) -> Tensor");
  EXPECT_EQ(fake::g.impls[1].ctx, nullptr);
  EXPECT_EQ(fake::g.impls[2].fn, &rawKernel);
  EXPECT_EQ(fake::g.impls[2].ctx, &g_seen);
  EXPECT_FALSE(fake::g.impls[2].has_signature);
  EXPECT_EQ(fake::g.impls[3].signature, "(Tensor) -> Tensor");
  EXPECT_EQ(fake::g.impls[4].signature, "(Tensor) -> Tensor");
  EXPECT_EQ(fake::g.impls[5].signature, "(Tensor, float) -> Tensor");
  ASSERT_EQ(fake::g.fallbacks.size(), 1u);
  EXPECT_EQ(fake::g.fallbacks[0].device_type, 7);
  EXPECT_FALSE(fake::g.fallbacks[0].has_signature);

  // The registered function and ctx run the kernel.
  BP_Tensor* a = fake::makeTensor({1});
  Call c({vTensor(a), vTensor(a)}, 1, 0, "test::add");
  EXPECT_EQ(fake::take(i0.fn(i0.ctx, c.get())).first, BP_OK);
  EXPECT_EQ(c.rets[0].u.tensor, a);
  Call c2({vTensor(a), vTensor(a), vDouble(2)}, 1);
  EXPECT_EQ(fake::take(fake::g.impls[1].fn(fake::g.impls[1].ctx, c2.get())).first, BP_OK);
  fake::tensorRelease(c.rets[0].u.tensor);
  fake::tensorRelease(c2.rets[0].u.tensor);
  fake::tensorRelease(a);

  EXPECT_EQ(m.findDeviceType("toy"), 7);
  EXPECT_EQ(m.findDeviceType("cpu"), 0);
  try {
    (void)m.findDeviceType("warp");
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_NOT_FOUND);
    EXPECT_EQ(e.message(), "no device type warp");
  }
  m.log(BP_LOG_WARNING, "hello");
  ASSERT_EQ(fake::g.logs.size(), 1u);
  EXPECT_EQ(fake::g.logs[0], std::make_pair(BP_LogLevel{BP_LOG_WARNING}, std::string("hello")));
}

// bp::Dtypes is BP_KernelDesc.dtypes' encoding: bit i = BP_ScalarType i, 0 =
// every dtype.
static_assert(bp::Dtypes().isAll() && bp::Dtypes::all().mask() == 0);
static_assert(bp::Dtypes{bp::ScalarType::Float32}.mask() == BP_DTYPE_BIT(BP_FLOAT32));
static_assert(bp::Dtypes{bp::ScalarType::Float32, bp::ScalarType::Float16}.mask() ==
              (BP_DTYPE_BIT(BP_FLOAT32) | BP_DTYPE_BIT(BP_FLOAT16)));
static_assert(bp::Dtypes{bp::ScalarType::Float32}.contains(bp::ScalarType::Float32));
static_assert(!bp::Dtypes{bp::ScalarType::Float32}.contains(bp::ScalarType::Int64));
static_assert(bp::Dtypes::all().contains(bp::ScalarType::Int64));

// Every impl / implWhenDefined overload passes the declared dtypes in
// BP_KernelDesc.dtypes (0, every dtype, when none are given); fallback
// passes 0.
TEST_F(PluginHpp, LibraryImplPassesTheDeclaredDtypes) {
  bp::Library m(fake::kPlugin);
  const bp::Dtypes f32{bp::ScalarType::Float32};
  m.impl("toy::add", 7, &add, f32);
  m.impl("toy::add2", 7, bp::kernel<&addScalar>(), {bp::ScalarType::Float32, bp::ScalarType::Float16});
  m.impl("toy::raw", 7, &rawKernel, &g_seen, nullptr, {bp::ScalarType::Int64});
  m.impl("toy::plain", 7, &add);
  ASSERT_EQ(fake::g.impls.size(), 4u);
  EXPECT_EQ(fake::g.impls[0].dtypes, BP_DTYPE_BIT(BP_FLOAT32));
  EXPECT_EQ(fake::g.impls[1].dtypes, BP_DTYPE_BIT(BP_FLOAT32) | BP_DTYPE_BIT(BP_FLOAT16));
  EXPECT_EQ(fake::g.impls[2].dtypes, BP_DTYPE_BIT(BP_INT64));
  EXPECT_EQ(fake::g.impls[3].dtypes, 0u);
  m.fallback(7, &rawKernel, &g_seen);
  ASSERT_EQ(fake::g.fallbacks.size(), 1u);
  EXPECT_EQ(fake::g.fallbacks[0].dtypes, 0u);
#if BP_ABI_MINOR >= 4
  m.implWhenDefined("other::add", 7, &add, f32);
  m.implWhenDefined("other::add2", 7, bp::kernel<&addScalar>(), {bp::ScalarType::Bool});
  m.implWhenDefined("other::raw", 7, &rawKernel, nullptr, nullptr, {bp::ScalarType::UInt8});
  ASSERT_EQ(fake::g.impls_when_defined.size(), 3u);
  EXPECT_EQ(fake::g.impls_when_defined[0].dtypes, BP_DTYPE_BIT(BP_FLOAT32));
  EXPECT_EQ(fake::g.impls_when_defined[1].dtypes, BP_DTYPE_BIT(BP_BOOL));
  EXPECT_EQ(fake::g.impls_when_defined[2].dtypes, BP_DTYPE_BIT(BP_UINT8));
#endif
  for (const fake::KernelRegistration& r : fake::g.impls) EXPECT_EQ(r.flags, 0u) << r.op;
}

// Runs `fn`, which must throw bp::Error with `code` and a message holding `part`.
template <class F>
void expectBpError(F&& fn, BP_ErrorCode code, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no bp::Error";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), code) << e.message();
    EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
  }
}

// Kernel::takingCpuScalars() (Note [CPU scalars as kernel arguments]) is
// BP_KERNEL_CPU_SCALARS in BP_KernelDesc.flags, through every impl and
// implWhenDefined overload that takes a bp::Kernel; a plugin built for an
// older ABI, or a bit the SDK does not know, fails at registration.
TEST_F(PluginHpp, TakingCpuScalarsIsTheKernelFlag) {
  bp::Library m(fake::kPlugin);
  const bp::Kernel k = bp::kernel(&add).takingCpuScalars();
  EXPECT_EQ(bp::kernel(&add).flags, 0u);
#if BP_ABI_MINOR >= 13
  EXPECT_EQ(k.flags, BP_KERNEL_CPU_SCALARS);
  m.impl("toy::add", 7, k);
  m.impl("toy::add2", 7, bp::kernel<&addScalar>().takingCpuScalars(), {bp::ScalarType::Float32});
  m.implWhenDefined("other::add", 7, k);
  ASSERT_EQ(fake::g.impls.size(), 2u);
  EXPECT_EQ(fake::g.impls[0].flags, BP_KERNEL_CPU_SCALARS);
  EXPECT_EQ(fake::g.impls[1].flags, BP_KERNEL_CPU_SCALARS);
  EXPECT_EQ(fake::g.impls[1].dtypes, BP_DTYPE_BIT(BP_FLOAT32));
  ASSERT_EQ(fake::g.impls_when_defined.size(), 1u);
  EXPECT_EQ(fake::g.impls_when_defined[0].flags, BP_KERNEL_CPU_SCALARS);
  expectBpError([&] { m.impl("toy::raw", 7, &rawKernel, nullptr, nullptr, bp::Dtypes::all(), uint64_t{1} << 5); },
                BP_INVALID_ARGUMENT, "impl(\"toy::raw\"): unknown kernel flags 32");
#else
  expectBpError([&] { m.impl("toy::add", 7, k); }, BP_FAILED_PRECONDITION,
                "impl(\"toy::add\"): kernel flags need plugin ABI 1.13");
  EXPECT_TRUE(fake::g.impls.empty());
#endif
}

#if BP_ABI_MINOR >= 4
// implWhenDefined goes to the host's impl_when_defined (never to impl), with
// the same generated signatures and adapters as impl.
TEST_F(PluginHpp, LibraryImplWhenDefinedPassesSignatureAndAdapter) {
  bp::Library m(fake::kPlugin);
  m.implWhenDefined("other::add", 7, &add);
  m.implWhenDefined("other::add2", 0, bp::kernel<&addScalar>());
  m.implWhenDefined("other::raw", 7, &rawKernel, &g_seen);
  m.implWhenDefined("other::raw_sig", 7, &rawKernel, nullptr, "(Tensor) -> Tensor");
  EXPECT_TRUE(fake::g.impls.empty());
  ASSERT_EQ(fake::g.impls_when_defined.size(), 4u);
  const auto& i0 = fake::g.impls_when_defined[0];
  EXPECT_EQ(i0.op, "other::add");
  EXPECT_EQ(i0.device_type, 7);
  EXPECT_EQ(i0.signature, "(Tensor, Tensor) -> Tensor");
  EXPECT_EQ(i0.ctx, reinterpret_cast<void*>(&add));
  EXPECT_EQ(i0.fn, (&bp::detail::kernelAdapter<bp::Tensor, const bp::Tensor&, const bp::Tensor&>));
  EXPECT_EQ(fake::g.impls_when_defined[1].device_type, 0);
  EXPECT_EQ(fake::g.impls_when_defined[1].signature, "(Tensor, Tensor, Scalar) -> Tensor");
  EXPECT_EQ(fake::g.impls_when_defined[2].fn, &rawKernel);
  EXPECT_EQ(fake::g.impls_when_defined[2].ctx, &g_seen);
  EXPECT_FALSE(fake::g.impls_when_defined[2].has_signature);
  EXPECT_EQ(fake::g.impls_when_defined[3].signature, "(Tensor) -> Tensor");

  // The registered function and ctx run the kernel.
  BP_Tensor* a = fake::makeTensor({1});
  Call c({vTensor(a), vTensor(a)}, 1, 0, "other::add");
  EXPECT_EQ(fake::take(i0.fn(i0.ctx, c.get())).first, BP_OK);
  EXPECT_EQ(c.rets[0].u.tensor, a);
  fake::tensorRelease(c.rets[0].u.tensor);
  fake::tensorRelease(a);

  // Host errors come back as bp::Error.
  fake::g.fail_registration = [] { return fake::errorNew(BP_INVALID_ARGUMENT, "signature does not fit"); };
  try {
    m.implWhenDefined("other::add", 7, &add);
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "signature does not fit");
  }
}

// A host table without the slot (an older host, or one that leaves it NULL):
// a clear error naming the call, the host's ABI and what to do; impl still works.
TEST_F(PluginHpp, ImplWhenDefinedOnAHostWithoutTheSlotSaysSo) {
  BP_HostApi t = fake::table();
  t.struct_size = BP_STRUCT_SIZE(BP_HostApi, device_type_name);  // a 1.3 host's table
  t.abi_minor = 3;
  bp::detail::installHost(t, fake::kPlugin);
  bp::Library m(fake::kPlugin);
  try {
    m.implWhenDefined("spconv::indice_conv", 7, &add);
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_UNIMPLEMENTED);
    EXPECT_NE(e.message().find("implWhenDefined(\"spconv::indice_conv\")"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("the host provides plugin ABI 1.3"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("added in ABI 1.4"), std::string::npos) << e.message();
  }
  EXPECT_TRUE(fake::g.impls_when_defined.empty());
  m.impl("test::add", 7, &add);
  EXPECT_EQ(fake::g.impls.size(), 1u);
}
#endif

#if BP_ABI_MINOR >= 6
// derivative goes to the host's slot with BP_ANY_DEVICE_TYPE or the given
// type; an older host's table says which ABI added it; host errors throw.
TEST_F(PluginHpp, LibraryDerivativeDeclaresThroughTheHost) {
  bp::Library m(fake::kPlugin);
  m.derivative("test::f", "test::f_backward(x, grad) -> x");
  m.derivative("add.Tensor", 7, "toy::fused_add_backward(grad) -> (self, other)");
  ASSERT_EQ(fake::g.derivatives.size(), 2u);
  EXPECT_EQ(fake::g.derivatives[0],
            std::make_tuple(std::string("test::f"), BP_ANY_DEVICE_TYPE, std::string("test::f_backward(x, grad) -> x")));
  EXPECT_EQ(std::get<1>(fake::g.derivatives[1]), 7);
  fake::g.fail_registration = [] { return fake::errorNew(BP_INVALID_ARGUMENT, "'y' is not an argument"); };
  try {
    m.derivative("test::f", "non_differentiable");
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "'y' is not an argument");
  }
  fake::g.fail_registration = nullptr;

  BP_HostApi t = fake::table();
  t.struct_size = BP_STRUCT_SIZE(BP_HostApi, impl_when_defined);  // a 1.5 host's table
  t.abi_minor = 5;
  bp::detail::installHost(t, fake::kPlugin);
  try {
    bp::Library(fake::kPlugin).derivative("test::f", "non_differentiable");
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_UNIMPLEMENTED);
    EXPECT_NE(e.message().find("the host provides plugin ABI 1.5"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("added in ABI 1.6"), std::string::npos) << e.message();
  }
  EXPECT_EQ(fake::g.derivatives.size(), 2u);
}
#endif

#if BP_ABI_MINOR >= 9
// ABI 1.9's registrations of a plugin's own operator (Note [A plugin's own
// operators]): a typed rule with its "-> ()" signature and no dtypes,
// samples with and without a typed reference, derived forms, a composite
// as impl(BP_ANY_DEVICE_TYPE); an older host gets a clear error.
void rule(const bp::Tensor&, const bp::Tensor&) {}
bp::Tensor reference(const bp::Tensor& a, const bp::Tensor&) { return a; }
TEST_F(PluginHpp, OwnOperatorRegistrations) {
  bp::Library m(fake::kPlugin);
  m.meta("test::f", &rule);
  ASSERT_EQ(fake::g.metas.size(), 1u);
  EXPECT_EQ(fake::g.metas[0], std::make_pair(std::string("test::f"), std::string("(Tensor, Tensor) -> ()")));
  m.spec("test::f", "rows: float32[2], float32[2]");
  m.spec("test::f", "rows: float32[2], float32[2]", &reference, 1e-3, 1e-2);
  ASSERT_EQ(fake::g.specs.size(), 2u);
  EXPECT_EQ(std::get<2>(fake::g.specs[0]), "");
  EXPECT_EQ(std::get<2>(fake::g.specs[1]), "(Tensor, Tensor) -> Tensor");
  EXPECT_EQ(std::get<3>(fake::g.specs[1]), 1e-3);
  EXPECT_EQ(std::get<4>(fake::g.specs[1]), 1e-2);
  m.deriveForms("test::f", BP_FORM_OUT | BP_FORM_INPLACE);
  ASSERT_EQ(fake::g.forms.size(), 1u);
  EXPECT_EQ(fake::g.forms[0].second, BP_FORM_OUT | BP_FORM_INPLACE);
  const size_t impls = fake::g.impls.size();
  m.composite("test::f", &reference);
  ASSERT_EQ(fake::g.impls.size(), impls + 1);
  EXPECT_EQ(fake::g.impls.back().device_type, BP_ANY_DEVICE_TYPE);
  EXPECT_EQ(fake::g.impls.back().dtypes, 0u);

  BP_HostApi t = fake::table();
  t.struct_size = BP_STRUCT_SIZE(BP_HostApi, derivative);  // a 1.8 host's table
  t.abi_minor = 8;
  bp::detail::installHost(t, fake::kPlugin);
  for (const std::function<void()>& call : std::vector<std::function<void()>>{
           [] { bp::Library(fake::kPlugin).meta("test::f", &rule); },
           [] { bp::Library(fake::kPlugin).spec("test::f", "rows: float32[2], float32[2]"); },
           [] { bp::Library(fake::kPlugin).deriveForms("test::f", BP_FORM_OUT); },
           [] { bp::Library(fake::kPlugin).composite("test::f", &reference); }}) {
    try {
      call();
      ADD_FAILURE() << "a 1.8 host took an ABI 1.9 registration";
    } catch (const bp::Error& e) {
      EXPECT_EQ(e.code(), BP_UNIMPLEMENTED);
      EXPECT_NE(e.message().find("the host provides plugin ABI 1.8"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("added in ABI 1.9"), std::string::npos) << e.message();
    }
  }
  EXPECT_EQ(fake::g.metas.size(), 1u);
  EXPECT_EQ(fake::g.impls.size(), impls + 1);
}
#endif

#if BP_ABI_MINOR >= 11
// ABI 1.11's key-value store: a value larger than storeGet's first buffer
// comes back whole (the second call), keys are per group, a missing key is
// the host's error, and a 1.10 host is named.
TEST_F(PluginHpp, StoreSetAndGetThroughTheHost) {
  const std::string big(1000, 'x');
  bp::storeSet(0, "mylib/id", big.data(), big.size());
  bp::storeSet(3, "mylib/id", "abc", 3);
  EXPECT_EQ(bp::storeGet(0, "mylib/id"), big);
  EXPECT_EQ(bp::storeGet(3, "mylib/id"), "abc");
  bp::storeSet(0, "mylib/empty", nullptr, 0);
  EXPECT_EQ(bp::storeGet(0, "mylib/empty"), "");
  try {
    bp::storeGet(0, "mylib/never");
    ADD_FAILURE() << "a missing key gave a value";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_DEADLINE_EXCEEDED);
  }
  BP_HostApi t = fake::table();
  t.struct_size = BP_STRUCT_SIZE(BP_HostApi, group_info);  // a 1.10 host's table
  t.abi_minor = 10;
  t.store_set = nullptr;
  t.store_get = nullptr;
  bp::detail::installHost(t, fake::kPlugin);
  try {
    bp::storeGet(0, "mylib/id");
    ADD_FAILURE() << "a 1.10 host served the store";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_UNIMPLEMENTED);
    EXPECT_NE(e.message().find("added in ABI 1.11"), std::string::npos) << e.message();
  }
}
#endif

TEST_F(PluginHpp, LibraryThrowsHostErrors) {
  bp::Library m(fake::kPlugin);
  fake::g.fail_registration = [] { return fake::errorNew(BP_ALREADY_EXISTS, "test::add already has a kernel"); };
  try {
    m.impl("test::add", 7, &add);
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_ALREADY_EXISTS);
    EXPECT_EQ(e.message(), "test::add already has a kernel");
  }
  EXPECT_THROW(m.def("test::x() -> ()"), bp::Error);
}

#if BP_ABI_MINOR >= 1
TEST_F(PluginHpp, DeviceTypeNameComesFromTheHost) {
  EXPECT_STREQ(bp::deviceTypeName(7), "toy");
  EXPECT_EQ(bp::deviceTypeName(3), nullptr);
  BP_HostApi t = fake::table();
  t.device_type_name = nullptr;
  bp::detail::installHost(t, fake::kPlugin);
  EXPECT_THROW(bp::deviceTypeName(0), bp::Error);
}
#endif

TEST_F(PluginHpp, MissingHostSlotIsUnimplemented) {
  BP_HostApi t = fake::table();
  t.op_redispatch = nullptr;
  bp::detail::installHost(t, fake::kPlugin);
  bp::Operator op = bp::Operator::find("test::x");
  try {
    (void)op.redispatchTensor(bp::DispatchKeys{1});
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_UNIMPLEMENTED);
    EXPECT_NE(e.message().find("op_redispatch"), std::string::npos);
  }
}

// ---------------------------------------------------------------- devices

struct TestBackend : bp::DeviceBackend {
  int throw_in = 0;  // which method throws: 1 allocate(bad_alloc) 2 memset 3 copies 4 deviceCount 5 deallocate
  bool null_alloc = false;
  int allocations = 0, frees = 0, syncs = 0;
  std::vector<unsigned char> arena = std::vector<unsigned char>(64);

  int deviceCount() override {
    if (throw_in == 4) throw std::runtime_error("driver gone");
    return 2;
  }
  const char* unavailableReason() override { return nullptr; }
  bool hostAccessible() override { return true; }
  void* allocate(int, size_t) override {
    ++allocations;
    if (throw_in == 1) throw std::bad_alloc();
    return null_alloc ? nullptr : arena.data();
  }
  void deallocate(int, void*) override {
    ++frees;
    if (throw_in == 5) throw std::runtime_error("double free");
  }
  void copyHostToDevice(int, void*, const void*, size_t) override {
    if (throw_in == 3) throw std::runtime_error("h2d failed");
  }
  void copyDeviceToHost(int, void*, const void*, size_t) override {
    if (throw_in == 3) throw 7;
  }
  void copyDeviceToDevice(int, void*, int, const void*, size_t) override {
    if (throw_in == 3) throw bp::Error(BP_DATA_LOSS, "d2d failed");
  }
  void memset(int device, void*, uint8_t, size_t) override {
    if (throw_in == 2) throw bp::Error(BP_UNAVAILABLE, bp::detail::concat("device ", device, " is busy"));
  }
  void synchronize(int) override { ++syncs; }
};

TEST_F(PluginHpp, RegisterDeviceBuildsDescAndTrampolinesConvertExceptions) {
  bp::Library m(fake::kPlugin);
  TestBackend backend;
  const int32_t type = m.registerDevice("toyaccel", &backend);
  EXPECT_EQ(type, 7);
  EXPECT_EQ(backend.deviceType(), 7);
  EXPECT_EQ(backend.typeName(), "toyaccel");
  ASSERT_EQ(fake::g.devices.size(), 1u);
  const BP_DeviceTypeDesc& d = *fake::g.devices[0];
  EXPECT_EQ(d.struct_size, size_t{BP_DeviceTypeDesc_STRUCT_SIZE});
  EXPECT_STREQ(d.name, "toyaccel");
  EXPECT_EQ(d.ctx, &backend);
  EXPECT_EQ(d.host_accessible, 1);
  EXPECT_EQ(d.stream_create, nullptr);  // no streams from DeviceBackend

  EXPECT_EQ(d.device_count(d.ctx), 2);
  EXPECT_EQ(d.unavailable_reason(d.ctx), nullptr);

  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(fake::take(d.allocate(d.ctx, 0, 16, &p)).first, BP_OK);
  EXPECT_EQ(p, backend.arena.data());
  EXPECT_EQ(fake::take(d.allocate(d.ctx, 0, 0, &p)).first, BP_OK);  // 0 bytes: NULL, backend not called
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(backend.allocations, 1);
  d.deallocate(d.ctx, 0, nullptr);
  EXPECT_EQ(backend.frees, 0);
  d.deallocate(d.ctx, 0, backend.arena.data());
  EXPECT_EQ(backend.frees, 1);
  EXPECT_EQ(fake::take(d.synchronize(d.ctx, 1)).first, BP_OK);
  EXPECT_EQ(backend.syncs, 1);

  backend.null_alloc = true;
  auto [code, msg] = fake::take(d.allocate(d.ctx, 1, 16, &p));
  EXPECT_EQ(code, BP_RESOURCE_EXHAUSTED);
  EXPECT_EQ(msg, "out of memory on toyaccel:1 allocating 16 bytes");
  backend.null_alloc = false;

  backend.throw_in = 1;
  EXPECT_EQ(fake::take(d.allocate(d.ctx, 0, 16, &p)).first, BP_RESOURCE_EXHAUSTED);
  backend.throw_in = 2;
  EXPECT_EQ(fake::take(d.memset(d.ctx, 1, p, 0, 4)), err(BP_UNAVAILABLE, std::string("device 1 is busy")));
  EXPECT_EQ(fake::take(d.memset(d.ctx, 1, p, 0, 0)).first, BP_OK);  // nothing to do
  backend.throw_in = 3;
  char buf[4];
  EXPECT_EQ(fake::take(d.copy_host_to_device(d.ctx, 0, p, buf, 4)), err(BP_INTERNAL, std::string("h2d failed")));
  EXPECT_EQ(fake::take(d.copy_device_to_host(d.ctx, 0, buf, p, 4)).first, BP_UNKNOWN);
  EXPECT_EQ(fake::take(d.copy_device_to_device(d.ctx, 0, p, 1, p, 4)).first, BP_DATA_LOSS);
  backend.throw_in = 4;
  EXPECT_EQ(d.device_count(d.ctx), 0);  // no error slot: logged, reported as no devices
  backend.throw_in = 5;
  d.deallocate(d.ctx, 0, backend.arena.data());
  ASSERT_EQ(fake::g.logs.size(), 2u);
  EXPECT_EQ(fake::g.logs[0].first, BP_LOG_ERROR);
  EXPECT_EQ(fake::g.logs[0].second, "DeviceBackend::deviceCount threw: driver gone");
  EXPECT_EQ(fake::g.logs[1].second, "DeviceBackend::deallocate threw: double free");
}

// A backend that says it has streams and events gets every slot of both
// groups; the trampolines pass handles through and turn exceptions into errors.
struct StreamBackend final : TestBackend {
  bool hasStreams() override { return true; }
  bool hasEvents() override { return true; }
  BP_Stream* createStream(int) override { return reinterpret_cast<BP_Stream*>(&streams); }
  void destroyStream(int, BP_Stream* s) override {
    if (s != reinterpret_cast<BP_Stream*>(&streams)) throw bp::Error(BP_INVALID_ARGUMENT, "not my stream");
    ++streams;
  }
  void synchronizeStream(int, BP_Stream*) override { ++syncs; }
  BP_Stream* currentStream(int) override { return current; }
  void setCurrentStream(int, BP_Stream* s) override { current = s; }
  BP_Event* createEvent(int) override { return reinterpret_cast<BP_Event*>(&events); }
  void destroyEvent(int, BP_Event*) override { ++events; }
  void recordEvent(int, BP_Event*, BP_Stream*) override { ++events; }
  void waitEvent(int device, BP_Event*, BP_Stream*) override {
    throw bp::Error(BP_UNAVAILABLE, bp::detail::concat("device ", device, " cannot wait"));
  }
  void synchronizeEvent(int, BP_Event*) override { ++events; }
  bool queryEvent(int, BP_Event*) override { return events > 1; }
  int streams = 0, events = 0;
  BP_Stream* current = nullptr;
};

TEST_F(PluginHpp, RegisterDeviceFillsStreamAndEventSlotsWhenTheBackendHasThem) {
  bp::Library m(fake::kPlugin);
  StreamBackend backend;
  m.registerDevice("streamy", &backend);
  ASSERT_EQ(fake::g.devices.size(), 1u);
  const BP_DeviceTypeDesc& d = *fake::g.devices[0];
  ASSERT_TRUE(d.stream_create && d.stream_destroy && d.stream_synchronize && d.get_current_stream &&
              d.set_current_stream && d.event_create && d.event_destroy && d.event_record && d.event_wait &&
              d.event_synchronize && d.event_query);
  BP_Stream* s = nullptr;
  EXPECT_EQ(fake::take(d.stream_create(d.ctx, 0, &s)).first, BP_OK);
  EXPECT_EQ(s, reinterpret_cast<BP_Stream*>(&backend.streams));
  EXPECT_EQ(fake::take(d.set_current_stream(d.ctx, 0, s)).first, BP_OK);
  BP_Stream* cur = nullptr;
  EXPECT_EQ(fake::take(d.get_current_stream(d.ctx, 0, &cur)).first, BP_OK);
  EXPECT_EQ(cur, s);
  EXPECT_EQ(fake::take(d.stream_synchronize(d.ctx, 0, s)).first, BP_OK);
  EXPECT_EQ(backend.syncs, 1);
  BP_Event* e = nullptr;
  EXPECT_EQ(fake::take(d.event_create(d.ctx, 0, &e)).first, BP_OK);
  uint8_t complete = 7;
  EXPECT_EQ(fake::take(d.event_query(d.ctx, 0, e, &complete)).first, BP_OK);
  EXPECT_EQ(complete, 0);
  EXPECT_EQ(fake::take(d.event_record(d.ctx, 0, e, s)).first, BP_OK);
  EXPECT_EQ(fake::take(d.event_synchronize(d.ctx, 0, e)).first, BP_OK);
  EXPECT_EQ(fake::take(d.event_query(d.ctx, 0, e, &complete)).first, BP_OK);
  EXPECT_EQ(complete, 1);
  const auto waited = fake::take(d.event_wait(d.ctx, 1, e, s));
  EXPECT_EQ(waited.first, BP_UNAVAILABLE);
  EXPECT_EQ(waited.second, "device 1 cannot wait");
  d.event_destroy(d.ctx, 0, e);
  d.stream_destroy(d.ctx, 0, s);
  EXPECT_EQ(backend.streams, 1);
  d.stream_destroy(d.ctx, 0, nullptr);  // throws inside: logged, not propagated
  EXPECT_EQ(backend.streams, 1);
}

// Event timing (ABI 1.12): a backend that has it gets both slots; the
// trampolines pass the events and the milliseconds through and turn an
// exception into an error. Without it both slots stay NULL.
struct TimedBackend final : TestBackend {
  bool hasEvents() override { return true; }
  bool hasEventTiming() override { return true; }
  BP_Event* createTimedEvent(int) override { return reinterpret_cast<BP_Event*>(&made); }
  double eventElapsedMs(int device, BP_Event* start, BP_Event* end) override {
    if (start == end) throw bp::Error(BP_FAILED_PRECONDITION, bp::detail::concat("device ", device, ": same event"));
    return 2.5;
  }
  int made = 0;
};

TEST_F(PluginHpp, EventTimingFillsBothSlotsOrNeither) {
  bp::Library m(fake::kPlugin);
  TimedBackend timed;
  StreamBackend untimed;
  m.registerDevice("timed", &timed);
  m.registerDevice("untimed", &untimed);
  ASSERT_EQ(fake::g.devices.size(), 2u);
  const BP_DeviceTypeDesc& d = *fake::g.devices[0];
  ASSERT_TRUE(d.event_create_timed && d.event_elapsed_ms);
  EXPECT_FALSE(fake::g.devices[1]->event_create_timed || fake::g.devices[1]->event_elapsed_ms);
  BP_Event* e = nullptr;
  EXPECT_EQ(fake::take(d.event_create_timed(d.ctx, 0, &e)).first, BP_OK);
  EXPECT_EQ(e, reinterpret_cast<BP_Event*>(&timed.made));
  double ms = 0;
  EXPECT_EQ(fake::take(d.event_elapsed_ms(d.ctx, 0, e, nullptr, &ms)).first, BP_OK);
  EXPECT_EQ(ms, 2.5);
  const auto same = fake::take(d.event_elapsed_ms(d.ctx, 1, e, e, &ms));
  EXPECT_EQ(same.first, BP_FAILED_PRECONDITION);
  EXPECT_EQ(same.second, "device 1: same event");
  const auto null_out = fake::take(d.event_elapsed_ms(d.ctx, 0, e, nullptr, nullptr));
  EXPECT_EQ(null_out.first, BP_INVALID_ARGUMENT);
  EXPECT_EQ(null_out.second, "event_elapsed_ms: NULL out_ms");
}

// A backend without them: every slot of both groups stays NULL, and the
// C++ defaults say what is missing.
TEST_F(PluginHpp, ABackendWithoutStreamsLeavesTheSlotsNull) {
  bp::Library m(fake::kPlugin);
  TestBackend backend;
  m.registerDevice("plain", &backend);
  const BP_DeviceTypeDesc& d = *fake::g.devices[0];
  EXPECT_FALSE(d.stream_create || d.stream_destroy || d.stream_synchronize || d.get_current_stream ||
               d.set_current_stream || d.event_create || d.event_destroy || d.event_record || d.event_wait ||
               d.event_synchronize || d.event_query);
  try {
    (void)backend.createStream(0);
    FAIL() << "the default createStream returned";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_UNIMPLEMENTED);
    EXPECT_NE(std::string(e.what()).find("createStream: plain:0 has no streams"), std::string::npos) << e.what();
  }
}

TEST_F(PluginHpp, DevicePropertiesRespectCallersStructSize) {
  bp::Library m(fake::kPlugin);
  TestBackend backend;
  m.registerDevice("toyaccel", &backend);
  const BP_DeviceTypeDesc& d = *fake::g.devices[0];

  BP_DeviceProperties full;
  std::memset(&full, 0xAB, sizeof full);
  full.struct_size = BP_DeviceProperties_STRUCT_SIZE;
  EXPECT_EQ(fake::take(d.get_properties(d.ctx, 0, &full)).first, BP_OK);
  EXPECT_STREQ(full.name, "toyaccel");
  EXPECT_EQ(full.total_memory, 0u);
  EXPECT_EQ(full.multiprocessor_count, 0);
  EXPECT_EQ(full.struct_size, size_t{BP_DeviceProperties_STRUCT_SIZE});

  // A caller that still sends sizeof (before BP_STRUCT_SIZE): its struct_size
  // is kept, and the tail padding past the last field is not written.
  BP_DeviceProperties padded;
  std::memset(&padded, 0xAB, sizeof padded);
  padded.struct_size = sizeof padded;
  static_assert(sizeof(BP_DeviceProperties) > BP_DeviceProperties_STRUCT_SIZE, "BP_DeviceProperties has tail padding");
  EXPECT_EQ(fake::take(d.get_properties(d.ctx, 0, &padded)).first, BP_OK);
  EXPECT_STREQ(padded.name, "toyaccel");
  EXPECT_EQ(padded.multiprocessor_count, 0);
  EXPECT_EQ(padded.struct_size, sizeof padded);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&padded);
  for (size_t i = BP_DeviceProperties_STRUCT_SIZE; i < sizeof padded; ++i) EXPECT_EQ(bytes[i], 0xAB) << "byte " << i;

  // An older, shorter struct: nothing past its struct_size is written.
  BP_DeviceProperties shortp;
  std::memset(&shortp, 0xAB, sizeof shortp);
  shortp.struct_size = offsetof(BP_DeviceProperties, total_memory);
  EXPECT_EQ(fake::take(d.get_properties(d.ctx, 0, &shortp)).first, BP_OK);
  EXPECT_STREQ(shortp.name, "toyaccel");
  EXPECT_EQ(shortp.total_memory, 0xABABABABABABABABu);
  EXPECT_EQ(shortp.struct_size, offsetof(BP_DeviceProperties, total_memory));
}

TEST_F(PluginHpp, RegisterDeviceFailureThrows) {
  bp::Library m(fake::kPlugin);
  TestBackend backend;
  fake::g.fail_registration = [] { return fake::errorNew(BP_INVALID_ARGUMENT, "bad name"); };
  try {
    m.registerDevice("Bad-Name", &backend);
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "bad name");
  }
  EXPECT_EQ(backend.deviceType(), -1);
}

// ------------------------------------------------------- errors and checks

TEST_F(PluginHpp, ThrowIfErrorConvertsAndFrees) {
  EXPECT_NO_THROW(bp::throwIfError(nullptr));
  try {
    bp::throwIfError(fake::errorNew(BP_ABORTED, "stop"));
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_ABORTED);
    EXPECT_EQ(e.message(), "stop");
    EXPECT_STREQ(e.what(), "stop");
  }
  EXPECT_EQ(fake::g.errors_freed, 1);
}

int g_message_builds = 0;
std::string expensiveMessage() {
  ++g_message_builds;
  return "expensive";
}

TEST_F(PluginHpp, CheckBuildsMessageOnlyOnFailure) {
  g_message_builds = 0;
  BP_PLUGIN_CHECK(1 + 1 == 2, expensiveMessage());
  EXPECT_EQ(g_message_builds, 0);
  try {
    BP_PLUGIN_CHECK(1 + 1 == 3, expensiveMessage(), " ", 42, " ", bp::ScalarType::BFloat16, " ", bp::IntList{1, 2});
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_INVALID_ARGUMENT);
    EXPECT_EQ(e.message(), "expensive 42 bfloat16 [1, 2]");
  }
  EXPECT_EQ(g_message_builds, 1);
  try {
    BP_PLUGIN_CHECK_CODE(false, BP_OUT_OF_RANGE, "too big");
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_OUT_OF_RANGE);
  }
  EXPECT_NO_THROW(bp::check(true, BP_INTERNAL, "x"));
  try {
    bp::check(false, BP_DATA_LOSS, "lost");
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_DATA_LOSS);
    EXPECT_EQ(e.message(), "lost");
  }
}

TEST(PluginHppHost, HostThrowsBeforeInit) {
  const BP_HostApi* saved = bp::detail::g_host;
  bp::detail::g_host = nullptr;
  try {
    (void)bp::host();
    ADD_FAILURE();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.code(), BP_FAILED_PRECONDITION);
    EXPECT_NE(e.message().find("before backplane_plugin_init"), std::string::npos);
  }
  // Destroying a Tensor cannot throw, even then.
  { bp::Tensor t = bp::Tensor::adopt(reinterpret_cast<BP_Tensor*>(&g_seen)); }
  bp::detail::g_host = saved;
}

// ------------------------------------------------------------ value types

TEST(PluginHppTypes, ScalarTypeMatchesAbi) {
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Bool), BP_BOOL);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::UInt8), BP_UINT8);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Int8), BP_INT8);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Int32), BP_INT32);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Int64), BP_INT64);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Float16), BP_FLOAT16);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::BFloat16), BP_BFLOAT16);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Float32), BP_FLOAT32);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Float64), BP_FLOAT64);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::Int16), BP_INT16);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::UInt16), BP_UINT16);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::UInt32), BP_UINT32);
  EXPECT_EQ(static_cast<int32_t>(bp::ScalarType::UInt64), BP_UINT64);
  const char* names[] = {"bool",    "uint8",   "int8",  "int32",  "int64",  "float16", "bfloat16",
                         "float32", "float64", "int16", "uint16", "uint32", "uint64"};
  const size_t sizes[] = {1, 1, 1, 4, 8, 2, 2, 4, 8, 2, 2, 4, 8};
  for (int i = 0; i < 13; ++i) {
    EXPECT_STREQ(bp::name(static_cast<bp::ScalarType>(i)), names[i]);
    EXPECT_EQ(bp::elementSize(static_cast<bp::ScalarType>(i)), sizes[i]);
  }
  EXPECT_EQ(bp::elementSize(static_cast<bp::ScalarType>(99)), 0u);
  static_assert(bp::scalarTypeOf<const bp::BFloat16>() == bp::ScalarType::BFloat16);
  static_assert(bp::scalarTypeOf<int16_t>() == bp::ScalarType::Int16);
  static_assert(bp::scalarTypeOf<uint64_t>() == bp::ScalarType::UInt64);
  // The full-support lists name int16; the barebones unsigned types have their own.
  EXPECT_EQ(bp::kAllScalarTypes.size(), 10u);
  EXPECT_EQ(bp::kNumericScalarTypes.size(), 9u);
  EXPECT_EQ(bp::kBarebonesUnsignedScalarTypes.size(), 3u);
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(PluginHppTypes, HalfRoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(bp::Half(1.0f).bits, 0x3c00);
  EXPECT_EQ(bp::Half(-2.0f).bits, 0xc000);
  EXPECT_EQ(bp::Half(0.0f).bits, 0x0000);
  EXPECT_EQ(bp::Half(-0.0f).bits, 0x8000);
  EXPECT_EQ(bp::Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(bp::Half(65519.99f).bits, 0x7bff);
  EXPECT_EQ(bp::Half(65520.0f).bits, 0x7c00);  // tie: rounds to even (infinity)
  EXPECT_EQ(bp::Half(1e10f).bits, 0x7c00);
  EXPECT_EQ(bp::Half(-INFINITY).bits, 0xfc00);
  EXPECT_EQ(bp::Half(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(bp::Half(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(bp::Half(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie: rounds to even (zero)
  EXPECT_EQ(bp::Half(std::ldexp(1.5f, -25)).bits, 0x0001);
  EXPECT_EQ(bp::Half(std::ldexp(3.0f, -25)).bits, 0x0002);                                 // 1.5 units: tie to even 2
  EXPECT_EQ(bp::Half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);                          // tie: even
  EXPECT_EQ(bp::Half(1.0f + std::ldexp(3.0f, -11)).bits, 0x3c02);                          // tie: even
  EXPECT_EQ(bp::Half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)).bits, 0x3c01);  // above tie
  EXPECT_TRUE(std::isnan(static_cast<float>(bp::Half(NAN))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bp::Half(floatOf(0x7f800001)))));  // payload only in low bits
  EXPECT_EQ(bp::Half(floatOf(0xffc00000)).bits & 0x8000, 0x8000);              // sign kept
  EXPECT_EQ(static_cast<float>(bp::Half::fromBits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(bp::Half::fromBits(0x3555)), 0.333251953125f);

  // Every non-NaN half survives half -> float -> half; NaNs stay NaN.
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const bp::Half h = bp::Half::fromBits(static_cast<uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) {
      ASSERT_TRUE((b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0) << b;
      ASSERT_TRUE(std::isnan(static_cast<float>(bp::Half(f)))) << b;
    } else {
      ASSERT_EQ(bp::Half(f).bits, b) << b;
    }
  }
#if defined(__FLT16_MAX__) && !defined(__clang__)
  // Against the compiler's own float -> _Float16 (round to nearest even).
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65521) {
    const float f = floatOf(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(bp::Half(f).bits, rb) << std::hex << u;
  }
#endif
}

TEST(PluginHppTypes, HalfAndBFloat16FollowTheRuleEveryLayerShares) {
  // The same cases and sweeps as core's and the GPU plugins' types meet
  // (Note [16-bit float conversions]).
  float16_test::expectFloat16ConversionsFollowTheRule(float16_test::scalarConversionsOf<bp::Half, bp::BFloat16>());
}

TEST(PluginHppTypes, BFloat16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(bp::BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(bp::BFloat16(floatOf(0x3f808000)).bits, 0x3f80);  // tie: even
  EXPECT_EQ(bp::BFloat16(floatOf(0x3f818000)).bits, 0x3f82);  // tie: even
  EXPECT_EQ(bp::BFloat16(floatOf(0x3f808001)).bits, 0x3f81);
  EXPECT_EQ(bp::BFloat16(floatOf(0x7f7fffff)).bits, 0x7f80);  // FLT_MAX rounds to infinity
  EXPECT_TRUE(std::isnan(static_cast<float>(bp::BFloat16(floatOf(0x7f800001)))));
  EXPECT_EQ(bp::BFloat16(floatOf(0xff800001)).bits & 0x8000, 0x8000);
  EXPECT_EQ(static_cast<float>(bp::BFloat16::fromBits(0xc040)), -3.0f);
  EXPECT_EQ(bp::BFloat16(-3.0f).bits, 0xc040);
}

TEST(PluginHppTypes, ScalarRemembersKindAndConverts) {
  bp::Scalar i(int64_t{300}), d(2.75), b(true), small(7);
  EXPECT_TRUE(i.isIntegral());
  EXPECT_FALSE(i.isFloatingPoint());
  EXPECT_TRUE(d.isFloatingPoint());
  EXPECT_TRUE(b.isBool());
  EXPECT_FALSE(b.isIntegral());
  EXPECT_EQ(i.toDouble(), 300.0);
  EXPECT_EQ(d.toInt(), 2);
  EXPECT_EQ(bp::Scalar(-2.75).toInt(), -2);
  EXPECT_EQ(b.toInt(), 1);
  EXPECT_TRUE(d.toBool());
  EXPECT_FALSE(bp::Scalar(0.0).toBool());
  EXPECT_EQ(small.to<int8_t>(), 7);
  EXPECT_EQ(d.to<float>(), 2.75f);
  EXPECT_EQ(d.to<bp::Half>().bits, bp::Half(2.75f).bits);
  EXPECT_TRUE(i.to<bool>());
  EXPECT_EQ(i.to<int64_t>(), 300);
  EXPECT_THROW(i.to<int8_t>(), bp::Error);
  EXPECT_THROW(bp::Scalar(-1).to<uint32_t>(), bp::Error);
  EXPECT_THROW(bp::Scalar(1e30).toInt(), bp::Error);
  EXPECT_THROW(bp::Scalar(NAN).toInt(), bp::Error);
  EXPECT_THROW(bp::Scalar(uint64_t{1} << 63), bp::Error);
  EXPECT_TRUE(bp::Scalar(1.5f).isFloatingPoint());
  EXPECT_TRUE(bp::Scalar(bp::Half(1.0f)).isFloatingPoint());
  EXPECT_TRUE(bp::Scalar().isIntegral());
}

TEST(PluginHppTypes, IntListViews) {
  std::vector<int64_t> v{1, 2, 3};
  const int64_t arr[] = {1, 2, 3};
  bp::IntList a = v, b(arr), c(v.data(), 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(a[2], 3);
  EXPECT_EQ(a.vec(), v);
  EXPECT_TRUE(bp::IntList().empty());
  EXPECT_THROW((void)a.at(3), bp::Error);
  auto sum = [](bp::IntList l) {
    int64_t s = 0;
    for (int64_t x : l) s += x;
    return s;
  };
  EXPECT_EQ(sum({4, 5, 6}), 15);
  EXPECT_EQ(bp::detail::concat(bp::IntList{1, 2}), "[1, 2]");
}

// ------------------------------------------------------------ entry points

// The plugin this test binary "is": the header's minimum example, plus modes
// that make init fail.
class ToyBackend final : public bp::DeviceBackend {
 public:
  int deviceCount() override { return 1; }
  bool hostAccessible() override { return true; }
  void* allocate(int, size_t n) override { return ::operator new(n); }
  void deallocate(int, void* p) override { ::operator delete(p); }
  void copyHostToDevice(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToHost(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToDevice(int, void* d, int, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void memset(int, void* d, uint8_t v, size_t n) override { std::memset(d, v, n); }
};

bp::Tensor toyAdd(const bp::Tensor& a, const bp::Tensor& b) {
  BP_PLUGIN_CHECK(a.dtype() == bp::ScalarType::Float32 && b.dtype() == a.dtype(),
                  "toy::add supports float32 only, got ", a.dtype(), " and ", b.dtype());
  BP_PLUGIN_CHECK(a.sizes() == b.sizes() && a.is_contiguous() && b.is_contiguous(),
                  "toy::add needs contiguous tensors of one shape, got ", a.sizes(), " and ", b.sizes());
  bp::Tensor out = bp::Tensor::empty(a.sizes(), a.dtype(), a.device());
  const float* x = a.data_ptr<const float>();
  const float* y = b.data_ptr<const float>();
  float* z = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) z[i] = x[i] + y[i];
  return out;
}

int g_init_mode = 0, g_init_runs = 0, g_shutdowns = 0;
int32_t g_toy_type = -1;

void testPluginInit(bp::Library& m) {
  ++g_init_runs;
  if (g_init_mode == 1) throw bp::Error(BP_ALREADY_EXISTS, "device type toy exists");
  if (g_init_mode == 2) throw std::runtime_error("init crashed");
  static ToyBackend backend;
  g_toy_type = m.registerDevice("toy", &backend);
  m.def("toy::add(Tensor a, Tensor b) -> Tensor");
  m.impl("toy::add", g_toy_type, &toyAdd);
}

void testPluginShutdown() {
  ++g_shutdowns;
  throw std::runtime_error("shutdown failed");
}

}  // namespace

BACKPLANE_PLUGIN("hpp_test", "0.1.2", testPluginInit)
BACKPLANE_PLUGIN_SHUTDOWN(testPluginShutdown)

namespace {

class PluginHppEntry : public PluginHpp {
 protected:
  void SetUp() override {
    PluginHpp::SetUp();
    bp::detail::g_host = nullptr;
    bp::detail::g_plugin = nullptr;
    g_init_mode = 0;
    g_init_runs = 0;
  }
};

TEST_F(PluginHppEntry, QueryDescribesThePlugin) {
  const BP_PluginInfo* info = backplane_plugin_query();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info, backplane_plugin_query());
  EXPECT_EQ(info->struct_size, size_t{BP_PluginInfo_STRUCT_SIZE});
  EXPECT_EQ(info->magic, BP_PLUGIN_MAGIC);
  EXPECT_EQ(info->abi_major, static_cast<uint32_t>(BP_ABI_MAJOR));
  EXPECT_EQ(info->abi_minor, static_cast<uint32_t>(BP_ABI_MINOR));
  EXPECT_STREQ(info->name, "hpp_test");
  EXPECT_STREQ(info->version, "0.1.2");
}

TEST_F(PluginHppEntry, InitInstallsHostAndRunsTheExamplePlugin) {
  BP_HostApi h = fake::table();
  ASSERT_EQ(fake::take(backplane_plugin_init(&h, fake::kPlugin)).first, BP_OK);
  EXPECT_EQ(g_init_runs, 1);
  EXPECT_EQ(&bp::host(), &bp::detail::g_host_table);  // a copy, not the caller's table
  EXPECT_EQ(bp::host().tensor_info, &fake::tensorInfo);
  EXPECT_EQ(bp::pluginHandle(), fake::kPlugin);
  ASSERT_EQ(fake::g.devices.size(), 1u);
  EXPECT_STREQ(fake::g.devices[0]->name, "toy");
  ASSERT_EQ(fake::g.impls.size(), 1u);
  EXPECT_EQ(fake::g.impls[0].signature, "(Tensor, Tensor) -> Tensor");

  // Run the registered kernel end to end on host-accessible fake tensors.
  BP_Tensor* a = fake::makeTensor({3}, BP_FLOAT32, {g_toy_type, 0});
  BP_Tensor* b = fake::makeTensor({3}, BP_FLOAT32, {g_toy_type, 0});
  float* pa = reinterpret_cast<float*>(fake::impl(a)->storage->data());
  float* pb = reinterpret_cast<float*>(fake::impl(b)->storage->data());
  for (int i = 0; i < 3; ++i) {
    pa[i] = static_cast<float>(i);
    pb[i] = 10.0f;
  }
  Call c({vTensor(a), vTensor(b)}, 1, 0, "toy::add");
  const auto& k = fake::g.impls[0];
  ASSERT_EQ(fake::take(k.fn(k.ctx, c.get())).first, BP_OK);
  bp::Tensor out = bp::Tensor::adopt(c.rets[0].u.tensor);
  EXPECT_EQ(out.device(), (bp::Device{g_toy_type, 0}));
  const float* z = out.data_ptr<const float>();
  EXPECT_EQ(z[0], 10.0f);
  EXPECT_EQ(z[2], 12.0f);

  BP_Tensor* i64 = fake::makeTensor({3}, BP_INT64);
  Call bad({vTensor(a), vTensor(i64)}, 1, 0, "toy::add");
  EXPECT_EQ(fake::take(k.fn(k.ctx, bad.get())),
            err(BP_INVALID_ARGUMENT, std::string("toy::add supports float32 only, got float32 and int64")));
  for (BP_Tensor* t : {a, b, i64}) fake::tensorRelease(t);
}

TEST_F(PluginHppEntry, InitRejectsADifferentAbiMajor) {
  BP_HostApi h = fake::table();
  h.abi_major = BP_ABI_MAJOR + 1;
  auto [code, msg] = fake::take(backplane_plugin_init(&h, fake::kPlugin));
  EXPECT_EQ(code, BP_FAILED_PRECONDITION);
  const std::string mine = std::to_string(BP_ABI_MAJOR) + "." + std::to_string(BP_ABI_MINOR);
  const std::string theirs = std::to_string(BP_ABI_MAJOR + 1) + "." + std::to_string(BP_ABI_MINOR);
  EXPECT_EQ(msg, "plugin 'hpp_test' was built against Backplane plugin ABI " + mine + ", but the host provides ABI " +
                     theirs + "; rebuild the plugin against the host's plugin_api.h");
  EXPECT_EQ(g_init_runs, 0);
  EXPECT_EQ(bp::detail::g_host, nullptr);
  EXPECT_TRUE(fake::g.devices.empty());
}

#if BP_ABI_MINOR > 0
TEST_F(PluginHppEntry, InitRejectsAnOlderAbiMinor) {
  // Built for a newer minor than the host's: it may call slots the host lacks.
  BP_HostApi h = fake::table();
  h.abi_minor = BP_ABI_MINOR - 1;
  auto [code, msg] = fake::take(backplane_plugin_init(&h, fake::kPlugin));
  EXPECT_EQ(code, BP_FAILED_PRECONDITION);
  EXPECT_NE(msg.find("the host provides ABI " + std::to_string(BP_ABI_MAJOR) + "." + std::to_string(BP_ABI_MINOR - 1)),
            std::string::npos)
      << msg;
  EXPECT_EQ(g_init_runs, 0);
}
#endif

TEST_F(PluginHppEntry, InitRejectsAShortOrIncompleteTable) {
  BP_HostApi h = fake::table();
  h.struct_size = offsetof(BP_HostApi, op_redispatch);  // a table without the last slot
  auto [code, msg] = fake::take(backplane_plugin_init(&h, fake::kPlugin));
  EXPECT_EQ(code, BP_FAILED_PRECONDITION);
  EXPECT_NE(msg.find("struct_size"), std::string::npos) << msg;

  h = fake::table();
  h.struct_size = BP_MAX_STRUCT_SIZE + 1;
  EXPECT_EQ(fake::take(backplane_plugin_init(&h, fake::kPlugin)).first, BP_FAILED_PRECONDITION);

  h = fake::table();
  h.tensor_retain = nullptr;
  auto [code2, msg2] = fake::take(backplane_plugin_init(&h, fake::kPlugin));
  EXPECT_EQ(code2, BP_FAILED_PRECONDITION);
  EXPECT_EQ(msg2, "plugin 'hpp_test': the host's BP_HostApi has no tensor_retain (NULL slot)");
  EXPECT_EQ(g_init_runs, 0);
  EXPECT_EQ(bp::detail::g_host, nullptr);
}

TEST_F(PluginHppEntry, UnusableTableRegistersNothing) {
  // No way to report: NULL is returned, nothing is stored, init never runs.
  EXPECT_EQ(backplane_plugin_init(nullptr, fake::kPlugin), nullptr);
  BP_HostApi h = fake::table();
  h.error_new = nullptr;
  EXPECT_EQ(backplane_plugin_init(&h, fake::kPlugin), nullptr);
  h = fake::table();
  h.struct_size = offsetof(BP_HostApi, error_new);
  EXPECT_EQ(backplane_plugin_init(&h, fake::kPlugin), nullptr);
  EXPECT_EQ(g_init_runs, 0);
  EXPECT_EQ(bp::detail::g_host, nullptr);
}

TEST_F(PluginHppEntry, InitExceptionsBecomeErrors) {
  BP_HostApi h = fake::table();
  g_init_mode = 1;
  EXPECT_EQ(fake::take(backplane_plugin_init(&h, fake::kPlugin)),
            err(BP_ALREADY_EXISTS, std::string("device type toy exists")));
  g_init_mode = 2;
  EXPECT_EQ(fake::take(backplane_plugin_init(&h, fake::kPlugin)), err(BP_INTERNAL, std::string("init crashed")));
  EXPECT_EQ(g_init_runs, 2);
}

TEST_F(PluginHppEntry, ShutdownRunsAndLogsExceptions) {
  BP_HostApi h = fake::table();
  ASSERT_EQ(fake::take(backplane_plugin_init(&h, fake::kPlugin)).first, BP_OK);
  fake::g.logs.clear();
  g_shutdowns = 0;
  backplane_plugin_shutdown(fake::kPlugin);
  EXPECT_EQ(g_shutdowns, 1);
  ASSERT_EQ(fake::g.logs.size(), 1u);
  EXPECT_EQ(fake::g.logs[0].second, "plugin shutdown threw: shutdown failed");
}

}  // namespace
