#include "backplane/core/autograd_hooks.h"

#include <atomic>

#include "backplane/core/error.h"

namespace backplane {

namespace {
std::atomic<const AutogradHooks*> g_hooks{nullptr};
}  // namespace

const AutogradHooks& autogradHooks() {
  const AutogradHooks* h = g_hooks.load(std::memory_order_acquire);
  BP_CHECK(h != nullptr,
           "autograd is not available: the autograd layer was not loaded (link libbackplane.so, which installs it)");
  return *h;
}

void setAutogradHooks(const AutogradHooks* hooks) { g_hooks.store(hooks, std::memory_order_release); }

}  // namespace backplane
