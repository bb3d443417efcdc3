#include "backplane/ops/random.h"

#include <atomic>

namespace backplane {

namespace {
// Two atomics rather than a lock: a draw costs one fetch_add.
std::atomic<uint64_t> g_seed{kDefaultRandomSeed};
std::atomic<uint64_t> g_offset{0};
}  // namespace

void manualSeed(uint64_t seed) {
  g_seed.store(seed, std::memory_order_relaxed);
  g_offset.store(0, std::memory_order_relaxed);
}

uint64_t defaultSeed() { return g_seed.load(std::memory_order_relaxed); }

RandomState randomState() {
  return RandomState{g_seed.load(std::memory_order_relaxed), g_offset.load(std::memory_order_relaxed)};
}

void setRandomState(RandomState state) {
  g_seed.store(state.seed, std::memory_order_relaxed);
  g_offset.store(state.offset, std::memory_order_relaxed);
}

RandomState reserveRandomBlocks(uint64_t blocks) {
  const uint64_t first = g_offset.fetch_add(blocks, std::memory_order_relaxed);
  return RandomState{g_seed.load(std::memory_order_relaxed), first};
}

}  // namespace backplane
