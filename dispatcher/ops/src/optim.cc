// Family "optim": optimizer steps as operators (Note [Optimizer ops]).

#include <cmath>
#include <string>

#include "backplane/ops/ops.h"
#include "families.h"
#include "meta.h"
#include "structured.h"

namespace backplane::ops {

// Note [Optimizer ops]
// _fused_sgd_ and _fused_adamw_ are one optimizer step over a list of
// parameters: each updates every parameter of `self` and its state tensors
// in place, from the gradient at the same position of `grads`, in one call
// (multi-tensor: a device kernel serves the whole list, as PyTorch's fused
// optimizers do). The arithmetic is PyTorch's torch.optim.SGD and
// torch.optim.AdamW, in the parameter's opmath type (float32 for float16
// and bfloat16), so a model trained here follows libtorch's step for step
// (dispatcher/ops/tests/torch_parity: the optimizers family). Differences
// from PyTorch's fused ops' schemas: `grads` is read only, AdamW takes the
// step number as `int step` (every listed parameter has taken the same
// number of steps; the optimizer classes group parameters by it) instead
// of a tensor per parameter, and there is no grad_scale/found_inf.
//
// Each op has a meta that checks the lists (equal lengths; every tensor
// defined, contiguous, floating, on one device with one dtype per
// position) and the hyperparameters, and a composite written with
// standard ops that any device falls back to without leaving the device;
// the CPU and GPU plugins implement both natively, one pass over each
// parameter's elements. The derivative table declares them
// non-differentiable: they run under no_grad (backplane/autograd/optim.h's
// classes call them there).
namespace {

const ScalarTypeSet kFloating = ScalarTypeSet::floating();

// Checks that list `name` holds `n` tensors (or none, when `may_be_empty`)
// shaped, typed and placed as the parameters are.
void checkStateList(const std::string& op, TensorList params, TensorList list, const char* name, bool may_be_empty,
                    const char* when_empty) {
  if (list.empty() && may_be_empty) return;
  BP_CHECK(list.size() == params.size(), op, ": '", name, "' has ", list.size(), " tensors but 'self' has ",
           params.size(), "; pass one per parameter", when_empty);
  for (size_t i = 0; i < list.size(); ++i) {
    const Tensor& p = params[i];
    const Tensor& t = list[i];
    BP_CHECK(t.defined(), op, ": ", name, "[", i, "] is undefined; pass a tensor shaped as self[", i, "]");
    BP_CHECK(t.device() == p.device(), op, ": ", name, "[", i, "] is on ", t.device(), " but self[", i, "] is on ",
             p.device(), "; the optimizer's state lives with its parameter");
    BP_CHECK(t.dtype() == p.dtype(), op, ": ", name, "[", i, "] has dtype ", scalarTypeName(t.dtype()), " but self[", i,
             "] has ", scalarTypeName(p.dtype()), "; they must match");
    BP_CHECK(t.sizes() == p.sizes(), op, ": ", name, "[", i, "] has shape ", shapeString(t.sizes()), " but self[", i,
             "] has ", shapeString(p.sizes()), "; they must match");
    BP_CHECK(t.is_contiguous(), op, ": ", name, "[", i,
             "] is not contiguous; optimizer steps update dense tensors (call .contiguous() once when creating it)");
  }
}

void checkParams(const std::string& op, TensorList params, TensorList grads) {
  BP_CHECK(!params.empty(), op, ": 'self' is empty; pass at least one parameter (skip the call when no ",
           "parameter has a gradient)");
  for (size_t i = 0; i < params.size(); ++i)
    BP_CHECK(params[i].defined(), op, ": self[", i, "] is undefined; pass the parameters themselves");
  const Device device = params[0].device();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    BP_CHECK(p.device() == device, op, ": self[", i, "] is on ", p.device(), " but self[0] is on ", device,
             "; one call updates the parameters of one device (group them by device)");
    BP_CHECK(kFloating.contains(p.dtype()), op, ": self[", i, "] has dtype ", scalarTypeName(p.dtype()),
             "; optimizers update floating parameters (float16, bfloat16, float32, float64)");
    BP_CHECK(p.is_contiguous(), op, ": self[", i,
             "] is not contiguous; optimizer steps update dense tensors (train a contiguous copy)");
  }
  checkStateList(op, params, grads, "grads", false, "");
}

void checkHyper(const std::string& op, const char* name, double value, double lo, double hi, const char* range) {
  BP_CHECK(std::isfinite(value) && value >= lo && value <= hi, op, ": ", name, " must be ", range, ", got ", value);
}

void fusedSgdMeta(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                  double momentum, double lr, double dampening, bool nesterov, bool /*maximize*/,
                  bool /*is_first_step*/) {
  const std::string& op = qualified<"_fused_sgd_">();
  checkParams(op, self, grads);
  checkHyper(op, "lr", lr, 0, INFINITY, "a finite number >= 0");
  checkHyper(op, "momentum", momentum, 0, INFINITY, "a finite number >= 0");
  checkHyper(op, "weight_decay", weight_decay, 0, INFINITY, "a finite number >= 0");
  checkHyper(op, "dampening", dampening, -INFINITY, INFINITY, "finite");
  BP_CHECK(!nesterov || (momentum > 0 && dampening == 0), op,
           ": nesterov momentum needs momentum > 0 and dampening 0 (as PyTorch's SGD), got momentum ", momentum,
           " and dampening ", dampening);
  checkStateList(op, self, momentum_buffer_list, "momentum_buffer_list", momentum == 0,
                 " (or none when momentum is 0)");
}

void fusedAdamwMeta(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                    TensorList max_exp_avg_sqs, int64_t step, double lr, double beta1, double beta2,
                    double weight_decay, double eps, bool amsgrad, bool /*maximize*/) {
  const std::string& op = qualified<"_fused_adamw_">();
  checkParams(op, self, grads);
  BP_CHECK(step >= 1, op, ": step must be the step's number, counted from 1 (PyTorch's state_steps after ",
           "the increment), got ", step);
  checkHyper(op, "lr", lr, 0, INFINITY, "a finite number >= 0");
  checkHyper(op, "beta1", beta1, 0, std::nextafter(1.0, 0.0), "in [0, 1)");
  checkHyper(op, "beta2", beta2, 0, std::nextafter(1.0, 0.0), "in [0, 1)");
  checkHyper(op, "weight_decay", weight_decay, 0, INFINITY, "a finite number >= 0");
  checkHyper(op, "eps", eps, 0, INFINITY, "a finite number >= 0");
  checkStateList(op, self, exp_avgs, "exp_avgs", false, "");
  checkStateList(op, self, exp_avg_sqs, "exp_avg_sqs", false, "");
  BP_CHECK(amsgrad || max_exp_avg_sqs.empty(), op, ": max_exp_avg_sqs holds ", max_exp_avg_sqs.size(),
           " tensors but amsgrad is false; pass none, or set amsgrad");
  if (amsgrad) checkStateList(op, self, max_exp_avg_sqs, "max_exp_avg_sqs", false, " when amsgrad is set");
}

// The composites compute in the opmath dtype (float32 for float16 and
// bfloat16) and write each result back once, as the native kernels do.
Tensor opmath(const Tensor& t) {
  return t.dtype() == ScalarType::Float16 || t.dtype() == ScalarType::BFloat16 ? t.to(ScalarType::Float32) : t;
}

void fusedSgdComposite(TensorList self, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                       double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step) {
  for (size_t i = 0; i < self.size(); ++i) {
    const Tensor p = opmath(self[i]);
    Tensor g = opmath(grads[i]);
    if (maximize) g = -g;
    if (weight_decay != 0) g = g.add(p, weight_decay);
    if (momentum != 0) {
      const Tensor& buf = momentum_buffer_list[i];
      Tensor b = is_first_step ? g : opmath(buf).mul(momentum).add(g, 1 - dampening);
      buf.copy_(b);
      g = nesterov ? g.add(b, momentum) : b;
    }
    self[i].copy_(p.add(g, -lr));
  }
}

void fusedAdamwComposite(TensorList self, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                         TensorList max_exp_avg_sqs, int64_t step, double lr, double beta1, double beta2,
                         double weight_decay, double eps, bool amsgrad, bool maximize) {
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, t));
  const double step_size = lr / bias_correction1;
  for (size_t i = 0; i < self.size(); ++i) {
    Tensor p = opmath(self[i]).mul(1 - lr * weight_decay);
    Tensor g = opmath(grads[i]);
    if (maximize) g = -g;
    Tensor m = opmath(exp_avgs[i]).mul(beta1).add(g, 1 - beta1);
    Tensor v = opmath(exp_avg_sqs[i]).mul(beta2).add(g * g, 1 - beta2);
    exp_avgs[i].copy_(m);
    exp_avg_sqs[i].copy_(v);
    if (amsgrad) {
      v = opmath(max_exp_avg_sqs[i]).maximum(v);
      max_exp_avg_sqs[i].copy_(v);
    }
    Tensor denom = v.sqrt() / bias_correction2_sqrt + eps;
    self[i].copy_(p.add(m / denom, -step_size));
  }
}

}  // namespace

void addOptimOps(std::vector<StandardOp>& ops) {
  using K = KernelFunction;
  ops.push_back(StandardOp{
      "_fused_sgd_(Tensor(a!)[] self, Tensor[] grads, Tensor(b!)[] momentum_buffer_list, *, float weight_decay, "
      "float momentum, float lr, float dampening, bool nesterov, bool maximize, bool is_first_step) -> ()",
      K::makeFromFunction(BP_FN(fusedSgdMeta)),
      K::makeFromFunction(BP_FN(fusedSgdComposite)),
      "optim",
      {{"self", kFloating}, {"grads", kFloating}, {"momentum_buffer_list", kFloating}}});
  ops.push_back(
      StandardOp{"_fused_adamw_(Tensor(a!)[] self, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, "
                 "Tensor(d!)[] max_exp_avg_sqs, *, int step, float lr, float beta1, float beta2, float weight_decay, "
                 "float eps, bool amsgrad, bool maximize) -> ()",
                 K::makeFromFunction(BP_FN(fusedAdamwMeta)),
                 K::makeFromFunction(BP_FN(fusedAdamwComposite)),
                 "optim",
                 {{"self", kFloating},
                  {"grads", kFloating},
                  {"exp_avgs", kFloating},
                  {"exp_avg_sqs", kFloating},
                  {"max_exp_avg_sqs", kFloating}}});
}

}  // namespace backplane::ops
