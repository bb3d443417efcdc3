#pragma once
// Data parallelism in one process: a batch split over several devices, the
// same work run on each, the results put back together.
//
// Note [Data parallel in one process]
// As PyTorch's DataParallel (scatter, replicate, parallel_apply, gather): an
// app that found several devices at run time splits its batch along a dim
// over them (scatter: the first size % n devices get one item more than the
// others, so no device idles while another has two more), holds a copy of
// its parameters on each (replicating is the app's own `to(device)` of its
// weights), runs the same function on every device at once, one host
// thread per device (parallelApply: GPU work queued from several threads
// overlaps, and the CPU's replica runs beside them), and concatenates the
// results on one device (gather). Any devices mix: cpu, gpusim:0 and a
// vendor's, each with its own kernels or the CPU fallback. Every step is
// made of ordinary ops (narrow, to, cat), so autograd differentiates
// through it: gradients of replicated parameters come back to the
// originals through their `to()`. Collectives are not needed inside one
// process: gather is the all_gather and the sum of replicas' gradients the
// all_reduce.

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/types/span.h"
#include "backplane/ops/tensor.h"

namespace backplane::parallel {

// How scatter splits `size` items over `parts` devices: size / parts each,
// one more for the first size % parts. Throws kInvalidArgument when a device
// would get none (size < parts) or parts is 0.
std::vector<int64_t> splitSizes(int64_t size, size_t parts);

// Part i of `t` along `dim` (splitSizes) on devices[i]. A part already on its
// device is a view of `t`, not a copy.
std::vector<Tensor> scatter(const Tensor& t, absl::Span<const Device> devices, int64_t dim = 0);

// The parts concatenated along `dim` on `destination` (each moved there first).
Tensor gather(absl::Span<const Tensor> parts, Device destination, int64_t dim = 0);

// Runs fn(i) for every i in [0, n) at once: i = 0 on the calling thread, the
// others on threads of their own, each in the caller's grad mode, and
// returns when all have returned. If any threw, rethrows the first (lowest
// i) as backplane::Error prefixed with "replica i: ", after every replica
// has finished.
void parallelApply(size_t n, const std::function<void(size_t)>& fn);

}  // namespace backplane::parallel
