// The application example shown in README.md ("A short application") and
// docs/apps.md ("Write an application"); built and run as a test so it stays true.
#include <iostream>

#include "backplane/backplane.h"  // runtime/, ops/, profiler, dlpack
using namespace backplane;

int main(int argc, char** argv) {
  try {
    Runtime rt;                                           // loads the plugins
    Device dev = rt.device(argc > 1 ? argv[1] : "auto");  // "cuda:0", "cpu", "auto"
    std::cout << rt.describe() << "\n";                   // devices, and why others are unavailable

    manualSeed(0);
    Tensor x = randn({8, 768}, {.device = dev});
    Tensor w = randn({768, 768}).to(dev) * 0.02;  // made on the CPU, moved
    Profiler prof;
    Tensor y = layer_norm(x.matmul(w) + x, {768}).gelu();
    std::cout << y.slice(1, 0, 4).format() << "\n" << prof.report().table();
    // Each row of a layer_norm output has mean 0 before the GELU; check one value
    // so that the test can fail.
    double mean = layer_norm(x.matmul(w) + x, {768}).mean().item<double>();
    return std::abs(mean) < 1e-4 ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "app_example: " << e.what() << "\n";
    return 1;
  }
}
