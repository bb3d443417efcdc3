"""Gradients from Python (docs/python.md#autograd): grad mode, backward,
grad, and custom functions. The engine is Backplane's own (the autograd
layer of libbackplane.so); this module is a thin layer over it.
"""
import functools

from . import _backplane
from ._backplane import Tensor, is_grad_enabled  # noqa: F401

__all__ = ["Function", "FunctionCtx", "backward", "enable_grad", "grad", "is_grad_enabled", "no_grad",
           "set_grad_enabled"]


class _GradMode:
    """Sets grad mode for this thread while a block (or a decorated
    function) runs, and restores the previous mode after it."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        self.prev = is_grad_enabled()
        _backplane._set_grad_enabled(self.mode)

    def __exit__(self, *exc) -> None:
        _backplane._set_grad_enabled(self.prev)

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with _GradMode(mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Ops in this block (or decorated function) record no gradients."""

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(_GradMode):
    """Ops in this block (or decorated function) record gradients, inside no_grad too."""

    def __init__(self) -> None:
        super().__init__(True)


class set_grad_enabled(_GradMode):
    """Sets grad mode for this thread at once, as PyTorch's does; as a context
    manager it restores the previous mode when the block ends, and as a
    decorator it changes nothing until the function runs."""

    def __init__(self, mode: bool) -> None:
        super().__init__(mode)
        self.prev = is_grad_enabled()
        _backplane._set_grad_enabled(self.mode)

    def __enter__(self) -> None:
        pass  # set by __init__; __exit__ restores

    def __call__(self, fn):
        _backplane._set_grad_enabled(self.prev)
        return super().__call__(fn)


def _as_list(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False) -> None:
    """Accumulates the gradients of `tensors` into the .grad of the leaves they depend on."""
    _backplane._backward(_as_list(tensors), _as_list(grad_tensors), retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple; None for an
    unused input with allow_unused), without touching any .grad."""
    return tuple(_backplane._grad(_as_list(outputs), _as_list(inputs), _as_list(grad_outputs), retain_graph,
                                  create_graph, allow_unused))


class FunctionCtx:
    """What forward passes to backward: save_for_backward(*tensors),
    saved_tensors, needs_input_grad, mark_non_differentiable(*tensors), and
    any attribute you set."""

    def __init__(self) -> None:
        self.needs_input_grad = ()
        self._saved = ()
        self._versions = ()
        self._non_differentiable = []

    def save_for_backward(self, *tensors) -> None:
        self._saved = tuple(t.detach() if isinstance(t, Tensor) else t for t in tensors)
        self._versions = tuple(t._version if isinstance(t, Tensor) else None for t in tensors)

    @property
    def saved_tensors(self):
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if isinstance(t, Tensor) and t._version != v:
                raise _backplane.FailedPreconditionError(
                    f"saved tensor {i} was modified by an in-place op after forward saved it "
                    f"(version {t._version}, saved at {v}); clone() it before writing it")
        return self._saved

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.extend(tensors)


class Function:
    """A differentiable op written in Python:

        class Square(backplane.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * 2 * x

        y = Square.apply(x)

    forward runs with recording off; backward gets one gradient per result
    and returns one per forward argument (None where there is none)."""

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass defines forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass defines backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        inputs = [a if isinstance(a, Tensor) else None for a in args]
        record = is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)
        ctx.needs_input_grad = tuple(record and t is not None and t.requires_grad for t in inputs)
        with no_grad():
            out = cls.forward(ctx, *args)
        if not record:
            return out
        single = isinstance(out, Tensor)
        results = [out] if single else list(out)

        def run_backward(grads):
            r = cls.backward(ctx, *grads)
            r = (r,) if isinstance(r, Tensor) or r is None else tuple(r)
            if len(r) != len(args):
                raise _backplane.InvalidArgumentError(
                    f"{cls.__name__}.backward returned {len(r)} gradients, but forward took {len(args)} "
                    "arguments; return one per forward argument (None for those without)")
            return list(r)

        recorded = _backplane._record_function(cls.__name__, inputs, results, run_backward,
                                               ctx._non_differentiable)
        return recorded[0] if single else type(out)(recorded)
