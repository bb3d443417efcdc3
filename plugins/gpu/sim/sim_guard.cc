// Guard bytes around the simulator's device memory (sim_guard.h; Note
// [Guard bytes in the simulator] in sim_runtime.h).
#include "sim_guard.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backplane/plugin.hpp"
#include "simt.h"  // BP_GPU_SIM_ASAN

namespace bp_gpu::sim {
namespace {

// Bytes of guard on each side of a block, and their value: not a pattern a
// kernel writes by accident (as a float it is about -4.2e37; as an int,
// -33686019), and 64 bytes keep the block 16-byte aligned, as malloc's.
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardByte = 0xFD;
constexpr std::array<unsigned char, kGuardBytes> kGuard = [] {
  std::array<unsigned char, kGuardBytes> g{};
  for (unsigned char& b : g) b = kGuardByte;
  return g;
}();

#if defined(BP_GPU_SIM_ASAN)
constexpr bool kOnByDefault = false;  // ASan reports the write itself, with its stack
#else
constexpr bool kOnByDefault = true;
#endif

// -1 until the environment is read, then 0 (off) or 1 (on).
std::atomic<int> g_mode{-1};

int modeFromEnvironment() {
  const char* v = std::getenv("BACKPLANE_GPUSIM_CHECK_BOUNDS");
  if (v == nullptr || *v == '\0') return kOnByDefault ? 1 : 0;
  return std::strcmp(v, "0") == 0 ? 0 : 1;
}

// The live guarded blocks: the pointer gpuMalloc returned -> the bytes asked
// for. The allocation starts kGuardBytes before the pointer.
struct GuardedBlocks {
  std::mutex mutex;
  std::unordered_map<unsigned char*, size_t> sizes;
};
GuardedBlocks& guardedBlocks() {
  static auto* blocks = new GuardedBlocks;  // leaked: blocks may be freed from static destructors
  return *blocks;
}

// What changed in one block's guards: [first, last] offsets from the
// block's start, before it (negative) and after its end.
struct Damage {
  bool before = false, after = false;
  std::ptrdiff_t before_first = 0, before_last = 0, after_first = 0, after_last = 0;
  bool any() const { return before || after; }
};

Damage inspect(const unsigned char* block, size_t nbytes) {
  Damage d;
  const unsigned char* head = block - kGuardBytes;
  const unsigned char* tail = block + nbytes;
  if (std::memcmp(head, kGuard.data(), kGuardBytes) != 0) {
    d.before = true;
    size_t first = 0, last = kGuardBytes - 1;
    while (head[first] == kGuardByte) ++first;
    while (head[last] == kGuardByte) --last;
    d.before_first = static_cast<std::ptrdiff_t>(first) - static_cast<std::ptrdiff_t>(kGuardBytes);
    d.before_last = static_cast<std::ptrdiff_t>(last) - static_cast<std::ptrdiff_t>(kGuardBytes);
  }
  if (std::memcmp(tail, kGuard.data(), kGuardBytes) != 0) {
    d.after = true;
    size_t first = 0, last = kGuardBytes - 1;
    while (tail[first] == kGuardByte) ++first;
    while (tail[last] == kGuardByte) --last;
    d.after_first = static_cast<std::ptrdiff_t>(nbytes + first);
    d.after_last = static_cast<std::ptrdiff_t>(nbytes + last);
  }
  return d;
}

void arm(unsigned char* block, size_t nbytes) {
  std::memcpy(block - kGuardBytes, kGuard.data(), kGuardBytes);
  std::memcpy(block + nbytes, kGuard.data(), kGuardBytes);
}

// "the 4000-byte device block at 0x... was written at offsets 4000 to 4003 (after its end)"
std::string describe(const unsigned char* block, size_t nbytes, const Damage& d) {
  std::string s = bp::detail::concat("the ", nbytes, "-byte device block at ", static_cast<const void*>(block),
                                     " was written outside its bounds at offsets ");
  if (d.before) {
    s += bp::detail::concat(d.before_first, " to ", d.before_last, " (before its start)");
    if (d.after) s += " and ";
  }
  if (d.after) s += bp::detail::concat(d.after_first, " to ", d.after_last, " (after its end)");
  return s;
}

constexpr const char* kHowToTurnOff =
    "(Note [Guard bytes in the simulator] in sim_runtime.h; BACKPLANE_GPUSIM_CHECK_BOUNDS=0 turns the check off)";

}  // namespace

bool boundsChecking() {
  int mode = g_mode.load(std::memory_order_relaxed);
  if (mode < 0) {
    int unread = -1;
    g_mode.compare_exchange_strong(unread, modeFromEnvironment(), std::memory_order_relaxed);
    mode = g_mode.load(std::memory_order_relaxed);
  }
  return mode == 1;
}

void setBoundsChecking(bool enabled) { g_mode.store(enabled ? 1 : 0, std::memory_order_relaxed); }

void* allocateDeviceBytes(size_t nbytes) {
  if (!boundsChecking()) return std::malloc(nbytes == 0 ? 1 : nbytes);
  if (nbytes > SIZE_MAX - 2 * kGuardBytes) return nullptr;
  auto* base = static_cast<unsigned char*>(std::malloc(nbytes + 2 * kGuardBytes));
  if (base == nullptr) return nullptr;
  unsigned char* block = base + kGuardBytes;
  arm(block, nbytes);
  GuardedBlocks& g = guardedBlocks();
  try {
    std::lock_guard<std::mutex> lock(g.mutex);
    g.sizes.emplace(block, nbytes);
  } catch (...) {  // no room in the table: as if the host had no memory
    std::free(base);
    return nullptr;
  }
  return block;
}

void freeDeviceBytes(void* ptr) {
  auto* block = static_cast<unsigned char*>(ptr);
  GuardedBlocks& g = guardedBlocks();
  size_t nbytes = 0;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    const auto it = g.sizes.find(block);
    if (it == g.sizes.end()) {  // allocated while the mode was off
      std::free(ptr);
      return;
    }
    nbytes = it->second;
    g.sizes.erase(it);
  }
  const Damage d = inspect(block, nbytes);
  const std::string what = d.any() ? describe(block, nbytes, d) : std::string();
  std::free(block - kGuardBytes);
  if (d.any()) {
    bp::fail(BP_INTERNAL, bp::detail::concat("gpusim: device memory was written outside a block, found when it was "
                                             "freed: ",
                                             what, " ", kHowToTurnOff));
  }
}

void checkGuardsAfterKernel(std::string_view kernel) {
  GuardedBlocks& g = guardedBlocks();
  std::string first;
  size_t damaged = 0;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    for (const auto& [block, nbytes] : g.sizes) {
      const Damage d = inspect(block, nbytes);
      if (!d.any()) continue;
      if (damaged++ == 0) first = describe(block, nbytes, d);
      arm(block, nbytes);  // reported once
    }
  }
  if (damaged == 0) return;
  std::string others;
  if (damaged > 1) others = bp::detail::concat(" (and ", damaged - 1, " other block(s) likewise)");
  bp::fail(BP_INTERNAL, bp::detail::concat("gpusim: kernel ", kernel, " wrote outside its memory: ", first, others,
                                           "; the guard bytes are restored ", kHowToTurnOff));
}

}  // namespace bp_gpu::sim
