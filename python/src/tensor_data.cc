// Tensor data to and from Python: backplane.tensor(), Tensor.numpy(),
// tolist(), item(), the number conversions, and basic indexing (Note
// [Indexing from Python]). DLPack is dlpack.cc's.
//
// Note [backplane.tensor()]
// tensor(data, dtype=None, device=None) always copies, as torch.tensor does.
// `data` is, in this order:
// - a backplane.Tensor (copied; device=None keeps its device);
// - an object with the buffer protocol (a NumPy array or scalar, an
//   array.array, a memoryview): its elements are read through the buffer,
//   strided or not, and keep their dtype (float64 stays float64);
// - an object with __dlpack__ (a torch.Tensor, on any device a plugin
//   provides): imported without a copy, then copied (device=None keeps its
//   device); when its __dlpack__() refuses (torch 1.13 exports no bool
//   tensor), read through its __array__ as below;
// - an object with __array__: its array, read through the buffer;
// - a Python scalar or nested lists/tuples (any sequence) of bool, int,
//   float, NumPy scalars and backplane tensors. The shape comes from the
//   first element at each depth; a sequence of another length, or a number
//   where a sequence is expected, is a ValueError naming its position
//   (data[1][0]). The dtype, when not given, is PyTorch's: each element
//   asks for one (bool for a bool, int64 for an int, the default float32
//   for a float, its own for a NumPy scalar or a tensor's element) and the
//   dtypes are promoted: [True, 2] is int64, [1, 2.5] float32,
//   [numpy.float64(1.5), 2.0] float64, [numpy.int32(3)] int32; an empty
//   list is float32. Values are written straight into the requested dtype on the
//   host; an int that does not fit it (300 as uint8, 2**64) or a float
//   that does not fit an integer dtype (nan, 1e30 as int32) is an
//   OverflowError naming the value and its position, as PyTorch refuses
//   them, instead of a wrapped value. Floats become integers by truncation
//   toward zero.
//
// Note [Indexing from Python]
// t[index] follows PyTorch's (and NumPy's) basic indexing, and returns a
// view: no element is copied. `index` is one item or a tuple of items:
// - an int (or an object with __index__, or a 0-d integer tensor) selects
//   along the next dim, which disappears (select); negative ints count from
//   the end; out of range is an IndexError;
// - a slice start:stop:step keeps the dim (slice); start and stop clamp as
//   in Python; step must be > 0, as in PyTorch (a ValueError names
//   t.flip(dim) for the reverse);
// - None inserts a dim of size 1 (unsqueeze);
// - ... stands for as many full slices as the other items leave dims (at
//   most one ellipsis).
// - a tensor, list, NumPy array or another library's tensor is advanced
//   indexing: an integer one picks positions along the next dim, a bool
//   (or uint8) mask of k dims picks its true positions of the next k dims
//   (whose sizes it must have). As in PyTorch, the basic items apply first
//   (a view), and then the standard op `index.Tensor` (Note [Advanced
//   indexing] in dispatcher/ops/src/indexing.cc) with the index tensors at
//   the dims of that view they apply to: the result is a copy, the
//   broadcast index shape in place of the indexed dims when they are
//   adjacent, else first. A CPU index may index a tensor on any device.
// A bool (t[True]) is refused with an IndexError that says what to write.
// t[index] = value writes through that view on any device: a tensor value
// is broadcast to the view's shape (leading dims of size 1 dropped, as
// PyTorch does) and copied with copy_, converting dtype and device; a number
// is written with fill_; anything else is made a tensor first (tensor(value)
// with the view's dtype and device). A value sharing memory with the view
// is copied first, so t[1:] = t[:-1] reads the old elements. With advanced
// items, the write is `index_put_` on the view (the value converted to its
// dtype and device, broadcast to the indexed shape); where an index names
// one element twice, which value lands is unspecified on a GPU.
#include <Python.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backplane/core/storage.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/dlpack.h"
#include "bindings.h"

namespace backplane::python {
namespace {

bool hasAttr(nb::handle o, const char* name) { return PyObject_HasAttrString(o.ptr(), name) == 1; }

// A new reference from the C API, or the Python error it set.
nb::object checked(PyObject* o) {
  if (!o) throw nb::python_error();
  return nb::steal(o);
}

// An int's value, or `overflow` (a message) when it does not fit int64.
int64_t int64Of(nb::handle o, PyObject* error_type, const std::string& overflow) {
  int over = 0;
  long long v = PyLong_AsLongLongAndOverflow(o.ptr(), &over);
  if (over != 0) raise(error_type, overflow);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

// ------------------------------------------------------------ elements

// One element at `p` (of dtype `dt`, host memory) as a Python number.
nb::object elementObject(ScalarType dt, const unsigned char* p) {
  return visitScalarType(dt, [&]<typename S>() -> nb::object {
    if constexpr (std::is_same_v<S, bool>) {
      return nb::bool_(*p != 0);  // read as a byte: a bool holding another value would be UB
    } else {
      S v;
      std::memcpy(&v, p, sizeof(S));
      if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
        return nb::float_(static_cast<double>(static_cast<float>(v)));
      } else if constexpr (std::is_floating_point_v<S>) {
        return nb::float_(static_cast<double>(v));
      } else if constexpr (std::is_unsigned_v<S>) {
        return checked(PyLong_FromUnsignedLongLong(v));
      } else {
        return checked(PyLong_FromLongLong(v));
      }
    }
  });
}

// t's elements on the host, contiguous, row-major.
Tensor hostContiguous(const Tensor& t) {
  nb::gil_scoped_release unlocked;
  return t.cpu().contiguous();
}

// Recursion one level per dim: at most kMaxTensorDims deep (Note [Rank limit]).
nb::object listOf(ScalarType dt, const unsigned char* p, IntArrayRef sizes, size_t d, const int64_t* row_bytes) {
  if (d == sizes.size()) return elementObject(dt, p);
  nb::list out;
  for (int64_t i = 0; i < sizes[d]; ++i) out.append(listOf(dt, p + i * row_bytes[d], sizes, d + 1, row_bytes));
  return out;
}

nb::object toList(const Tensor& t) {
  Tensor h = hostContiguous(t);
  std::vector<int64_t> row_bytes(static_cast<size_t>(h.dim()));
  int64_t step = static_cast<int64_t>(h.itemsize());
  for (size_t d = row_bytes.size(); d-- > 0;) {
    row_bytes[d] = step;
    step *= h.sizes()[d];
  }
  return listOf(h.dtype(), static_cast<const unsigned char*>(h.data_ptr()), h.sizes(), 0, row_bytes.data());
}

// The one element of `t` (numel() == 1) as a Python number.
nb::object onlyElement(const Tensor& t) {
  Tensor h = hostContiguous(t);
  return elementObject(h.dtype(), static_cast<const unsigned char*>(h.data_ptr()));
}

std::string sizesText(const Tensor& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.sizes().size(); ++i) s += (i ? ", " : "") + std::to_string(t.sizes()[i]);
  return s + "]";
}

nb::object item(const Tensor& t) {
  if (t.numel() != 1)
    raise(PyExc_ValueError, "a Tensor with " + std::to_string(t.numel()) +
                                " elements cannot be converted to Scalar (item() needs exactly one element; this "
                                "tensor's shape is " +
                                sizesText(t) + "; use tolist() for all of them)");
  return onlyElement(t);
}

void needOneElement(const Tensor& t, const char* what) {
  if (t.numel() != 1)
    raise(PyExc_ValueError, std::string("only one element tensors can be converted to Python scalars (") + what +
                                "() of a tensor of shape " + sizesText(t) + ", " + std::to_string(t.numel()) +
                                " elements)");
}

bool toBool(const Tensor& t) {
  if (t.numel() == 0) raise(PyExc_ValueError, "Boolean value of Tensor with no values is ambiguous");
  if (t.numel() > 1)
    raise(PyExc_ValueError, "Boolean value of Tensor with more than one value is ambiguous (shape " + sizesText(t) +
                                "); use t.any() or t.all()");
  int truth = PyObject_IsTrue(onlyElement(t).ptr());
  if (truth < 0) throw nb::python_error();
  return truth != 0;
}

nb::object toIndex(const Tensor& t) {
  if (t.numel() != 1 || !isIntegralType(t.dtype(), /*include_bool=*/true))
    raise(PyExc_TypeError, "only integer tensors of a single element can be converted to an index (this one is " +
                               std::string(scalarTypeName(t.dtype())) + " of shape " + sizesText(t) + ")");
  return checked(PyNumber_Index(onlyElement(t).ptr()));
}

// ------------------------------------------------------------ numpy()

nb::dlpack::dtype numpyDtype(ScalarType dt) {
  DLDataType d = toDLDataType(dt);
  return nb::dlpack::dtype{d.code, d.bits, d.lanes};
}

// NumPy's own rank limit (NPY_MAXDIMS): 32 before NumPy 2, 64 from NumPy 2
// on. A deeper array would make NumPy refuse the buffer with an unhelpful
// message, or worse (Note [Rank limit]).
int64_t numpyMaxDims(nb::handle numpy) {
  const std::string version = nb::str(numpy.attr("__version__")).c_str();
  const int major = std::atoi(version.c_str());
  return major >= 2 ? 64 : 32;
}

nb::ndarray<nb::numpy> toNumpy(const Tensor& self, bool force) {
  Tensor t = self;
  if (!t.device().isCpu()) {
    if (!force)
      raise(PyExc_TypeError, "can't convert a " + t.device().str() +
                                 " tensor to NumPy: numpy() shares memory, so it needs a CPU tensor; call .cpu() "
                                 "first (t.cpu().numpy()), or numpy(force=True) to copy");
    t = hostContiguous(t);
  }
  if (t.dtype() == ScalarType::BFloat16)
    raise(PyExc_TypeError,
          "NumPy has no bfloat16 dtype, so a bfloat16 tensor has no NumPy view; convert it first: "
          "t.to(backplane.float32).numpy()");
  // NumPy is imported here, on first use, never by `import backplane`.
  nb::object numpy = nb::steal(PyImport_ImportModule("numpy"));
  if (!numpy.is_valid()) {
    nb::python_error cause;
    raise(PyExc_ImportError, std::string("numpy() needs NumPy, which cannot be imported here (") +
                                 nb::str(cause.value()).c_str() + "); install it: pip install numpy");
  }
  const int64_t numpy_max_dims = numpyMaxDims(numpy);
  if (t.dim() > numpy_max_dims)
    raise(PyExc_ValueError, "can't convert a tensor of " + std::to_string(t.dim()) + " dimensions to NumPy: NumPy " +
                                std::string(nb::str(numpy.attr("__version__")).c_str()) + " holds at most " +
                                std::to_string(numpy_max_dims) +
                                " (NumPy 2 holds 64, as Backplane); reshape the tensor to fewer dimensions first, or "
                                "pass it through DLPack to a library that takes more (torch.from_dlpack)");
  // The array keeps the storage (not the tensor: an empty tensor may be
  // given new storage in place) alive for as long as NumPy uses it.
  auto* keep = new Storage(t.storage());
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Storage*>(p); });
  std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  return nb::ndarray<nb::numpy>(t.data_ptr(), shape.size(), shape.data(), owner, strides.data(), numpyDtype(t.dtype()),
                                nb::device::cpu::value, 0);
}

// ------------------------------------------------------------ tensor()

// One number of the data, before it is written in the target dtype.
struct Leaf {
  enum class Kind : uint8_t { Bool, Int, UInt, Float } kind;
  // The dtype it asks for when none is given (PyTorch's infer_scalar_type):
  // bool for a bool, int64 for an int, the default float32 for a float; a
  // NumPy scalar's own dtype, a tensor element's its tensor's.
  ScalarType type;
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
  };
};

struct Parsed {
  std::vector<int64_t> shape;  // from the first element at each depth
  std::vector<Leaf> leaves;    // row-major
};

std::string positionText(const std::vector<Py_ssize_t>& path) {
  std::string s = "data";
  for (Py_ssize_t i : path) s += "[" + std::to_string(i) + "]";
  return s;
}

bool isNumpyBool(nb::handle o) {
  const char* n = Py_TYPE(o.ptr())->tp_name;
  return std::strcmp(n, "numpy.bool_") == 0 || std::strcmp(n, "numpy.bool") == 0;
}

// Whether `o` is a nested level of data (a sequence other than text).
bool isSequenceData(nb::handle o) {
  PyObject* p = o.ptr();
  if (PyList_Check(p) || PyTuple_Check(p)) return true;
  if (PyUnicode_Check(p) || PyBytes_Check(p) || PyByteArray_Check(p) || PyDict_Check(p)) return false;
  if (!PySequence_Check(p)) return false;
  Py_ssize_t n = PySequence_Size(p);  // a 0-d NumPy array is a sequence type with no length
  if (n < 0) {
    PyErr_Clear();
    return false;
  }
  return true;
}

std::optional<ScalarType> bufferDtype(const char* format, Py_ssize_t itemsize);

// The dtype of a NumPy scalar (numpy.float64(1.5), numpy.int32(3)): a 0-d
// buffer of one element; nullopt for anything else (a Python number, whose
// type is no buffer, or a 0-d array, which is a sequence type).
std::optional<ScalarType> numpyScalarDtype(nb::handle o) {
  PyObject* p = o.ptr();
  if (PyFloat_CheckExact(p) || PyLong_CheckExact(p) || PyBool_Check(p) || !PyObject_CheckBuffer(p)) return std::nullopt;
  Py_buffer view;
  if (PyObject_GetBuffer(p, &view, PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    return std::nullopt;
  }
  std::optional<ScalarType> t = view.ndim == 0 ? bufferDtype(view.format, view.itemsize) : std::nullopt;
  PyBuffer_Release(&view);
  return t;
}

// An int (or NumPy integer) or a NumPy float of the data, or false.
bool toNumber(nb::handle o, Leaf* leaf, const std::vector<Py_ssize_t>& path) {
  PyObject* p = o.ptr();
  if (PyComplex_Check(p))
    raise(PyExc_TypeError, "tensor(): " + positionText(path) + " is a complex number; Backplane has no complex dtype");
  nb::object number;
  if (PyLong_Check(p)) {
    number = nb::borrow(o);
  } else if (PyIndex_Check(p) && !isSequenceData(o)) {  // NumPy integers (a float 0-d array is no int)
    number = nb::steal(PyNumber_Index(p));
    if (!number.is_valid()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
      PyErr_Clear();
    }
  }
  if (number.is_valid()) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
    if (overflow == 0) {
      if (v == -1 && PyErr_Occurred()) throw nb::python_error();
      leaf->kind = Leaf::Kind::Int;
      leaf->i = v;
      return true;
    }
    unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(number.ptr()) : 0;
    if (overflow < 0 || (u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
      PyErr_Clear();
      raise(PyExc_OverflowError, "tensor(): " + positionText(path) + " = " + nb::str(o).c_str() +
                                     " does not fit any Backplane integer dtype (int64 or uint64)");
    }
    leaf->kind = Leaf::Kind::UInt;
    leaf->u = u;
    return true;
  }
  if (Py_TYPE(p)->tp_as_number && Py_TYPE(p)->tp_as_number->nb_float && !isSequenceData(o)) {  // NumPy floats
    double d = PyFloat_AsDouble(p);
    if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
    leaf->kind = Leaf::Kind::Float;
    leaf->d = d;
    return true;
  }
  return false;
}

// A number of the data, or false for anything else.
bool toLeaf(nb::handle o, Leaf* leaf, const std::vector<Py_ssize_t>& path) {
  const bool leaf_found = [&] {
    PyObject* p = o.ptr();
    if (PyBool_Check(p) || isNumpyBool(o)) {
      leaf->kind = Leaf::Kind::Bool;
      int truth = PyObject_IsTrue(p);
      if (truth < 0) throw nb::python_error();
      leaf->b = truth != 0;
      return true;
    }
    if (PyFloat_Check(p)) {
      leaf->kind = Leaf::Kind::Float;
      leaf->d = PyFloat_AS_DOUBLE(p);
      return true;
    }
    return toNumber(o, leaf, path);
  }();
  if (!leaf_found) return false;
  leaf->type = leaf->kind == Leaf::Kind::Bool    ? ScalarType::Bool
               : leaf->kind == Leaf::Kind::Float ? ScalarType::Float32
                                                 : ScalarType::Int64;
  if (std::optional<ScalarType> t = numpyScalarDtype(o)) leaf->type = *t;
  return true;
}

void parseData(nb::handle o, size_t depth, std::vector<Py_ssize_t>& path, Parsed& out, bool shape_known) {
  if (const Tensor* t = tensorOrNull(o.ptr())) {  // a tensor inside a list: its values, as nested lists
    const size_t first = out.leaves.size();
    parseData(toList(*t), depth, path, out, shape_known);
    for (size_t i = first; i < out.leaves.size(); ++i) out.leaves[i].type = t->dtype();  // its dtype, not Python's
    return;
  }
  Leaf leaf;
  bool is_leaf = toLeaf(o, &leaf, path);
  if (shape_known) {
    bool want_leaf = depth == out.shape.size();
    if (is_leaf != want_leaf && (is_leaf || isSequenceData(o))) {
      std::vector<Py_ssize_t> first(path.size(), 0);
      raise(PyExc_ValueError,
            "tensor(): ragged nested sequence: " + positionText(path) + " is " + (is_leaf ? "a number" : "a sequence") +
                " but " + positionText(first) + " is " + (is_leaf ? "a sequence" : "a number") +
                " (every element at the same depth must be a sequence of the same length, or every one a number)");
    }
  }
  if (is_leaf) {
    if (!shape_known) out.shape.resize(depth);
    out.leaves.push_back(leaf);
    return;
  }
  if (!isSequenceData(o))
    raise(PyExc_TypeError, "tensor(): " + positionText(path) + " is a " + typeName(o) +
                               "; elements must be bool, int or float (or sequences of them, NumPy arrays, tensors)");
  // A list that holds itself (a = [a]) or nests deeper than any tensor: an
  // error, not a stack overflow.
  constexpr size_t kMaxNesting = 64;
  if (depth >= kMaxNesting)
    raise(PyExc_ValueError, "tensor(): data nests more than " + std::to_string(kMaxNesting) + " sequences deep at " +
                                positionText(path) + " (a list that contains itself?)");
  nb::object seq = nb::steal(PySequence_Fast(o.ptr(), "tensor(): data is not a sequence"));
  if (!seq.is_valid()) throw nb::python_error();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  if (!shape_known) {
    out.shape.push_back(n);
  } else if (n != out.shape[depth]) {
    std::vector<Py_ssize_t> first(path.size(), 0);
    raise(PyExc_ValueError, "tensor(): ragged nested sequence: " + positionText(path) + " has length " +
                                std::to_string(n) + " but " + positionText(first) + " has length " +
                                std::to_string(out.shape[depth]) +
                                " (every sequence at the same depth must have the same length)");
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    path.push_back(i);
    // The first element at each depth fixes the shape below it.
    parseData(PySequence_Fast_GET_ITEM(seq.ptr(), i), depth + 1, path, out, shape_known || i > 0);
    path.pop_back();
    shape_known = true;
  }
}

[[noreturn]] void doesNotFit(const std::string& value, ScalarType dt, size_t index, const Parsed& p) {
  // The position of leaf `index` from the row-major shape.
  std::vector<Py_ssize_t> path(p.shape.size());
  size_t rest = index;
  for (size_t d = p.shape.size(); d-- > 0;) {
    path[d] = static_cast<Py_ssize_t>(rest % static_cast<size_t>(p.shape[d]));
    rest /= static_cast<size_t>(p.shape[d]);
  }
  raise(PyExc_OverflowError, "tensor(): " + positionText(path) + " = " + value + " cannot be converted to " +
                                 std::string(scalarTypeName(dt)) + " without overflow");
}

float toFloat(double d) {
  // Out of float's range is undefined behaviour for a C++ conversion: give IEEE's result.
  if (std::isfinite(d) && std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max()))
    return std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(d < 0 ? -1 : 1));
  return static_cast<float>(d);
}

template <typename T>
T leafAs(const Leaf& l, ScalarType dt, size_t index, const Parsed& p) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (l.kind) {
      case Leaf::Kind::Bool: return l.b;
      case Leaf::Kind::Int: return l.i != 0;
      case Leaf::Kind::UInt: return l.u != 0;
      case Leaf::Kind::Float: return l.d != 0;
    }
  } else if constexpr (std::is_integral_v<T>) {
    switch (l.kind) {
      case Leaf::Kind::Bool: return static_cast<T>(l.b);
      case Leaf::Kind::Int:
        if (!std::in_range<T>(l.i)) doesNotFit(std::to_string(l.i), dt, index, p);
        return static_cast<T>(l.i);
      case Leaf::Kind::UInt:
        if (!std::in_range<T>(l.u)) doesNotFit(std::to_string(l.u), dt, index, p);
        return static_cast<T>(l.u);
      case Leaf::Kind::Float: {
        double t = std::trunc(l.d);
        double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);  // exclusive
        double lower = std::is_signed_v<T> ? -upper : 0.0;
        if (!(t >= lower && t < upper)) doesNotFit(nb::str(nb::float_(l.d)).c_str(), dt, index, p);
        return static_cast<T>(t);
      }
    }
  } else {
    double d = 0;
    switch (l.kind) {
      case Leaf::Kind::Bool: d = l.b ? 1 : 0; break;
      case Leaf::Kind::Int: d = static_cast<double>(l.i); break;
      case Leaf::Kind::UInt: d = static_cast<double>(l.u); break;
      case Leaf::Kind::Float: d = l.d; break;
    }
    if constexpr (std::is_same_v<T, double>)
      return d;
    else
      return T(toFloat(d));  // float, Half, BFloat16
  }
  return T();
}

// The dtype of data without dtype=: its leaves' dtypes promoted, as
// PyTorch's infer_scalar_type does (bool with int is int64, int with float
// float32, numpy.float64 with float float64); float32 for no leaves.
ScalarType inferredDtype(const Parsed& p) {
  if (p.leaves.empty()) return ScalarType::Float32;
  ScalarType dt = p.leaves[0].type;
  for (const Leaf& l : p.leaves) {
    if (l.type == dt) continue;
    if (!canPromoteTypes(dt, l.type))
      raise(PyExc_TypeError, "tensor(): data mixes " + std::string(scalarTypeName(dt)) + " and " +
                                 std::string(scalarTypeName(l.type)) +
                                 " elements, which have no common dtype; pass dtype=");
    dt = promoteTypes(dt, l.type);
  }
  return dt;
}

Tensor fromParsed(const Parsed& p, std::optional<ScalarType> dtype, Device device) {
  ScalarType dt = dtype ? *dtype : inferredDtype(p);
  size_t itemsize = elementSize(dt);
  std::vector<unsigned char> bytes(p.leaves.size() * itemsize);
  visitScalarType(dt, [&]<typename T>() {
    for (size_t i = 0; i < p.leaves.size(); ++i) {
      T v = leafAs<T>(p.leaves[i], dt, i, p);
      std::memcpy(bytes.data() + i * itemsize, &v, itemsize);
    }
  });
  nb::gil_scoped_release unlocked;
  TensorBase t = emptyTensor(p.shape, dt, device);
  detail::fillFromHost(t, bytes.data(), bytes.size());
  return t;
}

// The ScalarType of a buffer's struct format ('<f', 'q', '?'), or nullopt.
std::optional<ScalarType> bufferDtype(const char* format, Py_ssize_t itemsize) {
  if (!format) return ScalarType::UInt8;  // PEP 3118: no format means unsigned bytes
  std::string f = format;
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<' || f[0] == '!' || f[0] == '>')) {
    bool little = f[0] != '>' && f[0] != '!';
    if (!little && itemsize > 1) return std::nullopt;  // big-endian: not this machine's layout
    f = f.substr(1);
  }
  if (f.size() != 1) return std::nullopt;
  ScalarType t;
  switch (f[0]) {
    case '?': t = ScalarType::Bool; break;
    case 'b': t = ScalarType::Int8; break;
    case 'B': t = ScalarType::UInt8; break;
    case 'e': t = ScalarType::Float16; break;
    case 'f': t = ScalarType::Float32; break;
    case 'd': t = ScalarType::Float64; break;
    case 'h':
    case 'i':
    case 'l':
    case 'q':
      t = itemsize == 2   ? ScalarType::Int16
          : itemsize == 4 ? ScalarType::Int32
          : itemsize == 8 ? ScalarType::Int64
                          : ScalarType::Int8;
      if (itemsize == 1) return std::nullopt;
      break;
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
      t = itemsize == 2   ? ScalarType::UInt16
          : itemsize == 4 ? ScalarType::UInt32
          : itemsize == 8 ? ScalarType::UInt64
                          : ScalarType::UInt8;
      if (itemsize == 1) return std::nullopt;
      break;
    default: return std::nullopt;
  }
  if (static_cast<Py_ssize_t>(elementSize(t)) != itemsize) return std::nullopt;
  return t;
}

// A CPU copy of a buffer's elements (any strides, negative ones included),
// or nullopt when `o` gives no buffer of numbers (a NumPy array of Python
// objects): its elements are then read as a sequence.
std::optional<Tensor> fromBuffer(nb::handle o) {
  Py_buffer view;
  if (PyObject_GetBuffer(o.ptr(), &view, PyBUF_RECORDS_RO) != 0) {
    if (!isSequenceData(o) || !(PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
                                PyErr_ExceptionMatches(PyExc_BufferError)))
      throw nb::python_error();
    PyErr_Clear();
    return std::nullopt;
  }
  std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> release(&view, PyBuffer_Release);
  if (view.format && std::strcmp(view.format, "O") == 0 && isSequenceData(o)) return std::nullopt;  // Python objects
  std::optional<ScalarType> dt = bufferDtype(view.format, view.itemsize);
  if (!dt)
    raise(PyExc_TypeError, "tensor(): the array's element type (buffer format '" +
                               std::string(view.format ? view.format : "B") + "', " + std::to_string(view.itemsize) +
                               " bytes) has no Backplane dtype; supported: bool, int8..int64, uint8..uint64, "
                               "float16, float32, float64 (bfloat16 comes through DLPack)");
  std::vector<int64_t> shape(view.shape, view.shape + view.ndim);
  Tensor t = emptyTensor(shape, *dt, Device(DeviceType::CPU));
  auto* dst = static_cast<unsigned char*>(t.data_ptr());
  const auto* src = static_cast<const unsigned char*>(view.buf);
  const size_t item = static_cast<size_t>(view.itemsize);
  if (t.numel() == 0) return t;
  if (PyBuffer_IsContiguous(&view, 'C')) {
    std::memcpy(dst, src, static_cast<size_t>(t.numel()) * item);
    return t;
  }
  // Odometer over the index: the last dim moves fastest.
  std::vector<Py_ssize_t> index(static_cast<size_t>(view.ndim), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    Py_ssize_t offset = 0;
    for (int d = 0; d < view.ndim; ++d) offset += index[d] * view.strides[d];
    std::memcpy(dst + static_cast<size_t>(n) * item, src + offset, item);
    for (int d = view.ndim - 1; d >= 0; --d) {
      if (++index[d] < view.shape[d]) break;
      index[d] = 0;
    }
  }
  return t;
}

// The tensor `data` names, copied (Note [backplane.tensor()]).
Tensor tensorFrom(nb::handle data, std::optional<ScalarType> dtype, std::optional<Device> device) {
  auto finish = [&](const Tensor& t, bool fresh) -> Tensor {
    nb::gil_scoped_release unlocked;
    Device d = device.value_or(t.device());
    return t.to(d, dtype.value_or(t.dtype()), /*copy=*/!fresh);
  };
  if (const Tensor* t = tensorOrNull(data.ptr())) return finish(*t, false);
  nb::object array;  // data's __array__(), when data is read through it
  PyObject* p = data.ptr();
  if (PyUnicode_Check(p) || PyBytes_Check(p) || PyByteArray_Check(p))
    raise(PyExc_TypeError,
          "tensor(): data must be a number, a (nested) sequence of numbers or an array, not " + typeName(data));
  if (PyObject_CheckBuffer(p)) {
    if (std::optional<Tensor> t = fromBuffer(data)) return finish(*t, true);
  } else if (hasAttr(data, "__dlpack__")) {
    // An exporter may refuse a dtype DLPack cannot describe to it (torch
    // 1.13: "Bool type is not supported by dlpack"); an object that also
    // has __array__ is then read through its array, as the docstring says.
    std::optional<Tensor> imported;
    std::string refusal;
    try {
      imported = importDLPack(data);
    } catch (nb::python_error& e) {
      if (!hasAttr(data, "__array__")) throw;
      refusal = e.what();
    }
    if (imported) return finish(*imported, false);
    try {
      array = data.attr("__array__")();
    } catch (nb::python_error& e) {
      raise(PyExc_TypeError, "tensor(): " + typeName(data) + " could not be read: its __dlpack__() failed (" + refusal +
                                 ") and so did its __array__() (" + e.what() + ")");
    }
    if (PyObject_CheckBuffer(array.ptr())) {
      if (std::optional<Tensor> t = fromBuffer(array)) return finish(*t, true);
    }
    data = array;
  } else if (hasAttr(data, "__array__")) {
    array = data.attr("__array__")();
    if (PyObject_CheckBuffer(array.ptr())) {
      if (std::optional<Tensor> t = fromBuffer(array)) return finish(*t, true);
    }
  }
  Parsed parsed;
  std::vector<Py_ssize_t> path;
  parseData(data, 0, path, parsed, false);
  return fromParsed(parsed, dtype, device.value_or(Device(DeviceType::CPU)));
}

std::optional<ScalarType> optionalDtype(nb::handle o, const char* what) {
  if (o.is_none()) return std::nullopt;
  bool ok = true;
  ScalarType t = dtypeFrom(o, &ok);
  if (!ok)
    raise(PyExc_TypeError,
          std::string(what) + ": dtype must be a backplane.dtype (backplane.float32, ...), not " + typeName(o));
  return t;
}

std::optional<Device> optionalDevice(nb::handle o, const char* what) {
  if (o.is_none()) return std::nullopt;
  return deviceArg(o, what);
}

// ------------------------------------------------------------ indexing

enum class IndexKind : uint8_t { Int, Slice, NewAxis, Ellipsis, Tensor };

struct IndexItem {
  IndexKind kind = IndexKind::Int;
  int64_t value = 0;                         // Int
  Py_ssize_t start = 0, stop = 0, step = 1;  // Slice
  Tensor tensor;                             // Tensor (advanced indexing)

  // The dims of the indexed tensor this item consumes.
  int64_t dims() const {
    switch (kind) {
      case IndexKind::Int:
      case IndexKind::Slice: return 1;
      case IndexKind::Tensor: return isMask(tensor) ? std::max<int64_t>(tensor.dim(), 1) : 1;
      default: return 0;
    }
  }
  static bool isMask(const Tensor& t) { return t.dtype() == ScalarType::Bool || t.dtype() == ScalarType::UInt8; }
};

IndexItem advancedItem(Tensor t) {
  IndexItem item;
  item.kind = IndexKind::Tensor;
  item.tensor = std::move(t);
  return item;
}

IndexItem indexItem(nb::handle o) {
  PyObject* p = o.ptr();
  IndexItem item;
  if (p == Py_None) {
    item.kind = IndexKind::NewAxis;
    return item;
  }
  if (p == Py_Ellipsis) {
    item.kind = IndexKind::Ellipsis;
    return item;
  }
  if (PySlice_Check(p)) {
    item.kind = IndexKind::Slice;
    if (PySlice_Unpack(p, &item.start, &item.stop, &item.step) < 0) throw nb::python_error();
    if (item.step < 0)
      raise(PyExc_ValueError,
            "step must be greater than zero: negative slice steps are not supported (as in "
            "PyTorch); use t.flip(dim) to reverse a dim");
    return item;
  }
  if (PyBool_Check(p))
    raise(PyExc_IndexError,
          "indexing with a bool (t[True]) is not supported: use t.unsqueeze(0) for t[True], or a bool tensor "
          "mask of the indexed dims' shape");
  if (PyLong_Check(p)) {
    item.value = int64Of(o, PyExc_IndexError, "index " + std::string(nb::str(o).c_str()) + " does not fit int64");
    return item;
  }
  if (const Tensor* t = tensorOrNull(p)) {
    // A 0-d integer tensor selects, as in PyTorch; any other tensor is advanced indexing.
    if (t->dim() == 0 && isIntegralType(t->dtype(), false) && t->dtype() != ScalarType::UInt8) {
      nb::object i = toIndex(*t);
      item.value = int64Of(i, PyExc_IndexError, "index " + std::string(nb::str(i).c_str()) + " does not fit int64");
      return item;
    }
    return advancedItem(*t);
  }
  if (PyList_Check(p) || PyTuple_Check(p)) return advancedItem(tensorFrom(o, std::nullopt, std::nullopt));
  if (PyIndex_Check(p)) {
    nb::object i = nb::steal(PyNumber_Index(p));
    if (i.is_valid()) {
      item.value = int64Of(i, PyExc_IndexError, "index " + std::string(nb::str(i).c_str()) + " does not fit int64");
      return item;
    }
    if (!isSequenceData(o)) throw nb::python_error();
    PyErr_Clear();
  }
  if (isSequenceData(o) || hasAttr(o, "__array__") || hasAttr(o, "__dlpack__"))
    return advancedItem(tensorFrom(o, std::nullopt, std::nullopt));
  raise(PyExc_IndexError,
        "only integers, slices (`:`), ellipsis (`...`) and None are valid indices (got " + typeName(o) + ")");
}

// The basic items of t[index] applied (a view), and the advanced ones at the
// dims of that view they index (empty when there are none).
struct Indexed {
  Tensor view;
  std::vector<std::optional<Tensor>> advanced;
};

// The items of t[index]: one, or a tuple's.
std::vector<IndexItem> indexItems(nb::handle index) {
  std::vector<IndexItem> items;
  if (PyTuple_Check(index.ptr())) {
    for (nb::handle h : nb::borrow<nb::tuple>(index)) items.push_back(indexItem(h));
  } else {
    items.push_back(indexItem(index));
  }
  return items;
}

Indexed applyIndex(const Tensor& self, const std::vector<IndexItem>& items) {
  int64_t consumed = 0, ellipses = 0;
  for (const IndexItem& i : items) {
    consumed += i.dims();
    ellipses += i.kind == IndexKind::Ellipsis;
  }
  if (ellipses > 1) raise(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
  if (self.dim() == 0 && consumed > 0)
    raise(PyExc_IndexError, "invalid index of a 0-dim tensor; use tensor.item() to get its value as a number");
  if (consumed > self.dim())
    raise(PyExc_IndexError, "too many indices for tensor of dimension " + std::to_string(self.dim()) + " (" +
                                std::to_string(consumed) + " given)");
  Tensor r = self;
  int64_t d = 0;                                     // the dim of r the next item applies to
  int64_t source = 0;                                // the same dim counted in self, for messages
  std::vector<std::pair<int64_t, Tensor>> advanced;  // (dim of r, index)
  for (const IndexItem& i : items) {
    switch (i.kind) {
      case IndexKind::Tensor:
        advanced.emplace_back(d, i.tensor);
        d += i.dims();
        source += i.dims();
        break;
      case IndexKind::Int: {
        int64_t size = r.sizes()[static_cast<size_t>(d)];
        if (i.value < -size || i.value >= size)
          raise(PyExc_IndexError, "index " + std::to_string(i.value) + " is out of bounds for dimension " +
                                      std::to_string(source) + " with size " + std::to_string(size));
        r = r.select(d, i.value);
        ++source;
        break;
      }
      case IndexKind::Slice: {
        // A step past the size takes one element at most, whose stride is
        // free: clamping it keeps slice()'s arithmetic within int64 (t[::sys.maxsize]).
        int64_t size = r.sizes()[static_cast<size_t>(d)];
        r = r.slice(d, i.start, i.stop, std::min<int64_t>(i.step, std::max<int64_t>(size, 1)));
        ++d;
        ++source;
        break;
      }
      case IndexKind::NewAxis:
        r = r.unsqueeze(d);
        ++d;
        break;
      case IndexKind::Ellipsis:
        d += self.dim() - consumed;
        source += self.dim() - consumed;
        break;
    }
  }
  // t[...] and t[()] are views too: a new tensor on the same storage (with
  // advanced items, the op reads or writes self itself).
  if (advanced.empty() && r.unsafeGetImpl() == self.unsafeGetImpl())
    r = self.as_strided(self.sizes(), self.strides(), self.storage_offset());
  Indexed out{r, {}};
  for (auto& [dim, index] : advanced) {
    out.advanced.resize(static_cast<size_t>(dim) + 1);
    out.advanced[static_cast<size_t>(dim)] = index;
  }
  return out;
}

// t[index] (Note [Indexing from Python]): a view, or a copy with advanced items.
Tensor indexGet(const Tensor& self, nb::handle index) {
  Indexed i = applyIndex(self, indexItems(index));
  if (i.advanced.empty()) return i.view;
  nb::gil_scoped_release unlocked;
  return backplane::index(i.view, i.advanced);
}

void setIndex(const Tensor& self, nb::handle index, nb::handle value) {
  Indexed indexed = applyIndex(self, indexItems(index));
  const Tensor& view = indexed.view;
  PyObject* v = value.ptr();
  if (!indexed.advanced.empty()) {
    const Tensor* given = tensorOrNull(v);
    Tensor src = given ? *given : tensorFrom(value, view.dtype(), view.device());
    nb::gil_scoped_release unlocked;
    if (src.dtype() != view.dtype() || src.device() != view.device()) src = src.to(view.device(), view.dtype());
    backplane::index_put_(view, indexed.advanced, src, false);
    return;
  }
  if (PyBool_Check(v) || PyLong_Check(v) || PyFloat_Check(v)) {
    Scalar s =
        PyBool_Check(v) ? Scalar(v == Py_True)
        : PyFloat_Check(v)
            ? Scalar(PyFloat_AS_DOUBLE(v))
            : Scalar(int64Of(value, PyExc_OverflowError,
                             "t[index] = " + std::string(nb::str(value).c_str()) + ": the value does not fit int64"));
    nb::gil_scoped_release unlocked;
    view.fill_(s);
    return;
  }
  Tensor src;
  if (const Tensor* t = tensorOrNull(v)) {
    src = *t;
  } else {
    src = tensorFrom(value, view.dtype(), view.device());
  }
  // Broadcast to the view's shape; leading dims of size 1 beyond it go (PyTorch's rule for setitem).
  while (src.dim() > view.dim() && src.sizes()[0] == 1) src = src.squeeze(0);
  bool fits = src.dim() <= view.dim();
  for (int64_t i = 1; fits && i <= src.dim(); ++i) {
    int64_t s = src.sizes()[static_cast<size_t>(src.dim() - i)];
    fits = s == 1 || s == view.sizes()[static_cast<size_t>(view.dim() - i)];
  }
  if (!fits)
    raise(PyExc_ValueError, "shape mismatch: value tensor of shape " + sizesText(src) +
                                " cannot be broadcast to indexing result of shape " + sizesText(view));
  nb::gil_scoped_release unlocked;
  if (src.is_alias_of(view)) src = src.clone();  // t[1:] = t[:-1] reads the old elements
  view.copy_(src.sizes() == view.sizes() ? src : src.expand(view.sizes()));
}

template <typename F, typename... Extra>
void defMethod(nb::handle cls, const char* name, F&& f, const Extra&... extra) {
  nb::cpp_function_def(std::forward<F>(f), nb::scope(cls), nb::name(name), nb::is_method(), extra...);
}

}  // namespace

Tensor tensorFromData(nb::handle data) { return tensorFrom(data, std::nullopt, std::nullopt); }

void bindTensorData(nb::module_& m) {
  m.def(
      "tensor",
      [](nb::handle data, nb::handle dtype, nb::handle device) {
        return tensorFrom(data, optionalDtype(dtype, "tensor()"), optionalDevice(device, "tensor()"));
      },
      nb::arg("data").none(), nb::arg("dtype").none() = nb::none(), nb::arg("device").none() = nb::none(),
      nb::sig("def tensor(data: object, dtype: dtype | None = None, device: str | Device | None = None) -> Tensor"),
      "A new tensor holding a copy of `data`: a number, nested lists/tuples of numbers, a NumPy array, a "
      "torch.Tensor or any object with __dlpack__ / __array__ / the buffer protocol. The dtype, when not given, "
      "is PyTorch's: bool -> bool, int -> int64, float -> float32, NumPy scalars and arrays keep theirs, and a "
      "list's elements promote ([1, 2.5] is float32). Note [backplane.tensor()].");

  nb::handle cls = nb::type<Tensor>();
  defMethod(
      cls, "numpy", [](const Tensor& t, bool force) { return toNumpy(t, force); }, nb::kw_only(),
      nb::arg("force") = false,
      "A NumPy array sharing this CPU tensor's memory (writes through either show in the other). A tensor on "
      "another device needs .cpu() first (or force=True, which copies). bfloat16 has no NumPy dtype.");
  defMethod(
      cls, "__array__",
      [](const Tensor& t, nb::handle dtype, nb::handle copy) -> nb::object {
        nb::object a = nb::cast(toNumpy(t, false));
        if (!copy.is_none() && PyObject_IsTrue(copy.ptr())) a = a.attr("copy")();
        if (!dtype.is_none()) a = a.attr("astype")(dtype, nb::arg("copy") = false);
        return a;
      },
      nb::arg("dtype").none() = nb::none(), nb::arg("copy").none() = nb::none(), "numpy.asarray(t): t.numpy().");
  defMethod(cls, "tolist", &toList, nb::sig("def tolist(self) -> list[typing.Any] | int | float | bool"),
            "The elements as nested lists of Python numbers (a number for a 0-d tensor).");
  defMethod(cls, "item", &item, nb::sig("def item(self) -> int | float | bool"), "The one element as a Python number.");
  defMethod(cls, "__bool__", &toBool);
  defMethod(cls, "__float__", [](const Tensor& t) {
    needOneElement(t, "float");
    return checked(PyNumber_Float(onlyElement(t).ptr()));
  });
  defMethod(cls, "__int__", [](const Tensor& t) {
    needOneElement(t, "int");
    return checked(PyNumber_Long(onlyElement(t).ptr()));
  });
  defMethod(cls, "__index__", &toIndex);
  defMethod(cls, "__getitem__", &indexGet, nb::arg("index").none(),
            "t[index]: PyTorch's indexing: a view with ints, slices, None and ...; a copy with an integer or bool "
            "tensor, list or array among them (Note [Indexing from Python]).");
  defMethod(cls, "__setitem__", &setIndex, nb::arg("index").none(), nb::arg("value").none(),
            "t[index] = value: writes a tensor (broadcast) or a number into t[index].");
  defMethod(cls, "__iter__", [](const Tensor& t) {
    if (t.dim() == 0) raise(PyExc_TypeError, "iteration over a 0-d tensor");
    nb::list rows;
    for (int64_t i = 0; i < t.sizes()[0]; ++i) rows.append(wrap(t.select(0, i)));
    return nb::iter(rows);
  });
}

}  // namespace backplane::python
