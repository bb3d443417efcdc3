"""Operators from the table, as functions, Tensor methods and operators, and
generically through `backplane.ops.<namespace>.<name>` (Note [Calling
operators from Python] in python/src/op_call.cc).
"""
import numbers as _numbers
import operator as _operator

from . import _backplane

__all__ = ["ops", "install", "split", "chunk", "allclose", "unique", "clone", "flatten", "narrow", "numel", "permute",
           "reshape", "squeeze", "t", "transpose", "unsqueeze"]


class _OpNamespace:
    """`backplane.ops.<ns>`: each attribute is an operator of namespace ns,
    with all its overloads; `.<overload>` picks one (`add.Tensor`, `.default`)."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        try:
            packet = _backplane._packet(self._name, op)
        except _backplane.NotFoundError as e:
            raise AttributeError(str(e)) from None
        setattr(self, op, packet)  # looked up once; load_plugin() clears the cache
        return packet

    def __dir__(self):
        return sorted({name for ns, name, _ in _backplane._operator_names() if ns == self._name})

    def __repr__(self):
        return f"<backplane.ops.{self._name}>"


class _Ops:
    """`backplane.ops`: the operator table by namespace, like torch.ops.
    `backplane.ops.spconv.get_indice_pairs(...)` calls a plugin's operator."""

    def __getattr__(self, ns):
        if ns.startswith("__"):
            raise AttributeError(ns)
        if ns not in self.namespaces():
            raise AttributeError(
                f"no operator namespace '{ns}'; defined: {', '.join(self.namespaces())} "
                "(a plugin's operators appear once it is loaded: backplane.load_plugin(path))")
        namespace = _OpNamespace(ns)
        setattr(self, ns, namespace)
        return namespace

    def __dir__(self):
        return self.namespaces()

    @staticmethod
    def namespaces():
        return sorted({ns for ns, _, _ in _backplane._operator_names()})

    def _forget(self):
        """Drops the cached namespaces and operators (after a plugin load)."""
        self.__dict__.clear()


ops = _Ops()

# Python operators -> standard operators. Reflected forms of commutative ones
# reuse the forward op; the others are in _reflected below.
_BINARY = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_",
    "__sub__": "sub", "__isub__": "sub_", "__rsub__": "rsub",
    "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_",
    "__truediv__": "div", "__itruediv__": "div_",
    "__floordiv__": "floor_divide", "__ifloordiv__": "floor_divide_",
    "__mod__": "remainder", "__imod__": "remainder_",
    "__pow__": "pow", "__ipow__": "pow_",
    "__matmul__": "matmul",
    "__and__": "bitwise_and", "__rand__": "bitwise_and", "__iand__": "bitwise_and_",
    "__or__": "bitwise_or", "__ror__": "bitwise_or", "__ior__": "bitwise_or_",
    "__xor__": "bitwise_xor", "__rxor__": "bitwise_xor", "__ixor__": "bitwise_xor_",
    "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
}
_UNARY = {"__neg__": "neg", "__abs__": "abs", "__invert__": "bitwise_not"}


def _number_tensor(number, like):
    """A 0-d tensor on like's device holding a Python number: int64 for an
    int, float64 for a float when like is floating (else float32, the
    default dtype), bool for a bool. Against a tensor with dimensions a 0-d
    tensor never widens the result, which is how PyTorch promotes a Python
    number; against a 0-d `like`, _reflected gives like a dimension first.
    A NumPy scalar counts as the Python number of its kind, as in PyTorch."""
    if isinstance(number, bool) or _is_numpy_bool(number):
        dt, number = _backplane.bool, bool(number)
    elif isinstance(number, _numbers.Integral):
        dt, number = _backplane.int64, int(number)
    elif isinstance(number, _numbers.Real):
        dt, number = (_backplane.float64 if like.dtype.is_floating_point else _backplane.float32), float(number)
    else:
        return None
    return _full((), number, dtype=dt, device=like.device)


def _is_numpy_bool(obj):
    # numpy.bool_ is no numbers.Integral; the package does not import NumPy.
    return type(obj).__module__ == "numpy" and type(obj).__name__ in ("bool_", "bool")


_full = _backplane._packet("bp", "full")


def _reflected(name):
    """`number <op> tensor` for the ops with no Scalar-first overload."""
    forward = _backplane._packet("bp", name)

    def op(self, other):
        t = _number_tensor(other, self)
        if t is None:
            t = _backplane._foreign_operand(other)  # Note [Foreign operands]
            if t is None:
                return NotImplemented
            return forward(t, self)
        if self.ndim == 0:
            # Two 0-d tensors promote as equals; a Python number must not
            # widen the tensor (2.5 / float16 0-d is float16): compute on a
            # 1-element view, which outranks the number, and drop its dim.
            return forward(t, self.unsqueeze(0)).squeeze(0)
        return forward(t, self)
    op.__name__ = f"__r{name}__"
    return op


def _reflected_foreign(operator, name):
    """`other <op> tensor`: `operator` (a reflected operator packet, or None)
    for what it takes, else `name`(other, tensor) with other a NumPy array or
    another library's tensor (Note [Foreign operands])."""
    forward = _backplane._packet("bp", name)

    def op(self, other):
        result = NotImplemented if operator is None else operator(self, other)
        if result is NotImplemented:
            t = _backplane._foreign_operand(other)
            if t is not None:
                return forward(t, self)
        return result
    op.__name__ = f"__r{name}__"
    return op


# Note [NumPy protocols]
# A NumPy ufunc called on a backplane.Tensor (numpy.exp(t), numpy.add(a, t),
# and `array + t`, which NumPy turns into numpy.add) runs the Backplane op
# of the same meaning and returns a backplane.Tensor, as PyTorch's tensors
# give back torch tensors: the other operands are taken as Python's
# operators take them (numbers, NumPy arrays and other libraries' tensors,
# Note [Foreign operands]). A ufunc without a Backplane counterpart, a
# ufunc method other than a call (numpy.add.reduce) and NumPy's keywords
# (out=, where=, dtype=) raise a TypeError that says what to call instead.
# NumPy's functions (numpy.sum, numpy.concatenate) run in NumPy on the
# arrays CPU tensors share memory with (numpy.asarray(t)) and return what
# NumPy returns; a tensor on another device raises __array__'s error.
_UFUNC_OPERATORS = {
    "add": _operator.add, "subtract": _operator.sub, "multiply": _operator.mul, "true_divide": _operator.truediv,
    "divide": _operator.truediv, "floor_divide": _operator.floordiv, "remainder": _operator.mod,
    "power": _operator.pow, "matmul": _operator.matmul, "equal": _operator.eq, "not_equal": _operator.ne,
    "less": _operator.lt, "less_equal": _operator.le, "greater": _operator.gt, "greater_equal": _operator.ge,
    "bitwise_and": _operator.and_, "bitwise_or": _operator.or_, "bitwise_xor": _operator.xor,
    "negative": _operator.neg, "absolute": _operator.abs, "invert": _operator.invert,
}
# NumPy's name -> Backplane's, for ufuncs that are standard ops of one
# tensor (or of two tensors: maximum, minimum, logical_*).
_UFUNC_OPS = {
    "exp": "exp", "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p", "expm1": "expm1",
    "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "sign": "sign", "floor": "floor",
    "ceil": "ceil", "trunc": "trunc", "rint": "round", "reciprocal": "reciprocal", "isnan": "isnan",
    "isinf": "isinf", "isfinite": "isfinite", "logical_not": "logical_not", "maximum": "maximum",
    "minimum": "minimum", "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "arctan2": "atan2", "erf": "erf",
}


def _ufunc_operand(x):
    """An operand of a ufunc as Python's operators take it: a NumPy scalar as
    the Python number of its kind (its own operators would call the ufunc
    again), an array or a foreign tensor as a backplane.Tensor."""
    if isinstance(x, _backplane.Tensor) or type(x) in (bool, int, float):  # numpy.float64 is a float subclass
        return x
    if _is_numpy_bool(x):
        return bool(x)
    if isinstance(x, _numbers.Integral):
        return int(x)
    if isinstance(x, _numbers.Real):
        return float(x)
    foreign = _backplane._foreign_operand(x)
    return x if foreign is None else foreign


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    name = ufunc.__name__
    call = f"numpy.{name}" + ("" if method == "__call__" else f".{method}")
    if method != "__call__":
        raise TypeError(f"{call}() on a backplane.Tensor: only calling a ufunc runs Backplane's op; use Backplane's "
                        "own (t.sum(), t.cumsum(dim), ...) or t.numpy() to compute it in NumPy")
    if kwargs:
        raise TypeError(f"{call}() on a backplane.Tensor takes no keyword ({', '.join(sorted(kwargs))}); call "
                        "Backplane's op (its out= and dtype= where it has them), or pass t.numpy() to NumPy")
    operands = [_ufunc_operand(x) for x in inputs]
    if name in _UFUNC_OPERATORS:
        return _UFUNC_OPERATORS[name](*operands)
    op = _backplane._packets("bp").get(_UFUNC_OPS.get(name, ""))
    if op is None:
        raise TypeError(f"{call}() has no Backplane counterpart for a backplane.Tensor; pass t.numpy() to compute "
                        "it in NumPy (a CPU tensor shares its memory)")
    tensors = [x if isinstance(x, _backplane.Tensor) else None for x in operands]
    like = next(t for t in tensors if t is not None)
    # A number operand of a two-tensor op becomes a 0-d tensor, which promotes as a Python number does.
    return op(*[t if t is not None else (_number_tensor(x, like) if _number_tensor(x, like) is not None else x)
                for t, x in zip(tensors, operands)])


def _as_arrays(value):
    if isinstance(value, _backplane.Tensor):
        return value.__array__()
    if isinstance(value, (list, tuple)):
        return type(value)(_as_arrays(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_arrays(v) for k, v in value.items()}
    return value


def _array_function(self, func, types, args, kwargs):
    return func(*_as_arrays(args), **_as_arrays(kwargs))


# Note [Tensor conveniences]: PyTorch's Tensor methods that are views or
# conversions of what exists (no new computation), in Python: x.float(),
# x.long(), ... (x.to(dtype)); expand_as, view_as, type_as; chunk and split
# (tuples of narrow views, as PyTorch's); cuda(). Computation is standard
# ops, so every device has it.
_DTYPE_METHODS = {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16",
                  "long": "int64", "int": "int32", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool"}


def _dtype_method(name, dtype_name):
    def method(self):
        return self.to(getattr(_backplane, dtype_name))
    method.__name__ = name
    method.__doc__ = f"This tensor as {dtype_name} (itself when it already is): x.to(backplane.{dtype_name})."
    return method


def _expand_as(self, other):
    """A view of this tensor expanded to other's shape: x.expand(other.shape)."""
    return self.expand(other.shape)


def _view_as(self, other):
    """A view of this tensor with other's shape: x.view(other.shape)."""
    return self.view(other.shape)


def _type_as(self, other):
    """This tensor in other's dtype: x.to(other.dtype)."""
    return self.to(other.dtype)


def _cuda(self, device=None, non_blocking=False):
    """This tensor on CUDA device `device` (an int, or 'cuda:N'; the first when None): x.to('cuda:N')."""
    if device is None:
        device = "cuda:0"
    elif isinstance(device, int) and not isinstance(device, bool):
        device = f"cuda:{device}"
    return self.to(device, non_blocking=non_blocking)


def _wrap_dim(dim, ndim, what):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{what}: dimension {dim} is out of range for a tensor of {ndim} dimensions "
                         f"(expected {-n}..{n - 1})")
    return dim % n


def split(tensor, split_size_or_sections, dim=0):
    """Views of `tensor` along `dim`, as torch.split: pieces of split_size_or_sections elements (the last may be
    smaller), or of the sizes a list gives (which must add up to the dim's size)."""
    dim = _wrap_dim(dim, tensor.ndim, "split")
    size = tensor.shape[dim] if tensor.ndim else 1
    if isinstance(split_size_or_sections, int) and not isinstance(split_size_or_sections, bool):
        step = split_size_or_sections
        if step <= 0 and not (step == 0 and size == 0):
            raise ValueError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, size - start) for start in range(0, size, step)] if size else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != size:
            raise ValueError(f"split: sections {sizes} must be non-negative and add up to {size}, the size of "
                             f"dimension {dim}")
    out, start = [], 0
    for s in sizes:
        out.append(tensor.narrow(dim, start, s))
        start += s
    return tuple(out)


def chunk(tensor, chunks, dim=0):
    """At most `chunks` views of `tensor` along `dim`, as torch.chunk: each of ceil(size / chunks) elements
    but the last."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks <= 0:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
    dim = _wrap_dim(dim, tensor.ndim, "chunk")
    size = tensor.shape[dim] if tensor.ndim else 1
    return split(tensor, max(-(-size // chunks), 1), dim)


# torch's functions for the views and queries Tensor has as methods
# (torch.reshape(x, shape) is x.reshape(shape)): metadata, not operators.
def clone(input):
    """A copy of input with its own storage, as torch.clone: input.clone()."""
    return input.clone()


def flatten(input, start_dim=0, end_dim=-1):
    """input with dims start_dim..end_dim merged, as torch.flatten: input.flatten(start_dim, end_dim)."""
    return input.flatten(start_dim, end_dim)


def narrow(input, dim, start, length):
    """The view of `length` elements of dim from `start`, as torch.narrow: input.narrow(dim, start, length)."""
    return input.narrow(dim, start, length)


def numel(input):
    """The number of elements, as torch.numel: input.numel()."""
    return input.numel()


def permute(input, dims):
    """The view with dims reordered, as torch.permute: input.permute(dims)."""
    return input.permute(dims)


def reshape(input, shape):
    """input with another shape (a view where the strides allow), as torch.reshape: input.reshape(shape)."""
    return input.reshape(shape)


def squeeze(input, dim=None):
    """input without its dims of size 1 (or only `dim`), as torch.squeeze: input.squeeze(dim)."""
    return input.squeeze(dim)


def t(input):
    """The transpose of a tensor of at most 2 dims, as torch.t: input.t()."""
    return input.t()


def transpose(input, dim0, dim1):
    """The view with dim0 and dim1 swapped, as torch.transpose: input.transpose(dim0, dim1)."""
    return input.transpose(dim0, dim1)


def unsqueeze(input, dim):
    """The view with a dim of size 1 inserted at dim, as torch.unsqueeze: input.unsqueeze(dim)."""
    return input.unsqueeze(dim)


_VIEW_FUNCTIONS = (clone, flatten, narrow, numel, permute, reshape, squeeze, t, transpose, unsqueeze)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of input, sorted, as torch.unique: with return_inverse also each element's index
    among them (input's shape), with return_counts how often each occurs; a tuple when either is asked for.
    dim= (unique slices) is not supported: unique(x.flatten()) or a loop over the slices."""
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported: Backplane's unique works on the flattened "
                                  "tensor (dim=None)")
    values, inverse, counts = _unique2(input, sorted, return_inverse, return_counts)
    if return_inverse and return_counts:
        return values, inverse, counts
    if return_inverse:
        return values, inverse
    if return_counts:
        return values, counts
    return values


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when isclose(input, other, ...) holds everywhere, as torch.allclose (a Python bool; reads the answer
    back from input's device)."""
    return bool(_isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan).all())


def _to(self, *args, dtype=None, device=None, non_blocking=False, copy=False):
    """x.to(device), x.to(dtype), x.to(device, dtype), x.to(other) and the
    keyword forms, as PyTorch's Tensor.to: this tensor when nothing changes
    (unless copy=True), else a new one."""
    other = None
    for a in args:
        if isinstance(a, _backplane.dtype):
            if dtype is not None:
                raise TypeError("Tensor.to(): dtype given twice")
            dtype = a
        elif isinstance(a, (str, _backplane.Device)):
            if device is not None:
                raise TypeError("Tensor.to(): device given twice")
            device = a
        elif isinstance(a, _backplane.Tensor):
            other = a
        else:
            raise TypeError(f"Tensor.to(): expected a device, a dtype or a Tensor, not {type(a).__name__}")
    if other is not None:
        if dtype is not None or device is not None:
            raise TypeError("Tensor.to(other): give a tensor, or a device and/or dtype, not both")
        return _to_other(self, other, non_blocking=non_blocking, copy=copy)
    return _to_options(self, dtype=dtype, device=device, non_blocking=non_blocking, copy=copy)


_isclose = _backplane._packet("bp", "isclose")
_unique2 = _backplane._packet("bp", "_unique2")
_to_other = _backplane._packet("bp", "to").other
_to_options = _backplane._packet("bp", "to").dtype_layout


def install(namespace):
    """Puts every standard operator (bp::) into `namespace` (the package's
    globals) and onto Tensor as a method where it takes `self`, and binds
    Python's operators. Existing names win: the package's own functions and
    Tensor's bound methods are not replaced."""
    functions = _backplane._packets("bp")
    methods = _backplane._packets("bp", method=True)
    operators = _backplane._packets("bp", method=True, operator=True)
    tensor = _backplane.Tensor
    for name in sorted(functions):
        if name.startswith("_"):
            continue
        if name not in namespace:
            namespace[name] = functions[name]
        if methods[name].takes_self and not hasattr(tensor, name):
            setattr(tensor, name, methods[name])
    for dunder, name in list(_BINARY.items()) + list(_UNARY.items()):
        if name in operators:
            setattr(tensor, dunder, operators[name])
    tensor.to = _to
    # Note [Tensor conveniences]
    for name, dtype_name in _DTYPE_METHODS.items():
        setattr(tensor, name, _dtype_method(name, dtype_name))
    tensor.expand_as, tensor.view_as, tensor.type_as, tensor.cuda = _expand_as, _view_as, _type_as, _cuda
    tensor.split, tensor.chunk, tensor.allclose, tensor.unique = split, chunk, allclose, unique
    namespace.setdefault("split", split)
    namespace.setdefault("chunk", chunk)
    namespace.setdefault("allclose", allclose)
    namespace.setdefault("unique", unique)
    for function in _VIEW_FUNCTIONS:
        namespace.setdefault(function.__name__, function)
    # Note [NumPy protocols]: NumPy's ufuncs run Backplane's ops (so that
    # `array + tensor` is a tensor, as `tensor + array` is); its functions
    # run on the arrays the tensors share memory with.
    tensor.__array_ufunc__ = _array_ufunc
    tensor.__array_function__ = _array_function
    # rsub has no Tensor overload, and matmul no reflected form: an array on
    # the left (numpy.ones(3) - t, array @ t) runs the forward op on it
    # (Note [Foreign operands]).
    tensor.__rsub__ = _reflected_foreign(operators["rsub"], "sub")
    tensor.__rmatmul__ = _reflected_foreign(None, "matmul")
    tensor.__rtruediv__ = _reflected("div")
    tensor.__rfloordiv__ = _reflected("floor_divide")
    tensor.__rmod__ = _reflected("remainder")
    tensor.__rpow__ = _reflected("pow")
