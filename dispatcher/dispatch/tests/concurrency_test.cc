// Registration concurrent with dispatch (Note [Lock-free dispatch]); meant
// to be run under ThreadSanitizer as well (scripts/test.sh --sanitize=thread).
#include <atomic>
#include <thread>
#include <vector>

#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/cpu_kernels.h"
#include "test_device.h"

namespace backplane {
namespace {

using testing::floats;

Tensor constantLike(const Tensor& t, float v) {
  return tensorFromVector<float>(std::vector<float>(static_cast<size_t>(t.numel()), v), t.sizes(), t.device());
}

TEST(ConcurrencyTest, DispatchWhileRegisteringAndDeregistering) {
  auto& dev = testing::TestDevice::install();
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  Library base("cc");
  ASSERT_TRUE(base.def("value(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(base.impl("value", DispatchKey::CPU, [](const Tensor& a) { return constantLike(a, 1); }).ok());
  auto op = Dispatcher::singleton().findOpOrThrow("cc::value").typed<Tensor(const Tensor&)>();

  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::atomic<long> calls{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&, t] {
      Tensor x = t == 0 ? floats({0, 0}) : floats({0, 0}, dev.device());
      while (!stop.load()) {
        float v = op.call(x).toVector<float>()[1];
        // 1: CPU kernel (directly or via CPU fallback); 2: native impl;
        // 3: composite; 4: backend fallback. Anything else is a torn table.
        if (v < 1 || v > 4) bad++;
        calls++;
      }
    });
  }
  const DispatchKey key = backendKey(dev.type());
  constexpr int kRounds = 300;
  std::thread registrar([&] {
    for (int i = 0; i < kRounds; ++i) {
      Library lib("cc");
      EXPECT_TRUE(lib.impl("value", key, [](const Tensor& a) { return constantLike(a, 2); }).ok());
      EXPECT_TRUE(lib.implComposite("value", [](const Tensor& a) { return constantLike(a, 3); }).ok());
      EXPECT_TRUE(lib.fallback(key, KernelFunction::makeFromBoxedFunction(
                                        [](OperatorKernel*, const OperatorHandle&, DispatchKeySet, Stack* s) {
                                          Tensor a = s->back().toTensor();
                                          s->back() = constantLike(a, 4);
                                        }))
                      .ok());
      if (i % 2) lib.reset();  // otherwise the destructor undoes it, newest first
    }
  });
  std::thread definer([&] {  // unrelated ops come and go meanwhile
    for (int i = 0; i < kRounds; ++i) {
      Library lib("cc_other");
      EXPECT_TRUE(lib.def("tmp(Tensor a) -> Tensor").ok());
      EXPECT_TRUE(lib.impl("tmp", DispatchKey::CPU, [](const Tensor& a) { return a; }).ok());
    }
  });
  registrar.join();
  definer.join();
  while (calls.load() < 200) std::this_thread::yield();
  stop = true;
  for (auto& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(Dispatcher::singleton().checkInvariants().ok());
  EXPECT_EQ(op.call(floats({0})).item<float>(), 1);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
}

}  // namespace
}  // namespace backplane
