"""Optimizers from Python (python/backplane/optim.py): SGD and AdamW against
torch.optim's on the same parameters and gradients (PyTorch, a test
dependency), on the CPU and through the composites on a device with no
kernels; and the errors a wrong setup gets."""
import pytest

import backplane
from backplane import optim

SHAPES = [(3, 4), (5,), (2, 1, 3)]


def torch_or_skip():
    return pytest.importorskip("torch")


def compare(device, make_ours, make_theirs, steps=4, tol=1e-12):
    torch = torch_or_skip()
    backplane.manual_seed(3)
    params = [backplane.randn(list(s), dtype=backplane.float64) for s in SHAPES]
    theirs = [torch.tensor(p.tolist(), dtype=torch.float64, requires_grad=True) for p in params]
    ours = [p.to(device).detach().requires_grad_() for p in params]
    opt, topt = make_ours(ours), make_theirs(theirs)
    for step in range(steps):
        for p, t in zip(ours, theirs):
            g = backplane.randn(list(p.shape), dtype=backplane.float64)
            p.grad = g.to(device)
            t.grad = torch.tensor(g.tolist(), dtype=torch.float64)
        opt.step()
        topt.step()
        for i, (p, t) in enumerate(zip(ours, theirs)):
            a = torch.tensor(p.detach().cpu().tolist(), dtype=torch.float64)
            assert torch.allclose(a, t.detach(), rtol=tol, atol=tol), f"parameter {i} after step {step + 1}"


def test_sgd_with_momentum_matches_torch(device):
    torch = torch_or_skip()
    compare(device, lambda p: optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01))
    compare(device, lambda p: optim.SGD(p, lr=0.1, momentum=0.8, nesterov=True, maximize=True),
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.8, nesterov=True, maximize=True))


def test_adamw_matches_torch(device):
    torch = torch_or_skip()
    for amsgrad in (False, True):
        compare(device, lambda p: optim.AdamW(p, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=amsgrad),
                lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=amsgrad))


def test_a_training_loop_fits_a_line():
    x = backplane.randn([32, 1], dtype=backplane.float64)
    y = x * 3 - 1
    w = backplane.zeros([1, 1], dtype=backplane.float64).requires_grad_()
    b = backplane.zeros([1], dtype=backplane.float64).requires_grad_()
    opt = optim.AdamW([w, b], lr=0.1, weight_decay=0.0)
    for _ in range(300):
        opt.zero_grad()
        loss = ((x @ w + b - y) * (x @ w + b - y)).mean()
        loss.backward()
        opt.step()
    assert w.grad is not None and not w.grad_fn
    assert abs(w.tolist()[0][0] - 3) < 1e-2 and abs(b.tolist()[0] + 1) < 1e-2
    opt.zero_grad()
    assert w.grad is None
    assert opt.steps == [300, 300]


def test_parameters_without_a_gradient_are_skipped():
    a = backplane.tensor([1.0, 2.0]).requires_grad_()
    b = backplane.tensor([3.0]).requires_grad_()
    opt = optim.SGD([a, b], lr=0.5)
    (a * a).sum().backward()
    opt.step()
    assert a.tolist() == [0.0, 0.0] and b.tolist() == [3.0]


def test_bad_setups_say_what_is_wrong():
    x = backplane.tensor([1.0, 2.0]).requires_grad_()
    with pytest.raises(ValueError, match="got no parameters"):
        optim.SGD([])
    with pytest.raises(ValueError, match="parameter 0 is not a leaf that requires grad"):
        optim.SGD([backplane.tensor([1.0])])
    with pytest.raises(ValueError, match="parameter 0 is not a leaf that requires grad"):
        optim.AdamW([x * 2])
    with pytest.raises(ValueError, match="parameters 0 and 1 are the same tensor"):
        optim.AdamW([x, x])
    with pytest.raises(TypeError, match="parameter 0 is a list"):
        optim.SGD([[1.0]])
    with pytest.raises(ValueError, match="nesterov momentum requires momentum > 0"):
        optim.SGD([x], nesterov=True)
    with pytest.raises(ValueError, match="option lr must be a finite number >= 0"):
        optim.SGD([x], lr=-1)
    with pytest.raises(ValueError, match=r"option beta2 must be in \[0, 1\), got 1.5"):
        optim.AdamW([x], betas=(0.9, 1.5))
