#pragma once
// Collectives as operators: the comm:: namespace, and C++ functions that
// call it.
//
// Note [Collectives are operators]
// A collective is an operator like any other: defined by the host (schema,
// rule, functional forms), dispatched on its tensors' device key, seen by
// tracing and the profiler, listed by `backplane ops`. Its kernel for a
// device is that device's engine: Open MPI for CPU tensors (the mpi plugin,
// plugins/mpi), NCCL inside the CUDA plugin, a vendor's library inside its
// plugin (it reads the group through BP_HostApi.group_info, ABI 1.10). A
// device without one runs the CPU engine through the CPU fallback: the
// tensors are staged through host memory, counted in the profiler's
// host<->device column. The operators:
//   comm::all_reduce_(Tensor(a!) self, str op="sum", int group=0)
//   comm::broadcast_(Tensor(a!) self, int src, int group=0)
//   comm::all_gather.out(Tensor self, int group=0, *, Tensor(a!) out)
//   comm::reduce_scatter.out(Tensor self, str op="sum", int group=0, *, Tensor(a!) out)
//   comm::all_to_all.out(Tensor self, int group=0, *, Tensor(a!) out)
//   comm::send(Tensor self, int dst, int tag=0, int group=0)
//   comm::recv_(Tensor(a!) self, int src, int tag=0, int group=0)
//   comm::barrier(int group=0)
// and the functional forms all_reduce, broadcast, all_gather,
// reduce_scatter and all_to_all (host composites over the forms above, so
// an engine implements those eight). Ranks (src, dst) are ranks of the
// group. all_gather concatenates along dim 0 (a 0-d tensor gathers into
// [size]); reduce_scatter and all_to_all split dim 0 into `size` equal
// blocks, block i going to rank i. Every rank calls a collective with the
// same dtype and shape (the mpi engine checks, Note [Checked collectives]
// in plugins/mpi); the rule checks each rank's own arguments.

#include "backplane/ops/tensor.h"
#include "backplane/runtime/process_group.h"

namespace backplane::comm {

const Tensor& allReduce_(const Tensor& self, ReduceOp op = ReduceOp::Sum, const Group& group = {});
Tensor allReduce(const Tensor& self, ReduceOp op = ReduceOp::Sum, const Group& group = {});
// `src` is a rank of `group`.
const Tensor& broadcast_(const Tensor& self, int src, const Group& group = {});
Tensor broadcast(const Tensor& self, int src, const Group& group = {});
Tensor allGather(const Tensor& self, const Group& group = {});
const Tensor& allGatherOut(const Tensor& self, const Tensor& out, const Group& group = {});
Tensor reduceScatter(const Tensor& self, ReduceOp op = ReduceOp::Sum, const Group& group = {});
const Tensor& reduceScatterOut(const Tensor& self, const Tensor& out, ReduceOp op = ReduceOp::Sum,
                               const Group& group = {});
Tensor allToAll(const Tensor& self, const Group& group = {});
const Tensor& allToAllOut(const Tensor& self, const Tensor& out, const Group& group = {});
// `dst` and `src` are ranks of `group`; a recv_ takes the send with the same
// tag from `src`, in order.
void send(const Tensor& self, int dst, int tag = 0, const Group& group = {});
const Tensor& recv_(const Tensor& self, int src, int tag = 0, const Group& group = {});
void barrier(const Group& group = {});

// The largest tag send and recv_ take (MPI guarantees 32767 tags; the engines
// keep the rest for themselves).
inline constexpr int64_t kMaxTag = 32767;

}  // namespace backplane::comm
