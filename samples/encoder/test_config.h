#pragma once
// The layer the encoder's tests run: small enough for plain loops and for
// the GPU simulator (every GPU thread a fiber on the host), large enough for
// several heads, padding, and a feed-forward block wider than the hidden
// size.
#include "encoder.h"

namespace encoder {

inline EncoderConfig smallConfig() {
  EncoderConfig c;
  c.batch = 2;
  c.seq = 16;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 128;
  c.vocab = 100;
  return c;
}

}  // namespace encoder
