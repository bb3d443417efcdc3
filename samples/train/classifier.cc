#include "classifier.h"

#include <random>

#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"

namespace train {

using namespace backplane;

void ClassifierConfig::validate() const {
  encoder.validate();
  BP_CHECK(layers >= 1, "ClassifierConfig: layers must be at least 1, got ", layers);
  BP_CHECK(classes >= 2, "ClassifierConfig: classes must be at least 2, got ", classes);
  BP_CHECK(encoder.vocab > TrainingBatch::kSignalToken + 1, "ClassifierConfig: vocab must be above ",
           TrainingBatch::kSignalToken + 1, " (token ", encoder::EncoderBatch::kPadTokenId, " pads, token ",
           TrainingBatch::kSignalToken, " is the signal), got ", encoder.vocab);
}

std::string ClassifierConfig::str() const { return strCat(layers, " layers, ", classes, " classes; ", encoder.str()); }

ClassifierWeights ClassifierWeights::random(const ClassifierConfig& config, uint64_t seed) {
  config.validate();
  ClassifierWeights w;
  w.config = config;
  for (int64_t l = 0; l < config.layers; ++l)
    w.layers.push_back(encoder::EncoderWeights::random(config.encoder, seed + static_cast<uint64_t>(l)));
  manualSeed(seed + static_cast<uint64_t>(config.layers));
  const int64_t H = config.encoder.hidden;
  w.head.weight = randn({config.classes, H}) * (1.0 / std::sqrt(static_cast<double>(H)));
  w.head.bias = randn({config.classes}) * 0.1;
  return w;
}

ClassifierWeights ClassifierWeights::to(Device device) const {
  ClassifierWeights w = *this;
  for (encoder::EncoderWeights& l : w.layers) l = l.to(device);
  w.head = {head.weight.to(device), head.bias.to(device)};
  return w;
}

std::vector<Tensor> ClassifierWeights::parameters() const {
  std::vector<Tensor> out;
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::vector<Tensor> p = layers[l].parameters();
    const size_t skip = l == 0 ? 0 : encoder::EncoderWeights::kEmbeddingParameters;
    out.insert(out.end(), p.begin() + static_cast<std::ptrdiff_t>(skip), p.end());
  }
  out.push_back(head.weight);
  out.push_back(head.bias);
  return out;
}

TrainingBatch TrainingBatch::random(const ClassifierConfig& config, uint64_t seed) {
  config.validate();
  const encoder::EncoderConfig& c = config.encoder;
  encoder::EncoderBatch tokens = encoder::EncoderBatch::random(c, seed);
  // EncoderBatch draws tokens in [1, vocab): the signal token is replaced,
  // then put back into about half of the sequences at a random position.
  std::vector<int64_t> ids = tokens.token_ids.toVector<int64_t>();
  const std::vector<int64_t> lengths = tokens.lengths.toVector<int64_t>();
  std::mt19937_64 gen(seed ^ 0x5eedf00dULL);
  std::vector<int64_t> labels(static_cast<size_t>(c.batch));
  for (int64_t b = 0; b < c.batch; ++b) {
    int64_t* row = ids.data() + b * c.seq;
    for (int64_t s = 0; s < lengths[b]; ++s)
      if (row[s] == kSignalToken) row[s] = kSignalToken + 1;
    const bool signal = gen() % 2 == 1;
    if (signal) row[gen() % static_cast<uint64_t>(lengths[b])] = kSignalToken;
    labels[static_cast<size_t>(b)] = signal ? 1 % config.classes : 0;
  }
  tokens.token_ids = tensorFromVector(ids, {c.batch, c.seq});
  return {tokens, tensorFromVector(labels, {c.batch})};
}

TrainingBatch TrainingBatch::to(Device device) const { return {tokens.to(device), labels.to(device)}; }

Tensor classifierLogits(const ClassifierWeights& w, const encoder::EncoderBatch& batch) {
  Tensor x = encoder::embed(w.layers[0], batch.token_ids);
  for (const encoder::EncoderWeights& layer : w.layers) x = encoder::encoderBlock(layer, x, batch.lengths);
  return linear(x.select(1, 0), w.head.weight, w.head.bias);
}

Tensor crossEntropy(const Tensor& logits, const Tensor& labels) {
  BP_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
           "crossEntropy: logits must be [batch, classes] and labels [batch], got ", logits.str(), " and ",
           labels.str());
  return -log_softmax(logits, 1).gather(1, labels.unsqueeze(1)).mean();
}

}  // namespace train
