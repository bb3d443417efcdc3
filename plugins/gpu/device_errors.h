#pragma once
// Errors that kernels find in their input (an index out of range, an
// integral division by zero, a rulebook pair outside its tensors), reported
// at the next synchronization instead of costing one on every call.
//
// Note [Deferred device errors]
// The CPU plugin checks an index before it writes anything and raises at
// once. A GPU kernel finds a bad index only as it runs, after the call has
// returned to the host; reading a count back to raise at once costs a wait
// for the stream on every call (it did: one per indexing call, 292 per
// LiDAR forward before the sparse-convolution rework). So the kernels check
// their input as they read it and, on a bad value, record it in the
// device's error slot and do nothing harmful with it (a gather writes zero,
// a scatter skips it, a division gives zero): no out-of-bounds access ever
// happens. The slot is host memory the device writes (pinned and mapped),
// one per device; the first error wins (atomicCAS), until it is reported.
//
// Every synchronization of a device's work (a copy to the host, a device,
// stream or event synchronize, an event query that finds the work done,
// and the plugin's own synchronising reads) then reads the slot: one load
// of host memory, no device round trip. A recorded error is cleared and
// raised there as a bp::Error naming the op and the value, as PyTorch's
// device-side assertions report at the next synchronization; unlike them,
// the device stays usable. What the error means for results: the call that
// found the bad value has results that are not meaningful (bad indices read
// as zero or were skipped); the calls before and after it are unaffected.
// The conformance run synchronizes after a call that must raise, so a
// deferred error counts as the call's (docs/conformance.md).
//
// A kernel names what it found through an ErrorSite: a static object with
// the op and a function that words the message from the kernel's numbers;
// the device only carries its address.
#include <cstdint>
#include <string>

#include "backplane/plugin.hpp"
#include "gpu_port.h"

namespace bp_gpu {

struct ErrorSite {
  const char* op;
  BP_ErrorCode code;
  // The message, from the numbers the kernel recorded.
  std::string (*describe)(const ErrorSite& site, const int64_t (&values)[4]);
  const char* subject;  // what describe() may name: the indexed tensor ("'self'")
};

// The device's error slot (host memory, written by kernels).
struct DeviceErrorSlot {
  unsigned int raised;  // 0 until a kernel records an error
  unsigned int unused;
  unsigned long long site;  // the ErrorSite's address
  long long values[4];
};

// Records an error in `slot` unless one is pending (kernels only).
__device__ inline void raiseDeviceError(DeviceErrorSlot* slot, const ErrorSite* site, int64_t v0, int64_t v1 = 0,
                                        int64_t v2 = 0, int64_t v3 = 0) {
  if (atomicCAS(&slot->raised, 0u, 1u) != 0u) return;
  slot->site = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(site));
  slot->values[0] = v0;
  slot->values[1] = v1;
  slot->values[2] = v2;
  slot->values[3] = v3;
}

// The slot of `device` as its kernels address it (allocated on first use;
// host code only).
DeviceErrorSlot* deviceErrorSlot(int device);

// Throws the error a kernel of `device` recorded since the last report,
// and clears it; nothing when none is pending (one load). Called after
// every synchronization of the device's work (host code only).
void reportDeviceErrors(int device);

}  // namespace bp_gpu
