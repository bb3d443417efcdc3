#pragma once
// The per-element arithmetic of the optimizer ops (Note [Optimizer ops] in
// dispatcher/ops/src/optim.cc), shared by the CPU and GPU kernels so that
// every device takes the same step: torch.optim.SGD's and
// torch.optim.AdamW's update, in the parameter's opmath type V, operation
// by operation in PyTorch's order (add(x, alpha) is x * alpha added;
// addcmul and addcdiv scale the product or quotient), so that a model
// trained here tracks libtorch's.
#include <cmath>
#include <cstdint>

#include "bp_common/arithmetic.h"

namespace bp_common {

template <class V>
struct SgdStep {
  V lr, weight_decay, momentum, one_minus_dampening;
  bool has_momentum, nesterov, maximize, first_step;

  // From the op's arguments (computed in double, then rounded to V, as
  // PyTorch's scalar arguments are).
  static SgdStep make(double lr, double weight_decay, double momentum, double dampening, bool nesterov, bool maximize,
                      bool first_step) {
    return {V(lr), V(weight_decay), V(momentum), V(1 - dampening), momentum != 0, nesterov, maximize, first_step};
  }

  // Updates parameter p from gradient g and the momentum buffer *buf (read
  // and written only with momentum).
  BP_HOST_DEVICE void operator()(V& p, V g, V* buf) const {
    if (maximize) g = -g;
    if (weight_decay != V(0)) g = g + weight_decay * p;
    if (has_momentum) {
      const V b = first_step ? g : *buf * momentum + one_minus_dampening * g;
      *buf = b;
      g = nesterov ? g + momentum * b : b;
    }
    p = p + (-lr) * g;
  }
};

template <class V>
struct AdamwStep {
  V decay;  // 1 - lr * weight_decay
  V beta1, beta2, one_minus_beta1, one_minus_beta2;
  V bias_correction2_sqrt, eps, step_size;  // step_size: lr / (1 - beta1^step)
  bool amsgrad, maximize;

  // From the op's arguments for step number `step` (counted from 1).
  static AdamwStep make(int64_t step, double lr, double beta1, double beta2, double weight_decay, double eps,
                        bool amsgrad, bool maximize) {
    const double t = static_cast<double>(step);
    return {V(1 - lr * weight_decay),
            V(beta1),
            V(beta2),
            V(1 - beta1),
            V(1 - beta2),
            V(std::sqrt(1 - std::pow(beta2, t))),
            V(eps),
            V(lr / (1 - std::pow(beta1, t))),
            amsgrad,
            maximize};
  }

  // Updates parameter p, the moments m and v and, with amsgrad, *vmax (the
  // largest v so far) from gradient g.
  BP_HOST_DEVICE void operator()(V& p, V g, V& m, V& v, V* vmax) const {
    if (maximize) g = -g;
    p = p * decay;
    m = m * beta1 + one_minus_beta1 * g;
    v = v * beta2 + one_minus_beta2 * g * g;
    V second = v;
    if (amsgrad) {
      if (*vmax > v) second = *vmax;
      *vmax = second;
    }
    const V denom = math::sqrt(second) / bias_correction2_sqrt + eps;
    p = p + (-step_size) * (m / denom);
  }
};

}  // namespace bp_common
