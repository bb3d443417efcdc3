// The example of docs/autograd.md: fits y = 3x - 1 by gradient descent with
// autograd, on the device the command line names; built and run as a test.
#include <cmath>
#include <iostream>

#include "backplane/backplane.h"  // autograd/, ops/, runtime/
using namespace backplane;

// A custom function: forward and backward written by hand.
struct ScaleBy : autograd::Function<ScaleBy> {
  static Tensor forward(autograd::AutogradContext& ctx, const Tensor& x, double c) {
    ctx.saved_data["c"] = c;
    return x * c;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext& ctx, std::vector<Tensor> grads) {
    return {grads[0] * ctx.saved_data["c"], Tensor()};  // one per forward argument
  }
};

int main(int argc, char** argv) {
  try {
    Runtime rt;
    Device dev = rt.device(argc > 1 ? argv[1] : "auto");
    manualSeed(0);
    Tensor x = randn({64, 1}, {.device = dev});
    Tensor y = x * 3 - 1;                                        // data: no gradient
    Tensor w = zeros({1, 1}, {.device = dev}).requires_grad_();  // leaves
    Tensor b = zeros({1}, {.device = dev}).requires_grad_();
    double loss_value = 0;
    for (int step = 0; step < 200; ++step) {
      Tensor pred = ScaleBy::apply(linear(x, w, b), 1.0);
      Tensor loss = (pred - y).pow(2).mean();
      loss.backward();  // w.grad(), b.grad()
      {
        autograd::NoGradGuard no_grad;  // the update must not be recorded
        w.sub_(w.grad() * 0.1);
        b.sub_(b.grad() * 0.1);
      }
      w.set_grad(Tensor());
      b.set_grad(Tensor());
      loss_value = loss.item<double>();
      if (step % 50 == 0) std::cout << "step " << step << " loss " << loss_value << "\n";
    }
    std::cout << "w " << w.item<double>() << " b " << b.item<double>() << "\n";
    return std::abs(w.item<double>() - 3) < 1e-3 && std::abs(b.item<double>() + 1) < 1e-3 ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "autograd_example: " << e.what() << "\n";
    return 1;
  }
}
