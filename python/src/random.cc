// backplane.manual_seed and backplane.initial_seed: the process-wide
// generator of rand, randn, dropout and the other random operators
// (backplane/ops/random.h), so that a Python program draws the same
// numbers as a C++ one seeded alike.
#include <Python.h>

#include <cstdint>
#include <string>

#include "backplane/ops/random.h"
#include "bindings.h"

namespace backplane::python {

void bindRandom(nb::module_& m) {
  m.def(
      "manual_seed",
      [](nb::handle seed) {
        if (!PyLong_Check(seed.ptr()) || PyBool_Check(seed.ptr())) {
          throw nb::type_error(
              ("manual_seed(): seed must be an int, not " + std::string(Py_TYPE(seed.ptr())->tp_name)).c_str());
        }
        const unsigned long long v = PyLong_AsUnsignedLongLong(seed.ptr());
        if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
          PyErr_Clear();
          throw nb::value_error(
              ("manual_seed(): seed must be in [0, 2**64), got " + std::string(nb::str(seed).c_str())).c_str());
        }
        manualSeed(static_cast<uint64_t>(v));
      },
      nb::arg("seed").none(), nb::sig("def manual_seed(seed: int) -> None"),
      "Seeds the generator of the random operators and rewinds it: the draws after manual_seed(s) repeat "
      "exactly, on every device, and match a C++ program's after backplane::manualSeed(s).");
  m.def(
      "initial_seed", []() { return defaultSeed(); },
      "The seed the random operators draw with now (PyTorch's default seed until manual_seed).");
}

}  // namespace backplane::python
