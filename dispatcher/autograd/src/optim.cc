#include "backplane/autograd/optim.h"

#include <cmath>
#include <utility>

#include "backplane/autograd/autograd.h"
#include "backplane/core/error.h"
#include "backplane/ops/ops.h"

namespace backplane::optim {
namespace {

// Positions of parameters that step together: one device, one dtype and
// (AdamW) one step count, in the order the parameters were given.
struct Group {
  Device device;
  ScalarType dtype;
  int64_t step;
  std::vector<size_t> members;
};

template <class Key>
std::vector<Group> groupWithGrads(const std::vector<Tensor>& params, Key&& step_of) {
  std::vector<Group> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad().defined()) continue;
    const int64_t step = step_of(i);
    Group* g = nullptr;
    for (Group& candidate : groups)
      if (candidate.device == params[i].device() && candidate.dtype == params[i].dtype() && candidate.step == step)
        g = &candidate;
    if (g == nullptr) g = &groups.emplace_back(Group{params[i].device(), params[i].dtype(), step, {}});
    g->members.push_back(i);
  }
  return groups;
}

// The gradient the step reads: params[i]'s, which must match it.
Tensor gradOf(const char* name, const Tensor& p, size_t i) {
  Tensor g = p.grad();
  BP_CHECK(g.device() == p.device() && g.dtype() == p.dtype() && g.sizes() == p.sizes(), name, ".step: parameter ", i,
           "'s gradient is ", g.str(), " but the parameter is ", p.str(),
           "; a gradient set with set_grad() must match its parameter");
  return g.is_contiguous() ? g : g.contiguous();
}

void checkFinite(const char* name, const char* option, double v, bool positive_or_zero = true) {
  BP_CHECK(std::isfinite(v) && (!positive_or_zero || v >= 0), name, ": option ", option,
           " must be a finite number >= 0, got ", v);
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, const char* name) : params_(std::move(params)), name_(name) {
  BP_CHECK(!params_.empty(), name_, ": got no parameters; pass the tensors to train");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    BP_CHECK(p.defined(), name_, ": parameter ", i, " is undefined");
    BP_CHECK(p.requires_grad() && p.is_leaf(), name_, ": parameter ", i, " (", p.str(),
             ") is not a leaf that requires grad; call requires_grad_() on the tensor you train (not on a result "
             "computed from it)");
    BP_CHECK(isFloatingType(p.dtype()), name_, ": parameter ", i, " has dtype ", scalarTypeName(p.dtype()),
             "; only floating tensors are trained");
    BP_CHECK(p.is_contiguous(), name_, ": parameter ", i,
             " is not contiguous; train a contiguous tensor (call .contiguous() before requires_grad_())");
    for (size_t j = 0; j < i; ++j)
      BP_CHECK(p.unsafeGetImpl() != params_[j].unsafeGetImpl(), name_, ": parameters ", j, " and ", i,
               " are the same tensor; list each parameter once");
  }
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.set_grad(Tensor());
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), "SGD"), options_(options), buffers_(params_.size()) {
  checkFinite(name_, "lr", options_.lr);
  checkFinite(name_, "momentum", options_.momentum);
  checkFinite(name_, "weight_decay", options_.weight_decay);
  checkFinite(name_, "dampening", options_.dampening, /*positive_or_zero=*/false);
  BP_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0), name_,
           ": nesterov momentum requires momentum > 0 and dampening 0 (got momentum ", options_.momentum,
           ", dampening ", options_.dampening, ")");
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  const bool momentum = options_.momentum != 0;
  // Parameters whose buffer exists step apart from those taking their
  // first momentum step (is_first_step is per call).
  auto first = [&](size_t i) -> int64_t { return momentum && !buffers_[i].defined() ? 1 : 0; };
  for (const Group& g : groupWithGrads(params_, first)) {
    std::vector<Tensor> ps, grads, bufs;
    for (size_t i : g.members) {
      ps.push_back(params_[i]);
      grads.push_back(gradOf(name_, params_[i], i));
      if (momentum) {
        if (!buffers_[i].defined()) buffers_[i] = empty_like(params_[i]);
        bufs.push_back(buffers_[i]);
      }
    }
    _fused_sgd_(ps, grads, bufs, options_.weight_decay, options_.momentum, options_.lr, options_.dampening,
                options_.nesterov, options_.maximize, /*is_first_step=*/g.step == 1);
  }
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), "AdamW"), options_(options), state_(params_.size()) {
  checkFinite(name_, "lr", options_.lr);
  checkFinite(name_, "eps", options_.eps);
  checkFinite(name_, "weight_decay", options_.weight_decay);
  for (auto [option, beta] : {std::pair{"beta1", options_.beta1}, std::pair{"beta2", options_.beta2}})
    BP_CHECK(std::isfinite(beta) && beta >= 0 && beta < 1, name_, ": option ", option, " must be in [0, 1), got ",
             beta);
}

void AdamW::step() {
  autograd::NoGradGuard no_grad;
  for (const Group& g : groupWithGrads(params_, [&](size_t i) { return state_[i].step; })) {
    std::vector<Tensor> ps, grads, m, v, vmax;
    for (size_t i : g.members) {
      State& s = state_[i];
      if (s.step == 0) {
        s.exp_avg = zeros_like(params_[i]);
        s.exp_avg_sq = zeros_like(params_[i]);
        if (options_.amsgrad) s.max_exp_avg_sq = zeros_like(params_[i]);
      }
      ++s.step;
      ps.push_back(params_[i]);
      grads.push_back(gradOf(name_, params_[i], i));
      m.push_back(s.exp_avg);
      v.push_back(s.exp_avg_sq);
      if (options_.amsgrad) vmax.push_back(s.max_exp_avg_sq);
    }
    _fused_adamw_(ps, grads, m, v, vmax, g.step + 1, options_.lr, options_.beta1, options_.beta2, options_.weight_decay,
                  options_.eps, options_.amsgrad, options_.maximize);
  }
}

}  // namespace backplane::optim
