#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backplane/core/error.h"

namespace encoder {
namespace {

using Vec = std::vector<double>;

// A linear layer with its weight transposed to [in, out], so that the inner
// loop of applyLinear runs over contiguous outputs (which compilers
// vectorise without reordering any sum).
struct HostLinear {
  int64_t in;
  int64_t out;
  Vec weight_t;  // [in, out]
  Vec bias;      // [out]
};

HostLinear readLinear(const LinearWeights& l) {
  HostLinear h{l.weight.size(1), l.weight.size(0), {}, l.bias.toVector<double>()};
  Vec w = l.weight.toVector<double>();
  h.weight_t.resize(w.size());
  for (int64_t o = 0; o < h.out; ++o) {
    for (int64_t i = 0; i < h.in; ++i) h.weight_t[i * h.out + o] = w[o * h.in + i];
  }
  return h;
}

// x [rows, in] @ weight.T + bias -> [rows, out].
Vec applyLinear(const LinearWeights& weights, const Vec& x, int64_t rows) {
  const HostLinear l = readLinear(weights);
  Vec y(static_cast<size_t>(rows * l.out));
  for (int64_t r = 0; r < rows; ++r) {
    double* yr = &y[r * l.out];
    std::copy(l.bias.begin(), l.bias.end(), yr);
    for (int64_t i = 0; i < l.in; ++i) {
      const double xi = x[r * l.in + i];
      const double* wi = &l.weight_t[i * l.out];
      for (int64_t o = 0; o < l.out; ++o) yr[o] += xi * wi[o];
    }
  }
  return y;
}

// In place, over rows of `width`: (x - mean) / sqrt(var + eps) * weight +
// bias, with the biased variance (as layer_norm defines it).
void applyNorm(const NormWeights& n, double eps, Vec& x, int64_t width) {
  const Vec gamma = n.weight.toVector<double>();
  const Vec beta = n.bias.toVector<double>();
  for (size_t start = 0; start < x.size(); start += static_cast<size_t>(width)) {
    double* row = &x[start];
    double mean = 0;
    for (int64_t i = 0; i < width; ++i) mean += row[i];
    mean /= static_cast<double>(width);
    double var = 0;
    for (int64_t i = 0; i < width; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(width);
    const double inv_std = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < width; ++i) row[i] = (row[i] - mean) * inv_std * gamma[i] + beta[i];
  }
}

void addInPlace(Vec& x, const Vec& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

}  // namespace

std::vector<double> referenceEncoderLayer(const EncoderWeights& w, const EncoderBatch& batch, int64_t num_sequences) {
  const EncoderConfig& c = w.config;
  const int64_t S = batch.token_ids.size(1), H = c.hidden, heads = c.heads, d = c.headDim();
  BP_CHECK(num_sequences >= 0 && num_sequences <= batch.token_ids.size(0), "referenceEncoderLayer: asked for ",
           num_sequences, " sequences of a batch of ", batch.token_ids.size(0));
  const int64_t rows = num_sequences * S;
  const std::vector<int64_t> ids = batch.token_ids.toVector<int64_t>();
  const std::vector<int64_t> lengths = batch.lengths.toVector<int64_t>();

  // Embeddings. Only the rows of the tokens used are read: the word table
  // of BERT-base is 94 MB.
  const Vec positions = w.position_embeddings.toVector<double>();
  Vec x(static_cast<size_t>(rows * H));
  for (int64_t r = 0; r < rows; ++r) {
    const Vec word = w.word_embeddings.select(0, ids[r]).toVector<double>();
    for (int64_t i = 0; i < H; ++i) x[r * H + i] = word[i] + positions[(r % S) * H + i];
  }
  applyNorm(w.embedding_norm, c.layer_norm_eps, x, H);

  // Self-attention, one (sequence, head, query) at a time; padded keys are
  // left out of the softmax.
  const Vec q = applyLinear(w.query, x, rows);
  const Vec k = applyLinear(w.key, x, rows);
  const Vec v = applyLinear(w.value, x, rows);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Vec context(static_cast<size_t>(rows * H), 0.0);
  Vec p(static_cast<size_t>(S));
  for (int64_t b = 0; b < num_sequences; ++b) {
    const int64_t length = lengths[b];
    BP_CHECK(length >= 1 && length <= S, "referenceEncoderLayer: sequence ", b, " has length ", length,
             ", outside [1, ", S, "]");
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < S; ++i) {
        const double* qi = &q[(b * S + i) * H + h * d];
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < length; ++j) {
          const double* kj = &k[(b * S + j) * H + h * d];
          double s = 0;
          for (int64_t t = 0; t < d; ++t) s += qi[t] * kj[t];
          p[j] = s * scale;
          max_score = std::max(max_score, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < length; ++j) sum += p[j] = std::exp(p[j] - max_score);
        double* ci = &context[(b * S + i) * H + h * d];
        for (int64_t j = 0; j < length; ++j) {
          const double* vj = &v[(b * S + j) * H + h * d];
          for (int64_t t = 0; t < d; ++t) ci[t] += p[j] / sum * vj[t];
        }
      }
    }
  }
  Vec attention = applyLinear(w.attention_output, context, rows);
  addInPlace(attention, x);
  applyNorm(w.attention_norm, c.layer_norm_eps, attention, H);

  // Feed-forward block, with the exact (erf) GELU.
  Vec inner = applyLinear(w.intermediate, attention, rows);
  for (double& e : inner) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
  Vec out = applyLinear(w.output, inner, rows);
  addInPlace(out, attention);
  applyNorm(w.output_norm, c.layer_norm_eps, out, H);
  return out;
}

}  // namespace encoder
