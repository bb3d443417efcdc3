// A device type with no kernels at all, for the Python tests: "nokernels",
// one device whose memory is host memory (bp::HostMemoryBackend). Every
// operator called on it runs through the host's CPU fallback (Note [CPU
// fallback]), so the tests that run on it and on the CPU check that the
// fallback gives the CPU's results from Python: arguments staged, outputs
// written back, results returned on the calling device. Built outside the
// default plugin directory: only python/tests/conftest.py loads it.
#include <backplane/plugin.hpp>

namespace {

struct NoKernelsBackend final : bp::HostMemoryBackend {
  int deviceCount() override { return 1; }
};

void init(bp::Library& m) {
  static NoKernelsBackend backend;  // must outlive the plugin
  m.registerDevice("nokernels", &backend);
}

}  // namespace

BACKPLANE_PLUGIN("nokernels", "1.0.0", init)
