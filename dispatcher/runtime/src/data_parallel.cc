// Note [Data parallel in one process] in backplane/runtime/data_parallel.h.
#include "backplane/runtime/data_parallel.h"

#include <exception>
#include <string>
#include <thread>

#include "backplane/autograd/autograd.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/ops/ops.h"

namespace backplane::parallel {

std::vector<int64_t> splitSizes(int64_t size, size_t parts) {
  BP_CHECK(parts > 0, "data parallel: no devices to split over; name at least one");
  const auto n = static_cast<int64_t>(parts);
  BP_CHECK(size >= n, "data parallel: a batch of ", size, " cannot be split over ", n,
           " devices (each needs at least one item); use a batch of at least ", n, " or fewer devices");
  std::vector<int64_t> sizes(parts, size / n);
  for (int64_t i = 0; i < size % n; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

std::vector<Tensor> scatter(const Tensor& t, absl::Span<const Device> devices, int64_t dim) {
  BP_CHECK(t.dim() > 0, "data parallel: scatter needs a tensor with a dim to split, got a 0-d one");
  const int64_t d = dim < 0 ? dim + t.dim() : dim;
  BP_CHECK(d >= 0 && d < t.dim(), "data parallel: scatter's dim ", dim, " is out of range for a ", t.dim(),
           "-d tensor");
  const std::vector<int64_t> sizes = splitSizes(t.size(d), devices.size());
  std::vector<Tensor> parts;
  parts.reserve(devices.size());
  int64_t start = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    parts.push_back(t.narrow(d, start, sizes[i]).to(devices[i]));
    start += sizes[i];
  }
  return parts;
}

Tensor gather(absl::Span<const Tensor> parts, Device destination, int64_t dim) {
  BP_CHECK(!parts.empty(), "data parallel: gather needs at least one part");
  std::vector<Tensor> here;
  here.reserve(parts.size());
  for (const Tensor& p : parts) here.push_back(p.to(destination));
  return cat(here, dim);
}

void parallelApply(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::exception_ptr> errors(n);
  // The replicas' threads run in the caller's grad mode (a NoGradGuard
  // around the call holds for every replica).
  const bool grad_enabled = autograd::isGradEnabled();
  auto runOne = [&](size_t i) {
    try {
      autograd::GradModeGuard mode(grad_enabled);
      fn(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(n > 0 ? n - 1 : 0);
  try {
    for (size_t i = 1; i < n; ++i) threads.emplace_back(runOne, i);
  } catch (...) {  // no thread for a replica: end the ones started, then say so
    for (std::thread& t : threads) t.join();
    throw;
  }
  if (n > 0) runOne(0);
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < n; ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const Error& e) {
      throw Error(e.code(), strCat("replica ", i, ": ", e.message()));
    } catch (const std::exception& e) {
      throw Error(absl::StatusCode::kInternal, strCat("replica ", i, ": ", e.what()));
    } catch (...) {
      throw Error(absl::StatusCode::kUnknown, strCat("replica ", i, " threw something that is not an exception"));
    }
  }
}

}  // namespace backplane::parallel
