#pragma once
// Optimizers: SGD (with momentum) and AdamW, as PyTorch's torch.optim
// classes, over the optimizer ops (Note [Optimizer ops]; docs/autograd.md
// "Optimizers"). Each step() groups the parameters that have a gradient by
// device and dtype (and AdamW's by their step count) and makes one
// multi-tensor call per group under no_grad, so the update runs on the
// parameters' device with its kernels (native, or the ops' composite).
//
//   backplane::optim::AdamW opt(model.parameters(), {.lr = 1e-3});
//   for (...) {
//     opt.zero_grad();
//     Tensor loss = ...;
//     loss.backward();
//     opt.step();
//   }

#include <cstdint>
#include <vector>

#include "backplane/ops/tensor.h"

namespace backplane::optim {

// What every optimizer shares: the parameters and zero_grad().
class Optimizer {
 public:
  // `params`: leaves that require grad (each distinct, floating and
  // contiguous); throws naming the first that is not.
  Optimizer(std::vector<Tensor> params, const char* name);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (the others are
  // skipped, as in PyTorch).
  virtual void step() = 0;
  // Drops every parameter's gradient (PyTorch's set_to_none=True, its
  // default): the next backward writes fresh ones.
  void zero_grad();
  const std::vector<Tensor>& parameters() const { return params_; }

 protected:
  std::vector<Tensor> params_;
  const char* name_;
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

// torch.optim.SGD: p -= lr * g, with weight decay added to g and, with
// momentum, g replaced by the momentum buffer (nesterov: g + momentum * buf).
class SGD : public Optimizer {
 public:
  // Throws on options PyTorch refuses (negative lr, momentum or
  // weight_decay; nesterov without momentum or with dampening).
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  const SGDOptions& options() const { return options_; }
  // Parameter i's momentum buffer (undefined before its first step).
  const Tensor& momentum_buffer(size_t i) const { return buffers_.at(i); }

 private:
  SGDOptions options_;
  std::vector<Tensor> buffers_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

// torch.optim.AdamW: decoupled weight decay p *= 1 - lr * weight_decay, then
// Adam's bias-corrected step from the moments of the gradient.
class AdamW : public Optimizer {
 public:
  // Throws on options PyTorch refuses (lr, eps or weight_decay negative,
  // betas outside [0, 1)).
  AdamW(std::vector<Tensor> params, AdamWOptions options);
  void step() override;
  const AdamWOptions& options() const { return options_; }
  // Parameter i's number of steps taken, and its moments (undefined before
  // its first step).
  int64_t step_count(size_t i) const { return state_.at(i).step; }
  const Tensor& exp_avg(size_t i) const { return state_.at(i).exp_avg; }
  const Tensor& exp_avg_sq(size_t i) const { return state_.at(i).exp_avg_sq; }

 private:
  struct State {
    int64_t step = 0;
    Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
  };
  AdamWOptions options_;
  std::vector<State> state_;
};

}  // namespace backplane::optim
