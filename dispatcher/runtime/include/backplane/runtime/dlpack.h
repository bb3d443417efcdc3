#pragma once
// DLPack export and import: Backplane tensors to and from PyTorch, NumPy,
// CuPy, JAX or any other DLPack 0.6 (DLManagedTensor) peer, without a copy.
//
//   DLManagedTensor* m = toDLPack(t);  // hand m to the consumer; it calls m->deleter
//   Tensor u = fromDLPack(m);          // u owns m now; m->deleter runs when u's storage dies
//
// Note [DLPack mapping]
// - Devices. cpu is kDLCPU. Another device type takes part only when its
//   DeviceInterface::dlpackDeviceType() names the DLPack device type whose
//   pointers its addresses are (a plugin sets BP_DeviceTypeDesc
//   .dlpack_device_type: kDLCUDA for CUDA, kDLROCM for HIP); device_id is
//   the device index. Addresses of a device that names none mean nothing
//   outside Backplane (the test device's cannot even be read), so its
//   tensors are refused, not copied behind the caller's back. On import,
//   kDLCPU is always cpu, and otherwise the lowest-numbered device type that
//   names the DLDevice's type wins, so the built-in cuda and hip come before
//   vendor types.
// - Element types. uint8 is kDLUInt 8; int8, int32 and int64 are kDLInt;
//   float16, float32 and float64 kDLFloat; bfloat16 is kDLBfloat 16. DLPack
//   0.6 has no bool: Backplane exports bool as code 6 bits 8, the kDLBool
//   that DLPack 0.8 added and that PyTorch 2, NumPy >= 1.25 and CuPy use, so
//   a round trip keeps the dtype; peers that predate it refuse the dtype
//   (NumPy 1.24 refuses bool in either direction). Exporting bool as uint8
//   instead would turn it into uint8 on every round trip. kDLUInt 8 is
//   always uint8 (an old PyTorch's bool arrives as uint8 0/1). Lanes must
//   be 1.
// - The first element. Export puts the storage offset into `data` and sets
//   byte_offset = 0, as PyTorch does: consumers differ in whether they honour
//   byte_offset, none in whether they read `data`. Import takes data +
//   byte_offset as the first element's address (integer arithmetic only, for
//   device addresses) and requires it to be aligned to the element size.
// - Layout. shape and strides are in elements. Export always fills strides.
//   Import reads strides == NULL as row-major contiguous; strides must be
//   >= 0 where the size is > 1 (Backplane has no negative strides; a
//   negative stride of a size-0 or size-1 dim, which moves nothing, becomes
//   0). The allocation's size is not part of DLPack, so import can check
//   only that the elements' span (1 + sum((size - 1) * stride) elements)
//   fits in int64 bytes and does not wrap the address space; memory the
//   producer's shape and strides claim is the producer's promise.
// - Streams. toDLPack does not synchronize: a consumer on another stream
//   must wait for the device's queued work first (DeviceInterface::
//   synchronize), as the Python protocol's __dlpack__(stream=...) arranges.

#include <dlpack/dlpack.h>

#include <cstdint>

#include "backplane/core/device.h"
#include "backplane/core/scalar_type.h"
#include "backplane/ops/tensor.h"

namespace backplane {

// Import refuses more dimensions than this (a corrupt ndim must not make it
// read a huge shape array): the tensor rank limit (Note [Rank limit]), so
// every tensor exports and every importable one fits.
inline constexpr int kMaxDLPackDims = static_cast<int>(kMaxTensorDims);

// DLPack 0.8's kDLBool, which the 0.6 header lacks (Note [DLPack mapping]).
inline constexpr uint8_t kDLBoolTypeCode = 6;

// A new DLManagedTensor viewing t's elements: no copy. It keeps t's storage
// alive until its deleter runs; the consumer calls m->deleter(m) exactly
// once, from any thread. shape and strides live inside it. Throws Error for
// an undefined tensor or a device whose memory only Backplane can address.
DLManagedTensor* toDLPack(const Tensor& t);

// A tensor viewing m's elements: no copy. On success it takes ownership of
// m: m->deleter(m) (when not NULL) runs exactly once, when the last tensor
// or view on the new storage dies, on whichever thread drops it. On error
// it throws Error naming the bad field and has taken nothing: the caller
// still owns m and must call m->deleter(m) itself (a Python consumer just
// leaves the capsule's name "dltensor", so the capsule deletes it).
Tensor fromDLPack(DLManagedTensor* m);

// The element type and device mappings of Note [DLPack mapping], for
// bindings (e.g. __dlpack_device__, which answers before any export). Each
// throws Error saying what has no counterpart.
DLDataType toDLDataType(ScalarType dtype);
ScalarType fromDLDataType(DLDataType dtype);
DLDevice toDLDevice(Device device);
Device fromDLDevice(DLDevice device);

}  // namespace backplane
