// Operator calls from Python through schemas (Note [Calling operators from
// Python]).
//
// Note [Calling operators from Python]
// Every operator in the table is callable from Python with no binding
// written for it: an OpPacket holds the overloads of one name ("bp::add":
// add.Tensor, add.Scalar, add.out, ...) and parses each call against their
// schemas, as torch.ops does.
// - Overloads are tried in order, Tensor-taking ones before those taking a
//   Scalar at the same place (so add(x, y) with a tensor y is add.Tensor and
//   with a number add.Scalar), then by name. Those with out= arguments are
//   tried only when an out argument is passed by keyword (`out=t`, or
//   `out=(values, indices)` for several, or their own names), and only
//   they then.
// - Positional and keyword arguments, defaults, Optional (None), lists and
//   tuples follow the schema: int[N] takes one int for all N; a call whose
//   only positional parameter (besides self) is int[] may list the ints as
//   separate arguments (zeros(2, 3), x.flip(0, 1)).
// - No overload fits: TypeError naming the argument, what it got and the
//   schema (the one candidate's), or every candidate's schema. A value of
//   the right type that the argument cannot take (an int past int64, a
//   malformed device string): backplane.InvalidArgumentError (a ValueError).
// - Returns: Tensor(a!) returns give back the very Python object passed for
//   that argument (x.add_(y) is x; add(x, y, out=z) is z); several returns
//   come as a named tuple when the schema names them (sort: values,
//   indices), else a tuple.
// - A packet used as a Tensor method (Py_TPFLAGS_METHOD_DESCRIPTOR: no bound
//   method object is made for x.op(...)) puts the object it was called on
//   into the argument named `self` (where.self's self is its second).
// - In operator mode (Tensor.__add__ and friends) a call that fits no
//   overload returns NotImplemented, so Python tries the reflected operator
//   (after trying its other operand as an array, Note [Foreign operands]).
// The call itself is OperatorHandle::callBoxed with the GIL released.
//
// Note [Foreign operands]
// Python's operators take as their other operand what PyTorch's take: a
// NumPy array (0-d included) or another library's tensor (a torch.Tensor),
// that is an object with __dlpack__ or __array__ that is neither a
// backplane.Tensor, a Python number nor a list. When no overload fits it
// as it is, it becomes a backplane.Tensor sharing its memory where DLPack
// allows (a torch tensor, a writable NumPy array), else a copy made as
// tensor() makes one, and the operator runs again on that: `t +
// numpy.ones(3)` is float64 as in PyTorch, and `numpy.ones(3) + t`, which
// NumPy hands to t.__radd__ (Tensor.__array_ufunc__ is None), works too.
// Functions (bp.add(t, array)) take backplane tensors only, as PyTorch's
// take torch tensors only; their TypeError names the foreign type by its
// module (torch.Tensor, numpy.ndarray: the two Tensor classes never meet in
// a message) and says how to convert it.
#include <Python.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>
#include <structmember.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/function_schema.h"
#include "backplane/dispatch/ivalue.h"
#include "bindings.h"

namespace backplane::python {
namespace {

// One overload's calling convention, from its schema.
struct Overload {
  Overload(OperatorHandle o, FunctionSchema s, std::string q) : op(o), schema(std::move(s)), qualified(std::move(q)) {}
  // Packets own their overloads and are freed with the GIL held.
  ~Overload() {
    if (!Py_IsInitialized()) return;
    for (PyObject* n : names) Py_DECREF(n);
    Py_XDECREF(return_type);
  }
  Overload(const Overload&) = delete;
  Overload& operator=(const Overload&) = delete;
  OperatorHandle op;
  FunctionSchema schema;
  std::string qualified;            // "bp::add.Tensor"
  std::vector<PyObject*> names;     // interned argument names (owned references)
  size_t num_positional = 0;        // arguments before '*'
  int self_index = -1;              // the argument named "self", if any
  std::vector<int> out_args;        // indices of the out= (Tensor(a!) kwarg-only) arguments
  std::vector<int> return_alias;    // per return: the argument it may alias (Tensor(a)), or -1
  std::vector<bool> return_writes;  // per return: Tensor(a!), always that argument
  PyObject* return_type = nullptr;  // a namedtuple type for named multiple returns (owned)
  int scalar_rank = 0;              // Scalar parameters: overloads with fewer are tried first
  bool has_out_name = false;        // one out argument is called "out"
};

struct PacketObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject* dict;
  std::vector<std::shared_ptr<Overload>>* overloads;
  std::string* name;  // "bp::add" or "bp::add.Tensor"
  bool method;        // the first positional argument fills `self`
  bool operator_mode;
};

PyTypeObject* g_packet_type = nullptr;
PyObject* g_namedtuple = nullptr;  // collections.namedtuple

constexpr size_t kMaxArgs = 32;

// A type by name: builtins bare (int, list), Backplane's tensor as
// "Tensor" (the schemas' word), any other with its module (torch.Tensor,
// numpy.ndarray).
std::string typeNameOf(PyObject* o) {
  if (o == Py_None) return "None";
  if (tensorOrNull(o)) return "Tensor";
  PyTypeObject* type = Py_TYPE(o);
  std::string name = type->tp_name;  // "numpy.ndarray" for static types, the bare name for heap types
  if (name.find('.') != std::string::npos) return name;
  nb::object module = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__module__"));
  if (!module.is_valid()) {
    PyErr_Clear();
    return name;
  }
  if (!PyUnicode_Check(module.ptr())) return name;
  std::string m = PyUnicode_AsUTF8(module.ptr());
  if (m == "builtins") return name;
  // Only the package: torch.Tensor, not torch._tensor.Tensor.
  return m.substr(0, m.find('.')) + "." + name;
}

// Note [Foreign operands]: an array or another library's tensor.
bool isForeignArray(PyObject* o) {
  if (tensorOrNull(o) || PyLong_Check(o) || PyFloat_Check(o) || PyBool_Check(o) || PyComplex_Check(o) ||
      PyList_Check(o) || PyTuple_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) || PyDict_Check(o))
    return false;
  return PyObject_HasAttrString(o, "__dlpack__") == 1 || PyObject_HasAttrString(o, "__array__") == 1;
}

// A foreign array as a backplane.Tensor: shared through DLPack where its
// producer allows, else copied.
nb::object foreignOperand(PyObject* o) {
  if (PyObject_HasAttrString(o, "__dlpack__") == 1) {
    try {
      return wrap(importDLPack(nb::handle(o)));
    } catch (nb::python_error&) {        // refused by its producer (a read-only NumPy array, torch's bool)
    } catch (const backplane::Error&) {  // a device no plugin provides natively
    }
  }
  return wrap(tensorFromData(nb::handle(o)));
}

int64_t layoutOrFormatNumber(const std::string& name, bool* ok) {
  *ok = true;
  if (name == "strided" || name == "contiguous_format") return 0;
  if (name == "preserve_format") return 1;
  if (name == "channels_last") return 2;
  *ok = false;
  return 0;
}

// The outcome of converting one Python object to one schema argument.
enum class Fit { Yes, WrongType };

bool isInt(PyObject* o) { return PyLong_Check(o) && !PyBool_Check(o); }

Fit toInt64(PyObject* o, const Argument& arg, int64_t* out) {
  if (!isInt(o)) {
    // A Tensor has __index__ (one integral element) but is no int argument:
    // an overload taking an int does not fit a tensor (another may).
    if (PyBool_Check(o) || !PyIndex_Check(o) || tensorOrNull(o)) return Fit::WrongType;
  }
  int overflow = 0;
  PyObject* index = PyNumber_Index(o);
  if (!index) throw nb::python_error();
  long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow != 0) {
    BP_THROW(kInvalidArgument, "argument '", arg.name, "' is out of range: ", nb::str(nb::handle(o)).c_str(),
             " does not fit int64");
  }
  *out = v;
  return Fit::Yes;
}

Fit toScalar(PyObject* o, const Argument& arg, Scalar* out) {
  if (PyBool_Check(o)) {
    *out = Scalar(o == Py_True);
    return Fit::Yes;
  }
  if (PyLong_Check(o)) {
    int64_t v = 0;
    Fit f = toInt64(o, arg, &v);
    *out = Scalar(v);
    return f;
  }
  if (PyFloat_Check(o)) {
    *out = Scalar(PyFloat_AS_DOUBLE(o));
    return Fit::Yes;
  }
  // NumPy's scalars (numpy.float32(2), numpy.int8(3), numpy.bool_(True)) are
  // numbers too; arrays are not, even with one element.
  const char* type_name = Py_TYPE(o)->tp_name;
  if (std::strncmp(type_name, "numpy.", 6) == 0 && std::strcmp(type_name, "numpy.ndarray") != 0) {
    if (std::strcmp(type_name, "numpy.bool_") == 0 || std::strcmp(type_name, "numpy.bool") == 0) {
      int truth = PyObject_IsTrue(o);
      if (truth < 0) throw nb::python_error();
      *out = Scalar(truth == 1);
      return Fit::Yes;
    }
    if (PyIndex_Check(o)) {
      int64_t v = 0;
      Fit f = toInt64(o, arg, &v);
      *out = Scalar(v);
      return f;
    }
    if (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {
      double d = PyFloat_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
      *out = Scalar(d);
      return Fit::Yes;
    }
  }
  return Fit::WrongType;
}

// One element of `t`'s base type.
Fit convertElement(PyObject* o, const SchemaType& t, const Argument& arg, IValue* out) {
  switch (t.base) {
    case BaseType::Tensor: {
      const Tensor* x = tensorOrNull(o);
      if (!x) return Fit::WrongType;
      *out = IValue(static_cast<const TensorBase&>(*x));
      return Fit::Yes;
    }
    case BaseType::Int: {
      int64_t v = 0;
      Fit f = toInt64(o, arg, &v);
      if (f == Fit::Yes) *out = IValue(v);
      return f;
    }
    case BaseType::Float:
      if (PyFloat_Check(o)) {
        *out = IValue(PyFloat_AS_DOUBLE(o));
        return Fit::Yes;
      }
      if (isInt(o)) {
        double d = PyLong_AsDouble(o);
        if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
        *out = IValue(d);
        return Fit::Yes;
      }
      if (Scalar number; !PyBool_Check(o) && toScalar(o, arg, &number) == Fit::Yes && !number.isBool()) {
        *out = IValue(number.toDouble());  // a NumPy scalar
        return Fit::Yes;
      }
      return Fit::WrongType;
    case BaseType::Bool:
      if (!PyBool_Check(o)) return Fit::WrongType;
      *out = IValue(o == Py_True);
      return Fit::Yes;
    case BaseType::Str: {
      if (!PyUnicode_Check(o)) return Fit::WrongType;
      Py_ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(o, &n);
      if (!s) throw nb::python_error();
      *out = IValue(std::string(s, static_cast<size_t>(n)));
      return Fit::Yes;
    }
    case BaseType::Scalar: {
      Scalar s;
      Fit f = toScalar(o, arg, &s);
      if (f == Fit::Yes) *out = IValue(s);
      return f;
    }
    case BaseType::ScalarType: {
      bool ok = true;
      ScalarType d = dtypeFrom(nb::handle(o), &ok);
      if (!ok) return Fit::WrongType;
      *out = IValue(d);
      return Fit::Yes;
    }
    case BaseType::Device: {
      bool ok = true;
      Device d = deviceFrom(nb::handle(o), &ok);
      if (!ok) return Fit::WrongType;
      *out = IValue(d);
      return Fit::Yes;
    }
    case BaseType::Layout:
    case BaseType::MemoryFormat: {
      if (!PyUnicode_Check(o)) return Fit::WrongType;
      const char* s = PyUnicode_AsUTF8(o);
      if (!s) throw nb::python_error();
      bool ok = false;
      int64_t v = layoutOrFormatNumber(s, &ok);
      BP_CHECK(ok, "argument '", arg.name, "': unknown ", baseTypeName(t.base), " '", s,
               "'; use strided, contiguous_format, preserve_format or channels_last");
      *out = IValue(v);
      return Fit::Yes;
    }
  }
  return Fit::WrongType;
}

Fit convertList(PyObject* o, const SchemaType& t, const Argument& arg, IValue* out) {
  // int[N] (and float[N], bool[N]) take one value for all N.
  if (t.list_size && !PyList_Check(o) && !PyTuple_Check(o) && t.base != BaseType::Tensor) {
    IValue one;
    if (convertElement(o, t, arg, &one) != Fit::Yes) return Fit::WrongType;
    size_t n = static_cast<size_t>(*t.list_size);
    switch (t.base) {
      case BaseType::Int: *out = IValue(std::vector<int64_t>(n, one.toInt())); return Fit::Yes;
      case BaseType::Float: *out = IValue(std::vector<double>(n, one.toDouble())); return Fit::Yes;
      case BaseType::Bool: *out = IValue(std::vector<bool>(n, one.toBool())); return Fit::Yes;
      default: return Fit::WrongType;
    }
  }
  if (!PyList_Check(o) && !PyTuple_Check(o)) return Fit::WrongType;
  PyObject* seq = o;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  SchemaType element = t;
  element.is_list = false;
  element.is_optional = false;
  IValue v;
  switch (t.base) {
    case BaseType::Int: {
      std::vector<int64_t> xs(static_cast<size_t>(n));
      for (Py_ssize_t i = 0; i < n; ++i)
        if (toInt64(items[i], arg, &xs[static_cast<size_t>(i)]) != Fit::Yes) return Fit::WrongType;
      *out = IValue(std::move(xs));
      return Fit::Yes;
    }
    case BaseType::Float: {
      std::vector<double> xs;
      xs.reserve(static_cast<size_t>(n));
      for (Py_ssize_t i = 0; i < n; ++i) {
        if (convertElement(items[i], element, arg, &v) != Fit::Yes) return Fit::WrongType;
        xs.push_back(v.toDouble());
      }
      *out = IValue(std::move(xs));
      return Fit::Yes;
    }
    case BaseType::Bool: {
      std::vector<bool> xs;
      for (Py_ssize_t i = 0; i < n; ++i) {
        if (!PyBool_Check(items[i])) return Fit::WrongType;
        xs.push_back(items[i] == Py_True);
      }
      *out = IValue(std::move(xs));
      return Fit::Yes;
    }
    case BaseType::Tensor: {
      if (t.element_optional) {
        std::vector<std::optional<TensorBase>> xs;
        for (Py_ssize_t i = 0; i < n; ++i) {
          if (items[i] == Py_None) {
            xs.emplace_back(std::nullopt);
            continue;
          }
          const Tensor* x = tensorOrNull(items[i]);
          if (!x) return Fit::WrongType;
          xs.emplace_back(*x);
        }
        *out = IValue(std::move(xs));
        return Fit::Yes;
      }
      std::vector<TensorBase> xs;
      xs.reserve(static_cast<size_t>(n));
      for (Py_ssize_t i = 0; i < n; ++i) {
        const Tensor* x = tensorOrNull(items[i]);
        if (!x) return Fit::WrongType;
        xs.push_back(*x);
      }
      *out = IValue(std::move(xs));
      return Fit::Yes;
    }
    default: return Fit::WrongType;
  }
}

Fit convert(PyObject* o, const Argument& arg, IValue* out) {
  const SchemaType& t = arg.type;
  if (o == Py_None) {
    if (!t.is_optional) return Fit::WrongType;
    *out = IValue();
    return Fit::Yes;
  }
  return t.is_list ? convertList(o, t, arg, out) : convertElement(o, t, arg, out);
}

// Why an overload did not fit a call. Recorded as data and put into words
// only when no overload fits (the TypeError): a call that fits its second
// overload (x + 1 is add.Scalar) must not pay for the first one's message.
struct Mismatch {
  enum class Kind { NotAMethod, TooManyPositional, OutTupleSize, MultipleValues, UnknownKeyword, Missing, WrongType };
  Kind kind = Kind::WrongType;
  size_t arg = 0;           // the schema argument concerned
  size_t count = 0;         // positional parameters (TooManyPositional), out arguments (OutTupleSize)
  size_t given = 0;         // positional arguments given
  PyObject* obj = nullptr;  // the keyword (UnknownKeyword) or the value (WrongType); borrowed from the call
};

std::string describe(const Mismatch& m, const Overload& ov) {
  const auto& args = ov.schema.arguments();
  switch (m.kind) {
    case Mismatch::Kind::NotAMethod: return "it has no argument named 'self', so it is not a Tensor method";
    case Mismatch::Kind::TooManyPositional:
      return strCat("it takes ", m.count, " positional argument", m.count == 1 ? "" : "s", " but ", m.given,
                    " were given");
    case Mismatch::Kind::OutTupleSize: return strCat("out= must be a tuple of ", m.count, " tensors");
    case Mismatch::Kind::MultipleValues: return strCat("got multiple values for argument '", args[m.arg].name, "'");
    case Mismatch::Kind::UnknownKeyword: return strCat("it has no argument named '", PyUnicode_AsUTF8(m.obj), "'");
    case Mismatch::Kind::Missing:
      return strCat("missing argument '", args[m.arg].name, "' (", args[m.arg].type.str(), ")");
    case Mismatch::Kind::WrongType:
      return strCat("argument '", args[m.arg].name, "' must be ", args[m.arg].type.str(), ", not ", typeNameOf(m.obj),
                    isForeignArray(m.obj) && args[m.arg].type.str().find("Tensor") != std::string::npos
                        ? " (make it a backplane.Tensor first: bp.from_dlpack(x) shares its memory, bp.tensor(x) "
                          "copies it)"
                        : "");
  }
  return "";
}

bool isOutKeyword(PyObject* name) { return PyUnicode_CompareWithASCIIString(name, "out") == 0; }

int findArgument(const Overload& ov, PyObject* name) {
  for (size_t i = 0; i < ov.names.size(); ++i)
    if (ov.names[i] == name) return static_cast<int>(i);
  for (size_t i = 0; i < ov.names.size(); ++i)
    if (PyUnicode_Compare(ov.names[i], name) == 0) return static_cast<int>(i);
  return -1;
}

// Fills `slots` (one per schema argument) from a call, or says why not.
bool bind(const Overload& ov, const PacketObject* p, PyObject* const* args, size_t nargs, PyObject* kwnames,
          PyObject** slots, Mismatch* m, PyObject** packed_ints) {
  const auto& schema_args = ov.schema.arguments();
  size_t n = schema_args.size();
  std::fill(slots, slots + n, nullptr);
  // The positional parameters in the order a call lists them: with method
  // packets, `self` first, then the others.
  size_t order[kMaxArgs];
  size_t num_order = 0;
  if (p->method && ov.self_index >= 0) order[num_order++] = static_cast<size_t>(ov.self_index);
  for (size_t i = 0; i < ov.num_positional; ++i)
    if (!(p->method && static_cast<int>(i) == ov.self_index)) order[num_order++] = i;
  if (p->method && ov.self_index < 0) {
    m->kind = Mismatch::Kind::NotAMethod;
    return false;
  }
  size_t first_free = (p->method && ov.self_index >= 0) ? 1 : 0;
  // zeros(2, 3), x.flip(0, 1), x.flip(0): the only positional parameter
  // besides self is int[], and the call lists ints.
  bool int_list_only = num_order == first_free + 1 && schema_args[order[first_free]].type.is_list &&
                       schema_args[order[first_free]].type.base == BaseType::Int;
  if (nargs > num_order || (int_list_only && nargs == num_order && isInt(args[first_free]))) {
    bool can_pack = int_list_only;
    if (can_pack) {
      for (size_t i = first_free; i < nargs; ++i)
        if (!isInt(args[i]) && !(PyIndex_Check(args[i]) && !PyBool_Check(args[i]) && !tensorOrNull(args[i]))) {
          can_pack = false;
          break;
        }
    }
    if (!can_pack) {
      *m = Mismatch{Mismatch::Kind::TooManyPositional, 0, num_order, nargs, nullptr};
      return false;
    }
    PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(nargs - first_free));
    if (!tuple) throw nb::python_error();
    for (size_t i = first_free; i < nargs; ++i) {
      Py_INCREF(args[i]);
      PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i - first_free), args[i]);
    }
    *packed_ints = tuple;
    for (size_t i = 0; i < first_free; ++i) slots[order[i]] = args[i];
    slots[order[first_free]] = tuple;
  } else {
    for (size_t i = 0; i < nargs; ++i) slots[order[i]] = args[i];
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    PyObject* value = args[nargs + static_cast<size_t>(k)];
    int i = findArgument(ov, name);
    if (i < 0 && isOutKeyword(name) && !ov.out_args.empty()) {
      // out=(values, indices) for an op whose out arguments have their own names.
      if (ov.out_args.size() == 1) {
        i = ov.out_args[0];
      } else {
        if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != static_cast<Py_ssize_t>(ov.out_args.size())) {
          *m = Mismatch{Mismatch::Kind::OutTupleSize, 0, ov.out_args.size(), 0, nullptr};
          return false;
        }
        for (size_t j = 0; j < ov.out_args.size(); ++j) {
          if (slots[ov.out_args[j]]) {
            *m = Mismatch{Mismatch::Kind::MultipleValues, static_cast<size_t>(ov.out_args[j]), 0, 0, nullptr};
            return false;
          }
          slots[ov.out_args[j]] = PyTuple_GET_ITEM(value, static_cast<Py_ssize_t>(j));
        }
        continue;
      }
    }
    if (i < 0) {
      *m = Mismatch{Mismatch::Kind::UnknownKeyword, 0, 0, 0, name};
      return false;
    }
    if (slots[i]) {
      *m = Mismatch{Mismatch::Kind::MultipleValues, static_cast<size_t>(i), 0, 0, nullptr};
      return false;
    }
    slots[i] = value;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!slots[i] && !schema_args[i].default_value) {
      *m = Mismatch{Mismatch::Kind::Missing, i, 0, 0, nullptr};
      return false;
    }
  }
  return true;
}

// Converts the bound slots to `stack`, or says which argument does not fit.
bool convertAll(const Overload& ov, PyObject** slots, Stack& stack, Mismatch* m) {
  const auto& schema_args = ov.schema.arguments();
  stack.clear();
  for (size_t i = 0; i < schema_args.size(); ++i) {
    const Argument& arg = schema_args[i];
    if (!slots[i]) {
      stack.push_back(defaultArgumentValue(arg));
      continue;
    }
    IValue v;
    if (convert(slots[i], arg, &v) != Fit::Yes) {
      *m = Mismatch{Mismatch::Kind::WrongType, i, 0, 0, slots[i]};
      return false;
    }
    stack.push_back(std::move(v));
  }
  return true;
}

nb::object fromIValue(IValue& v) {
  switch (v.tag()) {
    case IValue::Tag::None: return nb::none();
    case IValue::Tag::Tensor: return wrap(Tensor(std::move(v).toTensor()));
    case IValue::Tag::Int: return nb::int_(v.toInt());
    case IValue::Tag::Double: return nb::float_(v.toDouble());
    case IValue::Tag::Bool: return nb::bool_(v.toBool());
    case IValue::Tag::String: return nb::str(v.toString().c_str(), v.toString().size());
    case IValue::Tag::Scalar: {
      Scalar s = v.toScalar();
      if (s.isBool()) return nb::bool_(s.toBool());
      if (s.isIntegral()) return nb::int_(s.toInt());
      return nb::float_(s.toDouble());
    }
    case IValue::Tag::ScalarType: return dtypeObject(v.toScalarType());
    case IValue::Tag::Device: return nb::cast(v.toDevice());
    case IValue::Tag::IntList: return nb::cast(v.toIntList());
    case IValue::Tag::DoubleList: return nb::cast(v.toDoubleList());
    case IValue::Tag::BoolList: return nb::cast(v.toBoolList());
    case IValue::Tag::TensorList: {
      nb::list out;
      for (TensorBase& t : v.toTensorList()) out.append(wrap(Tensor(std::move(t))));
      return out;
    }
    case IValue::Tag::OptionalTensorList: {
      nb::list out;
      for (auto& t : v.toOptionalTensorList()) out.append(t ? wrap(Tensor(std::move(*t))) : nb::none());
      return out;
    }
  }
  return nb::none();
}

PyObject* callOverload(const Overload& ov, PyObject** slots, Stack& stack) {
  {
    nb::gil_scoped_release release;
    ov.op.callBoxed(stack);
  }
  size_t nret = ov.schema.returns().size();
  auto result = [&](size_t i) -> nb::object {
    // Tensor(a!) returns are the argument; a Tensor(a) return may be (to()
    // of a tensor already on that device and dtype): then it is the same
    // Python object too, as in PyTorch.
    int alias = ov.return_alias[i];
    if (alias >= 0 && slots[alias]) {
      if (ov.return_writes[i]) return nb::borrow(slots[alias]);
      const Tensor* passed = tensorOrNull(slots[alias]);
      if (passed && stack[i].isTensor() && stack[i].toTensor().unsafeGetImpl() == passed->unsafeGetImpl())
        return nb::borrow(slots[alias]);
    }
    return fromIValue(stack[i]);
  };
  if (nret == 0) return Py_NewRef(Py_None);
  if (nret == 1) return result(0).release().ptr();
  nb::tuple values = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(nret)));
  for (size_t i = 0; i < nret; ++i)
    PyTuple_SET_ITEM(values.ptr(), static_cast<Py_ssize_t>(i), result(i).release().ptr());
  if (ov.return_type) return PyObject_Call(ov.return_type, values.ptr(), nullptr);
  return values.release().ptr();
}

// The stack a call fills: reused by the thread's next call (no allocation
// once it has grown), or a fresh one while a call on this thread is still
// converting its arguments (a conversion that called back into Backplane).
struct StackLease {
  StackLease() : stack(inUse() ? fresh.emplace() : shared()) { ++depth(); }
  ~StackLease() {
    stack.clear();
    --depth();
  }
  static Stack& shared() {
    thread_local Stack s;
    return s;
  }
  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  static bool inUse() { return depth() > 0; }
  std::optional<Stack> fresh;
  Stack& stack;
};

std::string callSignature(PyObject* const* args, size_t nargs, PyObject* kwnames) {
  // Appended piece by piece: GCC 12 at -O3 mistakes `"=" + std::string` for
  // an overlapping copy (-Wrestrict).
  std::string s = "(";
  for (size_t i = 0; i < nargs; ++i) {
    if (i) s += ", ";
    s += typeNameOf(args[i]);
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    if (nargs + static_cast<size_t>(k)) s += ", ";
    s += PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
    s += '=';
    s += typeNameOf(args[nargs + static_cast<size_t>(k)]);
  }
  s += ')';
  return s;
}

PyObject* packetCall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* p = reinterpret_cast<PacketObject*>(self);
  size_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  bool out_given = false;
  for (Py_ssize_t k = 0; k < nkw && !out_given; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    if (isOutKeyword(name)) out_given = true;
  }
  try {
    StackLease lease;
    PyObject* slots[kMaxArgs];
    // Why each tried overload did not fit (no allocation unless none fits).
    struct Miss {
      const Overload* ov;
      Mismatch why;
      nb::object packed;  // keeps a packed int list alive for its message
    };
    constexpr size_t kMaxMisses = 16;
    Miss misses[kMaxMisses];
    size_t num_misses = 0, num_untold = 0;
    for (const auto& ovp : *p->overloads) {
      const Overload& ov = *ovp;
      // out= picks the out overloads; their own out names do as well.
      if (!ov.out_args.empty()) {
        bool named = out_given;
        for (Py_ssize_t k = 0; k < nkw && !named; ++k) {
          int i = findArgument(ov, PyTuple_GET_ITEM(kwnames, k));
          named = i >= 0 && std::find(ov.out_args.begin(), ov.out_args.end(), i) != ov.out_args.end();
        }
        if (!named && p->overloads->size() > 1) continue;
      } else if (out_given) {
        continue;
      }
      Mismatch m;
      PyObject* packed = nullptr;
      bool bound = bind(ov, p, args, nargs, kwnames, slots, &m, &packed);
      nb::object packed_owner = nb::steal(packed);
      if (bound && convertAll(ov, slots, lease.stack, &m)) return callOverload(ov, slots, lease.stack);
      if (num_misses < kMaxMisses) {
        misses[num_misses++] = Miss{&ov, m, std::move(packed_owner)};
      } else {
        ++num_untold;
      }
    }
    if (p->operator_mode) {
      // Note [Foreign operands]: `self <op> other` with other an array.
      if (nargs == 2 && nkw == 0 && isForeignArray(args[1])) {
        nb::object other = foreignOperand(args[1]);
        PyObject* again[2] = {args[0], other.ptr()};
        return packetCall(self, again, 2, nullptr);
      }
      Py_RETURN_NOTIMPLEMENTED;
    }
    std::string msg;
    std::string got = callSignature(args, nargs, kwnames);
    if (num_misses == 1) {
      msg = strCat(*p->name, "() got ", got, ", but ", describe(misses[0].why, *misses[0].ov),
                   ". Schema: ", misses[0].ov->schema.toString());
    } else if (num_misses == 0) {
      msg = strCat(*p->name, "() got ", got,
                   (out_given ? "; out= was given but it has no out= overload: "
                              : "; only its out= overloads are left, which need out=: "));
      for (const auto& ovp : *p->overloads) msg += "\n  " + ovp->schema.toString();
    } else {
      msg = strCat(*p->name, "() got ", got, ", which fits none of its overloads:");
      for (size_t i = 0; i < num_misses; ++i)
        msg +=
            strCat("\n  ", misses[i].ov->schema.toString(), "\n      (", describe(misses[i].why, *misses[i].ov), ")");
      if (num_untold) msg += strCat("\n  and ", num_untold, " more");
    }
    PyErr_SetString(PyExc_TypeError, msg.c_str());
    return nullptr;
  } catch (nb::python_error& e) {
    e.restore();
    return nullptr;
  } catch (const backplane::Error& e) {
    raiseError(e);
    return nullptr;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "an operator call failed with an exception that is not a std::exception");
    return nullptr;
  }
}

void packetDealloc(PyObject* self) {
  auto* p = reinterpret_cast<PacketObject*>(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(p->dict);
  delete p->overloads;
  delete p->name;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

int packetTraverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<PacketObject*>(self)->dict);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int packetClear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<PacketObject*>(self)->dict);
  return 0;
}

PyObject* packetRepr(PyObject* self) {
  auto* p = reinterpret_cast<PacketObject*>(self);
  return PyUnicode_FromFormat("<backplane op %s>", p->name->c_str());
}

// x.op without a call: a bound method, as for Python functions.
PyObject* packetDescrGet(PyObject* self, PyObject* obj, PyObject* type) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyMemberDef g_packet_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(PacketObject, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(PacketObject, dict), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef g_packet_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot g_packet_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(packetDealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(packetTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(packetClear)},
    {Py_tp_repr, reinterpret_cast<void*>(packetRepr)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_descr_get, reinterpret_cast<void*>(packetDescrGet)},
    {Py_tp_members, g_packet_members},
    {Py_tp_getset, g_packet_getset},
    {Py_tp_doc, const_cast<char*>("An operator of Backplane's table, called through its schemas "
                                  "(docs/python.md).")},
    {0, nullptr},
};

PyType_Spec g_packet_spec = {
    "backplane.OpOverloadPacket",
    sizeof(PacketObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    g_packet_slots,
};

std::shared_ptr<Overload> makeOverload(OperatorHandle op) {
  auto ov = std::make_shared<Overload>(op, op.schema(), op.operatorName().qualifiedName());
  const auto& args = ov->schema.arguments();
  BP_CHECK(args.size() <= kMaxArgs, ov->qualified, " has ", args.size(), " arguments; Python calls take at most ",
           kMaxArgs);
  for (size_t i = 0; i < args.size(); ++i) {
    PyObject* name = PyUnicode_InternFromString(args[i].name.c_str());
    if (!name) throw nb::python_error();
    ov->names.push_back(name);
    if (!args[i].kwarg_only) ov->num_positional = i + 1;
    if (args[i].name == "self") ov->self_index = static_cast<int>(i);
    if (args[i].isOut()) {
      ov->out_args.push_back(static_cast<int>(i));
      if (args[i].name == "out") ov->has_out_name = true;
    }
    if (args[i].type.base == BaseType::Scalar && !args[i].type.is_list) ++ov->scalar_rank;
  }
  bool all_named = ov->schema.returns().size() > 1;
  for (const Argument& r : ov->schema.returns()) {
    int alias = -1;
    if (r.alias) {
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i].alias && args[i].alias->set == r.alias->set) alias = static_cast<int>(i);
    }
    ov->return_alias.push_back(alias);
    ov->return_writes.push_back(r.alias && r.alias->is_write);
    all_named = all_named && !r.name.empty();
  }
  if (all_named) {
    nb::list fields;
    for (const Argument& r : ov->schema.returns()) fields.append(nb::str(r.name.c_str()));
    std::string type_name = ov->schema.name().name + "_result";
    ov->return_type = PyObject_CallFunction(g_namedtuple, "sO", type_name.c_str(), fields.ptr());
    if (!ov->return_type) throw nb::python_error();
  }
  return ov;
}

nb::object newPacket(std::string name, std::vector<std::shared_ptr<Overload>> overloads, bool method, bool op_mode) {
  PyObject* o = PyType_GenericAlloc(g_packet_type, 0);
  if (!o) throw nb::python_error();
  auto* p = reinterpret_cast<PacketObject*>(o);
  p->vectorcall = packetCall;
  p->dict = PyDict_New();
  p->overloads = new std::vector<std::shared_ptr<Overload>>(std::move(overloads));
  p->name = new std::string(std::move(name));
  p->method = method;
  p->operator_mode = op_mode;
  nb::object obj = nb::steal(o);
  nb::list schemas;
  std::string doc;
  for (const auto& ov : *p->overloads) {
    std::string s = ov->schema.toString();
    schemas.append(nb::str(s.c_str()));
    doc += s + "\n";
  }
  PyDict_SetItemString(p->dict, "schemas", schemas.ptr());
  bool takes_self = false;
  for (const auto& ov : *p->overloads) takes_self = takes_self || ov->self_index >= 0;
  PyDict_SetItemString(p->dict, "takes_self", takes_self ? Py_True : Py_False);
  PyDict_SetItemString(p->dict, "__doc__", nb::str(doc.c_str()).ptr());
  std::string short_name = p->name->substr(p->name->find("::") + 2);
  PyDict_SetItemString(p->dict, "__name__", nb::str(short_name.c_str()).ptr());
  PyDict_SetItemString(p->dict, "__qualname__", nb::str(short_name.c_str()).ptr());
  return obj;
}

// A dict from alternating keys and values: record("a", 1, "b", x).
inline void fillRecord(nb::dict&) {}
template <typename V, typename... Rest>
void fillRecord(nb::dict& d, const char* key, V&& value, Rest&&... rest) {
  d[key] = nb::cast(std::forward<V>(value));
  fillRecord(d, std::forward<Rest>(rest)...);
}
template <typename... KV>
nb::dict record(KV&&... kv) {
  nb::dict d;
  fillRecord(d, std::forward<KV>(kv)...);
  return d;
}

}  // namespace

namespace {

nb::object packetOf(const std::string& ns, const std::string& name, std::vector<std::shared_ptr<Overload>> overloads,
                    bool method, bool operator_mode);

}  // namespace

nb::object makePacket(const std::string& ns, const std::string& name, bool method, bool operator_mode) {
  std::vector<std::shared_ptr<Overload>> overloads;
  for (const OperatorHandle& op : Dispatcher::singleton().definedOperators()) {
    const OperatorName& n = op.operatorName();
    if (n.ns == ns && n.name == name) overloads.push_back(makeOverload(op));
  }
  return packetOf(ns, name, std::move(overloads), method, operator_mode);
}

namespace {

nb::object packetOf(const std::string& ns, const std::string& name, std::vector<std::shared_ptr<Overload>> overloads,
                    bool method, bool operator_mode) {
  if (overloads.empty()) {
    std::string qualified = ns + "::" + name;
    BP_THROW(kNotFound, "no operator ", qualified, " is defined.", Dispatcher::singleton().didYouMean(qualified),
             " (`backplane ops` lists them; a plugin's operators appear once it is loaded.)");
  }
  // Tensor-taking overloads before Scalar-taking ones; otherwise by name.
  std::stable_sort(overloads.begin(), overloads.end(),
                   [](const auto& a, const auto& b) { return a->scalar_rank < b->scalar_rank; });
  std::string qualified = ns + "::" + name;
  nb::object packet = newPacket(qualified, overloads, method, operator_mode);
  auto* p = reinterpret_cast<PacketObject*>(packet.ptr());
  for (const auto& ov : overloads) {
    const std::string& overload = ov->schema.name().overload;
    std::string attr = overload.empty() ? "default" : overload;
    nb::object single = newPacket(ov->qualified, {ov}, method, operator_mode);
    PyDict_SetItemString(p->dict, attr.c_str(), single.ptr());
  }
  return packet;
}

// Every operator of namespace `ns` as {name: packet}, from one look at the
// table (the package installs ~200 of them at import; one lookup each sorted
// the whole table every time).
nb::dict packetsOf(const std::string& ns, bool method, bool operator_mode) {
  std::map<std::string, std::vector<std::shared_ptr<Overload>>> groups;
  for (const OperatorHandle& op : Dispatcher::singleton().definedOperators()) {
    const OperatorName& n = op.operatorName();
    if (n.ns == ns) groups[n.name].push_back(makeOverload(op));
  }
  nb::dict out;
  for (auto& [name, overloads] : groups)
    out[name.c_str()] = packetOf(ns, name, std::move(overloads), method, operator_mode);
  return out;
}

}  // namespace

void bindOps(nb::module_& m) {
  g_namedtuple = nb::object(nb::module_::import_("collections").attr("namedtuple")).release().ptr();
  g_packet_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&g_packet_spec));
  if (!g_packet_type) throw nb::python_error();
  m.attr("OpOverloadPacket") = nb::handle(reinterpret_cast<PyObject*>(g_packet_type));
  m.def("_packet", &makePacket, nb::arg("ns"), nb::arg("name"), nb::arg("method") = false, nb::arg("operator") = false,
        "The callable for operator ns::name, all its overloads (Note [Calling operators from Python]).");
  m.def(
      "_foreign_operand",
      [](nb::handle o) -> nb::object { return isForeignArray(o.ptr()) ? foreignOperand(o.ptr()) : nb::none(); },
      nb::arg("obj"),
      "A NumPy array or another library's tensor as an operator's operand (Note [Foreign operands]): a "
      "backplane.Tensor sharing its memory where DLPack allows, else a copy; None for any other object.");
  m.def("_packets", &packetsOf, nb::arg("ns"), nb::arg("method") = false, nb::arg("operator") = false,
        "{name: packet} for every operator of namespace ns (what _packet makes, from one look at the table).");
  m.def(
      "_operator_names",
      []() {
        nb::list out;
        for (const OperatorHandle& op : Dispatcher::singleton().definedOperators()) {
          const OperatorName& n = op.operatorName();
          out.append(nb::make_tuple(n.ns, n.name, n.overload));
        }
        return out;
      },
      "(namespace, name, overload) of every defined operator.");
  m.def(
      "_signatures",
      [](nb::handle packet) {
        BP_CHECK(Py_TYPE(packet.ptr()) == g_packet_type, "_signatures() takes an operator (OpOverloadPacket)");
        auto* p = reinterpret_cast<PacketObject*>(packet.ptr());
        auto type = [](const SchemaType& t) {
          return record("base", std::string(baseTypeName(t.base)), "is_list", t.is_list, "list_size",
                        t.list_size ? nb::object(nb::int_(*t.list_size)) : nb::none(), "element_optional",
                        t.element_optional, "is_optional", t.is_optional);
        };
        auto defaultValue = [](const DefaultValue& d) -> nb::object {
          return std::visit(
              [](const auto& v) -> nb::object {
                using T = std::decay_t<decltype(v)>;
                if constexpr (std::is_same_v<T, std::monostate>)
                  return nb::none();
                else
                  return nb::cast(v);
              },
              d);
        };
        nb::list out;
        for (const auto& ov : *p->overloads) {
          nb::list args, returns;
          for (const Argument& a : ov->schema.arguments()) {
            args.append(record("name", a.name, "type", type(a.type), "has_default", a.default_value.has_value(),
                               "default", a.default_value ? defaultValue(*a.default_value) : nb::none(), "kwarg_only",
                               a.kwarg_only, "is_out", a.isOut()));
          }
          for (const Argument& r : ov->schema.returns())
            returns.append(
                record("name", r.name, "type", type(r.type), "is_alias", r.alias.has_value() && r.alias->is_write));
          out.append(record("overload", ov->schema.name().overload, "schema", ov->schema.toString(), "arguments", args,
                            "returns", returns));
        }
        return out;
      },
      nb::arg("op"), "Each overload's arguments and returns, structured (for the type stubs).");
  m.def(
      "_schemas",
      []() {
        nb::list out;
        for (const OperatorHandle& op : Dispatcher::singleton().definedOperators())
          out.append(nb::str(op.schema().toString().c_str()));
        return out;
      },
      "The schema of every defined operator, as text.");
}

}  // namespace backplane::python
