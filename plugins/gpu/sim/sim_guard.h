#pragma once
// Guard bytes around the simulator's device memory (Note [Guard bytes in
// the simulator] in sim_runtime.h): how gpuMalloc gets its memory, and the
// checks made when a block is freed and after every kernel. Only the
// simulator build includes this header. Thread-safe.

#include <cstddef>
#include <string_view>

namespace bp_gpu::sim {

// Whether blocks allocated from now on get guard bytes and kernels are
// followed by a check: BACKPLANE_GPUSIM_CHECK_BOUNDS in the environment
// when first asked ("1" on, "0" off; unset: on, except under
// AddressSanitizer, which reports the same writes with a stack), then what
// setBoundsChecking said last. One relaxed atomic load.
bool boundsChecking();
// Turns the mode on or off for blocks allocated afterwards (tests); blocks
// keep the guards they were made with until they are freed.
void setBoundsChecking(bool enabled);

// `nbytes` of host memory for gpuMalloc, between guard bytes when the mode
// is on; nullptr when the host is out of memory.
void* allocateDeviceBytes(size_t nbytes);
// Frees what allocateDeviceBytes returned. A guarded block's guards are
// checked first: a changed guard byte throws bp::Error (BP_INTERNAL) naming
// the block, its size and the offsets written, after the memory is freed.
void freeDeviceBytes(void* ptr);
// Checks the guards of every live guarded block after `kernel` (its
// signature) ran; throws bp::Error (BP_INTERNAL) naming the kernel, the
// block, its size and the offsets written, and restores the guards so that
// one bad write is reported once. Call only when boundsChecking().
void checkGuardsAfterKernel(std::string_view kernel);

}  // namespace bp_gpu::sim
