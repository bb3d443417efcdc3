// _backplane: the extension module behind the Python package `backplane`
// (python/backplane/__init__.py re-exports it). Built with nanobind over the
// app API of libbackplane.so; see docs/python.md.
#include "bindings.h"

NB_MODULE(_backplane, m) {
  using namespace backplane::python;
  m.doc() = "Backplane's extension module; import `backplane`, not this.";
  // The dtype objects and operator packets live as long as the process (the
  // module's globals and Tensor's methods hold them); nanobind's report of
  // instances alive at exit would list them every time.
  nanobind::set_leak_warnings(false);
  bindErrors(m);
  bindTensor(m);
  bindOps(m);
  bindRuntime(m);
  bindProfiler(m);
  bindTensorData(m);
  bindDLPack(m);
  bindStreams(m);
  bindRandom(m);
  bindAutograd(m);
  bindDistributed(m);
}
