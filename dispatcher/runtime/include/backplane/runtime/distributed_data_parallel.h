#pragma once
// Data-parallel training across processes: gradients averaged over a
// process group, bucketed and overlapped with backward.
//
// Note [Gradient buckets]
// As PyTorch's DistributedDataParallel: every rank holds the same parameters
// (rank 0's, broadcast when the wrapper is made), runs forward and backward
// on its own part of the batch, and the gradients are averaged over the
// group before the optimizer steps, so every rank steps the same; the result
// equals one process's gradient of the mean loss over the whole batch.
// - Buckets: the parameters, last first (roughly the order backward makes
//   their gradients), are packed into buckets of about bucket_cap_mb (25
//   MiB), the first of about first_bucket_mb (1 MiB) so that communication
//   starts early. A bucket holds parameters of one device and dtype, and a
//   flat buffer of their size.
// - Overlap: a post-accumulate hook on each parameter (autograd's
//   registerPostAccumulateGradHook) counts its bucket's gradients; when the
//   last arrives, they are copied into the bucket's buffer and its
//   all_reduce (avg) goes to a communication thread, so it runs while
//   backward goes on. Buckets start in bucket order on every rank (one
//   ready early waits for those before it), so every rank makes the same
//   collectives in the same order.
// - finishGradientSync() waits for every bucket's all_reduce and copies the
//   averages back into each parameter's grad(); call it after backward and
//   before the optimizer's step, once per backward (gradient accumulation
//   over several backwards is refused, naming it). Every parameter must get
//   a gradient in each step: one that did not is named. A backward that
//   failed half-way is ended by finishGradientSync too (it throws what was
//   missing), so that the next step starts with every rank at bucket 0.
// - Each step is recorded (stepTimeline()): when each bucket's all_reduce
//   started and ended and when backward ended, so a test and the profiler
//   can see the overlap.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "backplane/ops/tensor.h"
#include "backplane/runtime/process_group.h"

namespace backplane::parallel {

// DistributedDataParallel's options.
struct DdpOptions {
  comm::Group group;           // the world by default
  double bucket_cap_mb = 25;   // a bucket's size (MiB), but a parameter is never split
  double first_bucket_mb = 1;  // the first bucket's size (MiB)
};

class DistributedDataParallel {
 public:
  using Options = DdpOptions;
  // Broadcasts every parameter from group rank 0 and registers the hooks.
  // The parameters must be leaves that require grad; every rank must pass
  // the same shapes in the same order (the broadcast checks it).
  explicit DistributedDataParallel(std::vector<Tensor> parameters, Options options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Waits for every bucket's all_reduce and writes the averaged gradients to
  // the parameters' grad(). Throws what a bucket's all_reduce threw, or
  // kFailedPrecondition naming a parameter whose gradient never arrived.
  void finishGradientSync();

  size_t bucketCount() const;
  // The bucket of each parameter (in the order they were given).
  std::vector<size_t> bucketOfParameters() const;

  // The last step's timeline, in steady-clock time: for each bucket, when its
  // last gradient arrived and when its all_reduce started and ended. Read it
  // after finishGradientSync (during a step the communication thread writes it).
  struct BucketTimes {
    std::chrono::steady_clock::time_point ready, started, ended;
  };
  std::vector<BucketTimes> stepTimeline() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace backplane::parallel
