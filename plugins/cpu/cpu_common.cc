#include "cpu_common.h"

#include "bp_common/threads.h"

#include <cstdlib>
#include <thread>

namespace bp_cpu {

namespace {
int readThreadSetting() {
  const char* invalid = nullptr;
  const int n = bp_common::threadSetting(&invalid);
  if (invalid != nullptr) {
    bp::logMessage(BP_LOG_WARNING, std::string("BACKPLANE_NUM_THREADS='") + invalid +
                                       "' is not a positive integer; using all " + std::to_string(n) + " cores");
  }
  return n;
}
}  // namespace

int numThreads() {
  static const int n = readThreadSetting();
  return n;
}

void initThreads() { (void)numThreads(); }

std::string dtypeList(std::initializer_list<ScalarType> types) {
  std::string s;
  for (ScalarType t : types) s += (s.empty() ? "" : ", ") + std::string(bp::name(t));
  return s;
}

void checkCpu(const char* op, const bp::Tensor& t, const char* arg) {
  if (t.device().type != kCpu) {
    bp::fail(BP_INVALID_ARGUMENT, std::string(op) + ": argument '" + arg + "' is on device type " +
                                      std::to_string(t.device().type) +
                                      ", but this is the cpu kernel; move it with .to(\"cpu\")");
  }
}

void checkDtype(const char* op, const bp::Tensor& t, const char* arg, std::initializer_list<ScalarType> supported) {
  for (ScalarType s : supported)
    if (t.dtype() == s) return;
  bp::fail(BP_INVALID_ARGUMENT, std::string(op) + " on cpu does not support dtype " + bp::name(t.dtype()) +
                                    " (argument '" + arg + "'); supported: " + dtypeList(supported));
}

std::vector<int64_t> contiguousStrides(bp::IntList sizes) {
  std::vector<int64_t> s(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return s;
}

}  // namespace bp_cpu
