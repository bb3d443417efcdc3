#pragma once
// A BERT-style transformer encoder layer written with the application API
// (backplane/ops/ops.h) only, so that the same code runs on whichever device its
// tensors are on: the embeddings, multi-head self-attention with a padding
// mask, and a feed-forward block with GELU, each followed by a residual
// connection and layer_norm (post-norm, as in BERT).
//
//   EncoderConfig config;                                   // BERT-base numbers
//   EncoderWeights weights = EncoderWeights::random(config, seed).to(dev);
//   EncoderBatch batch = EncoderBatch::random(config, seed).to(dev);
//   Tensor out = encoderLayer(weights, batch);              // [batch, seq, hidden] on dev

#include <cstdint>
#include <string>
#include <vector>

#include "backplane/ops/tensor.h"

namespace encoder {

using backplane::Device;
using backplane::Tensor;

// The sizes of one layer and its input. The defaults are BERT-base's.
struct EncoderConfig {
  int64_t batch = 8;
  int64_t seq = 128;  // also the number of position embeddings
  int64_t hidden = 768;
  int64_t heads = 12;  // must divide hidden
  int64_t ffn = 3072;  // the feed-forward block's inner width
  int64_t vocab = 30522;
  double layer_norm_eps = 1e-12;  // BERT's

  int64_t headDim() const { return hidden / heads; }
  // Throws backplane::Error naming the first size that cannot work.
  void validate() const;
  // "batch 8, seq 128, hidden 768, 12 heads, ffn 3072, vocab 30522".
  std::string str() const;
};

// input @ weight.T + bias, as backplane::linear takes them.
struct LinearWeights {
  Tensor weight;  // [out_features, in_features]
  Tensor bias;    // [out_features]
};

// layer_norm's elementwise affine parameters.
struct NormWeights {
  Tensor weight;  // gamma, [hidden]
  Tensor bias;    // beta, [hidden]
};

// Every parameter of the layer, float32, all on one device.
struct EncoderWeights {
  EncoderConfig config;
  Tensor word_embeddings;      // [vocab, hidden]
  Tensor position_embeddings;  // [seq, hidden]
  NormWeights embedding_norm;
  LinearWeights query, key, value;  // hidden -> hidden; head h owns features [h * headDim, (h + 1) * headDim)
  LinearWeights attention_output;   // hidden -> hidden
  NormWeights attention_norm;
  LinearWeights intermediate;  // hidden -> ffn
  LinearWeights output;        // ffn -> hidden
  NormWeights output_norm;

  // Weights drawn on the CPU after backplane::manualSeed(seed), so a seed
  // gives the same weights in every run and on every machine. Matrices are
  // normal with variance 1 / in_features and embeddings standard normal, so
  // activations stay of order 1 and the softmax is neither flat nor one-hot;
  // biases and norm parameters are perturbed away from 0 and 1 so that a
  // kernel that ignored them would be caught.
  static EncoderWeights random(const EncoderConfig& config, uint64_t seed);
  // The same weights on `device` (tensors already there are shared, not copied).
  EncoderWeights to(Device device) const;
  // Every parameter, in a fixed order: handles to these weights' tensors
  // (so requires_grad_() and grad() on them act on the weights). The first
  // kEmbeddingParameters are embed()'s (the tables and embedding_norm); the
  // others are encoderBlock()'s.
  std::vector<Tensor> parameters() const;
  static constexpr size_t kEmbeddingParameters = 4;

 private:
  // The members parameters() lists, in its order.
  std::vector<Tensor*> parameterSlots();
};

// A batch of token sequences padded to config.seq.
struct EncoderBatch {
  Tensor token_ids;  // [batch, seq] int64 in [1, vocab); kPadTokenId past a sequence's length
  Tensor lengths;    // [batch] int64 in [1, seq]

  static constexpr int64_t kPadTokenId = 0;

  // Deterministic in `seed`: sequence 0 is full length and the others are
  // padded (lengths in [seq / 2, seq - 1]), so the attention mask matters.
  static EncoderBatch random(const EncoderConfig& config, uint64_t seed);
  EncoderBatch to(Device device) const;
};

// The value a masked attention score is set to before the softmax: small
// enough that exp() of it underflows to exactly 0 in float32 next to any
// real score, and finite, so a row's maximum stays a real number.
inline constexpr double kMaskedScore = -1e9;

// The embeddings of `token_ids` ([batch, seq] int64): token plus position
// embeddings, then layer_norm. [batch, seq, hidden].
Tensor embed(const EncoderWeights& weights, const Tensor& token_ids);
// The layer after its embeddings, over x [batch, seq, hidden]: self-attention
// (keys at positions >= lengths[b] are masked) and the feed-forward block,
// each with its residual connection and layer_norm. Reads every weight but
// the embedding tables and embedding_norm, so a stack of layers can take
// them from EncoderWeights of its own.
Tensor encoderBlock(const EncoderWeights& weights, const Tensor& x, const Tensor& lengths);

// The block as a training step runs it, for the benchmarks and budget tests
// of its backward: the embedded tokens of `batch` as a leaf that requires
// grad (`input`), every weight requiring grad (`leaves` holds them and the
// input), and a constant gradient of the output. `weights` and `batch` must
// be on one device; so is everything here.
struct BlockGradients {
  BlockGradients(const EncoderWeights& weights, const EncoderBatch& batch, double out_grad_value);
  // encoderBlock over `input`, recording its graph.
  Tensor forward() const;
  // forward(), then backward into every leaf's grad; the grads are dropped
  // after it, so that each step writes them afresh rather than accumulating.
  void step() const;

  EncoderWeights weights;
  EncoderBatch batch;
  Tensor input;  // [batch, seq, hidden]
  std::vector<Tensor> leaves;
  Tensor out_grad;  // like input, every element out_grad_value
};

// One encoder layer over `batch`: token and position embeddings, layer_norm,
// then self-attention (keys at positions >= a sequence's length are masked)
// and the feed-forward block. Returns [batch, seq, hidden] float32 on the
// device of the weights; `batch` must be on the same device. Every position
// has an output, padding included (only keys are masked, as in BERT).
Tensor encoderLayer(const EncoderWeights& weights, const EncoderBatch& batch);

}  // namespace encoder
