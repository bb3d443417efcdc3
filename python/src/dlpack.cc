// DLPack's Python protocol over backplane/runtime/dlpack.h: Tensor.__dlpack__,
// Tensor.__dlpack_device__ and backplane.from_dlpack (Note [DLPack from
// Python]).
//
// Note [DLPack from Python]
// - Capsules. __dlpack__ returns a PyCapsule named "dltensor" holding a
//   DLManagedTensor from toDLPack (no copy; Note [DLPack mapping] says which
//   dtypes and devices). A consumer takes it by renaming the capsule
//   "used_dltensor" and later calls the tensor's deleter itself; a capsule
//   still named "dltensor" when it dies was never taken, and deletes the
//   tensor. from_dlpack does the consumer's half: it renames the capsule only
//   once fromDLPack has taken the tensor, so a refused capsule still frees it.
// - Versions. Backplane makes and takes DLPack 0.x's unversioned
//   DLManagedTensor. A consumer passing max_version >= (1, 0) gets the
//   unversioned capsule too, which the protocol allows (consumers must
//   accept it from producers that do not support the versioned one);
//   from_dlpack passes no max_version, so producers answer with the
//   unversioned one.
// - Streams (producer). For a tensor on a device with streams (cuda, hip),
//   `stream` is the consumer's stream: None or 1 (CUDA's legacy default), 2
//   (per-thread default), a stream pointer as an int, or -1 (the consumer
//   orders the work itself); for ROCm, None or 0 is the default stream. A
//   CUDA stream=0 is refused as ambiguous, as the protocol says. The
//   consumer's stream must not read the tensor before the work Backplane
//   queued for it is done; Backplane's streams are the plugin's
//   own (its default stream is a non-blocking one the app API does not
//   hand out), so the export does the simplest thing that is always
//   correct: it synchronizes the device (DeviceInterface::synchronize)
//   before returning the capsule, unless stream is -1. That blocks the host
//   until the device is idle; an event wait onto the consumer's stream would
//   not, and needs a raw-stream interop the device interface does not have.
//   A CPU tensor takes stream=None only (the protocol: devices without
//   streams accept only None); anything else is a ValueError.
// - Streams (consumer). from_dlpack asks a CUDA producer for stream=1 and
//   a ROCm one for stream=None (the legacy default stream, the only one
//   whose handle means the same to every library), then synchronizes the
//   Backplane device, whose streams do not wait for the legacy stream: after
//   that, the producer's work is done for every Backplane stream.
// - dl_device and copy (DLPack 1.0's keywords, taken with any max_version).
//   dl_device names the device the consumer wants; if it is not the
//   tensor's, __dlpack__ exports a copy on that device (the CPU, say), or
//   raises BufferError when copy=False forbids copies. copy=True always
//   exports a copy. copy=None copies only for dl_device.
// - Ownership across threads. The consumer may call the deleter of an
//   exported tensor on any thread, GIL or not: it only drops a Storage
//   (whose own deleter, for memory imported from Python, is the one below). An
//   imported tensor's storage may die on any thread too (the last view may
//   go inside an operator that runs with the GIL released), but a Python
//   producer's deleter (NumPy's decrefs the array) needs the GIL, so the
//   imported DLManagedTensor is wrapped by one whose deleter takes the GIL
//   around the producer's. After the interpreter is gone it leaks instead.
#include <Python.h>
#include <nanobind/stl/pair.h>

#include <cstring>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "backplane/core/device_type_registry.h"
#include "backplane/runtime/dlpack.h"
#include "bindings.h"

namespace backplane::python {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
constexpr const char* kVersionedCapsuleName = "dltensor_versioned";

// The capsule's destructor: deletes a tensor no consumer took.
void deleteUnconsumed(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;  // taken ("used_dltensor"): the consumer deletes it
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (m && m->deleter) m->deleter(m);
}

void synchronize(Device device) {
  nb::gil_scoped_release unlocked;
  DeviceTypeRegistry::global().interfaceOrThrow(device.type).synchronize(device);
}

std::string dlDeviceText(DLDevice d) {
  int32_t type = 0;
  std::memcpy(&type, &d.device_type, sizeof type);
  return "(" + std::to_string(type) + ", " + std::to_string(d.device_id) + ")";
}

// The exporter's DLDevice for t, or BufferError (the protocol's error for
// data that cannot be exported) saying why.
DLDevice exportDevice(const Tensor& t) {
  try {
    return toDLDevice(t.device());
  } catch (const backplane::Error& e) {
    raise(PyExc_BufferError, e.message());
  }
}

nb::object dlpack(const Tensor& self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                  nb::handle copy) {
  if (!max_version.is_none()) {
    // Any (major, minor) is fine: the unversioned capsule answers all (Note [DLPack from Python]).
    if (!PyTuple_Check(max_version.ptr()) || PyTuple_GET_SIZE(max_version.ptr()) != 2)
      raise(PyExc_TypeError,
            "__dlpack__: max_version must be a (major, minor) tuple or None, not " + typeName(max_version));
  }
  std::optional<bool> copy_flag;
  if (!copy.is_none()) {
    if (!PyBool_Check(copy.ptr()))
      raise(PyExc_TypeError, "__dlpack__: copy must be True, False or None, not " + typeName(copy));
    copy_flag = copy.ptr() == Py_True;
  }
  Tensor t = self;
  if (!dl_device.is_none()) {
    DLDevice want{kDLCPU, 0};
    int32_t type = 0;
    try {
      auto pair = nb::cast<std::pair<int32_t, int32_t>>(dl_device);
      type = pair.first;
      want.device_id = pair.second;
    } catch (const nb::cast_error&) {
      raise(PyExc_TypeError,
            "__dlpack__: dl_device must be a (device_type, device_id) tuple of ints, not " + typeName(dl_device));
    }
    std::memcpy(&want.device_type, &type, sizeof type);
    // A tensor on a device with no DLPack type (its memory means nothing
    // outside Backplane) is elsewhere whatever dl_device names.
    std::optional<DLDevice> source;
    try {
      source = toDLDevice(t.device());
    } catch (const backplane::Error&) {
    }
    if (!source || want.device_type != source->device_type || want.device_id != source->device_id) {
      if (copy_flag == false)
        raise(PyExc_BufferError, "__dlpack__: the tensor is on " + t.device().str() +
                                     (source ? " " + dlDeviceText(*source) : std::string()) + ", dl_device asks for " +
                                     dlDeviceText(want) + ", and copy=False forbids the copy that would take");
      Device target = Device();
      try {
        target = fromDLDevice(want);
      } catch (const backplane::Error& e) {
        raise(PyExc_BufferError, "__dlpack__: cannot export to dl_device " + dlDeviceText(want) + ": " + e.message());
      }
      nb::gil_scoped_release unlocked;
      t = t.to(target, /*copy=*/true);
      copy_flag = false;  // done
    }
  }
  if (copy_flag == true) {
    nb::gil_scoped_release unlocked;
    t = t.clone();
  }
  const DLDevice device = exportDevice(t);  // BufferError for a device whose memory cannot be exported
  if (t.device().isCpu()) {
    if (!stream.is_none())
      raise(PyExc_ValueError,
            "__dlpack__: stream must be None for a CPU tensor (devices without streams take only "
            "None), got " +
                std::string(nb::str(stream).c_str()));
  } else {
    int64_t s = 1;  // None: the legacy default stream
    if (!stream.is_none()) {
      if (!PyLong_Check(stream.ptr()) || PyBool_Check(stream.ptr()))
        raise(PyExc_TypeError, "__dlpack__: stream must be an int or None, not " + typeName(stream));
      int overflow = 0;
      s = PyLong_AsLongLongAndOverflow(stream.ptr(), &overflow);
      if (overflow) s = 3;  // a pointer past int64: some stream other than the special ones
    }
    if (s == 0 && device.device_type == kDLCUDA)  // ROCm's 0 is its default stream
      raise(PyExc_ValueError,
            "__dlpack__: stream=0 is ambiguous and disallowed by the DLPack protocol; pass 1 for "
            "the legacy default stream, 2 for the per-thread default stream, or the stream's "
            "handle");
    if (s != -1) synchronize(t.device());  // Note [DLPack from Python]: streams (producer)
  }
  DLManagedTensor* m = toDLPack(t);
  PyObject* capsule = PyCapsule_New(m, kCapsuleName, &deleteUnconsumed);
  if (!capsule) {
    m->deleter(m);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// ---------------------------------------------------------------- import

// An imported DLManagedTensor whose deleter takes the GIL around the
// producer's (Note [DLPack from Python]: ownership across threads).
struct ForeignTensor {
  DLManagedTensor managed;
  DLManagedTensor* producer;
};

void releaseForeign(DLManagedTensor* self) {
  auto* foreign = static_cast<ForeignTensor*>(self->manager_ctx);
  DLManagedTensor* producer = foreign->producer;
  delete foreign;
  if (producer->deleter == nullptr || !Py_IsInitialized()) return;
  PyGILState_STATE state = PyGILState_Ensure();
  producer->deleter(producer);
  PyGILState_Release(state);
}

// Takes the tensor out of a "dltensor" capsule (and renames it) or raises.
Tensor takeCapsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kUsedCapsuleName))
    raise(PyExc_ValueError,
          "from_dlpack: this DLPack capsule was already consumed (it is named 'used_dltensor'); "
          "a capsule can be imported once: ask the producer for a new one (x.__dlpack__())");
  if (PyCapsule_IsValid(c, kVersionedCapsuleName))
    raise(PyExc_BufferError,
          "from_dlpack: versioned DLPack capsules (DLPack >= 1.0, 'dltensor_versioned') are not "
          "supported yet; pass the array itself, so that from_dlpack asks it for an unversioned "
          "capsule");
  auto* producer = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kCapsuleName));
  if (!producer) {
    PyErr_Clear();
    const char* name = PyCapsule_GetName(c);
    PyErr_Clear();
    raise(PyExc_TypeError,
          std::string("from_dlpack: expected a DLPack capsule named 'dltensor', got a capsule named '") +
              (name ? name : "") + "'");
  }
  auto foreign = std::make_unique<ForeignTensor>();
  foreign->managed.dl_tensor = producer->dl_tensor;
  foreign->managed.manager_ctx = foreign.get();
  foreign->managed.deleter = &releaseForeign;
  foreign->producer = producer;
  // Throws having taken nothing: the capsule keeps its name and still frees the producer's tensor.
  Tensor t = fromDLPack(&foreign->managed);
  foreign.release();  // the storage owns it now
  if (PyCapsule_SetName(c, kUsedCapsuleName) != 0) throw nb::python_error();
  return t;
}

}  // namespace

Tensor importDLPack(nb::handle obj) {
  if (const Tensor* t = tensorOrNull(obj.ptr()))  // a view on the same storage, as a round trip would give
    return t->as_strided(t->sizes(), t->strides(), t->storage_offset());
  if (PyCapsule_CheckExact(obj.ptr())) return takeCapsule(obj);
  if (!PyObject_HasAttrString(obj.ptr(), "__dlpack__"))
    raise(PyExc_TypeError,
          "from_dlpack: expected an object with __dlpack__ (a NumPy array, a torch.Tensor, ...) or "
          "a DLPack capsule, not " +
              typeName(obj));
  nb::object capsule;
  int32_t dl_type = kDLCPU;
  if (PyObject_HasAttrString(obj.ptr(), "__dlpack_device__")) {
    nb::object d = obj.attr("__dlpack_device__")();
    auto pair = nb::cast<std::pair<int32_t, int32_t>>(d);
    dl_type = pair.first;
  }
  if (dl_type == kDLCUDA) {
    capsule = obj.attr("__dlpack__")(nb::arg("stream") = 1);
  } else {
    capsule = obj.attr("__dlpack__")();  // NumPy 1.24 takes no other keyword; ROCm: None is the default stream
  }
  if (!PyCapsule_CheckExact(capsule.ptr()))
    raise(PyExc_TypeError,
          "from_dlpack: " + typeName(obj) + ".__dlpack__() returned a " + typeName(capsule) + ", not a DLPack capsule");
  Tensor t = takeCapsule(capsule);
  if (!t.device().isCpu()) synchronize(t.device());  // Note [DLPack from Python]: streams (consumer)
  return t;
}

void bindDLPack(nb::module_& m) {
  m.def("from_dlpack", &importDLPack, nb::arg("obj"),
        "A tensor sharing memory with `obj`: an object with __dlpack__ (numpy.ndarray, torch.Tensor, ...) or a "
        "legacy DLPack capsule ('dltensor'). No copy; writes through either show in the other. Note [DLPack from "
        "Python].");
  nb::handle cls = nb::type<Tensor>();
  nb::cpp_function_def(&dlpack, nb::scope(cls), nb::name("__dlpack__"), nb::is_method(), nb::kw_only(),
                       nb::arg("stream").none() = nb::none(), nb::arg("max_version").none() = nb::none(),
                       nb::arg("dl_device").none() = nb::none(), nb::arg("copy").none() = nb::none(),
                       nb::sig("def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | "
                               "None = None, dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> "
                               "typing.Any"),
                       "A DLPack capsule viewing this tensor (the DLPack Python protocol; Note [DLPack from Python]).");
  nb::cpp_function_def(
      [](const Tensor& t) {
        DLDevice d = exportDevice(t);
        int32_t type = 0;
        std::memcpy(&type, &d.device_type, sizeof type);
        return nb::make_tuple(type, d.device_id);
      },
      nb::scope(cls), nb::name("__dlpack_device__"), nb::is_method(),
      nb::sig("def __dlpack_device__(self) -> tuple[int, int]"),
      "(DLPack device type, device id) of this tensor: (1, 0) for the CPU, (2, i) for cuda:i.");
}

}  // namespace backplane::python
