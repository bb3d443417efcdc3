#pragma once
// The parts of the extension module _backplane, each bound by one function
// that module.cc calls in order (the Tensor type first: everything else
// returns tensors).
#include <nanobind/nanobind.h>

#include <string>

#include "backplane/core/device.h"
#include "backplane/core/error.h"
#include "backplane/core/scalar_type.h"
#include "backplane/ops/tensor.h"

namespace backplane::python {

namespace nb = nanobind;

void bindErrors(nb::module_& m);    // errors.cc: backplane.Error and its subclasses
void bindTensor(nb::module_& m);    // tensor.cc: dtype, Device, Tensor
void bindOps(nb::module_& m);       // op_call.cc: operator calls through schemas
void bindRuntime(nb::module_& m);   // runtime.cc: the Runtime (plugins loaded at import), devices
void bindProfiler(nb::module_& m);  // profiler.cc: Profiler, OpReport, OpStats
void bindRandom(nb::module_& m);    // random.cc: manual_seed, initial_seed
void bindAutograd(nb::module_& m);  // autograd.cc: grad mode, backward, grad, custom functions

// Tensor data from and to Python, bound on the Tensor type above.
void bindTensorData(nb::module_& m);   // tensor_data.cc: tensor(), numpy(), tolist(), indexing
void bindDLPack(nb::module_& m);       // dlpack.cc: __dlpack__, __dlpack_device__, from_dlpack
void bindStreams(nb::module_& m);      // streams.cc: Stream, Event, default_stream
void bindDistributed(nb::module_& m);  // distributed.cc: process groups, the store, DistributedDataParallel

// --- Conversions shared by the parts.

// The Python object for a tensor (a new backplane.Tensor owning a reference).
nb::object wrap(Tensor t);
// The tensor behind a backplane.Tensor, or nullptr for any other object.
const Tensor* tensorOrNull(PyObject* o);
// The dtype an object names: a backplane.dtype. Sets *ok=false for other objects.
ScalarType dtypeFrom(nb::handle o, bool* ok);
// The device an object names: a backplane.Device, a str ("cuda:0", "cpu") or
// an int (CUDA-style index of the current default device type is not
// guessed: ints are refused). Throws backplane::Error for a malformed str;
// sets *ok=false for an object of another type.
Device deviceFrom(nb::handle o, bool* ok);
// deviceFrom, raising TypeError ("<what>: device must be a str ...") for an
// object of another type.
Device deviceArg(nb::handle o, const char* what);
// The backplane.dtype object for `t` (one object per dtype: `is` works).
nb::object dtypeObject(ScalarType t);
// Sets the Python error for `e`: the backplane.Error subclass of its code.
void raiseError(const backplane::Error& e) noexcept;
// Raises the Python exception `type` (PyExc_TypeError, ...) with `message`.
[[noreturn]] void raise(PyObject* type, const std::string& message);
// The Python type name of `o` ("list", "numpy.ndarray"), for messages.
std::string typeName(nb::handle o);
// The tensor sharing memory with a DLPack producer (an object with
// __dlpack__, or a "dltensor" capsule); dlpack.cc, Note [DLPack from Python].
Tensor importDLPack(nb::handle obj);
// A copy of `data` as tensor() makes it (tensor_data.cc, Note
// [backplane.tensor()]): on the CPU, in the dtype PyTorch would pick.
Tensor tensorFromData(nb::handle data);
// The callable for operator ns::name (all overloads); `method`: the first
// positional argument fills `self`; `operator_mode`: NotImplemented when no
// overload fits (Note [Calling operators from Python]).
nb::object makePacket(const std::string& ns, const std::string& name, bool method, bool operator_mode);

}  // namespace backplane::python
