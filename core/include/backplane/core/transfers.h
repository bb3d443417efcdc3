#pragma once
// Counters of the bytes that cross between the host and a device.
//
// Note [Counting host<->device transfers]
// Every byte the host moves between devices goes through
// copyBytesBetweenDevices (tensor.h's copies, stageSpan, item(), to(), the
// CPU fallback's staging), and each such copy that crosses between the host
// and a device is counted here: a copy between the CPU and another device
// type counts once, a copy between two different device types (which goes
// through a host buffer) counts as two, and a copy within one device type
// counts nothing. A device whose memory the host can read (isHostAccessible)
// is still a device: its copies count.
//
// The counts are per thread and only grow, so the hot path takes no lock and
// a thread sees exactly the copies it made itself. The Profiler
// (backplane/runtime/profiler.h) reads them when an op starts and ends to attribute
// the difference to the op that moved the bytes (Note [Profiling]); a test or
// a tool subtracts two readings the same way. Copies a
// plugin makes inside its own kernels with its runtime (not through the host)
// are not seen here.
#include <cstdint>

namespace backplane {

struct TransferCount {
  uint64_t bytes = 0;   // bytes moved between the host and a device
  uint64_t copies = 0;  // copy calls that moved them
};

namespace detail {
// This thread's counts since it started; only copyBytesBetweenDevices adds to it.
inline thread_local TransferCount tls_host_device_transfers;
}  // namespace detail

// The host<->device bytes and copies this thread has made since it started.
inline TransferCount hostDeviceTransfers() { return detail::tls_host_device_transfers; }

}  // namespace backplane
