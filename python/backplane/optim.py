"""Optimizers from Python (docs/python.md#optimizers): SGD and AdamW, as
torch.optim's, over the optimizer operators `_fused_sgd_` and
`_fused_adamw_` (Note [Optimizer ops]): each step makes one multi-tensor
call per group of parameters sharing a device and dtype (and, for AdamW, a
step count), under no_grad, on the parameters' device. The C++ classes of
backplane/autograd/optim.h do the same.
"""
import math

from . import _backplane
from ._ops import ops
from .autograd import no_grad

__all__ = ["AdamW", "Optimizer", "SGD"]


class Optimizer:
    """What every optimizer shares: the parameters and zero_grad()."""

    def __init__(self, params, name):
        self._name = name
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{name}: got no parameters; pass the tensors to train")
        for i, p in enumerate(self.params):
            if not isinstance(p, _backplane.Tensor):
                raise TypeError(f"{name}: parameter {i} is a {type(p).__name__}, not a backplane.Tensor")
            if not (p.requires_grad and p.is_leaf):
                raise ValueError(f"{name}: parameter {i} is not a leaf that requires grad; call "
                                 "requires_grad_() on the tensor you train (not on a result computed from it)")
            if not p.is_contiguous():
                raise ValueError(f"{name}: parameter {i} is not contiguous; train a contiguous tensor")
            for j in range(i):
                if self.params[j] is p:
                    raise ValueError(f"{name}: parameters {j} and {i} are the same tensor; list each once")

    def zero_grad(self):
        """Drops every parameter's gradient (torch's set_to_none=True)."""
        for p in self.params:
            p.grad = None

    def _groups(self, key):
        """Positions of the parameters that have a gradient, grouped by
        (device, dtype, key(i)) in the parameters' order."""
        groups = {}
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            groups.setdefault((str(p.device), str(p.dtype), key(i)), []).append(i)
        return groups

    @staticmethod
    def _check(name, option, value, lo=0.0):
        if not (math.isfinite(value) and value >= lo):
            raise ValueError(f"{name}: option {option} must be a finite number >= {lo:g}, got {value}")


class SGD(Optimizer):
    """torch.optim.SGD: p -= lr * g, with weight decay added to g and, with
    momentum, g replaced by the momentum buffer (nesterov: g + momentum * buf)."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        super().__init__(params, "SGD")
        for option, value in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
            self._check("SGD", option, value)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum requires momentum > 0 and dampening 0 "
                             f"(got momentum {momentum}, dampening {dampening})")
        self.lr, self.momentum, self.dampening = float(lr), float(momentum), float(dampening)
        self.weight_decay, self.nesterov, self.maximize = float(weight_decay), bool(nesterov), bool(maximize)
        self.momentum_buffers = [None] * len(self.params)

    def step(self):
        with no_grad():
            first = lambda i: self.momentum != 0 and self.momentum_buffers[i] is None  # noqa: E731
            for (_, _, is_first), members in self._groups(first).items():
                buffers = []
                if self.momentum != 0:
                    for i in members:
                        if self.momentum_buffers[i] is None:
                            self.momentum_buffers[i] = ops.bp.empty_like(self.params[i])
                        buffers.append(self.momentum_buffers[i])
                ops.bp._fused_sgd_([self.params[i] for i in members],
                                   [self.params[i].grad.contiguous() for i in members], buffers,
                                   weight_decay=self.weight_decay, momentum=self.momentum, lr=self.lr,
                                   dampening=self.dampening, nesterov=self.nesterov, maximize=self.maximize,
                                   is_first_step=bool(is_first))


class AdamW(Optimizer):
    """torch.optim.AdamW: decoupled weight decay p *= 1 - lr * weight_decay,
    then Adam's bias-corrected step; the step count is kept per parameter."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False):
        super().__init__(params, "AdamW")
        for option, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            self._check("AdamW", option, value)
        for option, beta in zip(("beta1", "beta2"), betas):
            if not (math.isfinite(beta) and 0 <= beta < 1):
                raise ValueError(f"AdamW: option {option} must be in [0, 1), got {beta}")
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.weight_decay, self.amsgrad, self.maximize = float(weight_decay), bool(amsgrad), bool(maximize)
        self.steps = [0] * len(self.params)
        self.exp_avgs = [None] * len(self.params)
        self.exp_avg_sqs = [None] * len(self.params)
        self.max_exp_avg_sqs = [None] * len(self.params)

    def step(self):
        with no_grad():
            for (_, _, done), members in self._groups(lambda i: self.steps[i]).items():
                for i in members:
                    if self.steps[i] == 0:
                        self.exp_avgs[i] = ops.bp.zeros_like(self.params[i])
                        self.exp_avg_sqs[i] = ops.bp.zeros_like(self.params[i])
                        if self.amsgrad:
                            self.max_exp_avg_sqs[i] = ops.bp.zeros_like(self.params[i])
                    self.steps[i] += 1
                ops.bp._fused_adamw_([self.params[i] for i in members],
                                     [self.params[i].grad.contiguous() for i in members],
                                     [self.exp_avgs[i] for i in members], [self.exp_avg_sqs[i] for i in members],
                                     [self.max_exp_avg_sqs[i] for i in members] if self.amsgrad else [],
                                     step=done + 1, lr=self.lr, beta1=self.betas[0], beta2=self.betas[1],
                                     weight_decay=self.weight_decay, eps=self.eps, amsgrad=self.amsgrad,
                                     maximize=self.maximize)
