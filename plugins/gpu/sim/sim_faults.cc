#include "sim_faults.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "backplane/plugin.hpp"

namespace bp_gpu::sim {

std::atomic<bool> g_faults_armed{false};

namespace {

constexpr int kNumFaultPoints = 4;
constexpr const char* kPointNames[kNumFaultPoints] = {"malloc", "memcpy", "memset", "launch"};

struct FaultPlan {
  std::atomic<bool> armed{false};
  std::atomic<int64_t> calls{0}, first{0}, count{0};
};
FaultPlan g_plans[kNumFaultPoints];

FaultPlan& planNamed(std::string_view name, const char* op) {
  for (int i = 0; i < kNumFaultPoints; ++i) {
    if (name == kPointNames[i]) return g_plans[i];
  }
  bp::fail(BP_INVALID_ARGUMENT, bp::detail::concat("gpusim::", op, ": unknown fault point '", name,
                                                   "'; use malloc, memcpy, memset or launch"));
}

void injectFaultOp(std::string_view point, int64_t nth, int64_t count) {
  if (nth < 0 || count < 1) {
    bp::fail(BP_INVALID_ARGUMENT, bp::detail::concat("gpusim::inject_fault: nth must be >= 0 (0 only counts) and "
                                                     "count >= 1, but got nth=",
                                                     nth, ", count=", count));
  }
  FaultPlan& f = planNamed(point, "inject_fault");
  f.armed.store(false);
  f.calls.store(0);
  f.first.store(nth);
  f.count.store(nth == 0 ? 0 : count);
  f.armed.store(true);
  g_faults_armed.store(true);
}

int64_t faultCallsOp(std::string_view point) { return planNamed(point, "fault_calls").calls.load(); }

void clearFaultsOp() {
  g_faults_armed.store(false);
  for (FaultPlan& f : g_plans) {
    f.armed.store(false);
    f.calls.store(0);
    f.first.store(0);
    f.count.store(0);
  }
}

}  // namespace

bool countFault(FaultPoint point) {
  FaultPlan& f = g_plans[static_cast<int>(point)];
  if (!f.armed.load()) return false;
  const int64_t call = f.calls.fetch_add(1) + 1;
  const int64_t first = f.first.load(), count = f.count.load();
  return first != 0 && call >= first && call - first < count;
}

void registerFaultOps(bp::Library& m) {
  m.def("gpusim::inject_fault(str point, int nth, int count=1) -> ()");
  m.def("gpusim::fault_calls(str point) -> int");
  m.def("gpusim::clear_faults() -> ()");
  m.impl("gpusim::inject_fault", 0, &injectFaultOp);
  m.impl("gpusim::fault_calls", 0, &faultCallsOp);
  m.impl("gpusim::clear_faults", 0, &clearFaultsOp);
}

}  // namespace bp_gpu::sim
