// A plugin with deliberately faulty kernels, built like a vendor's plugin
// (SDK headers only), for the tests of `backplane conformance` itself. It
// registers device type "faulty" (two devices over host memory: the device
// API checks pass and every op it lacks runs through the CPU fallback) and
// kernels the runner must catch:
//   add.out  subtracts (a wrong result: reported as fail with the error)
//   neg.out  right (self - 2 * self) except on a float32 self of shape
//            [0, 5] written into another tensor (the sample "empty [0,5]
//            float32" of the functional and out= forms, not the in-place
//            one), where it dies of SIGSEGV: reported as a crash of exactly
//            that form and sample, and the run goes on with the next form;
//            on device 1 it is wrong instead (self - 3 * self): a run with
//            --device 1 must report it as fail, one on device 0 must not
//   abs.out  never returns (reported as a crash after --timeout, naming the
//            form and sample that hung)
//   sign.out fails with a hostile message: bytes that are not UTF-8, an ANSI
//            colour sequence and 1 MiB of text, which every report must
//            keep well-formed and cap (Note [Report text])
//   exp, exp_, sqrt.out
//            two entries that disagree: the boxed one declines every call
//            (so the host serves it where it would have gone without this
//            kernel, rightly), the typed one returns self unchanged (for
//            sqrt.out, instead of out). Called boxed they pass; called typed,
//            as applications call them, they are wrong (Note [Typed calls in
//            conformance] in runner.cc). sqrt's other forms, composites that
//            call sqrt.out typed, are wrong too
// It lands outside the default plugin directory: only tests that pass
// --plugin load it.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backplane/plugin.hpp"

namespace {

class HostMemory : public bp::DeviceBackend {
 public:
  int deviceCount() override { return 2; }
  bool hostAccessible() override { return true; }
  // An impossible size is BP_RESOURCE_EXHAUSTED (malloc, not operator new:
  // under AddressSanitizer a failing operator new aborts the process).
  void* allocate(int, size_t n) override {
    if (n == 0) return nullptr;
    void* p = std::malloc(n);
    if (!p) bp::fail(BP_RESOURCE_EXHAUSTED, "faulty: cannot allocate " + std::to_string(n) + " bytes");
    return p;
  }
  void deallocate(int, void* p) override { std::free(p); }
  void copyHostToDevice(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToHost(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToDevice(int, void* d, int, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void memset(int, void* d, uint8_t v, size_t n) override { std::memset(d, v, n); }
};

bp::Tensor subtractingAdd(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha,
                          const bp::Tensor& out) {
  // "sub.out": a name without a namespace is a standard operator's.
  static const bp::Operator sub = bp::Operator::find("sub.out");
  return sub.call(self, other, alpha, out);
}

bp::Tensor crashingNeg(const bp::Tensor& self, const bp::Tensor& out) {
  const bool empty_0x5 = self.dim() == 2 && self.size(0) == 0 && self.size(1) == 5;
  if (empty_0x5 && self.dtype() == bp::ScalarType::Float32 && out.get() != self.get()) std::raise(SIGSEGV);
  static const bp::Operator sub = bp::Operator::find("sub.out");
  return sub.call(self, self, bp::Scalar(int64_t{self.device().index == 1 ? 3 : 2}), out);
}

bp::Tensor hangingAbs(const bp::Tensor&, const bp::Tensor& out) {
  for (;;) ::pause();
  return out;
}

bp::Tensor decliningExp(const bp::Tensor&) { bp::decline("faulty: exp is computed by its typed entry"); }
bp::Tensor decliningSqrtOut(const bp::Tensor&, const bp::Tensor&) {
  bp::decline("faulty: sqrt.out is computed by its typed entry");
}

// The typed entries of exp and exp_ (a Tensor(Tensor) kernel's C type,
// Note [Typed kernel entries]): self, unchanged.
BP_Error* unchangedSelfTyped(void*, const BP_Operator*, uint64_t, BP_Tensor* self, BP_Tensor** ret) {
  *ret = bp::host().tensor_retain(self);
  return nullptr;
}
// sqrt.out's (Tensor(Tensor, Tensor)): self instead of out.
BP_Error* selfForOutTyped(void*, const BP_Operator*, uint64_t, BP_Tensor* self, BP_Tensor*, BP_Tensor** ret) {
  *ret = bp::host().tensor_retain(self);
  return nullptr;
}

// `boxed` as the boxed entry, `typed` as the typed one.
bp::Kernel disagreeing(bp::Kernel boxed, void* typed) {
  boxed.typed_fn = reinterpret_cast<BP_TypedKernelFn>(typed);
  return boxed;
}

bp::Tensor hostileSign(const bp::Tensor&, const bp::Tensor&) {
  bp::fail(BP_INVALID_ARGUMENT, "faulty: sign \xff\xfe \x1b[31mred\x1b[0m " + std::string(size_t{1} << 20, 'x'));
}

void init(bp::Library& m) {
  static HostMemory backend;
  const int32_t faulty = m.registerDevice("faulty", &backend);
  m.impl("bp::add.out", faulty, &subtractingAdd);
  m.impl("bp::neg.out", faulty, &crashingNeg);
  m.impl("bp::abs.out", faulty, &hangingAbs);
  m.impl("bp::sign.out", faulty, &hostileSign);
  m.impl("bp::exp", faulty, disagreeing(bp::kernel<&decliningExp>(), reinterpret_cast<void*>(&unchangedSelfTyped)));
  m.impl("bp::exp_", faulty, disagreeing(bp::kernel<&decliningExp>(), reinterpret_cast<void*>(&unchangedSelfTyped)));
  m.impl("bp::sqrt.out", faulty,
         disagreeing(bp::kernel<&decliningSqrtOut>(), reinterpret_cast<void*>(&selfForOutTyped)));
}

}  // namespace

BACKPLANE_PLUGIN("faulty_test_plugin", "0.1.0-test", init)
