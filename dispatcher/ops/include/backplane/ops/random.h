#pragma once
// The process-wide random number generator of the standard operators
// (rand, randn, uniform_, normal_, bernoulli_, dropout): a seed and an
// offset into its Philox stream (plugin_sdk/include/backplane/philox.h,
// Note [The Philox stream]). Each draw reserves the counter blocks it uses
// by advancing the offset atomically, then hands (seed, offset) to the
// kernel; so a draw's values depend only on the seed and the draws before
// it, never on the device, the thread count or concurrent draws (which get
// disjoint blocks).

#include <cstdint>

namespace backplane {

// The seed in effect until manualSeed is called (PyTorch's default seed).
inline constexpr uint64_t kDefaultRandomSeed = 67280421310721ULL;

// Where the generator stands: its seed and the next unused Philox block.
struct RandomState {
  uint64_t seed;
  uint64_t offset;
};

// Seeds the generator and rewinds it to offset 0: the draws after
// manualSeed(s) repeat exactly. Do not race it with draws: a concurrent draw
// may see the old seed with the new offset.
void manualSeed(uint64_t seed);

// The seed the generator draws with now (kDefaultRandomSeed until
// manualSeed); like torch.initial_seed().
uint64_t defaultSeed();

// The whole state, to save and restore it (setRandomState) around draws.
RandomState randomState();
void setRandomState(RandomState state);

// Reserves `blocks` consecutive Philox blocks for one draw and returns the
// seed and the first of them. What composite kernels call.
RandomState reserveRandomBlocks(uint64_t blocks);

}  // namespace backplane
