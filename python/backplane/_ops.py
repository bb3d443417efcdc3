"""Operators from the table, as functions, Tensor methods and operators, and
generically through `backplane.ops.<namespace>.<name>` (Note [Calling
operators from Python] in python/src/op_call.cc).
"""
from . import _backplane

__all__ = ["ops", "install"]


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
    number; against a 0-d `like`, _reflected gives like a dimension first."""
    if isinstance(number, bool):
        dt = _backplane.bool
    elif isinstance(number, int):
        dt = _backplane.int64
    elif isinstance(number, float):
        dt = _backplane.float64 if like.dtype.is_floating_point else _backplane.float32
    else:
        return None
    return _full((), number, dtype=dt, device=like.device)


_full = _backplane._packet("bp", "full")


def _reflected(name):
    """`number <op> tensor` for the ops with no Scalar-first overload."""
    forward = _backplane._packet("bp", name)

    def op(self, other):
        t = _number_tensor(other, self)
        if t is None:
            return NotImplemented
        if self.ndim == 0:
            # Two 0-d tensors promote as equals; a Python number must not
            # widen the tensor (2.5 / float16 0-d is float16): compute on a
            # 1-element view, which outranks the number, and drop its dim.
            return forward(t, self.unsqueeze(0)).squeeze(0)
        return forward(t, self)
    op.__name__ = f"__r{name}__"
    return op


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
    # NumPy defers to Tensor's operators (which refuse arrays) instead of
    # turning `array + tensor` into an array through __array__.
    tensor.__array_ufunc__ = None
    tensor.__rtruediv__ = _reflected("div")
    tensor.__rfloordiv__ = _reflected("floor_divide")
    tensor.__rmod__ = _reflected("remainder")
    tensor.__rpow__ = _reflected("pow")
