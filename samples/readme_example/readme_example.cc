// The example shown in docs/apps.md; built and run as a test so it stays true.
#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"

using namespace backplane;

// A CPU kernel: typed C++; the dispatcher checks it against the schema.
Tensor relu_cpu(const Tensor& self) {
  Tensor in = self.contiguous(), out = emptyTensor(self.sizes(), self.dtype());
  const float* x = in.data_ptr<float>();
  float* y = out.data_ptr<float>();
  for (int64_t i = 0; i < in.numel(); ++i) y[i] = x[i] > 0 ? x[i] : 0;
  return out;
}

int main() {
  Library lib("demo");                                                // owns the registrations
  throwIfError(lib.def("relu(Tensor self) -> Tensor"));               // schema: the op's contract
  throwIfError(lib.impl("relu", DispatchKey::CPU, BP_FN(relu_cpu)));  // kernel for one key

  auto relu = Dispatcher::singleton().findOpOrThrow("demo::relu").typed<Tensor(const Tensor&)>();
  Tensor x = tensorFromVector<float>({-1, 2, -3, 4}, {2, 2});
  Tensor y = relu.call(x.t());  // views need no kernel
  return y.toVector<float>() == std::vector<float>{0, 0, 2, 4} ? 0 : 1;
}
