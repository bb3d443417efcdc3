"""Advanced indexing (t[idx], t[mask], t[idx] = v) and the ops behind it
(index, index_put_, nonzero, masked_select, scatter, index_add) and beside
it (tril/triu, roll, repeat, isclose/allclose), checked against PyTorch on
the same inputs: values, shapes, dtypes, errors and gradients."""
import os
import subprocess
import sys

import numpy as np
import pytest

import backplane as bp

torch = pytest.importorskip("torch")


def pair(shape=(3, 4, 5), dtype=np.float32):
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    return bp.tensor(a), torch.tensor(a)


def same(ours, theirs):
    assert list(ours.shape) == list(theirs.shape), (list(ours.shape), list(theirs.shape))
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# Each index is written once with a function of the library's `tensor`.
GET_INDICES = {
    "int tensor": lambda T: T([2, 0, 2]),
    "list": lambda T: [1, -1],
    "negative": lambda T: T([-3, -1]),
    "2-d index": lambda T: T([[0, 1], [2, 0]]),
    "slice then index": lambda T: (slice(None), T([3, 0])),
    "adjacent pair (broadcast)": lambda T: (slice(None), T([[0], [2]]), T([1, 4, 0])),
    "non-adjacent pair (B first)": lambda T: (T([0, 2]), slice(None), T([4, 1])),
    "int and index": lambda T: (1, slice(None), T([0, 4])),
    "ellipsis and index": lambda T: (Ellipsis, T([1, 2])),
    "None and index": lambda T: (None, T([1])),
    "mask of all dims": lambda T: T(np.arange(60).reshape(3, 4, 5) % 7 == 0),
    "mask of dim 1": lambda T: (slice(None), T([True, False, True, True])),
    "mask of leading 2 dims": lambda T: T(np.arange(12).reshape(3, 4) % 3 == 1),
    # PyTorch 2 takes int32 indices too; 1.13 (Debian's) only int64, so it gets those.
    "int32 index": lambda T: T(np.array([2, 1], dtype=np.int32 if T is bp.tensor else np.int64)),
    "empty index": lambda T: T(np.array([], dtype=np.int64)),
    "numpy array": lambda T: np.array([0, 2]),
}


@pytest.mark.parametrize("name", list(GET_INDICES))
def test_getitem_matches_pytorch(name):
    ours, theirs = pair()
    make = GET_INDICES[name]
    same(ours[make(bp.tensor)], theirs[make(torch.tensor)])


@pytest.mark.parametrize("name", list(GET_INDICES))
def test_setitem_matches_pytorch(name):
    ours, theirs = pair()
    make = GET_INDICES[name]
    ours[make(bp.tensor)] = -1.0
    theirs[make(torch.tensor)] = -1.0
    same(ours, theirs)
    # A tensor value broadcast to the indexed shape.
    ours, theirs = pair()
    shape = theirs[make(torch.tensor)].shape
    value = np.arange(shape[-1] if len(shape) else 1, dtype=np.float32) + 100
    ours[make(bp.tensor)] = bp.tensor(value)
    theirs[make(torch.tensor)] = torch.tensor(value)
    same(ours, theirs)


def test_setitem_on_a_transposed_tensor_and_with_another_dtype():
    ours, theirs = pair((4, 6))
    ours, theirs = ours.t(), theirs.t()
    ours[bp.tensor([5, 0]), bp.tensor([1, 3])] = bp.tensor([7, 8])  # int64 values into float32
    theirs[torch.tensor([5, 0]), torch.tensor([1, 3])] = torch.tensor([7, 8]).float()
    same(ours.contiguous(), theirs.contiguous())


def test_index_put_accumulates_repeats():
    ours, theirs = pair((5, 3))
    idx = [1, 3, 1, 1]
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    bp.index_put_(ours, [bp.tensor(idx)], bp.tensor(values), accumulate=True)
    theirs.index_put_((torch.tensor(idx),), torch.tensor(values), accumulate=True)
    same(ours, theirs)
    out = bp.index_put(ours, [None, bp.tensor([2])], bp.tensor(0.0))  # None: every row
    expected = theirs.clone()
    expected[:, torch.tensor([2])] = 0.0
    same(out, expected)
    same(ours, theirs)  # the functional form leaves self alone


def test_index_errors_name_the_problem():
    ours, _ = pair((3, 4))
    with pytest.raises(IndexError, match=r"index 3 is out of range for dimension 0 with size 3"):
        ours[bp.tensor([0, 3])]
    with pytest.raises(IndexError, match=r"index -5 is out of range for dimension 1 with size 4"):
        ours[:, bp.tensor([-5])]
    with pytest.raises(IndexError, match=r"out of range"):
        ours[bp.tensor([9])] = 1.0
    with pytest.raises(ValueError, match=r"tensors used as indices must be int64, int32, bool or uint8"):
        ours[bp.tensor([0.0])]
    with pytest.raises(ValueError, match=r"mask at index 0 has shape \[2\].*sizes \[3\]"):
        ours[bp.tensor([True, False])]
    with pytest.raises(IndexError, match=r"t\[True\]"):
        ours[True]
    with pytest.raises(ValueError, match=r"cannot be broadcast"):
        ours[bp.tensor([0, 1])] = bp.tensor([1.0, 2.0, 3.0])
    # Nothing was written by the refused assignments.
    np.testing.assert_array_equal(ours.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_nonzero_masked_select_and_their_dtypes():
    a = np.array([[0, 1.5, 0], [2, 0, np.nan]], dtype=np.float32)
    same(bp.nonzero(bp.tensor(a)), torch.nonzero(torch.tensor(a)))
    same(bp.tensor(a).nonzero(), torch.tensor(a).nonzero())
    same(bp.nonzero(bp.tensor(3.0)), torch.nonzero(torch.tensor(3.0)))
    same(bp.nonzero(bp.zeros(0, 3)), torch.nonzero(torch.zeros(0, 3)))
    m = np.array([True, False, True])
    same(bp.masked_select(bp.tensor(a), bp.tensor(m)), torch.masked_select(torch.tensor(a), torch.tensor(m)))
    with pytest.raises(ValueError, match="mask"):
        bp.masked_select(bp.tensor(a), bp.tensor([1.0, 0.0, 1.0]))


def test_scatter_and_index_add():
    s = np.zeros((3, 5), dtype=np.float32)
    idx = np.array([[0, 1, 2], [4, 3, 2]])
    src = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    same(bp.tensor(s).scatter(1, bp.tensor(idx[:, :2]), bp.tensor(src)),
         torch.tensor(s).scatter(1, torch.tensor(idx[:, :2]), torch.tensor(src)))
    same(bp.tensor(s).scatter(1, bp.tensor(idx), 2.5), torch.tensor(s).scatter(1, torch.tensor(idx), 2.5))
    ours, theirs = bp.tensor(s), torch.tensor(s)
    ours.scatter_(0, bp.tensor([[2, 0, 1, 1, 0]]), bp.ones(1, 5))
    theirs.scatter_(0, torch.tensor([[2, 0, 1, 1, 0]]), torch.ones(1, 5))
    same(ours, theirs)
    index = np.array([0, 2, 0, 2])
    source = np.arange(20, dtype=np.float32).reshape(4, 5)
    same(bp.tensor(s).index_add(0, bp.tensor(index), bp.tensor(source), alpha=2),
         torch.tensor(s).index_add(0, torch.tensor(index), torch.tensor(source), alpha=2))
    ours, theirs = bp.tensor(s), torch.tensor(s)
    ours.index_add_(1, bp.tensor([4, 4]), bp.ones(3, 2))
    theirs.index_add_(1, torch.tensor([4, 4]), torch.ones(3, 2))
    same(ours, theirs)


@pytest.mark.parametrize("diagonal", [0, 1, -2, 7])
def test_tril_triu(diagonal):
    ours, theirs = pair((2, 4, 5))
    same(ours.tril(diagonal), theirs.tril(diagonal))
    same(bp.triu(ours, diagonal), torch.triu(theirs, diagonal))
    ours.tril_(diagonal)
    theirs.tril_(diagonal)
    same(ours, theirs)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        bp.tril(bp.ones(3))


@pytest.mark.parametrize("shifts, dims", [(1, None), (-7, None), ((2,), (1,)), ((1, -3), (0, 2)), (13, 2)])
def test_roll(shifts, dims):
    ours, theirs = pair()
    expected = theirs.roll(shifts, dims) if dims is not None else theirs.roll(shifts)
    args = ([shifts] if isinstance(shifts, int) else list(shifts),) + (() if dims is None else
                                                                       ([dims] if isinstance(dims, int) else list(dims),))
    same(ours.roll(*args), expected)


@pytest.mark.parametrize("repeats", [(2, 1, 1), (1, 2, 3), (2, 1, 1, 2), (0, 1, 1)])
def test_repeat(repeats):
    ours, theirs = pair((2, 3, 1))
    same(ours.repeat(list(repeats)), theirs.repeat(*repeats))


def test_isclose_allclose():
    a = np.array([1.0, np.nan, 2.0, np.inf, -np.inf, 1e-9], dtype=np.float32)
    b = np.array([1.0 + 1e-7, np.nan, 2.1, np.inf, np.inf, 0.0], dtype=np.float32)
    for kw in [{}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 1e-8, "rtol": 0}]:
        same(bp.isclose(bp.tensor(a), bp.tensor(b), **kw), torch.isclose(torch.tensor(a), torch.tensor(b), **kw))
    assert bp.allclose(bp.ones(3), bp.ones(3) + 1e-9) is True
    assert bp.tensor([1.0, 2.0]).allclose(bp.tensor([1.0, 2.5])) is False
    same(bp.isclose(bp.tensor([1, 5]), bp.tensor([2, 5]), atol=1.0), torch.isclose(torch.tensor([1, 5]),
                                                                                     torch.tensor([2, 5]), atol=1.0))
    with pytest.raises(ValueError, match="must match"):
        bp.isclose(bp.ones(2), bp.ones(2, dtype=bp.float64))


def test_gradients_match_pytorch():
    a = np.random.default_rng(0).standard_normal((4, 5))
    w = np.random.default_rng(1).standard_normal((3, 5))
    x = bp.tensor(a).requires_grad_()
    tx = torch.tensor(a, requires_grad=True)
    idx = [3, 0, 3]
    (x[bp.tensor(idx)] * bp.tensor(w)).sum().backward()
    (tx[torch.tensor(idx)] * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    # Through a mask, a write and the triangle ops.
    x = bp.tensor(a).requires_grad_()
    tx = torch.tensor(a, requires_grad=True)
    v = bp.tensor(np.ones(5)).requires_grad_()
    tv = torch.tensor(np.ones(5), requires_grad=True)
    y = x * 2
    ty = tx * 2
    y[bp.tensor([1, 2])] = v
    ty[torch.tensor([1, 2])] = tv
    (y[y > 0].sum() + y.tril().sum() + y.roll([1], [1]).repeat([2, 1]).sum()).backward()
    (ty[ty > 0].sum() + ty.tril().sum() + ty.roll(1, 1).repeat(2, 1).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy())


def test_advanced_indexing_runs_natively_on_a_gpu_device(gpusim_plugin):
    """On the simulator every op of advanced indexing has a kernel: with
    BACKPLANE_FALLBACK=error any CPU fallback would raise."""
    code = f"""
import numpy as np
import backplane as bp
bp.load_plugin({gpusim_plugin!r})
a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
x, g = bp.tensor(a), bp.tensor(a).to('gpusim:0')
for make in [lambda t: (t[[0, 2]], t[:, [3, 1]], t[[0, 2], :, [4, 1]]),
             lambda t: (t[t > 30], bp.nonzero(t > 50), t.tril(), t.roll([2], [2]), t.repeat([1, 2, 1]))]:
    for ours, ref in zip(make(g), make(x)):
        assert ours.device.type == 'gpusim', ours.device
        np.testing.assert_array_equal(ours.cpu().numpy(), ref.numpy())
g[g > 40] = 0.0
x[x > 40] = 0.0
g[bp.tensor([0, 0]), bp.tensor([1, 1])] += 1.0
x[bp.tensor([0, 0]), bp.tensor([1, 1])] += 1.0
np.testing.assert_array_equal(g.cpu().numpy(), x.numpy())
"""
    env = dict(os.environ, BACKPLANE_FALLBACK="error")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("p", [2, 1, float("inf"), float("-inf"), 0, 3])
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, True), ([0, 2], False)])
def test_norm_matches_pytorch(p, dim, keepdim):
    a = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    a[0, 1, 2] = 0
    ours = bp.tensor(a).norm(p, dim, keepdim)
    theirs = torch.tensor(a).norm(p, dim, keepdim)
    assert list(ours.shape) == list(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)
    with pytest.raises(ValueError, match="norm"):
        bp.norm(bp.tensor([1, 2]))


def test_repeat_interleave_matches_pytorch():
    ours, theirs = pair((2, 3))
    same(ours.repeat_interleave(2), theirs.repeat_interleave(2))
    same(ours.repeat_interleave(3, dim=0), theirs.repeat_interleave(3, dim=0))
    same(ours.repeat_interleave(bp.tensor([1, 0, 2]), dim=1), theirs.repeat_interleave(torch.tensor([1, 0, 2]), dim=1))
    same(bp.repeat_interleave(bp.tensor([2, 0, 1])), torch.repeat_interleave(torch.tensor([2, 0, 1])))
    with pytest.raises(ValueError, match="non-negative"):
        ours.repeat_interleave(bp.tensor([1, -1, 1]), dim=1)
    with pytest.raises(ValueError, match="one count per element"):
        ours.repeat_interleave(bp.tensor([1, 1]), dim=1)


def test_function_forms_of_the_view_methods_match_pytorch():
    ours, theirs = pair((2, 3, 1))
    same(bp.reshape(ours, [3, 2]), torch.reshape(theirs, [3, 2]))
    same(bp.permute(ours, [2, 0, 1]), torch.permute(theirs, [2, 0, 1]))
    same(bp.flatten(ours, 0, 1), torch.flatten(theirs, 0, 1))
    same(bp.narrow(ours, 1, 1, 2), torch.narrow(theirs, 1, 1, 2))
    same(bp.squeeze(ours), torch.squeeze(theirs))
    same(bp.unsqueeze(ours, 0), torch.unsqueeze(theirs, 0))
    same(bp.transpose(ours, 0, 1), torch.transpose(theirs, 0, 1))
    same(bp.t(bp.squeeze(ours)), torch.t(torch.squeeze(theirs)))
    assert bp.numel(ours) == torch.numel(theirs) == 6
    copy = bp.clone(ours)
    copy[0, 0, 0] = 100.0
    assert ours[0, 0, 0].item() == 0.0


def test_cumprod_matches_pytorch():
    a = np.array([[1.5, -2.0, 0.0, 3.0], [0.5, 2.0, 4.0, -1.0]], dtype=np.float32)
    same(bp.tensor(a).cumprod(1), torch.tensor(a).cumprod(1))
    same(bp.cumprod(bp.tensor(a), 0), torch.cumprod(torch.tensor(a), 0))
    i = np.array([[3, -2, 5], [7, 1, -1]], dtype=np.int8)
    same(bp.tensor(i).cumprod(1), torch.tensor(i).cumprod(1))  # int64, as sum's rule
    x, tx = bp.tensor(a), torch.tensor(a)
    x.cumprod_(1)
    tx.cumprod_(1)
    same(x, tx)


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]), ("i,j->ij", [(3,), (4,)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ijk,kl,lm->im", [(2, 3, 4), (4, 2), (2, 3)]),
    ("ij,jk", [(3, 4), (4, 2)]), ("Ab,bA->", [(3, 4), (4, 3)])])
def test_einsum_matches_pytorch(equation, shapes):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = bp.einsum(equation, [bp.tensor(a) for a in arrays])
    theirs = torch.einsum(equation, [torch.tensor(a) for a in arrays])
    assert list(ours.shape) == list(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)
    leaves = [bp.tensor(a).requires_grad_() for a in arrays]
    tleaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    bp.einsum(equation, leaves).sum().backward()
    torch.einsum(equation, tleaves).sum().backward()
    for ours_leaf, their_leaf in zip(leaves, tleaves):
        np.testing.assert_allclose(ours_leaf.grad.numpy(), their_leaf.grad.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="einsum"):
        bp.einsum("ij,jk->ik", [bp.ones(2, 3)])


def test_unique_matches_pytorch():
    a = np.array([[3, 1, 2], [1, 3, 3]], dtype=np.int64)
    for kw in [{}, {"return_inverse": True}, {"return_counts": True}, {"return_inverse": True, "return_counts": True}]:
        ours, theirs = bp.unique(bp.tensor(a), **kw), torch.unique(torch.tensor(a), **kw)
        for o, t_ in zip(ours if isinstance(ours, tuple) else (ours,), theirs if isinstance(theirs, tuple) else (theirs,)):
            same(o, t_)
    same(bp.tensor(a).unique(), torch.tensor(a).unique())
    with pytest.raises(NotImplementedError, match="dim"):
        bp.unique(bp.tensor(a), dim=0)
