// backplane.dtype, backplane.Device and backplane.Tensor's metadata and views.
// Operators and op methods come from op_call.cc (installed on the class by
// python/backplane/_install.py); data exchange from tensor_data.cc.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "backplane/autograd/autograd.h"
#include "backplane/ops/ops.h"
#include "bindings.h"

namespace backplane::python {
namespace {

// A dtype object: backplane.float32 and friends are the only instances.
struct DType {
  ScalarType type;
};

std::array<nb::object, kNumScalarTypes>& dtypeObjects() {
  static auto* objects = new std::array<nb::object, kNumScalarTypes>();  // lives as long as the module
  return *objects;
}

nb::tuple toTuple(IntArrayRef xs) {
  nb::tuple t = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(xs.size())));
  for (size_t i = 0; i < xs.size(); ++i)
    PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), PyLong_FromLongLong(xs[i]));
  return t;
}

int64_t wrapDim(const Tensor& t, int64_t dim, const char* what) {
  int64_t n = t.dim();
  int64_t lo = n == 0 ? -1 : -n, hi = n == 0 ? 0 : n - 1;
  if (dim < lo || dim > hi) {
    BP_THROW(kOutOfRange, what, ": dimension ", dim, " is out of range for a tensor of ", n, " dimension",
             n == 1 ? "" : "s", " (expected ", lo, "..", hi, ")");
  }
  return dim < 0 ? dim + (n == 0 ? 1 : n) : dim;
}

// Sizes given as separate ints or as one sequence: x.view(2, 3), x.view((2, 3)).
std::vector<int64_t> sizesFrom(const nb::args& args, const char* what) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) {
    try {
      return nb::cast<std::vector<int64_t>>(args[0]);
    } catch (const nb::cast_error&) {
      BP_THROW(kInvalidArgument, what, "(): sizes must be ints or one sequence of ints, not ",
               Py_TYPE(args[0].ptr())->tp_name);
    }
  }
  std::vector<int64_t> out;
  for (nb::handle h : args) {
    if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr()))
      BP_THROW(kInvalidArgument, what, "(): sizes must be ints or one sequence of ints, not ",
               Py_TYPE(h.ptr())->tp_name);
    out.push_back(nb::cast<int64_t>(h));
  }
  return out;
}

// Sizes as PyTorch's view/reshape/expand/permute take them: separate ints,
// one sequence, or the one keyword `keyword` (reshape(shape=...),
// view(size=...)); a TypeError for another keyword or for both.
std::vector<int64_t> sizesFrom(const nb::args& args, const nb::kwargs& kwargs, const char* keyword, const char* what) {
  if (kwargs.size() == 0) return sizesFrom(args, what);
  for (auto [key, value] : kwargs) {
    const std::string name = nb::cast<std::string>(key);
    if (name != keyword)
      throw nb::type_error((std::string(what) + "() got an unexpected keyword argument '" + name + "'; it takes " +
                            "ints, one sequence of ints, or " + keyword + "=")
                               .c_str());
    if (args.size() != 0)
      throw nb::type_error(
          (std::string(what) + "() got sizes both as positional arguments and as " + keyword + "=").c_str());
    return sizesFrom(nb::borrow<nb::args>(nb::make_tuple(value)), what);
  }
  return {};
}

// Runs `f` (device work: copies, kernels) with the GIL released.
template <class F>
Tensor released(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

}  // namespace

nb::object dtypeObject(ScalarType t) { return dtypeObjects()[static_cast<size_t>(t)]; }

ScalarType dtypeFrom(nb::handle o, bool* ok) {
  DType* d = nullptr;
  if (nb::try_cast<DType*>(o, d) && d) {
    *ok = true;
    return d->type;
  }
  *ok = false;
  return ScalarType::Float32;
}

Device deviceArg(nb::handle o, const char* what) {
  bool ok = true;
  Device d = deviceFrom(o, &ok);
  if (!ok)
    raise(PyExc_TypeError,
          std::string(what) + ": device must be a str ('cpu', 'cuda:0') or a backplane.Device, not " + typeName(o));
  return d;
}

Device deviceFrom(nb::handle o, bool* ok) {
  *ok = true;
  if (PyUnicode_Check(o.ptr())) return valueOrThrow(Device::parse(nb::cast<std::string>(o)));
  Device* d = nullptr;
  if (nb::try_cast<Device*>(o, d) && d) return *d;
  *ok = false;
  return Device();
}

const Tensor* tensorOrNull(PyObject* o) {
  static PyTypeObject* type = reinterpret_cast<PyTypeObject*>(nb::type<Tensor>().ptr());
  if (Py_TYPE(o) != type && !PyType_IsSubtype(Py_TYPE(o), type)) return nullptr;
  return nb::inst_ptr<Tensor>(o);
}

nb::object wrap(Tensor t) { return nb::cast(std::move(t), nb::rv_policy::move); }

void bindTensor(nb::module_& m) {
  nb::class_<DType>(m, "dtype", "An element type: backplane.float32, backplane.int64, ...")
      .def_prop_ro(
          "itemsize", [](const DType& d) { return elementSize(d.type); }, "Bytes per element.")
      .def_prop_ro("is_floating_point", [](const DType& d) { return isFloatingType(d.type); })
      .def_prop_ro("is_signed",
                   [](const DType& d) {
                     return isFloatingType(d.type) || d.type == ScalarType::Int8 || d.type == ScalarType::Int16 ||
                            d.type == ScalarType::Int32 || d.type == ScalarType::Int64;
                   })
      .def_prop_ro("name", [](const DType& d) { return std::string(scalarTypeName(d.type)); })
      .def("__repr__", [](const DType& d) { return "backplane." + std::string(scalarTypeName(d.type)); })
      .def("__str__", [](const DType& d) { return "backplane." + std::string(scalarTypeName(d.type)); })
      .def("__hash__", [](const DType& d) { return static_cast<int64_t>(d.type); })
      // pickle: the module attribute of that name (backplane._backplane.float32).
      .def("__reduce__", [](const DType& d) { return std::string(scalarTypeName(d.type)); });
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto t = static_cast<ScalarType>(i);
    nb::object o = nb::cast(DType{t}, nb::rv_policy::move);
    dtypeObjects()[static_cast<size_t>(i)] = o;
    m.attr(std::string(scalarTypeName(t)).c_str()) = o;
  }

  nb::class_<Device>(m, "Device", "A device: Device(\"cuda:0\"), Device(\"cpu\"), Device(\"cuda\", 1).")
      .def(
          "__init__",
          [](Device* self, const std::string& spec) { new (self) Device(valueOrThrow(Device::parse(spec))); },
          nb::arg("spec"))
      .def(
          "__init__",
          [](Device* self, const std::string& type, int index) {
            Device d = valueOrThrow(Device::parse(type));
            BP_CHECK(d.index < 0 || type.find(':') == std::string::npos, "Device(\"", type, "\", ", index,
                     "): give the index once, in the string or as the second argument");
            BP_CHECK(index >= 0 && index <= 32767, "Device index ", index, " is out of range (0..32767)");
            new (self) Device(d.type, static_cast<DeviceIndex>(index));
          },
          nb::arg("type"), nb::arg("index"))
      .def_prop_ro(
          "type", [](const Device& d) { return deviceTypeName(d.type); }, "The device type's name: \"cuda\".")
      .def_prop_ro("index",
                   [](const Device& d) -> std::optional<int> {
                     if (d.index < 0) return std::nullopt;
                     return d.index;
                   })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "backplane.Device('" + d.str() + "')"; })
      .def("__eq__",
           [](const Device& a, nb::handle b) {
             bool ok = true;
             Device other = Device();
             try {
               other = deviceFrom(b, &ok);
             } catch (const backplane::Error&) {
               return false;
             }
             return ok && a == other;
           })
      // Equal to its string ("cpu" == Device("cpu")), so hashed as it.
      .def("__hash__", [](const Device& d) { return nb::hash(nb::str(d.str().c_str())); });

  nb::class_<Tensor>(m, "Tensor", "A tensor on any device (docs/python.md).")
      // PyTorch's legacy constructor (torch.Tensor([1, 2]), always float32)
      // is not offered: the message names what to call.
      .def(
          "__init__",
          [](Tensor*, nb::args, nb::kwargs) {
            throw nb::type_error(
                "backplane.Tensor is not constructed directly: bp.tensor(data) copies data into a new tensor "
                "(PyTorch's dtype: bp.tensor([1, 2]) is int64, bp.tensor([1.0, 2]) float32; dtype= picks one), "
                "bp.empty(sizes) / bp.zeros(sizes) make one of a shape, bp.from_dlpack(x) shares x's memory");
          },
          nb::sig("def __init__(self, *args, **kwargs) -> None"))
      .def_prop_ro(
          "shape", [](const Tensor& t) { return toTuple(t.sizes()); }, "The sizes, as a tuple.")
      .def_prop_ro("dtype", [](const Tensor& t) { return dtypeObject(t.dtype()); })
      .def_prop_ro("device", [](const Tensor& t) { return t.device(); })
      .def_prop_ro("ndim", [](const Tensor& t) { return t.dim(); })
      .def_prop_ro("itemsize", [](const Tensor& t) { return t.itemsize(); })
      .def_prop_ro("nbytes", [](const Tensor& t) { return t.nbytes(); })
      .def_prop_ro("is_cpu", [](const Tensor& t) { return t.device().isCpu(); })
      .def_prop_ro(
          "T",
          [](const Tensor& t) {
            std::vector<int64_t> dims(static_cast<size_t>(t.dim()));
            for (size_t i = 0; i < dims.size(); ++i) dims[i] = t.dim() - 1 - static_cast<int64_t>(i);
            return t.permute(dims);
          },
          "The dimensions reversed (a view).")
      .def("dim", [](const Tensor& t) { return t.dim(); })
      .def("numel", [](const Tensor& t) { return t.numel(); })
      .def("element_size", [](const Tensor& t) { return t.itemsize(); })
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (!dim) return toTuple(t.sizes());
            return nb::int_(t.sizes()[static_cast<size_t>(wrapDim(t, *dim, "size"))]);
          },
          nb::arg("dim") = nb::none())
      .def(
          "stride",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (!dim) return toTuple(t.strides());
            return nb::int_(t.strides()[static_cast<size_t>(wrapDim(t, *dim, "stride"))]);
          },
          nb::arg("dim") = nb::none())
      .def("storage_offset", [](const Tensor& t) { return t.storage_offset(); })
      .def("is_contiguous", [](const Tensor& t) { return t.is_contiguous(); })
      .def("is_floating_point", [](const Tensor& t) { return isFloatingType(t.dtype()); })
      .def(
          "contiguous",
          [](nb::handle self) -> nb::object {
            const Tensor& t = nb::cast<const Tensor&>(self);
            if (t.is_contiguous()) return nb::borrow(self);
            return wrap(released([&] { return t.clone(); }));
          },
          "This tensor if contiguous, else a contiguous copy.")
      .def("clone", &Tensor::clone, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "view",
          [](const Tensor& t, nb::args sizes, nb::kwargs kw) { return t.view(sizesFrom(sizes, kw, "size", "view")); },
          "A view with other sizes (one may be -1); the layout must allow it. view(2, 3), view((2, 3)), "
          "view(size=(2, 3)).")
      .def(
          "reshape",
          [](const Tensor& t, nb::args sizes, nb::kwargs kw) {
            std::vector<int64_t> shape = sizesFrom(sizes, kw, "shape", "reshape");
            return released([&] { return t.reshape(shape); });
          },
          "A view with other sizes if the layout allows, else a copy. reshape(2, 3), reshape((2, 3)), "
          "reshape(shape=(2, 3)).")
      .def("expand", [](const Tensor& t, nb::args sizes,
                        nb::kwargs kw) { return t.expand(sizesFrom(sizes, kw, "size", "expand")); })
      .def("permute", [](const Tensor& t, nb::args dims,
                         nb::kwargs kw) { return t.permute(sizesFrom(dims, kw, "dims", "permute")); })
      .def("flatten", &Tensor::flatten, nb::arg("start_dim") = 0, nb::arg("end_dim") = -1)
      .def("transpose", &Tensor::transpose, nb::arg("dim0"), nb::arg("dim1"))
      .def("t", &Tensor::t)
      .def("narrow", &Tensor::narrow, nb::arg("dim"), nb::arg("start"), nb::arg("length"))
      .def("select", &Tensor::select, nb::arg("dim"), nb::arg("index"))
      .def("unsqueeze", &Tensor::unsqueeze, nb::arg("dim"))
      .def(
          "squeeze", [](const Tensor& t, std::optional<int64_t> dim) { return dim ? t.squeeze(*dim) : t.squeeze(); },
          nb::arg("dim") = nb::none())
      .def(
          "as_strided",
          [](const Tensor& t, std::vector<int64_t> size, std::vector<int64_t> stride, std::optional<int64_t> offset) {
            return t.as_strided(size, stride, offset);
          },
          nb::arg("size"), nb::arg("stride"), nb::arg("storage_offset") = nb::none())
      .def(
          "cpu",
          [](nb::handle self) -> nb::object {
            const Tensor& t = nb::cast<const Tensor&>(self);
            if (t.device().isCpu()) return nb::borrow(self);
            return wrap(released([&] { return t.cpu(); }));
          },
          "This tensor on the CPU (itself if already there).")
      // --- Autograd (docs/python.md#autograd).
      .def_prop_rw(
          "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
          [](const Tensor& t, bool on) { t.requires_grad_(on); },
          "Whether gradients flow to this tensor; settable on leaves of a floating dtype.")
      .def(
          "requires_grad_",
          [](nb::handle self, bool on) {
            nb::cast<const Tensor&>(self).requires_grad_(on);
            return nb::borrow(self);
          },
          nb::arg("requires_grad") = true, "Makes this leaf require grad (or not); returns it.")
      .def_prop_rw(
          "grad",
          [](const Tensor& t) -> nb::object {
            Tensor g = t.grad();
            return g.defined() ? wrap(g) : nb::none();
          },
          [](const Tensor& t, nb::handle g) {
            const Tensor* grad = g.is_none() ? nullptr : tensorOrNull(g.ptr());
            if (!g.is_none() && grad == nullptr) throw nb::type_error("grad must be a backplane.Tensor or None");
            t.set_grad(grad ? *grad : Tensor());
          },
          nb::for_setter(nb::arg("value").none()),
          "The gradient backward() accumulated (None before the first); assign None to clear it.")
      .def_prop_ro("is_leaf", [](const Tensor& t) { return t.is_leaf(); })
      .def_prop_ro(
          "grad_fn",
          [](const Tensor& t) -> nb::object {
            std::string name = t.grad_fn_name();
            if (name.empty()) return nb::none();
            return nb::str(name.c_str());
          },
          "The name of the node that made this tensor ('mulBackward'), or None for a leaf.")
      .def_prop_ro("_version", [](const Tensor& t) { return t._version(); })
      .def("detach", &Tensor::detach, "The same data, cut from the graph.")
      .def("retain_grad", &Tensor::retain_grad, "Keeps this non-leaf's gradient in .grad after backward().")
      .def(
          "backward",
          [](const Tensor& t, nb::handle gradient, bool retain_graph, bool create_graph) {
            const Tensor* g = gradient.is_none() ? nullptr : tensorOrNull(gradient.ptr());
            if (!gradient.is_none() && g == nullptr)
              throw nb::type_error("gradient must be a backplane.Tensor or None");
            Tensor grad = g ? *g : Tensor();
            nb::gil_scoped_release release;
            t.backward(grad, retain_graph, create_graph);
          },
          nb::arg("gradient").none() = nb::none(), nb::arg("retain_graph") = false, nb::arg("create_graph") = false,
          "Accumulates the gradients of this tensor into the .grad of the leaves it depends on.")
      .def(
          "register_hook",
          [](const Tensor& t, nb::object fn) {
            auto callable = std::shared_ptr<nb::object>(new nb::object(std::move(fn)), [](nb::object* o) {
              nb::gil_scoped_acquire acquire;
              delete o;
            });
            return autograd::registerHook(t, [callable](const Tensor& g) {
              nb::gil_scoped_acquire acquire;
              nb::object r = (*callable)(wrap(g));
              if (r.is_none()) return Tensor();
              const Tensor* replaced = tensorOrNull(r.ptr());
              if (replaced == nullptr) throw nb::type_error("a tensor hook must return a backplane.Tensor or None");
              return *replaced;
            });
          },
          nb::arg("hook"), "Calls hook(grad) during backward; a returned tensor replaces the gradient. Returns an id.")
      .def(
          "register_post_accumulate_grad_hook",
          [](nb::handle self, nb::object fn) {
            const Tensor& t = nb::cast<const Tensor&>(self);
            auto callable = std::shared_ptr<nb::object>(new nb::object(std::move(fn)), [](nb::object* o) {
              nb::gil_scoped_acquire acquire;
              delete o;
            });
            return autograd::registerPostAccumulateGradHook(t, [callable](const Tensor& leaf) {
              nb::gil_scoped_acquire acquire;
              (*callable)(wrap(leaf));
            });
          },
          nb::arg("hook"), "Calls hook(tensor) after backward() accumulated this leaf's .grad. Returns an id.")
      .def(
          "remove_hook", [](const Tensor& t, uint64_t id) { return autograd::removeHook(t, id); }, nb::arg("id"),
          "Removes a hook by the id its register call returned.")
      .def("__repr__", [](const Tensor& t) { return t.format(); })
      .def("__str__", [](const Tensor& t) { return t.format(); })
      .def("__len__",
           [](const Tensor& t) {
             BP_CHECK(t.dim() > 0, "len() of a 0-d tensor");
             return t.sizes()[0];
           })
      .def("__hash__",
           [](nb::handle self) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(self.ptr()) >> 4); });
}

}  // namespace backplane::python
