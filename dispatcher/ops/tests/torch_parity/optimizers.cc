// The optimizer ops (Note [Optimizer ops]) against libtorch's torch::optim
// SGD and AdamW: the same parameters and gradients, several steps, and the
// parameters compared after each. Each of Backplane's kernels takes part: the
// CPU plugin's, the GPU plugin's on the simulator, and the ops' composite (on
// a test device with no kernels, where it runs with the standard ops).
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backplane/autograd/optim.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"
#include "backplane/runtime/runtime.h"
#include "test_device.h"

namespace backplane::torch_parity {
namespace {

struct Backend {
  std::string name;
  Device device;
};

std::vector<Backend> backends() {
  static Runtime* runtime = [] {
    RuntimeOptions o;
    o.plugin_paths = {BACKPLANE_GPUSIM_PLUGIN_PATH};
    return new Runtime(o);
  }();
  static const Device composite = testing::TestDevice::install("optimdev", 1).device(0);
  return {{"cpu", Device(DeviceType::CPU)},
          {"gpusim (GPU kernel)", runtime->device("gpusim:0")},
          {"optimdev (composite)", composite}};
}

at::ScalarType torchDtype(ScalarType dt) { return dt == ScalarType::Float64 ? at::kDouble : at::kFloat; }

at::Tensor toTorch(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  at::Tensor out = at::empty(std::vector<int64_t>(c.sizes().begin(), c.sizes().end()), torchDtype(c.dtype()));
  std::memcpy(out.data_ptr(), c.data_ptr(), static_cast<size_t>(c.numel()) * c.itemsize());
  return out;
}

// max |ours - theirs| / (1 + |theirs|) over every element.
double relativeError(const Tensor& ours, const at::Tensor& theirs) {
  const std::vector<double> a = ours.cpu().toVector<double>();
  const at::Tensor b = theirs.to(at::kDouble).contiguous();
  const double* bp = b.data_ptr<double>();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - bp[i]) / (1 + std::abs(bp[i])));
  return worst;
}

// Runs `steps` steps of our optimizer (made by `ours`) and libtorch's (made
// by `theirs`) over the same parameters and the same gradients, drawn
// anew each step; fails at the first step where a parameter differs by more
// than `tolerance`.
template <class Ours, class Theirs>
void compareSteps(const std::string& what, ScalarType dt, Ours&& ours, Theirs&& theirs, double tolerance) {
  const std::vector<std::vector<int64_t>> shapes = {{7, 5}, {5}, {3, 4, 2}, {1}};
  for (const Backend& b : backends()) {
    SCOPED_TRACE(what + " on " + b.name + ", " + std::string(scalarTypeName(dt)));
    manualSeed(11);
    std::vector<Tensor> params;
    std::vector<at::Tensor> torch_params;
    for (const auto& s : shapes) {
      const Tensor p = randn(s, {.dtype = dt});
      torch_params.push_back(toTorch(p).requires_grad_());
      params.push_back(p.to(b.device).requires_grad_());
    }
    std::unique_ptr<optim::Optimizer> opt = ours(params);
    auto torch_opt = theirs(torch_params);
    for (int step = 1; step <= 5; ++step) {
      for (size_t i = 0; i < params.size(); ++i) {
        const Tensor g = randn(params[i].sizes(), {.dtype = dt});
        params[i].set_grad(g.to(b.device));
        torch_params[i].mutable_grad() = toTorch(g);
      }
      opt->step();
      torch_opt->step();
      for (size_t i = 0; i < params.size(); ++i)
        ASSERT_LE(relativeError(params[i].detach(), torch_params[i].detach()), tolerance)
            << "parameter " << i << " after step " << step;
    }
  }
}

constexpr double kFloat32Tolerance = 1e-5, kFloat64Tolerance = 1e-12;

TEST(torch_parity_optimizers, SgdWithMomentumAndWeightDecayMatchesTorch) {
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64}) {
    compareSteps(
        "SGD momentum 0.9, dampening 0.1, weight_decay 0.01", dt,
        [](std::vector<Tensor> p) {
          return std::make_unique<optim::SGD>(
              p, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
        },
        [](std::vector<at::Tensor> p) {
          return std::make_unique<torch::optim::SGD>(
              p, torch::optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01));
        },
        dt == ScalarType::Float32 ? kFloat32Tolerance : kFloat64Tolerance);
  }
}

TEST(torch_parity_optimizers, NesterovSgdMatchesTorch) {
  compareSteps(
      "SGD nesterov", ScalarType::Float64,
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1, .momentum = 0.8, .nesterov = true});
      },
      [](std::vector<at::Tensor> p) {
        return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.1).momentum(0.8).nesterov(true));
      },
      kFloat64Tolerance);
}

TEST(torch_parity_optimizers, AdamWMatchesTorch) {
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64}) {
    for (bool amsgrad : {false, true}) {
      compareSteps(
          amsgrad ? "AdamW amsgrad" : "AdamW", dt,
          [amsgrad](std::vector<Tensor> p) {
            return std::make_unique<optim::AdamW>(
                p,
                optim::AdamWOptions{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .weight_decay = 0.1, .amsgrad = amsgrad});
          },
          [amsgrad](std::vector<at::Tensor> p) {
            return std::make_unique<torch::optim::AdamW>(
                p, torch::optim::AdamWOptions(0.01).betas({0.8, 0.95}).weight_decay(0.1).amsgrad(amsgrad));
          },
          dt == ScalarType::Float32 ? kFloat32Tolerance : kFloat64Tolerance);
    }
  }
}

}  // namespace
}  // namespace backplane::torch_parity
