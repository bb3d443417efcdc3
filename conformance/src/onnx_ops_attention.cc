// The transformer ops in the ONNX -> standard-op table (Note [ONNX op
// mapping] in onnx_ops.cc): Attention and RotaryEmbedding (opset 23, ONNX's
// nn domain). How the entries read a node: onnx_node_args.h.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backplane/core/scalar_type.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

// Attention (opset 23): as ONNX's reference: 3-d inputs split into heads,
// past keys/values prepended (the present outputs), K/V heads repeated for
// grouped queries, sqrt(scale) on Q and on K, the causal, boolean or additive
// masks and nonpad_kv_seqlen as an additive bias, softcap, softmax, then V;
// qk_matmul_output at the stage qk_matmul_output_mode names.
NodeRun attention(const NodeTest& n, const NodeInputs& in) {
  Tensor q = input(n, in, 0), k = input(n, in, 1), v = input(n, in, 2);
  if (q.dim() != k.dim() || q.dim() != v.dim() || (q.dim() != 3 && q.dim() != 4)) {
    return unsupported("Attention: Q, K and V must all be 3-d or all 4-d");
  }
  if (!isFloatingType(q.dtype())) return unsupported("Attention: integer inputs");
  if (n.has("softmax_precision")) return unsupported("Attention: softmax_precision is not mapped");
  const bool three_d = q.dim() == 3;
  const int64_t batch = q.size(0);
  auto heads = [&](const Tensor& t, int64_t h) {
    return t.reshape({batch, t.size(1), h, t.size(2) / h}).permute({0, 2, 1, 3});
  };
  if (three_d) {
    const int64_t qh = n.intAttr("q_num_heads", 0), kvh = n.intAttr("kv_num_heads", 0);
    if (qh < 1 || kvh < 1 || q.size(2) % qh != 0 || k.size(2) % kvh != 0 || v.size(2) % kvh != 0) {
      return unsupported("Attention: 3-d inputs need q_num_heads and kv_num_heads dividing their hidden sizes");
    }
    q = heads(q, qh);
    k = heads(k, kvh);
    v = heads(v, kvh);
  }
  int64_t past_len = 0;
  if (const Tensor* past = optionalInput(in, 4)) {
    past_len = past->size(2);
    k = cat({*past, k}, 2);
  }
  if (const Tensor* past = optionalInput(in, 5)) v = cat({*past, v}, 2);
  const Tensor present_k = k, present_v = v;
  const int64_t q_heads = q.size(1), kv_heads = k.size(1);
  if (q_heads != kv_heads) {
    if (kv_heads < 1 || q_heads % kv_heads != 0) return unsupported("Attention: q heads not a multiple of kv heads");
    const int64_t rep = q_heads / kv_heads;
    auto repeat = [&](const Tensor& t) {
      return t.unsqueeze(2)
          .expand({t.size(0), kv_heads, rep, t.size(2), t.size(3)})
          .reshape({t.size(0), q_heads, t.size(2), t.size(3)});
    };
    k = repeat(k);
    v = repeat(v);
  }
  const int64_t q_len = q.size(2), kv_len = k.size(2);
  const double scale = n.has("scale") ? n.floatAttr("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const double root = std::sqrt(scale);
  const TensorOptions opts{.dtype = q.dtype(), .device = q.device()};
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Tensor bias = zeros({q_len, kv_len}, opts);
  if (n.intAttr("is_causal", 0) != 0) {
    Tensor rows = arange(q_len, {.dtype = ScalarType::Int64, .device = q.device()}).unsqueeze(1);
    Tensor cols = arange(kv_len, {.dtype = ScalarType::Int64, .device = q.device()}).unsqueeze(0);
    // Query i sees the past keys and the new ones up to i.
    bias = where(cols.gt(rows + Scalar(past_len)), full_like(bias, Scalar(neg_inf)), bias);
  }
  if (const Tensor* mask = optionalInput(in, 3)) {
    Tensor m = mask->dtype() == ScalarType::Bool
                   ? where(*mask, zeros_like(*mask, opts), full_like(*mask, Scalar(neg_inf), opts))
                   : mask->to(q.dtype());
    // A mask shorter than the keys counts the rest as masked out.
    if (m.size(-1) < kv_len) m = pad(m, {0, kv_len - m.size(-1)}, "constant", neg_inf);
    bias = bias + m;
  }
  if (const Tensor* lens = optionalInput(in, 6)) {
    Tensor cols = arange(kv_len, {.dtype = ScalarType::Int64, .device = q.device()}).reshape({1, 1, 1, kv_len});
    Tensor past_end = cols.ge(lens->to(ScalarType::Int64).reshape({batch, 1, 1, 1}));
    bias = bias + where(past_end, full({1}, Scalar(neg_inf), opts), zeros({1}, opts));
  }
  Tensor qk = (q * root).matmul((k * root).transpose(-2, -1));
  const int64_t mode = n.intAttr("qk_matmul_output_mode", 0);
  Tensor staged = qk;
  // softcap caps the products before the masks add (a masked -inf stays -inf).
  Tensor capped = qk;
  if (n.has("softcap") && n.floatAttr("softcap", 0.0) != 0.0) {
    const double cap = n.floatAttr("softcap", 0.0);
    capped = (qk / cap).tanh() * cap;
  }
  if (mode == 1) staged = capped;
  Tensor scores = capped + bias;
  if (mode == 2) staged = scores;
  Tensor probs = scores.softmax(-1);
  if (mode == 3) staged = probs;
  if (mode < 0 || mode > 3) return unsupported("Attention: qk_matmul_output_mode " + std::to_string(mode));
  Tensor y = probs.matmul(v);
  if (three_d) y = y.permute({0, 2, 1, 3}).reshape({batch, q_len, -1});
  std::vector<Tensor> outs{y};
  const Tensor extra[] = {present_k, present_v, staged};
  for (size_t i = 1; i < n.outputs.size() && i <= 3; ++i) outs.push_back(wantsOutput(n, i) ? extra[i - 1] : Tensor());
  return outputs(std::move(outs));
}

// RotaryEmbedding (opset 23) as ONNX's reference: X as [B, S, H, D], the
// first rotary_embedding_dim of each head rotated by the cos/sin caches
// (picked by position_ids when given), halves or interleaved pairs.
NodeRun rotaryEmbedding(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0), cos_cache = input(n, in, 1), sin_cache = input(n, in, 2);
  if (!isFloatingType(x.dtype())) return unsupported("RotaryEmbedding: integer input");
  const Ints original = sizesOf(x);
  if (x.dim() == 4) {
    x = x.permute({0, 2, 1, 3});
  } else if (x.dim() == 3) {
    const int64_t heads = n.intAttr("num_heads", 0);
    if (heads < 1 || x.size(2) % heads != 0) return unsupported("RotaryEmbedding: 3-d input needs num_heads");
    x = x.reshape({x.size(0), x.size(1), heads, x.size(2) / heads});
  } else {
    return unsupported("RotaryEmbedding: the input must be 3-d or 4-d");
  }
  const int64_t batch = x.size(0), seq = x.size(1), head = x.size(3);
  int64_t rot = n.intAttr("rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot < 2 || rot > head || rot % 2 != 0) return unsupported("RotaryEmbedding: rotary_embedding_dim");
  Tensor cos = cos_cache, sin = sin_cache;
  if (const Tensor* ids = optionalInput(in, 3)) {
    Tensor flat = ids->to(ScalarType::Int64).reshape({ids->numel()});
    cos = cos.index_select(0, flat).reshape({batch, seq, -1});
    sin = sin.index_select(0, flat).reshape({batch, seq, -1});
  }
  cos = cos.narrow(-1, 0, rot / 2).unsqueeze(2);
  sin = sin.narrow(-1, 0, rot / 2).unsqueeze(2);
  Tensor rotate = x.narrow(3, 0, rot);
  const bool interleaved = n.intAttr("interleaved", 0) != 0;
  Tensor x1 = interleaved ? rotate.slice(3, 0, rot, 2) : rotate.narrow(3, 0, rot / 2);
  Tensor x2 = interleaved ? rotate.slice(3, 1, rot, 2) : rotate.narrow(3, rot / 2, rot / 2);
  Tensor real = cos * x1 - sin * x2, imag = sin * x1 + cos * x2;
  Tensor rotated = interleaved ? stack({real, imag}, -1).reshape({batch, seq, x.size(2), rot}) : cat({real, imag}, 3);
  Tensor y = rot == head ? rotated : cat({rotated, x.narrow(3, rot, head - rot)}, 3);
  return outputs({original.size() == 3 ? y.reshape(original) : y.permute({0, 2, 1, 3}).contiguous()});
}

}  // namespace

void registerAttentionNodes() {
  registerNode("Attention", [](const NodeTest& n, const NodeInputs& in, Device) { return attention(n, in); });
  registerNode("RotaryEmbedding",
               [](const NodeTest& n, const NodeInputs& in, Device) { return rotaryEmbedding(n, in); });
}

}  // namespace backplane::conformance::onnx
