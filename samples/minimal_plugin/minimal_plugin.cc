// The smallest complete Backplane plugin: a device type "minimal" whose
// memory is host memory, one native kernel (relu.out, for float32), and
// everything else, other dtypes included, through the host's CPU fallback.
// It passes `backplane conformance --plugin minimal_plugin.so --backend minimal`.
#include <backplane/plugin.hpp>

// The device: bp::HostMemoryBackend allocates, copies and fills host memory.
struct MinimalBackend final : bp::HostMemoryBackend {
  int deviceCount() override { return 1; }
};

// bp::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!). The host has
// run relu's shape rule: `out` has self's shape and device. Either may be a
// strided view, and in place (relu_) they are one tensor: bp::forEach walks
// any layout. NaN stays NaN (NaN < 0 is false).
bp::Tensor reluOut(const bp::Tensor& self, const bp::Tensor& out) {
  bp::forEach<float>(out, self, [](float x) { return x < 0 ? 0.0f : x; });
  return out;
}

void init(bp::Library& m) {
  static MinimalBackend backend;  // must outlive the plugin
  const int32_t minimal = m.registerDevice("minimal", &backend);
  // Served for float32 only: calls with other dtypes go to the CPU fallback.
  m.impl("relu.out", minimal, &reluOut, {bp::ScalarType::Float32});
}

BACKPLANE_PLUGIN("minimal", "1.0.0", init)
