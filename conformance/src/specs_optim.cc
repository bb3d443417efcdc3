// Conformance specs of the optim family: _fused_sgd_ and _fused_adamw_
// (Note [Conformance specs], Note [Optimizer ops]).
//
// An optimizer op returns nothing: what it certifies is what each listed
// parameter and each state tensor holds after the call (Expected::argument
// and Expected::element). The references are torch.optim.SGD's and
// torch.optim.AdamW's step in double; a 16-bit parameter's state is stored
// rounded to its dtype while the step itself uses the unrounded value, as
// the kernels, which compute in float32, do.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"

namespace backplane::conformance {
namespace {

using Sizes = std::vector<int64_t>;

// The parameters of a sample: a matrix, a vector, a 0-d tensor and an
// empty one (a list mixes them, as a model's parameters do).
const std::vector<Sizes> kShapes = {{3, 4}, {5}, {}, {0}};

std::vector<TensorBase> randomList(Rng& rng, ScalarType dt, Range range, size_t count = kShapes.size()) {
  std::vector<TensorBase> list;
  for (size_t i = 0; i < count; ++i) list.push_back(randomTensor(rng, kShapes[i], dt, range));
  return list;
}

std::vector<TensorBase> listOf(const IValue& v) { return v.toTensorList(); }

// What list argument `argument` must hold at position `element` after the call.
Expected after(int argument, int element, const Tensor& like, const std::vector<double>& values) {
  Expected e;
  e.argument = argument;
  e.element = element;
  e.sizes = sizesOf(like);
  e.dtype = like.dtype();
  for (double v : values) e.values.push_back(roundTo(like.dtype(), v));
  return e;
}

// --- _fused_sgd_(self, grads, momentum_buffer_list, *, weight_decay,
//     momentum, lr, dampening, nesterov, maximize, is_first_step)

struct Sgd {
  double weight_decay = 0, momentum = 0, lr = 0.1, dampening = 0;
  bool nesterov = false, maximize = false, is_first_step = false;
};

std::vector<IValue> sgdArgs(std::vector<TensorBase> params, std::vector<TensorBase> grads,
                            std::vector<TensorBase> buffers, const Sgd& h) {
  return {std::move(params), std::move(grads), std::move(buffers), h.weight_decay, h.momentum, h.lr,
          h.dampening,       h.nesterov,       h.maximize,         h.is_first_step};
}

std::vector<Sample> sgdSamples() {
  Rng rng(seedFor("bp::_fused_sgd_"));
  std::vector<Sample> out;
  auto add = [&](std::string name, ScalarType dt, const Sgd& h) {
    std::vector<TensorBase> buffers = h.momentum != 0 ? randomList(rng, dt, {-1, 1}) : std::vector<TensorBase>{};
    std::vector<TensorBase> params = randomList(rng, dt, {});
    out.push_back(makeSample(std::move(name) + dtypeSuffix(dt),
                             sgdArgs(std::move(params), randomList(rng, dt, {}), std::move(buffers), h)));
  };
  for (ScalarType dt : kFloatTypes) add("plain step", dt, Sgd{});
  const ScalarType f32 = ScalarType::Float32;
  add("weight decay 0.01", f32, Sgd{.weight_decay = 0.01});
  add("maximize", f32, Sgd{.maximize = true});
  for (ScalarType dt : kFloatTypes) add("momentum 0.9, dampening 0.1", dt, Sgd{.momentum = 0.9, .dampening = 0.1});
  add("momentum 0.9, first step (the buffer becomes the gradient)", f32,
      Sgd{.momentum = 0.9, .dampening = 0.1, .is_first_step = true});
  add("nesterov, momentum 0.9, weight decay 0.01", f32, Sgd{.weight_decay = 0.01, .momentum = 0.9, .nesterov = true});
  add("nesterov, maximize, first step", ScalarType::Float64,
      Sgd{.momentum = 0.5, .nesterov = true, .maximize = true, .is_first_step = true});
  add("lr 0 (nothing moves but the buffers)", f32, Sgd{.momentum = 0.9, .lr = 0});

  std::vector<TensorBase> p = randomList(rng, f32, {}, 2);
  std::vector<TensorBase> g = randomList(rng, f32, {}, 2);
  auto raise = [&](std::string name, std::vector<IValue> args, std::string reason) {
    out.push_back(raising(std::move(name), std::move(args), std::move(reason)));
  };
  raise("no parameters", sgdArgs({}, {}, {}, Sgd{}), "'self' is empty");
  raise("fewer gradients than parameters", sgdArgs(p, {g[0]}, {}, Sgd{}), "one gradient per parameter");
  raise("a gradient of another shape", sgdArgs(p, {g[1], g[0]}, {}, Sgd{}), "shapes must match");
  raise("a float64 gradient for a float32 parameter",
        sgdArgs(p, {g[0], hostTensor(valuesOf(Tensor(g[1])), {5}, ScalarType::Float64)}, {}, Sgd{}),
        "dtypes must match");
  raise("int64 parameters",
        sgdArgs({randomTensor(rng, {3}, ScalarType::Int64)}, {randomTensor(rng, {3}, ScalarType::Int64)}, {}, Sgd{}),
        "optimizers update floating parameters");
  raise("a transposed parameter",
        sgdArgs({randomTensor(rng, {4, 3}, f32).transpose(0, 1)}, {randomTensor(rng, {3, 4}, f32)}, {}, Sgd{}),
        "parameters must be contiguous");
  raise("momentum without buffers", sgdArgs(p, g, {}, Sgd{.momentum = 0.9}), "one momentum buffer per parameter");
  raise("nesterov with dampening",
        sgdArgs(p, g, randomList(rng, f32, {}, 2), Sgd{.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
        "nesterov needs dampening 0");
  raise("negative lr", sgdArgs(p, g, {}, Sgd{.lr = -0.1}), "lr must be >= 0");
  raise("NaN weight decay", sgdArgs(p, g, {}, Sgd{.weight_decay = std::nan("")}), "weight_decay must be finite");
  return out;
}

std::vector<Expected> sgdReference(const Sample& s) {
  const std::vector<TensorBase> params = listOf(s.args[0]);
  const std::vector<TensorBase> grads = listOf(s.args[1]);
  const std::vector<TensorBase> buffers = listOf(s.args[2]);
  const double weight_decay = s.args[3].toDouble(), momentum = s.args[4].toDouble(), lr = s.args[5].toDouble();
  const double dampening = s.args[6].toDouble();
  const bool nesterov = s.args[7].toBool(), maximize = s.args[8].toBool(), first = s.args[9].toBool();
  std::vector<Expected> want;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> p = valuesOf(Tensor(params[i]));
    const std::vector<double> g0 = valuesOf(Tensor(grads[i]));
    std::vector<double> b = momentum != 0 ? valuesOf(Tensor(buffers[i])) : std::vector<double>(p.size());
    for (size_t k = 0; k < p.size(); ++k) {
      double g = maximize ? -g0[k] : g0[k];
      g += weight_decay * p[k];
      if (momentum != 0) {
        b[k] = first ? g : momentum * b[k] + (1 - dampening) * g;
        g = nesterov ? g + momentum * b[k] : b[k];
      }
      p[k] -= lr * g;
    }
    want.push_back(after(0, static_cast<int>(i), Tensor(params[i]), p));
    if (momentum != 0) want.push_back(after(2, static_cast<int>(i), Tensor(buffers[i]), b));
  }
  return want;
}

// --- _fused_adamw_(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *,
//     step, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize)

struct AdamW {
  int64_t step = 3;
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, weight_decay = 1e-2, eps = 1e-8;
  bool amsgrad = false, maximize = false;
};

std::vector<IValue> adamwArgs(std::vector<TensorBase> params, std::vector<TensorBase> grads, std::vector<TensorBase> m,
                              std::vector<TensorBase> v, std::vector<TensorBase> vmax, const AdamW& h) {
  return {std::move(params), std::move(grads), std::move(m),   std::move(v), std::move(vmax), h.step,    h.lr,
          h.beta1,           h.beta2,          h.weight_decay, h.eps,        h.amsgrad,       h.maximize};
}

std::vector<Sample> adamwSamples() {
  Rng rng(seedFor("bp::_fused_adamw_"));
  std::vector<Sample> out;
  // The second moments are positive; with amsgrad each maximum starts
  // either side of the new moment, so both branches of the max are taken.
  auto add = [&](std::string name, ScalarType dt, const AdamW& h) {
    std::vector<TensorBase> params = randomList(rng, dt, {});
    std::vector<TensorBase> grads = randomList(rng, dt, {});
    std::vector<TensorBase> m = randomList(rng, dt, {-1, 1});
    std::vector<TensorBase> v = randomList(rng, dt, {0, 1});
    std::vector<TensorBase> vmax = h.amsgrad ? randomList(rng, dt, {0, 2}) : std::vector<TensorBase>{};
    out.push_back(
        makeSample(std::move(name) + dtypeSuffix(dt),
                   adamwArgs(std::move(params), std::move(grads), std::move(m), std::move(v), std::move(vmax), h)));
  };
  for (ScalarType dt : kFloatTypes) add("step 3", dt, AdamW{});
  const ScalarType f32 = ScalarType::Float32;
  add("step 1 (bias corrections at their largest)", f32, AdamW{.step = 1});
  add("step 1000, no weight decay", f32, AdamW{.step = 1000, .weight_decay = 0});
  for (ScalarType dt : kFloatTypes) add("amsgrad", dt, AdamW{.amsgrad = true});
  add("maximize, betas 0.5 0.75, eps 0.1", f32, AdamW{.beta1 = 0.5, .beta2 = 0.75, .eps = 0.1, .maximize = true});
  add("beta1 0 (no first moment)", ScalarType::Float64, AdamW{.beta1 = 0});

  std::vector<TensorBase> p = randomList(rng, f32, {}, 2);
  std::vector<TensorBase> g = randomList(rng, f32, {}, 2);
  std::vector<TensorBase> m = randomList(rng, f32, {}, 2);
  std::vector<TensorBase> v = randomList(rng, f32, {0, 1}, 2);
  auto raise = [&](std::string name, std::vector<IValue> args, std::string reason) {
    out.push_back(raising(std::move(name), std::move(args), std::move(reason)));
  };
  raise("step 0", adamwArgs(p, g, m, v, {}, AdamW{.step = 0}), "steps count from 1");
  raise("beta1 1", adamwArgs(p, g, m, v, {}, AdamW{.beta1 = 1}), "beta1 must be in [0, 1)");
  raise("negative eps", adamwArgs(p, g, m, v, {}, AdamW{.eps = -1e-8}), "eps must be >= 0");
  raise("fewer first moments than parameters", adamwArgs(p, g, {m[0]}, v, {}, AdamW{}), "one state per parameter");
  raise("a second moment of another shape", adamwArgs(p, g, m, {v[1], v[0]}, {}, AdamW{}), "shapes must match");
  raise("amsgrad without maxima", adamwArgs(p, g, m, v, {}, AdamW{.amsgrad = true}), "one maximum per parameter");
  raise("maxima without amsgrad", adamwArgs(p, g, m, v, v, AdamW{}), "no maxima without amsgrad");
  return out;
}

std::vector<Expected> adamwReference(const Sample& s) {
  const std::vector<TensorBase> params = listOf(s.args[0]);
  const std::vector<TensorBase> grads = listOf(s.args[1]);
  const std::vector<TensorBase> ms = listOf(s.args[2]);
  const std::vector<TensorBase> vs = listOf(s.args[3]);
  const std::vector<TensorBase> vmaxs = listOf(s.args[4]);
  const double step = static_cast<double>(s.args[5].toInt());
  const double lr = s.args[6].toDouble(), beta1 = s.args[7].toDouble(), beta2 = s.args[8].toDouble();
  const double weight_decay = s.args[9].toDouble(), eps = s.args[10].toDouble();
  const bool amsgrad = s.args[11].toBool(), maximize = s.args[12].toBool();
  const double step_size = lr / (1 - std::pow(beta1, step));
  const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, step));
  std::vector<Expected> want;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> p = valuesOf(Tensor(params[i]));
    const std::vector<double> g0 = valuesOf(Tensor(grads[i]));
    std::vector<double> m = valuesOf(Tensor(ms[i]));
    std::vector<double> v = valuesOf(Tensor(vs[i]));
    std::vector<double> vmax = amsgrad ? valuesOf(Tensor(vmaxs[i])) : std::vector<double>();
    for (size_t k = 0; k < p.size(); ++k) {
      const double g = maximize ? -g0[k] : g0[k];
      m[k] = beta1 * m[k] + (1 - beta1) * g;
      v[k] = beta2 * v[k] + (1 - beta2) * g * g;
      double second = v[k];
      if (amsgrad) second = vmax[k] = std::max(vmax[k], v[k]);
      p[k] = p[k] * (1 - lr * weight_decay) - step_size * m[k] / (std::sqrt(second) / bias_correction2_sqrt + eps);
    }
    const int element = static_cast<int>(i);
    want.push_back(after(0, element, Tensor(params[i]), p));
    want.push_back(after(2, element, Tensor(ms[i]), m));
    want.push_back(after(3, element, Tensor(vs[i]), v));
    if (amsgrad) want.push_back(after(4, element, Tensor(vmaxs[i]), vmax));
  }
  return want;
}

}  // namespace

void addOptimSpecs(std::vector<OpSpec>& specs) {
  OpSpec sgd;
  sgd.op = "bp::_fused_sgd_";
  sgd.family = "optim";
  sgd.samples = sgdSamples;
  sgd.reference = sgdReference;
  specs.push_back(std::move(sgd));
  OpSpec adamw;
  adamw.op = "bp::_fused_adamw_";
  adamw.family = "optim";
  adamw.samples = adamwSamples;
  adamw.reference = adamwReference;
  specs.push_back(std::move(adamw));
}

}  // namespace backplane::conformance
