#pragma once
// The dispatcher's own boxed kernels.

#include <cstdint>
#include <string>

#include "backplane/dispatch/dispatcher.h"

namespace backplane {

// Raises the "no kernel" error: names the op, the key, the argument devices
// and dtypes, and the keys that do have kernels.
void missingKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack);

// Note [CPU fallback]
// Runs an op that has a CPU kernel but none for the call's device: tensor
// arguments (also inside lists) on other devices are staged to the host
// (Note [Span staging]), Device arguments are replaced by cpu, the CPU kernel
// runs, arguments the schema marks as written (Tensor(a!), out=) are copied
// back into the originals, and returned tensors are moved to the target
// device (the first non-CPU Device argument, else the first non-CPU tensor
// argument's device). A returned tensor that aliases a written argument is
// that original argument. Returns of view ops come back as copies.
void cpuFallbackKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack);

// Logs op, key set and the kind of kernel that will run, then redispatches
// below Tracing.
void tracingKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack);

namespace detail {
// Bytes the CPU fallback has copied on this thread: cpuFallbackKernel adds
// each call's bytes when it finishes. The profiler zeroes it around every
// call it times, to attribute bytes to one call without reading the op's
// process-wide counters, which other threads change (Note [Profiling]).
inline thread_local uint64_t tls_fallback_bytes = 0;
}  // namespace detail

// Writes one line to stderr; lines from different threads do not interleave.
void logLine(const std::string& line);

}  // namespace backplane
