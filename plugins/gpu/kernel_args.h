#pragma once
// Host-side argument handling shared by the creation, elementwise and data
// movement kernels: device and dtype checks with errors that say what to
// do, 0-d tensors read as scalars, and dtype conversion of a whole tensor.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "device_errors.h"
#include "dtypes.cuh"
#include "runtime.h"

namespace bp_gpu {

inline constexpr int32_t kCpuType = 0;

// "gpusim:0", "cpu", or the device type number for other plugins' devices.
inline std::string deviceName(bp::Device d) {
  if (d.type == kCpuType) return "cpu";
  const std::string type = d.type == deviceType() ? std::string(BP_GPU_NAME) : "device type " + std::to_string(d.type);
  return type + ":" + std::to_string(d.index);
}

inline std::string dtypeList(std::initializer_list<ScalarType> types) {
  std::string s;
  for (ScalarType t : types) s += (s.empty() ? "" : ", ") + std::string(bp::name(t));
  return s;
}

// Throws "<op> on gpusim does not support dtype X (argument 'a'); supported:
// ..." unless t's dtype is in `supported`.
inline void checkDtype(const char* op, const bp::Tensor& t, const char* arg,
                       std::initializer_list<ScalarType> supported) {
  for (ScalarType s : supported)
    if (t.dtype() == s) return;
  bp::fail(BP_INVALID_ARGUMENT, std::string(op) + " on " + BP_GPU_NAME + " does not support dtype " +
                                    bp::name(t.dtype()) + " (argument '" + arg +
                                    "'); supported: " + dtypeList(supported));
}

// The device a call runs on: that of `t` (its out, or self for in-place
// ops), which must be one of this plugin's.
inline bp::Device callDevice(const char* op, const bp::Tensor& t, const char* arg) {
  BP_PLUGIN_CHECK(t.device().type == deviceType(), op, ": argument '", arg, "' is on ", deviceName(t.device()),
                  ", but this is the ", BP_GPU_NAME, " kernel; move it with .to(\"", BP_GPU_NAME, "\")");
  return t.device();
}

// Throws unless t is on `device` (the device of the call's `out`/`self`).
inline void checkOnDevice(const char* op, const bp::Tensor& t, const char* arg, bp::Device device) {
  if (t.device() == device) return;
  bp::fail(BP_INVALID_ARGUMENT, std::string(op) + ": argument '" + arg + "' is on " + deviceName(t.device()) +
                                    " but the call runs on " + deviceName(device) + "; move it there with .to(\"" +
                                    deviceName(device) + "\")");
}

// A 0-d cpu tensor: PyTorch lets one stand for a scalar among device
// tensors; kernels read it on the host and pass the value.
inline bool isCpuScalar(const bp::Tensor& t) { return t.device().type == kCpuType && t.dim() == 0; }

// Throws unless t is on `device` or is a 0-d cpu tensor.
inline void checkOnDeviceOrCpuScalar(const char* op, const bp::Tensor& t, const char* arg, bp::Device device) {
  if (!isCpuScalar(t)) checkOnDevice(op, t, arg, device);
}

// The element of a 0-d cpu tensor converted to storage type T, as a copy
// into a tensor of T's dtype would convert it.
template <class T>
T cpuScalarAs(const bp::Tensor& t) {
  return visitAnyDtype(t.dtype(), [&](auto tag) {
    using I = decltype(tag);
    I v;
    std::memcpy(&v, t.data_ptr(), sizeof(I));
    return convert<T>(v);
  });
}

// Copies `bytes` from device memory to the host once the work queued
// before it on the device's stream is done (waits for it).
inline void readDevice(int device, void* dst, const void* src, size_t bytes, const char* what) {
  refuseWhileCapturing(device, "a read of device memory on the host (a data-dependent size or value)");
  g_activity.host_reads.fetch_add(1, std::memory_order_relaxed);  // Note [Launch counters]
  g_activity.host_read_bytes.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  DeviceGuard guard(device);
  const gpuStream_t stream = currentStream(device);
  check(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDeviceToHost, stream), what);
  check(gpuStreamSynchronize(stream), what);
  reportDeviceErrors(device);  // Note [Deferred device errors]
}

// The value of a 0-d tensor on the cpu or on this plugin's device (read
// with a synchronous copy) as a bp::Scalar.
inline bp::Scalar scalarOf(const bp::Tensor& t) {
  uint64_t bits = 0;
  if (t.device().type == kCpuType) {
    std::memcpy(&bits, t.data_ptr(), t.element_size());
  } else {
    readDevice(t.device().index, &bits, t.data_ptr(), t.element_size(), "reading a 0-d tensor");
  }
  return visitAnyDtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, &bits, sizeof(T));
    return bp_common::scalarOfElement(v);
  });
}

// dst = src (broadcast to dst's shape) converted to dst's dtype, on dst's
// device; any strides (creation.cu, the _copy_on_device_ kernel).
void copyCast(const char* op, const bp::Tensor& dst, const bp::Tensor& src);

// The floating dtypes, which the float-only kernels accept.
inline const std::initializer_list<ScalarType> kFloatDtypes = {ScalarType::Float16, ScalarType::BFloat16,
                                                               ScalarType::Float32, ScalarType::Float64};

// t contiguous and of `dtype`: t itself, or a converted/packed copy on the
// same device kept in `holder`.
inline const bp::Tensor& dense(const char* op, const bp::Tensor& t, ScalarType dtype, bp::Tensor& holder) {
  if (t.dtype() == dtype && t.is_contiguous()) return t;
  holder = bp::Tensor::empty(t.sizes(), dtype, t.device());
  copyCast(op, holder, t);
  return holder;
}

// An optional floating operand (batch_norm's per-channel weight, bias and
// running statistics): null when absent, else checked to be on `device`.
inline const bp::Tensor* optionalOnDevice(const char* op, const std::optional<bp::Tensor>& t, const char* arg,
                                          bp::Device device) {
  if (!t || !t->defined()) return nullptr;
  checkOnDevice(op, *t, arg, device);
  checkDtype(op, *t, arg, kFloatDtypes);
  return &*t;
}

// t as `dtype`: t itself when it has it, else a converted copy on the same
// device kept in `holder`.
inline const bp::Tensor& as(const char* op, const bp::Tensor& t, ScalarType dtype, bp::Tensor& holder) {
  if (t.dtype() == dtype) return t;
  holder = bp::Tensor::empty(t.sizes(), dtype, t.device());
  copyCast(op, holder, t);
  return holder;
}

// An operand of selectInto: a tensor on out's device (of out's dtype; bool
// for the condition) broadcast to out's shape, or, when `tensor` is null,
// the element whose bits are `bits` (low bytes) for every position.
struct SelectOperand {
  const bp::Tensor* tensor;
  uint64_t bits;
};

// out = cond ? a : b elementwise (elementwise.cu; where and masked_fill).
void selectInto(const char* op, const bp::Tensor& out, SelectOperand cond, SelectOperand a, SelectOperand b);

}  // namespace bp_gpu
