"""Operators from Python: as functions, as Tensor methods, as Python
operators and through backplane.ops.<ns>.<op> (Note [Calling operators from
Python] in python/src/op_call.cc). Results are checked against NumPy."""
import math

import numpy as np
import pytest

import backplane as bp


def arr(t):
    return np.array(t.tolist())


# ------------------------------------------------------------- functions, methods


def test_functions_and_methods_compute_the_standard_ops(device):
    x = bp.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], device=device)
    w = bp.tensor([[1.0, 0.0], [2.0, 1.0], [-1.0, 3.0]], device=device)
    xn, wn = arr(x), arr(w)
    np.testing.assert_allclose(arr(bp.matmul(x, w)), xn @ wn, rtol=1e-6)
    np.testing.assert_allclose(arr(x @ w), xn @ wn, rtol=1e-6)
    e = np.exp(xn - xn.max(-1, keepdims=True))
    np.testing.assert_allclose(arr(x.softmax(-1)), e / e.sum(-1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(arr(bp.softmax(x, dim=0)), np.exp(xn) / np.exp(xn).sum(0), rtol=1e-6)
    np.testing.assert_allclose(arr(x.relu()), np.maximum(xn, 0))
    np.testing.assert_allclose(arr(bp.abs(x)), np.abs(xn))
    assert x.sum().item() == pytest.approx(xn.sum())
    np.testing.assert_allclose(arr(x.sum(1)), xn.sum(1))
    np.testing.assert_allclose(arr(x.sum((0, 1), keepdim=True)), xn.sum(keepdims=True))
    np.testing.assert_allclose(arr(x.mean(dim=[1])), xn.mean(1), rtol=1e-6)
    assert x.softmax(-1).device == x.device


def test_method_fills_self_wherever_the_schema_puts_it():
    cond = bp.tensor([True, False, True])
    a = bp.tensor([1, 2, 3])
    b = bp.tensor([10, 20, 30])
    # where.self(Tensor condition, Tensor self, Tensor other): a.where(cond, b)
    assert bp.where(cond, a, b).tolist() == [1, 20, 3]
    assert a.where(cond, b).tolist() == [1, 20, 3]


def test_varargs_int_lists_as_in_pytorch():
    assert bp.zeros(2, 3).shape == (2, 3)
    assert bp.zeros((2, 3)).shape == (2, 3)
    assert bp.ones([4]).shape == (4,)
    x = bp.arange(6).reshape(2, 3)
    assert x.flip(0).tolist() == [[3, 4, 5], [0, 1, 2]]
    assert x.flip(0, 1).tolist() == [[5, 4, 3], [2, 1, 0]]
    assert x.flip((1,)).tolist() == [[2, 1, 0], [5, 4, 3]]


def test_keyword_arguments_defaults_and_optional():
    x = bp.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = bp.tensor([[1.0, 1.0], [1.0, 1.0]])
    assert bp.add(x, y, alpha=2).tolist() == [[3.0, 4.0], [5.0, 6.0]]
    assert bp.add(self=x, other=y).tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert x.sum(dim=None).item() == 10.0  # int[1]? dim=None: every dimension
    assert x.sum(dtype=bp.float64).dtype == bp.float64
    assert bp.clamp(x, min=2.0).tolist() == [[2.0, 2.0], [3.0, 4.0]]
    assert bp.clamp(x, None, 2.5).tolist() == [[1.0, 2.0], [2.5, 2.5]]
    assert bp.div(bp.tensor([7, -7]), bp.tensor([2, 2]), rounding_mode="floor").tolist() == [3, -4]
    assert bp.div(bp.tensor([7, -7]), 2, rounding_mode="trunc").tolist() == [3, -3]
    assert x.gelu(approximate="tanh").shape == (2, 2)
    # int[2] takes one int for both
    img = bp.ones(1, 1, 4, 4)
    assert bp.max_pool2d(img, 2).shape == (1, 1, 2, 2)
    assert bp.max_pool2d(img, kernel_size=[2, 2], stride=2).shape == (1, 1, 2, 2)


def test_lists_of_tensors_and_tuple_returns():
    a, b = bp.tensor([1, 2]), bp.tensor([3, 4])
    assert bp.cat([a, b]).tolist() == [1, 2, 3, 4]
    assert bp.cat((a, b), dim=0).tolist() == [1, 2, 3, 4]
    assert bp.stack([a, b], 1).tolist() == [[1, 3], [2, 4]]
    r = bp.sort(bp.tensor([3.0, 1.0, 2.0]))
    values, indices = r
    assert values.tolist() == [1.0, 2.0, 3.0] and indices.tolist() == [1, 2, 0]
    assert r.values.tolist() == values.tolist() and r.indices.tolist() == indices.tolist()
    top = bp.topk(bp.tensor([1, 5, 3, 4]), 2)
    assert top.values.tolist() == [5, 4] and top.indices.tolist() == [1, 3]


def test_out_and_in_place_return_the_very_objects_passed():
    x = bp.tensor([1.0, 2.0])
    out = bp.empty(2)
    r = bp.add(x, x, out=out)
    assert r is out and out.tolist() == [2.0, 4.0]
    r = bp.ops.bp.mul.out(x, x, out=out)
    assert r is out and out.tolist() == [1.0, 4.0]
    assert x.add_(1) is x and x.tolist() == [2.0, 3.0]
    y = x
    y += 1
    assert y is x and x.tolist() == [3.0, 4.0]
    # several out= tensors: out=(values, indices) or by their schema names
    v, i = bp.empty(3), bp.empty(3, dtype=bp.int64)
    r = bp.sort(bp.tensor([2.0, 3.0, 1.0]), out=(v, i))
    assert r.values is v and r.indices is i and i.tolist() == [2, 0, 1]
    v2, i2 = bp.empty(3), bp.empty(3, dtype=bp.int64)
    r = bp.sort(bp.tensor([2.0, 3.0, 1.0]), values=v2, indices=i2)
    assert r[0] is v2 and v2.tolist() == [1.0, 2.0, 3.0]


def test_out_of_another_dtype_is_cast_as_pytorch_does():
    out = bp.empty(2, dtype=bp.float64)
    bp.add(bp.tensor([1, 2], dtype=bp.int8), bp.tensor([1, 1], dtype=bp.int8), out=out)
    assert out.dtype == bp.float64 and out.tolist() == [2.0, 3.0]


# -------------------------------------------------------------- Python operators


@pytest.mark.parametrize(
    "expr",
    [
        lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
        lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ** b,
        lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b, lambda a, b: a >= b,
        lambda a, b: a == b, lambda a, b: a != b,
    ],
)
@pytest.mark.parametrize("scalar", [None, 3, 2.5, -2])
def test_operators_match_numpy(expr, scalar):
    a_np = np.array([[1.5, -2.0, 7.0], [4.0, 0.5, -3.5]], dtype=np.float32)
    b_np = np.array([2.0, 3.0, -1.5], dtype=np.float32)
    a = bp.tensor(a_np.tolist())
    b = bp.tensor(b_np.tolist()) if scalar is None else scalar
    bn = b_np if scalar is None else scalar
    with np.errstate(all="ignore"):
        want = expr(a_np, bn)
        want_reflected = expr(bn, a_np)
    np.testing.assert_allclose(arr(expr(a, b)), want, rtol=1e-5)
    np.testing.assert_allclose(arr(expr(b, a)), want_reflected, rtol=1e-5)


def test_unary_and_bitwise_operators():
    x = bp.tensor([1, -2, 3])
    assert (-x).tolist() == [-1, 2, -3]
    assert abs(x).tolist() == [1, 2, 3]
    assert (~x).tolist() == [-2, 1, -4]
    assert (x & 1).tolist() == [1, 0, 1]
    assert (x | 4).tolist() == [5, -2, 7]
    assert (x ^ x).tolist() == [0, 0, 0]
    assert (6 & x).tolist() == [0, 6, 2]
    m = bp.tensor([True, False])
    assert (~m).tolist() == [False, True]


@pytest.mark.parametrize(
    "dtype, number, op, want",
    [
        ("int32", 2, "add", "int32"),     # a Python int keeps an integral tensor's dtype
        ("int32", 2.5, "add", "float32"),  # a float makes it the default float dtype
        ("int8", 1000, "mul", "int8"),     # the number's size does not matter
        ("uint8", True, "add", "uint8"),
        ("bool", 1, "add", "int64"),       # int beats bool
        ("bool", 1.5, "mul", "float32"),
        ("float16", 2.5, "add", "float16"),  # a float never widens a float tensor
        ("bfloat16", 1e3, "mul", "bfloat16"),
        ("float64", 2, "sub", "float64"),
        ("int64", 2, "div", "float32"),    # true division
        ("int16", 2, "floor_divide", "int16"),
        ("int32", 2.0, "pow", "float32"),
    ],
)
def test_python_number_promotion_is_pytorchs(dtype, number, op, want):
    x = bp.ones(3, dtype=getattr(bp, dtype))
    assert getattr(bp, op)(x, number).dtype == getattr(bp, want)
    assert getattr(x, op)(number).dtype == getattr(bp, want)


@pytest.mark.parametrize(
    "dtype, number, want",
    [("int32", 2, "int32"), ("int32", 2.5, "float32"), ("int8", 3, "int8"), ("float16", 2.0, "float16"),
     ("float64", 1, "float64"), ("uint8", 2.5, "float32")],
)
def test_reflected_operators_promote_as_pytorch(dtype, number, want):
    x = bp.ones(2, dtype=getattr(bp, dtype))
    assert (number - x).dtype == getattr(bp, want)
    assert (number * x).dtype == getattr(bp, want)
    assert (number ** x).dtype == getattr(bp, want)
    assert (number % x).dtype == getattr(bp, want)
    assert (number / x).dtype == (getattr(bp, want) if getattr(bp, want).is_floating_point else bp.float32)


def test_reflected_operators_with_bool_follow_pytorch():
    m = bp.tensor([True, False])
    assert (3 * m).dtype == bp.int64 and (3 * m).tolist() == [3, 0]
    assert (1.5 + m).dtype == bp.float32
    with pytest.raises(bp.InvalidArgumentError, match="subtraction with a bool operand is not supported"):
        1 - m


def test_reflected_operators_compute_the_right_values():
    x = bp.tensor([1.0, 2.0, 4.0])
    assert (8 / x).tolist() == [8.0, 4.0, 2.0]
    assert (2 ** x).tolist() == [2.0, 4.0, 16.0]
    assert (9 // x).tolist() == [9.0, 4.0, 2.0]
    assert (9 % x).tolist() == [0.0, 1.0, 1.0]
    assert (1 - x).tolist() == [0.0, -1.0, -3.0]


def test_numpy_scalars_are_numbers():
    x = bp.tensor([1, 2], dtype=bp.int32)
    assert (x + np.int64(3)).tolist() == [4, 5]
    assert (x + np.int64(3)).dtype == bp.int32
    assert (x * np.float32(0.5)).tolist() == [0.5, 1.0]
    assert (x + np.bool_(True)).tolist() == [2, 3]


def test_tensor_comparison_makes_tensors_and_tensors_stay_hashable():
    x = bp.tensor([1, 2])
    assert (x == x).dtype == bp.bool
    assert len({x, x}) == 1


def test_operator_with_unsupported_operand_raises_typeerror():
    x = bp.tensor([1.0])
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        "a" - x
    with pytest.raises(TypeError):
        x @ 2


# ---------------------------------------------------------------- generic calls


def test_generic_path_calls_any_op_and_overload():
    x = bp.tensor([1.0, 2.0])
    assert bp.ops.bp.add(x, x).tolist() == [2.0, 4.0]
    assert bp.ops.bp.add.Tensor(x, x, alpha=3).tolist() == [4.0, 8.0]
    assert bp.ops.bp.add.Scalar(x, 1).tolist() == [2.0, 3.0]
    assert bp.ops.bp.sum.default(x).item() == 3.0
    assert "bp" in bp.ops.namespaces() and "add" in dir(bp.ops.bp)
    assert bp.ops.bp.add.schemas[0].startswith("bp::add")
    assert "bp::add.Tensor" in bp.ops.bp.add.__doc__
    assert repr(bp.ops.bp.add) == "<backplane op bp::add>"


def test_generic_path_reaches_plugin_ops_spconv():
    if "spconv" not in bp.ops.namespaces():
        pytest.skip("the spconv plugin is not loaded (not built?)")
    # Two active voxels on a 1x1x4 grid (batch, z, y, x), a 1x1x3 submanifold kernel.
    indices = bp.tensor([[0, 0, 0, 1], [0, 0, 0, 2]], dtype=bp.int32)
    out_indices, pairs, counts = bp.ops.spconv.get_indice_pairs(
        indices, batch_size=1, spatial_shape=[1, 1, 4], kernel_size=[1, 1, 3], stride=[1, 1, 1],
        padding=[0, 0, 1], dilation=[1, 1, 1], subm=True)
    assert out_indices.tolist() == indices.tolist()
    # centre offset: both voxels map to themselves; the side offsets: one pair each
    assert sorted(counts.tolist()) == [1, 1, 2]
    feats = bp.tensor([[1.0], [2.0]])
    filters = bp.ones(1, 1, 3, 1, 1)  # [kD, kH, kW, Cin, Cout]
    out = bp.ops.spconv.indice_conv(feats, filters, pairs, counts, 2, subm=True)
    assert out.tolist() == [[3.0], [3.0]]


def test_unknown_op_and_namespace_say_what_exists():
    with pytest.raises(AttributeError, match="Did you mean bp::add"):
        bp.ops.bp.addd
    with pytest.raises(AttributeError, match="no operator namespace 'nope'.*bp"):
        bp.ops.nope


# -------------------------------------------------------------------- errors


def test_wrong_argument_type_names_argument_and_schema():
    x = bp.tensor([1.0])
    with pytest.raises(TypeError) as e:
        bp.ops.bp.add.Tensor(x, "a")
    msg = str(e.value)
    assert "argument 'other' must be Tensor, not str" in msg
    assert "bp::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" in msg
    with pytest.raises(TypeError, match=r"(?s)fits none of its overloads.*add.Tensor.*add.Scalar"):
        bp.add(x, [1, 2])
    with pytest.raises(TypeError, match="no argument named 'alhpa'"):
        bp.ops.bp.add.Tensor(x, x, alhpa=2)
    with pytest.raises(TypeError, match="missing argument 'other'"):
        bp.ops.bp.add.Tensor(x)
    with pytest.raises(TypeError, match="multiple values for argument 'other'"):
        bp.ops.bp.add.Tensor(x, x, other=x)
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        bp.ops.bp.add.Tensor(x, x, 2)
    with pytest.raises(TypeError, match=r"argument 'dim' must be int\[1\]\?, not Tensor"):
        x.sum(bp.tensor(0))  # a tensor is no int argument, even with __index__
    with pytest.raises(TypeError, match="argument 'keepdim' must be bool, not int"):
        bp.ops.bp.sum.dim_IntList(x, [0], 1)


def test_wrong_argument_value_raises_valueerror():
    x = bp.tensor([1.0])
    with pytest.raises(ValueError, match="out of range"):
        bp.add(x, 2 ** 70)
    with pytest.raises(ValueError):
        x.to("cuda:x")


def test_a_dim_out_of_range_raises_indexerror():
    # As PyTorch: IndexError (bp.OutOfRangeError), from the ops' rules and the views alike.
    x = bp.ones(2, 3)
    for call in (lambda: x.sum(2), lambda: x.softmax(-3), lambda: x.transpose(0, 3), lambda: x.unsqueeze(4),
                 lambda: x.select(2, 0), lambda: x.narrow(2, 0, 1), lambda: bp.cat([x, x], 3), lambda: x.size(4)):
        with pytest.raises(IndexError, match="out of range"):
            call()
    with pytest.raises(bp.OutOfRangeError, match="bp::flip: dimension 3 is out of range for a tensor with 2 "
                                                 r"dimensions \(expected -2 to 1\)"):
        x.flip([3])


def test_kernel_errors_arrive_as_backplane_errors_with_the_message():
    x = bp.ones(2, 3)
    with pytest.raises(bp.InvalidArgumentError) as e:
        bp.add(x, bp.ones(5))
    assert isinstance(e.value, ValueError) and isinstance(e.value, bp.Error)
    assert e.value.code == "INVALID_ARGUMENT"
    assert "bp::add.Tensor" in str(e.value) and "cannot be broadcast" in str(e.value)
    with pytest.raises(bp.OutOfRangeError):
        x.size(5)
    with pytest.raises(bp.Error, match="mm"):
        bp.mm(x, x)


def test_errors_map_every_status_code_to_a_subclass():
    assert issubclass(bp.InvalidArgumentError, ValueError)
    assert issubclass(bp.OutOfRangeError, IndexError)
    assert issubclass(bp.UnimplementedError, NotImplementedError)
    assert issubclass(bp.ResourceExhaustedError, MemoryError)
    assert issubclass(bp.NotFoundError, LookupError)
    for name in ["FailedPreconditionError", "InternalError", "UnavailableError", "NotFoundError"]:
        assert issubclass(getattr(bp, name), bp.Error)


# -------------------------------------------------------------- to, dtype, devices


def test_to_follows_pytorch():
    x = bp.tensor([1.5, 2.5])
    assert x.to(bp.int32).tolist() == [1, 2]
    assert x.to("cpu") is x
    assert x.to("cpu", copy=True) is not x
    assert x.to(bp.float32) is x
    assert x.to(dtype=bp.float64).dtype == bp.float64
    assert x.to(bp.Device("cpu"), bp.float16).dtype == bp.float16
    assert x.to(bp.tensor([1], dtype=bp.int64)).dtype == bp.int64
    with pytest.raises(TypeError, match="expected a device, a dtype or a Tensor"):
        x.to(3)


def test_dtypes_are_singletons_with_properties():
    assert bp.float32 is bp.ones(1).dtype
    assert repr(bp.float16) == "backplane.float16"
    assert bp.float16.itemsize == 2 and bp.float16.is_floating_point
    assert not bp.int8.is_floating_point and bp.int8.is_signed and not bp.uint8.is_signed
    assert bp.bool is not bool


def test_metadata_and_views():
    x = bp.arange(24).reshape(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.size() == (2, 3, 4) and x.size(-1) == 4
    assert x.stride() == (12, 4, 1) and x.ndim == 3 and x.dim() == 3 and x.numel() == 24
    t = x.transpose(0, 2)
    assert t.shape == (4, 3, 2) and not t.is_contiguous() and t.contiguous().is_contiguous()
    assert x.permute(2, 0, 1).shape == (4, 2, 3)
    assert x.T.shape == (4, 3, 2)
    assert x.view(6, 4).shape == (6, 4) and x.view(-1).shape == (24,)
    assert x.unsqueeze(0).shape == (1, 2, 3, 4) and x.unsqueeze(0).squeeze(0).shape == (2, 3, 4)
    assert x.narrow(2, 1, 2).shape == (2, 3, 2)
    assert x.select(0, 1).tolist() == x.tolist()[1]
    assert x.flatten(1).shape == (2, 12)
    assert x.expand(5, 2, 3, 4).shape == (5, 2, 3, 4)
    with pytest.raises(bp.Error, match="view"):
        t.view(24)
    assert "tensor(" in repr(x) and "int64" in repr(x)


def test_math_functions_against_numpy():
    xn = np.linspace(-3, 3, 13, dtype=np.float32)
    x = bp.tensor(xn.tolist())
    for name, ref in [("exp", np.exp), ("sin", np.sin), ("cos", np.cos), ("tanh", np.tanh),
                      ("sigmoid", lambda v: 1 / (1 + np.exp(-v))), ("floor", np.floor), ("ceil", np.ceil),
                      ("neg", np.negative), ("sign", np.sign), ("erf", np.vectorize(math.erf))]:
        np.testing.assert_allclose(arr(getattr(bp, name)(x)), ref(xn), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(
    "make, want",
    [(lambda: 2.5 / bp.tensor(2.0, dtype=bp.float16), "float16"),
     (lambda: 1.0 / bp.ones(3).sum(), "float32"),
     (lambda: 7 // bp.tensor(2, dtype=bp.int32), "int32"),
     (lambda: 2 ** bp.tensor(3, dtype=bp.int32), "int32"),
     (lambda: 7 % bp.tensor(2, dtype=bp.int8), "int8"),
     (lambda: 2.5 ** bp.tensor(2, dtype=bp.int16), "float32")],
)
def test_a_number_never_widens_a_0d_tensor_either(make, want):
    r = make()
    assert r.dtype == getattr(bp, want) and r.shape == ()


class TestForeignOperands:
    """Note [Foreign operands] and Note [NumPy protocols]: NumPy arrays, NumPy
    scalars and torch tensors as operands of Python's operators and in NumPy's
    ufuncs, with PyTorch's promotion; functions take backplane tensors only."""

    def test_numpy_arrays_on_either_side_of_an_operator(self):
        x = bp.tensor([1.0, 2.0, 4.0])
        a = np.array([1.0, 1.0, 1.0])  # float64: promotes as a tensor would
        for r, want in ((x + a, [2, 3, 5]), (a + x, [2, 3, 5]), (a - x, [0, -1, -3]), (x - a, [0, 1, 3]),
                        (a / x, [1, 0.5, 0.25]), (a * x, [1, 2, 4]), (np.full(3, 2.0) ** x, [2, 4, 16]),
                        (x ** np.array(2.0), [1, 4, 16])):
            assert isinstance(r, bp.Tensor) and r.tolist() == want
        assert (x + a).dtype is bp.float64 and (x + np.array(2.0)).dtype is bp.float32  # a 0-d array never widens
        assert ((np.zeros(3) < x).tolist(), (x == a).tolist()) == ([True] * 3, [True, False, False])
        assert (np.ones((2, 3)) @ bp.ones(3, dtype=bp.float64)).tolist() == [3.0, 3.0]
        y = bp.zeros(3)
        y += np.arange(3, dtype=np.float32)
        assert y.tolist() == [0, 1, 2]
        ro = np.broadcast_to(np.ones(1, dtype=np.float32), (3,))  # read-only: no DLPack, copied
        assert (x + ro).tolist() == [2, 3, 5]

    def test_numpy_scalars_are_numbers(self):
        h = bp.ones(3, dtype=bp.float16)
        for r in (np.float64(2) * h, h * np.float64(2), np.float32(2) / h, np.int32(2) ** h, np.float64(1) - h):
            assert r.dtype is bp.float16  # a number never widens a tensor of its own kind, as in PyTorch
        assert (np.bool_(True) & bp.tensor([True, False])).tolist() == [True, False]

    def test_torch_tensors_on_either_side_of_an_operator(self):
        torch = pytest.importorskip("torch")
        x = bp.tensor([1.0, 2.0])
        for r, want in ((x + torch.ones(2), [2, 3]), (torch.ones(2) + x, [2, 3]), (torch.full((2,), 4.0) - x, [3, 2]),
                        (torch.tensor([True, False]) & bp.tensor([True, True]), [True, False])):
            assert isinstance(r, bp.Tensor) and r.tolist() == want
        t = torch.zeros(2)
        assert bp.from_dlpack(t).add_(x).tolist() == t.tolist() == [1, 2]  # shared, not copied

    def test_functions_take_backplane_tensors_and_say_how_to_convert(self):
        x = bp.ones(2)
        with pytest.raises(TypeError, match=r"argument 'other' must be Tensor, not numpy.ndarray \(make it a "
                                            r"backplane.Tensor first: bp.from_dlpack\(x\) shares its memory"):
            bp.add(x, np.ones(2))
        torch = pytest.importorskip("torch")
        with pytest.raises(TypeError, match=r"(?s)bp::add\(\) got \(Tensor, torch.Tensor\).*must be Tensor, not "
                                            r"torch.Tensor \(make it"):
            bp.add(x, torch.ones(2))

    def test_ufuncs_run_backplane_ops(self):
        x = bp.tensor([1.0, 2.0, 4.0])
        r = np.exp(x)
        assert isinstance(r, bp.Tensor) and r.dtype is bp.float32
        np.testing.assert_allclose(r.numpy(), np.exp(np.array([1.0, 2.0, 4.0], dtype=np.float32)), rtol=1e-6)
        assert np.add(2, x).tolist() == [3, 4, 6] and np.maximum(x, 2.5).tolist() == [2.5, 2.5, 4]
        assert np.sqrt(x).tolist() == [1, np.sqrt(2.0).astype(np.float32), 2]
        with pytest.raises(TypeError, match=r"numpy.hypot\(\) has no Backplane counterpart .* pass t.numpy\(\)"):
            np.hypot(x, x)
        with pytest.raises(TypeError, match=r"numpy.add.reduce\(\) on a backplane.Tensor: only calling a ufunc"):
            np.add.reduce(x)
        with pytest.raises(TypeError, match=r"numpy.exp\(\) on a backplane.Tensor takes no keyword \(out\)"):
            np.exp(x, out=np.zeros(3))

    def test_numpy_functions_run_in_numpy_on_the_shared_array(self):
        x = bp.tensor([1.0, 2.0, 4.0])
        assert np.sum(x) == 7 and np.mean(x) == np.float32(7 / 3)
        c = np.concatenate([x, x])
        assert isinstance(c, np.ndarray) and c.tolist() == [1, 2, 4, 1, 2, 4]
        assert np.where(np.asarray(x) > 1.5, x, 0).tolist() == [0, 2, 4]

    def test_lists_are_not_operands(self):
        with pytest.raises(TypeError, match="unsupported operand"):
            bp.ones(3) + [1, 2, 3]


def test_dtypes_pickle_and_devices_hash_as_their_strings():
    import pickle
    assert pickle.loads(pickle.dumps(bp.float16)) is bp.float16
    assert bp.Device("cpu") == "cpu" and hash(bp.Device("cpu")) == hash("cpu")
    assert {bp.Device("cpu"): 1}["cpu"] == 1


def test_tensor_of_a_list_that_contains_itself_is_an_error():
    a = []
    a.append(a)
    with pytest.raises(ValueError, match="a list that contains itself"):
        bp.tensor(a)


def test_sizes_by_keyword_as_in_pytorch():
    x = bp.arange(6).view(2, 3)
    assert x.reshape(shape=(3, 2)).shape == (3, 2) and x.view(size=[6]).shape == (6,)
    assert x.expand(size=(4, 2, 3)).shape == (4, 2, 3) and x.permute(dims=(1, 0)).tolist() == [[0, 3], [1, 4], [2, 5]]
    with pytest.raises(TypeError, match="reshape\\(\\) got an unexpected keyword argument 'size'; it takes ints, one "
                                        "sequence of ints, or shape="):
        x.reshape(size=(3, 2))
    with pytest.raises(TypeError, match="view\\(\\) got sizes both as positional arguments and as size="):
        x.view(3, size=(3, 2))


def test_tensor_class_says_how_to_make_one():
    # PyTorch's legacy torch.Tensor([1, 2]) constructor is not offered; the error names what is.
    with pytest.raises(TypeError, match=r"backplane.Tensor is not constructed directly: bp.tensor\(data\) copies"):
        bp.Tensor([1, 2])
    assert isinstance(bp.tensor([1, 2]), bp.Tensor)


def test_where_takes_a_number_for_either_value():
    # where.ScalarOther / .ScalarSelf / .Scalar: the number promotes as a Python number, as in PyTorch.
    m = bp.tensor([True, False, True])
    h = bp.ones(3, dtype=bp.float16)
    assert bp.where(m, h, 0.0).dtype is bp.float16 and bp.where(m, h, 0.0).tolist() == [1, 0, 1]
    assert bp.where(m, 2.5, bp.ones(3, dtype=bp.int32)).dtype is bp.float32
    assert bp.where(m, 1, 0).dtype is bp.int64 and bp.where(m, True, False).dtype is bp.bool
    x = bp.tensor([1.0, 2.0, 3.0], dtype=bp.float64).requires_grad_()
    bp.where(m, x, 0.0).sum().backward()
    assert x.grad.tolist() == [1, 0, 1]
    with pytest.raises(bp.InvalidArgumentError, match="condition"):
        bp.where(bp.ones(3), h, 0.0)


class TestTensorConveniences:
    """Note [Tensor conveniences]: PyTorch's view and conversion methods, checked against torch where it is here."""

    def test_dtype_methods(self):
        x = bp.arange(4)
        for name, dtype in (("float", bp.float32), ("double", bp.float64), ("half", bp.float16),
                            ("bfloat16", bp.bfloat16), ("long", bp.int64), ("int", bp.int32), ("short", bp.int16),
                            ("char", bp.int8), ("byte", bp.uint8), ("bool", bp.bool)):
            assert getattr(x, name)().dtype is dtype
        assert x.long() is x  # no copy when nothing changes, as x.to(dtype)

    def test_split_and_chunk_are_views_as_in_pytorch(self):
        x = bp.arange(10).view(2, 5)
        torch = pytest.importorskip("torch")
        tx = torch.arange(10).view(2, 5)
        for ours, theirs in (
                (x.split(2, 1), tx.split(2, 1)), (bp.split(x, [1, 4], dim=1), torch.split(tx, [1, 4], dim=1)),
                (x.chunk(3, 1), tx.chunk(3, 1)), (bp.chunk(x, 2), torch.chunk(tx, 2)), (x.chunk(4, -1), tx.chunk(4, -1)),
                (bp.arange(0).split(2), torch.arange(0).split(2))):
            assert [t.tolist() for t in ours] == [t.tolist() for t in theirs]
        parts = x.split(2, 1)
        parts[0][0, 0] = 7  # views: writes show in x
        assert x[0, 0].item() == 7
        with pytest.raises(ValueError, match=r"sections \[1, 2\] must be non-negative and add up to 5"):
            x.split([1, 2], 1)
        with pytest.raises(IndexError, match="split: dimension 2 is out of range"):
            x.split(1, 2)
        with pytest.raises(ValueError, match="chunks must be a positive int"):
            x.chunk(0)

    def test_as_methods(self):
        x = bp.arange(6).view(2, 3)
        assert x.expand_as(bp.ones(4, 2, 3)).shape == (4, 2, 3)
        assert x.view_as(bp.ones(6)).shape == (6,) and x.type_as(bp.ones(1)).dtype is bp.float32

    def test_synchronize(self):
        bp.synchronize()  # every device present
        bp.synchronize("cpu")
        with pytest.raises(TypeError, match="synchronize\\(\\): device must be"):
            bp.synchronize(3.5)


def test_max_and_min_overloads_as_in_pytorch():
    x = bp.tensor([[1.0, 3.0, 3.0, float("nan")], [2.0, 5.0, -1.0, 5.0]])
    assert np.isnan(x.max().item()) and np.isnan(bp.min(x).item())
    values, indices = x.max(1)
    assert indices.tolist() == [3, 1] and values.tolist()[1] == 5.0  # NaN wins, then the first maximum
    r = x.min(dim=0, keepdim=True)
    assert r.indices.shape == (1, 4) and r.values.tolist()[0][:3] == [1.0, 3.0, -1.0]
    assert bp.max(x, bp.zeros(4)).shape == (2, 4)  # max.other: maximum
    g = bp.tensor([[1.0, 3.0, 3.0]], dtype=bp.float64).requires_grad_()
    g.max(1).values.sum().backward()
    assert g.grad.tolist() == [[0.0, 1.0, 0.0]]  # to the returned index, as PyTorch
    with pytest.raises(bp.InvalidArgumentError, match="bp::max: cannot reduce over dimension 0 of size 0"):
        bp.ones(0).max()


def test_argsort_is_sorts_indices():
    x = bp.tensor([[3.0, float("nan"), 1.0, 1.0], [0.0, -2.0, 5.0, 0.0]])
    assert x.argsort().tolist() == [[2, 3, 0, 1], [1, 0, 3, 2]]  # stable; NaN last
    assert bp.argsort(x, dim=0, descending=True).tolist() == [[0, 0, 1, 0], [1, 1, 0, 1]]
    assert x.argsort(stable=True, descending=True).tolist() == [[1, 0, 2, 3], [2, 0, 3, 1]]


def test_eye_and_linspace():
    assert bp.eye(3).tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]] and bp.eye(3).dtype is bp.float32
    assert bp.eye(2, 3, dtype=bp.int32).tolist() == [[1, 0, 0], [0, 1, 0]]
    assert bp.linspace(0, 1, 5).tolist() == [0, 0.25, 0.5, 0.75, 1]
    assert bp.linspace(-3.5, 7.25, 11, dtype=bp.int64).tolist() == [-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7]  # truncated ends
    assert bp.linspace(10, 0, 3).tolist() == [10, 5, 0] and bp.linspace(0, 1, 0).shape == (0,)
    with pytest.raises(bp.InvalidArgumentError, match="bp::linspace: number of steps must be non-negative"):
        bp.linspace(0, 1, -1)


def test_log_softmax_is_exact_where_one_logit_dominates():
    # [[30., 0.]]: PyTorch's float32 gives 0 for the first element (its sum
    # rounds 1 + e^-30 to 1); the exact value is -log1p(e^-30) = -9.36e-14.
    y = bp.log_softmax(bp.tensor([[30.0, 0.0], [0.0, 30.0]]), -1)
    want = np.float32(-math.log1p(math.exp(-30.0)))
    assert y.tolist()[0][0] == want and y.tolist()[1][1] == want
    assert y.tolist()[0][1] == np.float32(-30.0 - math.log1p(math.exp(-30.0)))
    # Rows with one dominant logit, along the last dim and the first: never
    # positive, and within float32's rounding of the exact values.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(64, 100)).astype(np.float32)
    x[np.arange(64), rng.integers(0, 100, 64)] += 25
    for dim, xs in ((1, x), (0, np.ascontiguousarray(x.T))):
        got = arr(bp.log_softmax(bp.tensor(xs), dim))
        d = xs.astype(np.float64)
        m = d.max(axis=dim, keepdims=True)
        rest = np.where(d == m, 0.0, np.exp(d - m)).sum(axis=dim, keepdims=True)  # one maximum per row
        exact = (d - m) - np.log1p(rest)
        assert got.max() <= 0
        np.testing.assert_allclose(got, exact, rtol=2e-6, atol=0)
