// Note [Gradient buckets] in backplane/runtime/distributed_data_parallel.h.
#include "backplane/runtime/distributed_data_parallel.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "backplane/autograd/autograd.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/collectives.h"

namespace backplane::parallel {

using Clock = std::chrono::steady_clock;

struct DistributedDataParallel::State {
  struct Bucket {
    std::vector<size_t> params;    // indices into State::params
    std::vector<int64_t> offsets;  // each one's first element in flat
    Tensor flat;
    size_t ready = 0;  // gradients arrived this step
    BucketTimes times;
  };

  comm::Group group;
  std::vector<Tensor> params;
  std::vector<uint64_t> hook_ids;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;

  std::mutex step_mu;  // the step's bookkeeping (hooks may run on several threads)
  std::vector<bool> arrived;
  size_t arrivals = 0;    // parameters whose gradient arrived this step
  bool repeated = false;  // a gradient arrived twice (a second backward before finishGradientSync)
  size_t next_launch = 0;

  std::mutex queue_mu;  // the communication thread's queue
  std::condition_variable queue_cv, done_cv;
  std::deque<size_t> queue;
  size_t completed = 0;
  bool stop = false;
  std::exception_ptr error;
  std::thread thread;

  void communicate() {
    for (;;) {
      size_t b;
      {
        std::unique_lock<std::mutex> lock(queue_mu);
        queue_cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (stop) return;  // what is still queued is dropped: the wrapper is going away
        b = queue.front();
        queue.pop_front();
      }
      Bucket& bucket = buckets[b];
      bucket.times.started = Clock::now();
      std::exception_ptr failed;
      try {
        comm::allReduce_(bucket.flat, comm::ReduceOp::Avg, group);
      } catch (...) {
        failed = std::current_exception();
      }
      bucket.times.ended = Clock::now();
      {
        std::lock_guard<std::mutex> lock(queue_mu);
        if (failed && !error) error = failed;
        ++completed;
      }
      done_cv.notify_all();
    }
  }

  // Copies bucket b's gradients into its buffer and hands its all_reduce to
  // the communication thread. step_mu is held.
  void launch(size_t b) {
    Bucket& bucket = buckets[b];
    {
      autograd::NoGradGuard no_grad;
      for (size_t k = 0; k < bucket.params.size(); ++k) {
        const Tensor& p = params[bucket.params[k]];
        bucket.flat.narrow(0, bucket.offsets[k], p.numel()).copy_(p.grad().reshape({-1}));
      }
    }
    {
      std::lock_guard<std::mutex> lock(queue_mu);
      queue.push_back(b);
    }
    queue_cv.notify_one();
  }

  void gradientArrived(size_t p) {
    std::lock_guard<std::mutex> lock(step_mu);
    if (arrived[p]) {
      repeated = true;  // its bucket may be on its way already: finishGradientSync says so
      return;
    }
    arrived[p] = true;
    ++arrivals;
    Bucket& bucket = buckets[bucket_of[p]];
    if (++bucket.ready == bucket.params.size()) bucket.times.ready = Clock::now();
    // In bucket order on every rank (Note [Gradient buckets]).
    while (next_launch < buckets.size() && buckets[next_launch].ready == buckets[next_launch].params.size())
      launch(next_launch++);
  }
};

DistributedDataParallel::DistributedDataParallel(std::vector<Tensor> parameters, Options options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.group = options.group;
  BP_CHECK(s.group.isMember(), "DistributedDataParallel: this process is not a member of ", s.group.describe());
  BP_CHECK(!parameters.empty(), "DistributedDataParallel: no parameters");
  BP_CHECK(options.bucket_cap_mb > 0 && options.first_bucket_mb > 0,
           "DistributedDataParallel: bucket sizes must be positive, got bucket_cap_mb ", options.bucket_cap_mb,
           " and first_bucket_mb ", options.first_bucket_mb);
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    BP_CHECK(p.defined() && p.is_leaf() && p.requires_grad(), "DistributedDataParallel: parameter ", i,
             " must be a leaf that requires grad (requires_grad_())");
    BP_CHECK(isFloatingType(p.dtype()), "DistributedDataParallel: parameter ", i, " is ", scalarTypeName(p.dtype()),
             "; gradients are averaged, which needs a floating dtype");
  }
  s.params = std::move(parameters);
  // Every rank starts from rank 0's values.
  {
    autograd::NoGradGuard no_grad;
    for (const Tensor& p : s.params) comm::broadcast_(p, 0, s.group);
  }
  // Buckets, last parameter first.
  const double mib = 1024.0 * 1024.0;
  s.bucket_of.assign(s.params.size(), 0);
  int64_t bytes = 0;
  for (size_t k = s.params.size(); k-- > 0;) {
    const Tensor& p = s.params[k];
    const int64_t nbytes = p.numel() * static_cast<int64_t>(elementSize(p.dtype()));
    const double cap = (s.buckets.size() <= 1 ? options.first_bucket_mb : options.bucket_cap_mb) * mib;
    bool fresh = s.buckets.empty();
    if (!fresh) {
      const Tensor& first = s.params[s.buckets.back().params.front()];
      fresh = first.device() != p.device() || first.dtype() != p.dtype() || static_cast<double>(bytes + nbytes) > cap;
    }
    if (fresh) {
      s.buckets.emplace_back();
      bytes = 0;
    }
    State::Bucket& b = s.buckets.back();
    b.offsets.push_back(bytes / static_cast<int64_t>(elementSize(p.dtype())));
    b.params.push_back(k);
    bytes += nbytes;
    s.bucket_of[k] = s.buckets.size() - 1;
  }
  for (State::Bucket& b : s.buckets) {
    const Tensor& first = s.params[b.params.front()];
    const int64_t n = b.offsets.back() + s.params[b.params.back()].numel();
    b.flat = empty({n}, {.dtype = first.dtype(), .device = first.device()});
  }
  s.arrived.assign(s.params.size(), false);
  const std::weak_ptr<State> weak = state_;
  try {
    for (size_t i = 0; i < s.params.size(); ++i)
      s.hook_ids.push_back(autograd::registerPostAccumulateGradHook(s.params[i], [weak, i](const Tensor&) {
        if (std::shared_ptr<State> live = weak.lock()) live->gradientArrived(i);
      }));
  } catch (...) {
    for (size_t i = 0; i < s.hook_ids.size(); ++i) autograd::removeHook(s.params[i], s.hook_ids[i]);
    throw;
  }
  s.thread = std::thread([state = state_.get()] { state->communicate(); });  // last: nothing after it throws
}

DistributedDataParallel::~DistributedDataParallel() {
  State& s = *state_;
  for (size_t i = 0; i < s.params.size(); ++i) autograd::removeHook(s.params[i], s.hook_ids[i]);
  {
    std::lock_guard<std::mutex> lock(s.queue_mu);
    s.stop = true;
  }
  s.queue_cv.notify_all();
  s.thread.join();
}

void DistributedDataParallel::finishGradientSync() {
  State& s = *state_;
  size_t launched, arrivals, missing = s.params.size();
  bool repeated;
  {
    std::lock_guard<std::mutex> lock(s.step_mu);
    launched = s.next_launch;
    arrivals = s.arrivals;
    repeated = s.repeated;
    for (size_t i = 0; i < s.params.size() && missing == s.params.size(); ++i)
      if (!s.arrived[i]) missing = i;
  }
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(s.queue_mu);
    s.done_cv.wait(lock, [&] { return s.completed == launched; });
    error = s.error;
    s.error = nullptr;
    s.completed = 0;
  }
  // The next step starts afresh, whatever happened in this one.
  std::lock_guard<std::mutex> lock(s.step_mu);
  auto reset = [&] {
    s.next_launch = 0;
    s.arrivals = 0;
    s.repeated = false;
    s.arrived.assign(s.params.size(), false);
    for (State::Bucket& b : s.buckets) b.ready = 0;
  };
  if (error) {
    reset();
    std::rethrow_exception(error);
  }
  if (repeated) {
    reset();
    throw Error(absl::StatusCode::kFailedPrecondition,
                "DistributedDataParallel: a parameter's gradient arrived twice in this step (two backward() calls "
                "before finishGradientSync, as gradient accumulation does): its bucket was averaged with the first "
                "only. Call finishGradientSync after every backward");
  }
  if (arrivals == 0) {
    reset();
    throw Error(absl::StatusCode::kFailedPrecondition,
                "DistributedDataParallel: finishGradientSync with no backward since the last one (no parameter got a "
                "gradient); call it once after each backward");
  }
  if (missing != s.params.size()) {
    reset();
    throw Error(absl::StatusCode::kFailedPrecondition,
                strCat("DistributedDataParallel: parameter ", missing, " (", s.params[missing].str(),
                       ") got no gradient in this step, so its bucket's all_reduce never started (and the other "
                       "ranks wait for it); every parameter must take part in the loss of every step"));
  }
  {
    autograd::NoGradGuard no_grad;
    for (State::Bucket& b : s.buckets)
      for (size_t k = 0; k < b.params.size(); ++k) {
        const Tensor& p = s.params[b.params[k]];
        p.grad().copy_(b.flat.narrow(0, b.offsets[k], p.numel()).view(p.sizes()));
      }
  }
  reset();
}

size_t DistributedDataParallel::bucketCount() const { return state_->buckets.size(); }

std::vector<size_t> DistributedDataParallel::bucketOfParameters() const { return state_->bucket_of; }

std::vector<DistributedDataParallel::BucketTimes> DistributedDataParallel::stepTimeline() const {
  std::vector<BucketTimes> out;
  for (const State::Bucket& b : state_->buckets) out.push_back(b.times);
  return out;
}

}  // namespace backplane::parallel
