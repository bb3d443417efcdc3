// backplane.distributed's native half (python/backplane/distributed.py is
// the module users import): process groups, the world's key-value store and
// DistributedDataParallel (docs/collectives.md). Calls that wait for other
// ranks release the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/distributed_data_parallel.h"
#include "backplane/runtime/process_group.h"
#include "backplane/runtime/store.h"
#include "bindings.h"

namespace backplane::python {

void bindDistributed(nb::module_& m) {
  nb::class_<comm::Group>(m, "_Group", "A process group (backplane/runtime/process_group.h).")
      .def_prop_ro("id", &comm::Group::id)
      .def_prop_ro("rank", &comm::Group::rank)
      .def_prop_ro("size", &comm::Group::size)
      .def_prop_ro("world_ranks", &comm::Group::worldRanks)
      .def_prop_ro("timeout", &comm::Group::timeoutSeconds)
      .def("__repr__", &comm::Group::describe)
      .def("__eq__", [](const comm::Group& a, const comm::Group& b) { return a == b; });
  m.def("_world", [] { return comm::world(); });
  m.def(
      "_new_group",
      [](const std::vector<int>& ranks, double timeout) {
        return valueOrThrow(comm::newGroup(ranks, {.timeout_seconds = timeout}));
      },
      nb::arg("ranks"), nb::arg("timeout") = 0.0);
  m.def("_find_group", [](int64_t id) { return valueOrThrow(comm::findGroup(id)); });

  m.def("_store_set", [](const std::string& key, nb::bytes value) {
    const std::string v(static_cast<const char*>(value.data()), value.size());
    nb::gil_scoped_release release;
    comm::worldStore().set(key, v);
  });
  m.def("_store_get", [](const std::string& key, double timeout) {
    std::string v;
    {
      nb::gil_scoped_release release;
      v = comm::worldStore().get(key, timeout);
    }
    return nb::bytes(v.data(), v.size());
  });
  m.def("_store_add", [](const std::string& key, int64_t delta) {
    nb::gil_scoped_release release;
    return comm::worldStore().add(key, delta);
  });

  using Ddp = parallel::DistributedDataParallel;
  nb::class_<Ddp>(m, "_DistributedDataParallel")
      .def(
          "__init__",
          [](Ddp* self, const std::vector<Tensor>& params, const comm::Group& group, double bucket_cap_mb,
             double first_bucket_mb) {
            nb::gil_scoped_release release;  // the constructor broadcasts the parameters
            new (self)
                Ddp(params, parallel::DdpOptions{
                                .group = group, .bucket_cap_mb = bucket_cap_mb, .first_bucket_mb = first_bucket_mb});
          },
          nb::arg("params"), nb::arg("group"), nb::arg("bucket_cap_mb"), nb::arg("first_bucket_mb"))
      .def("finish_gradient_sync",
           [](Ddp& self) {
             nb::gil_scoped_release release;
             self.finishGradientSync();
           })
      .def_prop_ro("bucket_count", &Ddp::bucketCount)
      .def("bucket_of_parameters", &Ddp::bucketOfParameters);
}

}  // namespace backplane::python
