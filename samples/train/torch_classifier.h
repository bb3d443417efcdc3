#pragma once
// The classifier of classifier.h written again with ATen's ops, for the
// programs that compare with libtorch (train_parity_test.cc,
// bench/train_bench.cc): the same model, fed the same initial weights.
// Needs libtorch (cmake/BackplaneLibtorch.cmake).
#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backplane/core/error.h"
#include "classifier.h"

namespace train {

// A CPU copy of `t` (float32 or int64) as an ATen tensor.
inline at::Tensor toTorch(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  const at::ScalarType dt = c.dtype() == backplane::ScalarType::Int64 ? at::kLong : at::kFloat;
  BP_CHECK(c.dtype() == backplane::ScalarType::Int64 || c.dtype() == backplane::ScalarType::Float32,
           "toTorch: ", c.str());
  at::Tensor out = at::empty(std::vector<int64_t>(c.sizes().begin(), c.sizes().end()), dt);
  std::memcpy(out.data_ptr(), c.data_ptr(), static_cast<size_t>(c.numel()) * c.itemsize());
  return out;
}

// The classifier in ATen: parameters in ClassifierWeights::parameters()'s
// order (for each layer the embeddings' four, layer 0 only, then the
// block's sixteen, then the head's two).
struct TorchClassifier {
  ClassifierConfig config;
  std::vector<at::Tensor> params;

  at::Tensor logits(const at::Tensor& ids, const at::Tensor& lengths) const {
    const encoder::EncoderConfig& c = config.encoder;
    const int64_t B = ids.size(0), S = ids.size(1), H = c.hidden, heads = c.heads, d = c.headDim();
    size_t next = 0;
    auto take = [&] { return params.at(next++); };
    auto norm = [&](const at::Tensor& x) {
      at::Tensor w = take(), b = take();
      return at::layer_norm(x, {H}, w, b, c.layer_norm_eps);
    };
    auto dense = [&](const at::Tensor& x) {
      at::Tensor w = take(), b = take();
      return at::linear(x, w, b);
    };
    at::Tensor words = take(), positions = take();
    at::Tensor x = norm(at::embedding(words, ids) + positions.narrow(0, 0, S));
    for (int64_t l = 0; l < config.layers; ++l) {
      auto split = [&](const at::Tensor& t) { return t.view({B, S, heads, d}).transpose(1, 2); };
      at::Tensor q = split(dense(x)), k = split(dense(x)), v = split(dense(x));
      at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(d)));
      at::Tensor padding = at::arange(S).ge(lengths.unsqueeze(1));
      at::Tensor probs = scores.masked_fill(padding.view({B, 1, 1, S}), encoder::kMaskedScore).softmax(-1);
      at::Tensor context = at::matmul(probs, v).transpose(1, 2).reshape({B, S, H});
      at::Tensor attended = dense(context);
      x = norm(attended + x);
      at::Tensor inner = at::gelu(dense(x));
      at::Tensor out = dense(inner);
      x = norm(out + x);
    }
    return dense(x.select(1, 0));
  }
};

inline at::Tensor torchCrossEntropy(const at::Tensor& logits, const at::Tensor& labels) {
  return -at::log_softmax(logits, 1).gather(1, labels.unsqueeze(1)).mean();
}

// TorchClassifier whose parameters are copies of `weights`' (CPU), each a
// leaf that requires grad.
inline TorchClassifier torchCopyOf(const ClassifierWeights& weights) {
  TorchClassifier model{weights.config, {}};
  for (const backplane::Tensor& p : weights.parameters()) model.params.push_back(toTorch(p.cpu()).requires_grad_());
  return model;
}

}  // namespace train
