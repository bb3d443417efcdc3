"""Autograd from Python (python/src/autograd.cc, python/backplane/autograd.py):
requires_grad, .grad, backward, detach, no_grad, autograd.grad, hooks and
custom functions, on the CPU and through the CPU fallback of a device with
no kernels."""
import math
import threading

import pytest

import backplane
from backplane import autograd


def leaf(values, device="cpu"):
    return backplane.tensor(values, dtype=backplane.float64, device=device).requires_grad_()


def values(t):
    return t.cpu().tolist()


def test_backward_accumulates_into_leaves(device):
    x = leaf([1.0, -2.0, 3.0], device)
    assert x.requires_grad and x.is_leaf and x.grad is None and x.grad_fn is None
    y = (x * x).sum()
    assert y.requires_grad and not y.is_leaf and y.grad_fn == "sumBackward"
    y.backward()
    assert values(x.grad) == [2.0, -4.0, 6.0]
    assert x.grad.device == x.device
    (x * 3).sum().backward()
    assert values(x.grad) == [5.0, -1.0, 9.0]
    x.grad = None
    assert x.grad is None


def test_tensors_that_do_not_require_grad_record_nothing():
    a = backplane.tensor([1.0, 2.0])
    b = a * 2
    assert not b.requires_grad and b.grad_fn is None
    with pytest.raises(backplane.InvalidArgumentError, match="does not require grad"):
        b.sum().backward()


def test_no_grad_is_a_context_manager_a_decorator_and_thread_local():
    x = leaf([1.0])
    with backplane.no_grad():
        assert not backplane.is_grad_enabled()
        assert not (x * 2).requires_grad
        seen = []
        t = threading.Thread(target=lambda: seen.append(backplane.is_grad_enabled()))
        t.start()
        t.join()
        assert seen == [True]
        with backplane.enable_grad():
            assert (x * 2).requires_grad

    @backplane.no_grad()
    def step():
        return x * 2

    assert not step().requires_grad
    assert backplane.is_grad_enabled() and (x * 2).requires_grad
    with backplane.set_grad_enabled(False):
        assert not backplane.is_grad_enabled()
    assert backplane.is_grad_enabled()


def test_grad_returns_gradients_and_leaves_grad_alone():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    gx, gw = autograd.grad((x * w).sum(), (x, w))
    assert values(gx) == [3.0, 4.0] and values(gw) == [1.0, 2.0]
    assert x.grad is None
    unused = leaf([1.0])
    with pytest.raises(backplane.InvalidArgumentError, match="allow_unused"):
        autograd.grad((x * 2).sum(), [unused])
    assert autograd.grad((x * 2).sum(), [unused], allow_unused=True) == (None,)


def test_second_derivatives_with_create_graph():
    x = leaf([2.0])
    (dy,) = autograd.grad((x * x * x).sum(), [x], create_graph=True)
    assert values(dy) == [12.0] and dy.requires_grad
    (d2,) = autograd.grad(dy.sum(), [x])
    assert values(d2) == [12.0]


def test_retain_graph():
    x = leaf([1.0])
    y = x.exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    assert values(x.grad)[0] == pytest.approx(2 * math.e)
    with pytest.raises(backplane.InvalidArgumentError, match="retain_graph=true"):
        y.backward()


def test_hooks():
    x = leaf([1.0, 2.0])
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(values(g)) or g * 10)
    accumulated = []
    x.register_post_accumulate_grad_hook(lambda t: accumulated.append(values(t.grad)))
    y.sum().backward()
    assert seen == [[1.0, 1.0]]
    assert values(x.grad) == [20.0, 20.0]
    assert accumulated == [[20.0, 20.0]]


def test_hook_errors_reach_python():
    x = leaf([1.0])
    y = x * 2

    def bad(g):
        raise ValueError("from the hook")

    y.register_hook(bad)
    with pytest.raises(ValueError, match="from the hook"):
        y.sum().backward()


def test_detach_and_retain_grad():
    x = leaf([1.0, 2.0])
    d = (x * 2).detach()
    assert not d.requires_grad
    y = x * 3
    y.retain_grad()
    (y * d).sum().backward()
    assert values(y.grad) == [2.0, 4.0]
    assert values(x.grad) == [6.0, 12.0]


def test_in_place_errors_say_what_to_do():
    x = leaf([1.0, 2.0])
    with pytest.raises(backplane.InvalidArgumentError, match="leaf that requires grad.*no_grad"):
        x.add_(backplane.tensor([1.0, 1.0], dtype=backplane.float64))
    w = backplane.tensor([3.0, 4.0], dtype=backplane.float64)
    y = (x * w).sum()
    w.add_(w)
    with pytest.raises(backplane.FailedPreconditionError, match="bp::mul.Tensor.*'other'.*in-place"):
        y.backward()


def test_requires_grad_only_for_floating_leaves():
    with pytest.raises(backplane.InvalidArgumentError, match="floating dtype"):
        backplane.tensor([1, 2]).requires_grad_()
    y = leaf([1.0]) * 2
    with pytest.raises(backplane.InvalidArgumentError, match="only a leaf"):
        y.requires_grad = False


class Cube(autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x * ctx.scale, None


def test_custom_function():
    x = leaf([1.0, 2.0])
    y = Cube.apply(x, 2.0)
    assert y.requires_grad and y.grad_fn == "CubeBackward"
    y.sum().backward()
    assert values(x.grad) == [6.0, 24.0]
    with backplane.no_grad():
        assert not Cube.apply(x, 2.0).requires_grad


def test_custom_function_with_a_wrong_count_of_gradients():
    class Bad(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    with pytest.raises(backplane.InvalidArgumentError, match="returned 2 gradients, but forward took 1"):
        Bad.apply(leaf([1.0])).sum().backward()


def test_a_small_regression_trains():
    backplane.manual_seed(0)
    x = backplane.randn((32, 1), dtype=backplane.float64)
    y = x * 3 - 1
    w = backplane.zeros((1, 1), dtype=backplane.float64).requires_grad_()
    b = backplane.zeros((1,), dtype=backplane.float64).requires_grad_()
    for _ in range(200):
        loss = ((backplane.linear(x, w, b) - y) ** 2).mean()
        loss.backward()
        with backplane.no_grad():
            w.sub_(w.grad * 0.1)
            b.sub_(b.grad * 0.1)
        w.grad = None
        b.grad = None
    assert values(w)[0][0] == pytest.approx(3, abs=1e-3)
    assert values(b)[0] == pytest.approx(-1, abs=1e-3)
