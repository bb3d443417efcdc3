#pragma once
// What the fault-injection tests share (fault_injection_test.cc on the test
// device, gpu_plugins/gpusim_fault_injection_test.cc on the simulator): the
// tally of (op, fault point) pairs that recovered, printed when the tests
// end, and a tensor's bytes read through the CPU for before/after checks.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "backplane/ops/tensor.h"

namespace backplane::fault_test {

// Records that `op` recovered from the k-th fault at `point` in the current
// test; the environment below prints how many distinct pairs and ops did.
class Tally : public ::testing::Environment {
 public:
  explicit Tally(const char* where) : where_(where) {}
  static Tally& install(const char* where) {
    static Tally* tally = [&] {
      auto* t = new Tally(where);
      ::testing::AddGlobalTestEnvironment(t);  // gtest owns it
      return t;
    }();
    return *tally;
  }
  void record(const std::string& op, const std::string& point, int k) {
    pairs_.insert(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "|" + op + "|" +
                  point + "#" + std::to_string(k));
    ops_.insert(op);
  }
  void TearDown() override {
    std::printf("fault injection (%s): %zu distinct (op, fault point) pairs tested in %zu ops, all recovering\n",
                where_, pairs_.size(), ops_.size());
  }

 private:
  const char* where_;
  std::set<std::string> pairs_, ops_;
};

inline std::vector<unsigned char> bytesOf(const Tensor& t) {
  Tensor c = t.cpu().contiguous();
  std::vector<unsigned char> out(c.nbytes());
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}
inline std::vector<std::vector<unsigned char>> bytesOf(const std::vector<Tensor>& ts) {
  std::vector<std::vector<unsigned char>> out;
  for (const Tensor& t : ts) out.push_back(bytesOf(t));
  return out;
}

}  // namespace backplane::fault_test
