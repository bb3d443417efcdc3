#pragma once
// A small BERT-style sequence classifier to train: the encoder sample's
// embeddings, `layers` encoder blocks (samples/encoder/encoder.h), and a
// linear head on the first token's state. Its loss is the cross entropy of
// the head's logits against the labels.
//
//   ClassifierWeights w = ClassifierWeights::random(config, seed).to(dev);
//   for (Tensor& p : w.parameters()) p.requires_grad_();
//   TrainingBatch b = TrainingBatch::random(config, seed + step).to(dev);
//   Tensor loss = crossEntropy(classifierLogits(w, b), b.labels);

#include <cstdint>
#include <string>
#include <vector>

#include "encoder.h"

namespace train {

using backplane::Device;
using backplane::Tensor;

struct ClassifierConfig {
  // The encoder's sizes; the defaults are small enough to train in seconds
  // on one core.
  encoder::EncoderConfig encoder{
      .batch = 8, .seq = 16, .hidden = 32, .heads = 4, .ffn = 64, .vocab = 50, .layer_norm_eps = 1e-12};
  int64_t layers = 2;
  int64_t classes = 2;

  // Throws backplane::Error naming the first size that cannot work.
  void validate() const;
  // "2 layers, 2 classes; batch 8, seq 16, ...".
  std::string str() const;
};

struct ClassifierWeights {
  ClassifierConfig config;
  // Layer 0's weights hold the embeddings too; the other layers' embedding
  // tables are never read (and are not parameters()).
  std::vector<encoder::EncoderWeights> layers;
  encoder::LinearWeights head;  // hidden -> classes

  // Drawn on the CPU after backplane::manualSeed(seed): a seed gives the
  // same weights everywhere.
  static ClassifierWeights random(const ClassifierConfig& config, uint64_t seed);
  ClassifierWeights to(Device device) const;
  // What training updates, in a fixed order: handles to these weights'
  // tensors.
  std::vector<Tensor> parameters() const;
};

// A batch of padded sequences and a label each: 1 when the sequence holds
// kSignalToken (drawn into about half of them), else 0, so attention has
// something to learn.
struct TrainingBatch {
  encoder::EncoderBatch tokens;
  Tensor labels;  // [batch] int64 in [0, classes)

  static constexpr int64_t kSignalToken = 1;
  // Deterministic in `seed`, as EncoderBatch::random.
  static TrainingBatch random(const ClassifierConfig& config, uint64_t seed);
  TrainingBatch to(Device device) const;
};

// [batch, classes] logits: embeddings, the encoder blocks, the head on
// position 0.
Tensor classifierLogits(const ClassifierWeights& weights, const encoder::EncoderBatch& batch);
// The mean over the batch of -log softmax(logits)[label]: a 0-d tensor.
Tensor crossEntropy(const Tensor& logits, const Tensor& labels);

}  // namespace train
