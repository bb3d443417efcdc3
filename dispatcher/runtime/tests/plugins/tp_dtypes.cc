// tp_dtypes: a C++ SDK plugin whose kernels declare the dtypes they serve
// (bp::Dtypes, BP_KernelDesc.dtypes, ABI 1.5) or decline calls at run time
// (bp::decline, ABI 1.7), for plugin_dtypes_test.cc.
// Device type "tpdtdev": one device of host memory. Operators:
//   tpdt::twice(Tensor self) -> Tensor       cpu: every dtype;
//                                            tpdtdev: float32 only (impl)
//   tpdt::cat_sum(Tensor[] xs) -> Tensor     cpu: every dtype;
//                                            tpdtdev: float32, float16
//                                            (implWhenDefined)
//   tpdt::small(Tensor self) -> Tensor       cpu: every tensor;
//                                            tpdtdev: at most 4 elements,
//                                            declines bigger ones
//   tpdt::nocpu(Tensor self) -> Tensor       tpdtdev only: declines
//                                            everything
//   tpdt::info(int which) -> int             cpu: 0 calls of the tpdtdev
//                                            twice kernel, 1 of the cpu one,
//                                            2 of tpdtdev cat_sum, 3 of cpu
//                                            cat_sum, 4 of tpdtdev small
//                                            (served), 5 of cpu small
// The kernels only count and return their first tensor argument (a new
// tensor of its shape and dtype on its device): what the test checks is
// which kernel ran.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include <backplane/plugin.hpp>

namespace {

std::atomic<int64_t> g_calls[6];

class HostMemory final : public bp::DeviceBackend {
 public:
  int deviceCount() override { return 1; }
  bool hostAccessible() override { return true; }
  void* allocate(int, size_t nbytes) override { return std::malloc(nbytes ? nbytes : 1); }
  void deallocate(int, void* p) override { std::free(p); }
  void copyHostToDevice(int, void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copyDeviceToHost(int, void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copyDeviceToDevice(int, void* dst, int, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void memset(int, void* dst, uint8_t value, size_t n) override { std::memset(dst, value, n); }
};
HostMemory g_backend;

bp::Tensor like(const bp::Tensor& t) { return bp::Tensor::empty(t.sizes(), t.dtype(), t.device()); }

bp::Tensor twiceDev(const bp::Tensor& self) {
  BP_PLUGIN_CHECK(self.dtype() == bp::ScalarType::Float32, "tpdt::twice on tpdtdev declared float32 only, got ",
                  bp::name(self.dtype()));
  ++g_calls[0];
  return like(self);
}
bp::Tensor twiceCpu(const bp::Tensor& self) {
  ++g_calls[1];
  return like(self);
}
bp::Tensor catSumDev(const std::vector<bp::Tensor>& xs) {
  for (const bp::Tensor& x : xs)
    BP_PLUGIN_CHECK(x.dtype() == bp::ScalarType::Float32 || x.dtype() == bp::ScalarType::Float16,
                    "tpdt::cat_sum on tpdtdev declared float32 and float16 only");
  ++g_calls[2];
  return like(xs[0]);
}
bp::Tensor catSumCpu(const std::vector<bp::Tensor>& xs) {
  ++g_calls[3];
  return like(xs[0]);
}
bp::Tensor smallDev(const bp::Tensor& self) {
  if (self.numel() > 4) bp::decline("tpdtdev serves at most 4 elements");
  ++g_calls[4];
  return like(self);
}
bp::Tensor smallCpu(const bp::Tensor& self) {
  ++g_calls[5];
  return like(self);
}
bp::Tensor nocpuDev(const bp::Tensor&) { bp::decline("tpdt::nocpu declines every call"); }
int64_t info(int64_t which) { return which >= 0 && which < 6 ? g_calls[which].load() : -1; }

void init(bp::Library& m) {
  const int32_t dev = m.registerDevice("tpdtdev", &g_backend);
  m.def("tpdt::twice(Tensor self) -> Tensor");
  m.def("tpdt::cat_sum(Tensor[] xs) -> Tensor");
  m.def("tpdt::small(Tensor self) -> Tensor");
  m.def("tpdt::nocpu(Tensor self) -> Tensor");
  m.def("tpdt::info(int which) -> int");
  m.impl("tpdt::twice", 0, &twiceCpu);
  m.impl("tpdt::twice", dev, &twiceDev, {bp::ScalarType::Float32});
  m.impl("tpdt::cat_sum", 0, &catSumCpu);
  m.implWhenDefined("tpdt::cat_sum", dev, bp::kernel<&catSumDev>(),
                    bp::Dtypes{bp::ScalarType::Float32, bp::ScalarType::Float16});
  m.impl("tpdt::small", 0, &smallCpu);
  m.impl("tpdt::small", dev, &smallDev);
  m.impl("tpdt::nocpu", dev, &nocpuDev);
  m.impl("tpdt::info", 0, &info);
}

}  // namespace

BACKPLANE_PLUGIN("tp_dtypes", "0.0.1", init)
