#include "encoder.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"

namespace encoder {

using namespace backplane;

void EncoderConfig::validate() const {
  auto positive = [](int64_t v, const char* name) {
    BP_CHECK(v > 0, "EncoderConfig: ", name, " must be positive, got ", v);
  };
  positive(batch, "batch");
  positive(seq, "seq");
  positive(hidden, "hidden");
  positive(heads, "heads");
  positive(ffn, "ffn");
  BP_CHECK(hidden % heads == 0, "EncoderConfig: hidden (", hidden, ") must be a multiple of heads (", heads,
           "): each head takes hidden / heads features");
  BP_CHECK(vocab >= 2, "EncoderConfig: vocab must be at least 2 (token ", EncoderBatch::kPadTokenId,
           " is padding), got ", vocab);
  BP_CHECK(layer_norm_eps > 0, "EncoderConfig: layer_norm_eps must be positive, got ", layer_norm_eps);
}

std::string EncoderConfig::str() const {
  return strCat("batch ", batch, ", seq ", seq, ", hidden ", hidden, ", ", heads, " heads, ffn ", ffn, ", vocab ",
                vocab);
}

EncoderWeights EncoderWeights::random(const EncoderConfig& config, uint64_t seed) {
  config.validate();
  manualSeed(seed);
  // Each draw takes the next numbers of the seeded stream, so the order of
  // the statements below decides which parameter gets which numbers.
  auto linearWeights = [](int64_t in, int64_t out) {
    LinearWeights l;
    l.weight = randn({out, in}) * (1.0 / std::sqrt(static_cast<double>(in)));
    l.bias = randn({out}) * 0.1;
    return l;
  };
  auto normWeights = [&] {
    NormWeights n;
    n.weight = randn({config.hidden}) * 0.1 + 1.0;
    n.bias = randn({config.hidden}) * 0.1;
    return n;
  };
  EncoderWeights w;
  w.config = config;
  w.word_embeddings = randn({config.vocab, config.hidden});
  w.position_embeddings = randn({config.seq, config.hidden});
  w.embedding_norm = normWeights();
  w.query = linearWeights(config.hidden, config.hidden);
  w.key = linearWeights(config.hidden, config.hidden);
  w.value = linearWeights(config.hidden, config.hidden);
  w.attention_output = linearWeights(config.hidden, config.hidden);
  w.attention_norm = normWeights();
  w.intermediate = linearWeights(config.hidden, config.ffn);
  w.output = linearWeights(config.ffn, config.hidden);
  w.output_norm = normWeights();
  return w;
}

std::vector<Tensor*> EncoderWeights::parameterSlots() {
  return {&word_embeddings,
          &position_embeddings,
          &embedding_norm.weight,
          &embedding_norm.bias,
          &query.weight,
          &query.bias,
          &key.weight,
          &key.bias,
          &value.weight,
          &value.bias,
          &attention_output.weight,
          &attention_output.bias,
          &attention_norm.weight,
          &attention_norm.bias,
          &intermediate.weight,
          &intermediate.bias,
          &output.weight,
          &output.bias,
          &output_norm.weight,
          &output_norm.bias};
}

std::vector<Tensor> EncoderWeights::parameters() const {
  std::vector<Tensor> out;
  for (Tensor* t : const_cast<EncoderWeights*>(this)->parameterSlots()) out.push_back(*t);
  return out;
}

EncoderWeights EncoderWeights::to(Device device) const {
  EncoderWeights w = *this;
  for (Tensor* t : w.parameterSlots()) *t = t->to(device);
  return w;
}

EncoderBatch EncoderBatch::random(const EncoderConfig& config, uint64_t seed) {
  config.validate();
  // std::mt19937_64's output is fixed by the C++ standard (the std
  // distributions' is not), so a seed gives the same batch everywhere.
  std::mt19937_64 gen(seed);
  auto below = [&](int64_t n) { return static_cast<int64_t>(gen() % static_cast<uint64_t>(n)); };
  // Padded lengths are in [ceil(seq / 2), seq - 1] (just 1 when seq is 1).
  const int64_t min_length = (config.seq + 1) / 2;
  const int64_t max_padded = std::max(min_length, config.seq - 1);
  std::vector<int64_t> lengths(config.batch);
  std::vector<int64_t> ids(config.batch * config.seq, kPadTokenId);
  for (int64_t b = 0; b < config.batch; ++b) {
    const int64_t length = b == 0 ? config.seq : min_length + below(max_padded - min_length + 1);
    lengths[b] = length;
    for (int64_t s = 0; s < length; ++s) ids[b * config.seq + s] = 1 + below(config.vocab - 1);
  }
  return {tensorFromVector(ids, {config.batch, config.seq}), tensorFromVector(lengths, {config.batch})};
}

EncoderBatch EncoderBatch::to(Device device) const { return {token_ids.to(device), lengths.to(device)}; }

Tensor embed(const EncoderWeights& w, const Tensor& token_ids) {
  const EncoderConfig& c = w.config;
  BP_CHECK(token_ids.dim() == 2, "embed: token_ids must be [batch, seq], got ", token_ids.str());
  const int64_t S = token_ids.size(1);
  BP_CHECK(S <= c.seq, "embed: sequences of ", S, " tokens are longer than the ", c.seq, " position embeddings");
  // [B, S, H]. The position table broadcasts over the batch.
  return layer_norm(embedding(w.word_embeddings, token_ids) + w.position_embeddings.narrow(0, 0, S), {c.hidden},
                    w.embedding_norm.weight, w.embedding_norm.bias, c.layer_norm_eps);
}

Tensor encoderBlock(const EncoderWeights& w, const Tensor& x, const Tensor& lengths) {
  const EncoderConfig& c = w.config;
  BP_CHECK(x.dim() == 3 && x.size(2) == c.hidden && lengths.dim() == 1 && lengths.size(0) == x.size(0),
           "encoderBlock: x must be [batch, seq, ", c.hidden, "] and lengths [batch], got ", x.str(), " and ",
           lengths.str());
  const int64_t B = x.size(0), S = x.size(1);
  const int64_t H = c.hidden, heads = c.heads, d = c.headDim();
  auto dense = [](const Tensor& t, const LinearWeights& l) { return linear(t, l.weight, l.bias); };
  auto norm = [&](const Tensor& t, const NormWeights& n) {
    return layer_norm(t, {H}, n.weight, n.bias, c.layer_norm_eps);
  };

  // Self-attention. Head h owns features [h * d, (h + 1) * d), so the heads
  // are views: [B, S, H] -> [B, S, heads, d] -> [B, heads, S, d].
  auto splitHeads = [&](const Tensor& t) { return t.view({B, S, heads, d}).transpose(1, 2); };
  Tensor q = splitHeads(dense(x, w.query));
  Tensor k = splitHeads(dense(x, w.key));
  Tensor v = splitHeads(dense(x, w.value));
  Tensor scores = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(d)));  // [B, heads, S, S]
  // Keys past a sequence's length are padding: no query attends to them.
  Tensor padding = arange(S, {.device = x.device()}).ge(lengths.unsqueeze(1));  // [B, S] bool
  Tensor probs = scores.masked_fill(padding.view({B, 1, 1, S}), kMaskedScore).softmax(-1);
  // Merge the heads: [B, heads, S, d] -> [B, S, heads, d] is a view, but no
  // view of it is [B, S, H], so the reshape copies.
  Tensor context = probs.matmul(v).transpose(1, 2).reshape({B, S, H});
  Tensor y = norm(dense(context, w.attention_output) + x, w.attention_norm);

  // Feed-forward block. Its first dense layer's product, bias and gelu are
  // one call, which a plugin may fuse (Note [Fused activation products]):
  // gelu(dense(y, w.intermediate)) over y's rows.
  const int64_t ffn = w.intermediate.weight.size(0);
  const Tensor hidden = _addmm_activation(w.intermediate.bias, y.reshape({B * S, H}), w.intermediate.weight.t(), 1, 1,
                                          /*use_gelu=*/true)
                            .view({B, S, ffn});
  return norm(dense(hidden, w.output) + y, w.output_norm);
}

Tensor encoderLayer(const EncoderWeights& w, const EncoderBatch& batch) {
  BP_CHECK(batch.token_ids.dim() == 2 && batch.lengths.dim() == 1 && batch.lengths.size(0) == batch.token_ids.size(0),
           "encoderLayer: token_ids must be [batch, seq] and lengths [batch], got ", batch.token_ids.str(), " and ",
           batch.lengths.str());
  return encoderBlock(w, embed(w, batch.token_ids), batch.lengths);
}

BlockGradients::BlockGradients(const EncoderWeights& w, const EncoderBatch& b, double out_grad_value)
    : weights(w), batch(b), input(embed(w, b.token_ids)), leaves(w.parameters()) {
  input.requires_grad_();
  for (const Tensor& p : leaves) p.requires_grad_();
  leaves.push_back(input);
  out_grad = full(input.sizes(), out_grad_value, {.device = input.device()});
}

Tensor BlockGradients::forward() const { return encoderBlock(weights, input, batch.lengths); }

void BlockGradients::step() const {
  forward().backward(out_grad);
  for (const Tensor& p : leaves) p.set_grad(Tensor());
}

}  // namespace encoder
