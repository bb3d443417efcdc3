// Philox4x32-10, the counter-based random number generator of Salmon et
// al., "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11), and the one
// random stream every Backplane device draws from. Header-only, no
// dependencies; every function is usable in host C++ and, compiled by nvcc
// or hipcc, in device code (BP_PHILOX_FN).
//
// Note [The Philox stream]
// A seed (64 bits) selects a stream; block b (64 bits) of the stream is
// philox4x32_10(counter = {lo(b), hi(b), 0, 0}, key = {lo(seed), hi(seed)}),
// four 32-bit words. A draw of n elements at offset `offset` (in blocks)
// gives element i (row-major index of the tensor, whatever its strides)
// from block offset + i / k, where k = elementsPerBlock(kind):
//   * 32-bit draws (uniform and normal of float32/float16/bfloat16,
//     bernoulli of any dtype): 4 elements per block, element i uses word
//     i % 4 (normals: Box-Muller on the word pair (i % 4) & ~1; even lanes
//     take the cosine, odd lanes the sine);
//   * 64-bit draws (uniform and normal of float64): 2 elements per block;
//     uniforms use words 2(i % 2), 2(i % 2) + 1; normals Box-Muller on the
//     two 53-bit uniforms of the whole block, lane 0 the cosine, lane 1 the
//     sine.
// So an element depends only on (seed, offset, index): not on the device,
// the thread count or how a kernel splits the work, and one draw of 8
// float32 values equals two draws of 4 at offsets o and o + 1. The host
// reserves blocksFor(n, kind) blocks per draw (dispatcher/random.h).
// Uniform words are exact everywhere; normals go through log/sqrt/cos/sin
// and may differ in the last bit between math libraries.
#ifndef BACKPLANE_PHILOX_H_
#define BACKPLANE_PHILOX_H_

#include <math.h>  // NOLINT: the C names (logf, cosf, ...) exist in host and device code alike
#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define BP_PHILOX_FN __host__ __device__ inline
#else
#define BP_PHILOX_FN inline
#endif

namespace bp {
namespace philox {

// Four 32-bit words: one Philox counter, key output or block.
struct Words {
  uint32_t w[4];
};

BP_PHILOX_FN void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// Philox4x32 with 10 rounds on `counter` under key {k0, k1}.
BP_PHILOX_FN Words philox4x32_10(Words c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key schedule: Weyl sequence of the golden ratio and sqrt(3) - 1
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c.w[0], &hi0, &lo0);
    mulhilo(0xCD9E8D57u, c.w[2], &hi1, &lo1);
    Words n;
    n.w[0] = hi1 ^ c.w[1] ^ k0;
    n.w[1] = lo1;
    n.w[2] = hi0 ^ c.w[3] ^ k1;
    n.w[3] = lo0;
    c = n;
  }
  return c;
}

// Block `block` of the stream of `seed` (Note [The Philox stream]).
BP_PHILOX_FN Words streamBlock(uint64_t seed, uint64_t block) {
  Words c;
  c.w[0] = static_cast<uint32_t>(block);
  c.w[1] = static_cast<uint32_t>(block >> 32);
  c.w[2] = 0;
  c.w[3] = 0;
  return philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// What a draw produces, which sets how many elements share a block.
enum class DrawKind {
  Narrow,  // 32-bit draws: float32/float16/bfloat16 uniform and normal; bernoulli
  Wide,    // 64-bit draws: float64 uniform and normal
};

BP_PHILOX_FN constexpr int64_t elementsPerBlock(DrawKind kind) { return kind == DrawKind::Wide ? 2 : 4; }

// Blocks a draw of `numel` elements uses (and the host reserves).
BP_PHILOX_FN constexpr uint64_t blocksFor(int64_t numel, DrawKind kind) {
  return numel <= 0 ? 0 : static_cast<uint64_t>((numel + elementsPerBlock(kind) - 1) / elementsPerBlock(kind));
}

// [0, 1) with 24 random bits: exact in float32.
BP_PHILOX_FN float uniformFloat(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }
// (0, 1]: never 0, for the logarithm of Box-Muller.
BP_PHILOX_FN float uniformFloatNonzero(uint32_t word) {
  return static_cast<float>((word >> 8) + 1u) * (1.0f / 16777216.0f);
}
// [0, 1) with 53 random bits: exact in float64.
BP_PHILOX_FN double uniformDouble(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}
BP_PHILOX_FN double uniformDoubleNonzero(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits + 1u) * (1.0 / 9007199254740992.0);
}
// [0, 1) with 32 random bits, for comparisons against a probability.
BP_PHILOX_FN double uniformWord(uint32_t word) { return static_cast<double>(word) * (1.0 / 4294967296.0); }

// Element `lane` (0..3) of a 32-bit draw's block as a uniform in [0, 1).
BP_PHILOX_FN float narrowUniform(const Words& b, int lane) { return uniformFloat(b.w[lane]); }
// Element `lane` (0..1) of a 64-bit draw's block as a uniform in [0, 1).
BP_PHILOX_FN double wideUniform(const Words& b, int lane) { return uniformDouble(b.w[2 * lane], b.w[2 * lane + 1]); }

// Element `lane` (0..3) of a 32-bit draw's block as a standard normal.
BP_PHILOX_FN float narrowNormal(const Words& b, int lane) {
  const int pair = lane & ~1;
  const float radius = sqrtf(-2.0f * logf(uniformFloatNonzero(b.w[pair])));
  const float angle = 6.28318530717958647692f * uniformFloat(b.w[pair + 1]);
  return radius * ((lane & 1) ? sinf(angle) : cosf(angle));
}
// Element `lane` (0..1) of a 64-bit draw's block as a standard normal.
BP_PHILOX_FN double wideNormal(const Words& b, int lane) {
  const double radius = sqrt(-2.0 * log(uniformDoubleNonzero(b.w[0], b.w[1])));
  const double angle = 6.28318530717958647692 * uniformDouble(b.w[2], b.w[3]);
  return radius * (lane ? sin(angle) : cos(angle));
}

// All four standard normals of a 32-bit draw's block (narrowNormal of
// lanes 0..3, with one logarithm per pair): for kernels that write a
// whole block per step.
BP_PHILOX_FN void narrowNormals(const Words& b, float out[4]) {
  for (int pair = 0; pair < 4; pair += 2) {
    const float radius = sqrtf(-2.0f * logf(uniformFloatNonzero(b.w[pair])));
    const float angle = 6.28318530717958647692f * uniformFloat(b.w[pair + 1]);
    out[pair] = radius * cosf(angle);
    out[pair + 1] = radius * sinf(angle);
  }
}
// Both standard normals of a 64-bit draw's block (wideNormal of lanes 0, 1).
BP_PHILOX_FN void wideNormals(const Words& b, double out[2]) {
  const double radius = sqrt(-2.0 * log(uniformDoubleNonzero(b.w[0], b.w[1])));
  const double angle = 6.28318530717958647692 * uniformDouble(b.w[2], b.w[3]);
  out[0] = radius * cos(angle);
  out[1] = radius * sin(angle);
}

}  // namespace philox
}  // namespace bp

#endif  // BACKPLANE_PHILOX_H_
