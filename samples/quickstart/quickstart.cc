// quickstart: define an operator, register a CPU kernel, call it on the CPU
// and on a device without a kernel for it (the CPU fallback runs it).
#include <cstdio>
#include <vector>

#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "test_device.h"

using namespace backplane;

// out[i] = self[i] * factor, for float32 tensors of any layout.
Tensor scale_cpu(const Tensor& self, double factor) {
  BP_CHECK(self.dtype() == ScalarType::Float32, "demo::scale supports float32, got ", scalarTypeName(self.dtype()));
  Tensor in = self.contiguous();
  Tensor out = emptyTensor(self.sizes(), self.dtype(), self.device());
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = static_cast<float>(src[i] * factor);
  return out;
}

int run() {
  Library lib("demo");
  throwIfError(lib.def("scale(Tensor self, float factor) -> Tensor"));
  throwIfError(lib.impl("scale", DispatchKey::CPU, BP_FN(scale_cpu)));

  auto scale = Dispatcher::singleton().findOpOrThrow("demo::scale").typed<Tensor(const Tensor&, double)>();
  Tensor x = tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = scale.call(x.t(), 10.0);  // a transposed view: no copy before the call
  std::printf("cpu:      scale(x.t(), 10) = %s -> [", y.str().c_str());
  for (float v : y.toVector<float>()) std::printf(" %g", v);
  std::printf(" ]\n");

  // A device whose memory the host cannot read, with no kernel for scale.
  auto& dev = testing::TestDevice::install("testdev", 1);
  Tensor xd = tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, dev.device(0));
  Tensor yd = scale.call(xd.t(), 10.0);
  std::printf("testdev:  scale(x.t(), 10) = %s -> [", yd.str().c_str());
  for (float v : yd.toVector<float>()) std::printf(" %g", v);
  std::printf(" ]\n");
  const auto& op = Dispatcher::singleton().findOpOrThrow("demo::scale");
  std::printf("testdev ran demo::scale via %s: %llu call(s), %llu bytes copied\n",
              kernelKindName(op.kernelKind(backendKey(dev.type()))),
              static_cast<unsigned long long>(op.fallbackCalls(backendKey(dev.type()))),
              static_cast<unsigned long long>(op.fallbackBytes(backendKey(dev.type()))));
  bool same = y.toVector<float>() == yd.toVector<float>();
  std::printf("results match: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}

int main() {
  try {
    return run();
  } catch (const Error& e) {
    std::fprintf(stderr, "quickstart: error: %s\n", e.what());
    return 1;
  }
}
