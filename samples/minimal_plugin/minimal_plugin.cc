// The minimum plugin shown in README.md ("Write a plugin"): a device type
// whose memory is host memory, and one kernel. Built and loaded by the tests.
#include <backplane/plugin.hpp>

#include <cstring>
#include <new>

class ToyBackend final : public bp::DeviceBackend {
 public:
  int deviceCount() override { return 1; }
  bool hostAccessible() override { return true; }
  void* allocate(int, size_t n) override { return ::operator new(n); }
  void deallocate(int, void* p) override { ::operator delete(p); }
  void copyHostToDevice(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToHost(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToDevice(int, void* d, int, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void memset(int, void* d, uint8_t v, size_t n) override { std::memset(d, v, n); }
};

// minimal::add(Tensor a, Tensor b) -> Tensor; float32, same shape, contiguous.
bp::Tensor add(const bp::Tensor& a, const bp::Tensor& b) {
  BP_PLUGIN_CHECK(a.dtype() == bp::ScalarType::Float32 && b.dtype() == a.dtype(),
                  "minimal::add supports float32 only, got ", a.dtype(), " and ", b.dtype());
  BP_PLUGIN_CHECK(a.sizes() == b.sizes() && a.is_contiguous() && b.is_contiguous(),
                  "minimal::add needs contiguous tensors of one shape, got ", a.sizes(), " and ", b.sizes());
  bp::Tensor out = bp::Tensor::empty(a.sizes(), a.dtype(), a.device());
  const float* x = a.data_ptr<const float>();
  const float* y = b.data_ptr<const float>();
  float* z = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) z[i] = x[i] + y[i];
  return out;  // the host adopts the new reference
}

void init(bp::Library& m) {
  static ToyBackend backend;  // must outlive the plugin
  int32_t toy = m.registerDevice("minimal", &backend);
  m.def("minimal::add(Tensor a, Tensor b) -> Tensor");
  m.impl("minimal::add", toy, &add);
  m.impl("minimal::add", /*cpu=*/0, &add);
}

BACKPLANE_PLUGIN("minimal", "1.0.0", init)
