"""Tensor data from Python: backplane.tensor(), the factories, .numpy(),
.tolist(), .item() and the number conversions, and basic indexing with
PyTorch's semantics (Note [Indexing from Python] in python/src/tensor_data.cc).

Indexing is checked against NumPy's basic indexing on the same data, which
PyTorch follows for these index kinds (except negative steps, which both
PyTorch and Backplane refuse).

The tests taking the `dev` fixture run on the CPU here, and on the gpusim
test device (host memory Backplane cannot read directly) in a subprocess:
see test_device_tests_on_gpusim at the end.
"""
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import backplane as bp

GPUSIM_ENV = "BACKPLANE_PYTEST_GPUSIM"
ON_GPUSIM = os.environ.get(GPUSIM_ENV) is not None

if ON_GPUSIM:
    bp.load_plugin(os.environ[GPUSIM_ENV])


@pytest.fixture
def dev():
    return "gpusim:0" if ON_GPUSIM else "cpu"


def device_test(f):
    """Marks a test (function or class) that runs on the gpusim device too."""
    f.device_test = True
    return f


@pytest.fixture(autouse=True)
def _only_device_tests_on_gpusim(request):
    if ON_GPUSIM and not getattr(request.function, "device_test", False) \
            and not getattr(request.cls, "device_test", False):
        pytest.skip("not a device test")


# ---------------------------------------------------------------- tensor()

class TestTensorInference:
    """The dtype tensor() picks without dtype=, as PyTorch's torch.tensor."""

    @pytest.mark.parametrize("data, dtype, shape", [
        (True, bp.bool, ()),
        (3, bp.int64, ()),
        (2.5, bp.float32, ()),
        ([True, False], bp.bool, (2,)),
        ([1, 2, 3], bp.int64, (3,)),
        ([1, 2.5], bp.float32, (2,)),
        ([True, 2], bp.int64, (2,)),
        ([True, 2.0], bp.float32, (2,)),
        ([[1, 2], [3, 4], [5, 6]], bp.int64, (3, 2)),
        (((1, 2), (3, 4)), bp.int64, (2, 2)),
        ([(1, 2), [3, 4]], bp.int64, (2, 2)),
        ([], bp.float32, (0,)),
        ([[], []], bp.float32, (2, 0)),
        ([[[1]], [[2]]], bp.int64, (2, 1, 1)),
        (range(4), bp.int64, (4,)),
    ])
    def test_python_data(self, data, dtype, shape):
        t = bp.tensor(data)
        assert t.dtype is dtype
        assert t.shape == shape
        assert t.device == "cpu"
        expected = np.array(data).tolist() if shape != () else data
        assert t.tolist() == expected

    def test_numpy_scalars_and_arrays_inside_lists_are_numbers(self):
        t = bp.tensor([np.int32(1), np.int64(2)])
        assert t.dtype is bp.int64 and t.tolist() == [1, 2]
        t = bp.tensor([np.float32(1.5), 2])
        assert t.dtype is bp.float32 and t.tolist() == [1.5, 2.0]
        assert bp.tensor([np.bool_(True), np.bool_(False)]).tolist() == [True, False]
        t = bp.tensor([np.array([1, 2]), np.array([3, 4])])
        assert t.shape == (2, 2) and t.tolist() == [[1, 2], [3, 4]]
        assert bp.tensor([np.array(1.5), 2]).tolist() == [1.5, 2.0]

    def test_tensors_inside_lists_give_their_values(self):
        t = bp.tensor([bp.tensor([1, 2]), bp.tensor([3, 4])])
        assert t.shape == (2, 2) and t.tolist() == [[1, 2], [3, 4]]
        assert bp.tensor([bp.tensor(1.5), 2]).tolist() == [1.5, 2.0]
        # ... and their dtypes, which promote with the other elements' (not Python's float32).
        assert bp.tensor([bp.tensor(1.5, dtype=bp.float64), 2.0]).dtype is bp.float64
        assert bp.tensor([bp.tensor(1, dtype=bp.int32), True]).dtype is bp.int32

    # Each element asks for a dtype (a NumPy scalar its own) and they promote, as torch.tensor's do.
    NUMPY_SCALAR_DATA = [
        ([np.float64(1.5)], bp.float64),
        ([np.int32(3)], bp.int32),
        ([np.float64(1.5), 2.0], bp.float64),
        ([np.float16(1.5)], bp.float16),
        ([np.int32(3), 4], bp.int64),
        ([np.int32(3), 2.5], bp.float32),
        ([np.uint8(3)], bp.uint8),
        ([np.bool_(True), 1], bp.int64),
        ([True, np.int8(1)], bp.int8),
        ([np.float32(1), np.int64(2)], bp.float32),
        ([[np.float64(1)], [2]], bp.float64),
        ([np.int16(1), np.uint8(2)], bp.int16),
    ]

    @pytest.mark.parametrize("data, dtype", NUMPY_SCALAR_DATA)
    def test_numpy_scalars_keep_their_dtype(self, data, dtype):
        t = bp.tensor(data)
        assert t.dtype is dtype
        assert t.tolist() == np.array(data).astype(object).tolist()

    @pytest.mark.filterwarnings("ignore:In future, it will be an error for 'np.bool_':DeprecationWarning")
    def test_numpy_scalar_dtypes_are_torchs(self):
        torch = pytest.importorskip("torch")
        for data, dtype in self.NUMPY_SCALAR_DATA:
            assert str(torch.tensor(data).dtype) == "torch." + dtype.name, data

    def test_elements_without_a_common_dtype_are_refused(self):
        with pytest.raises(TypeError, match="data mixes uint16 and int64 elements, which have no common dtype; "
                                            "pass dtype="):
            bp.tensor([np.uint16(1), 2])
        assert bp.tensor([np.uint16(1), 2], dtype=bp.int32).tolist() == [1, 2]

    def test_float32_rounds_python_floats(self):
        assert bp.tensor(0.1).item() == float(np.float32(0.1))
        assert bp.tensor([0.1], dtype=bp.float64).item() == 0.1


class TestTensorDtypeConversion:
    @pytest.mark.parametrize("dtype", [bp.bool, bp.uint8, bp.int8, bp.int16, bp.int32, bp.int64, bp.uint16,
                                       bp.uint32, bp.uint64, bp.float16, bp.bfloat16, bp.float32, bp.float64])
    def test_every_dtype_from_ints(self, dtype):
        t = bp.tensor([0, 1, 2, 3], dtype=dtype)
        assert t.dtype is dtype
        expected = [False, True, True, True] if dtype is bp.bool else [0, 1, 2, 3]
        assert t.tolist() == expected

    def test_floats_to_integers_truncate_toward_zero(self):
        assert bp.tensor([1.7, -1.7, 2.0], dtype=bp.int64).tolist() == [1, -1, 2]
        assert bp.tensor([0.0, 0.5, -2.0], dtype=bp.bool).tolist() == [False, True, True]

    def test_full_range_of_wide_integers(self):
        assert bp.tensor([2**63 - 1, -2**63]).tolist() == [2**63 - 1, -2**63]
        assert bp.tensor([2**64 - 1, 0], dtype=bp.uint64).tolist() == [2**64 - 1, 0]
        assert bp.tensor([2**53 + 1], dtype=bp.float64).item() == float(2**53)

    def test_float16_and_bfloat16_values(self):
        assert bp.tensor([1.0 / 3], dtype=bp.float16).item() == float(np.float16(1.0 / 3))
        assert bp.tensor([1e6], dtype=bp.float16).item() == float("inf")
        assert bp.tensor([3.0, 0.5], dtype=bp.bfloat16).tolist() == [3.0, 0.5]
        assert bp.tensor([1e300]).item() == float("inf")  # float32, as IEEE rounds

    @pytest.mark.parametrize("data, dtype, position, value", [
        ([1, 300], bp.uint8, "data[1]", "300"),
        ([[1, 2], [3, -1]], bp.uint32, "data[1][1]", "-1"),
        ([128], bp.int8, "data[0]", "128"),
        ([2**63], bp.int64, "data[0]", str(2**63)),
        ([1.0, float("nan")], bp.int32, "data[1]", "nan"),
        ([1e30], bp.int64, "data[0]", "1e+30"),
        ([-1.0], bp.uint8, "data[0]", "-1.0"),
    ])
    def test_values_that_do_not_fit_are_refused(self, data, dtype, position, value):
        with pytest.raises(OverflowError) as e:
            bp.tensor(data, dtype=dtype)
        assert position in str(e.value) and value in str(e.value) and dtype.name in str(e.value)

    def test_ints_past_uint64_are_refused(self):
        with pytest.raises(OverflowError, match=r"data\[0\] = 18446744073709551616 does not fit"):
            bp.tensor([2**64])
        with pytest.raises(OverflowError, match="does not fit"):
            bp.tensor(-2**63 - 1)

    def test_ints_past_int64_need_uint64(self):
        with pytest.raises(OverflowError, match="int64"):
            bp.tensor([2**63])  # inferred int64


class TestTensorErrors:
    @pytest.mark.parametrize("data, message", [
        ([[1, 2], [3]], r"ragged nested sequence: data\[1\] has length 1 but data\[0\] has length 2"),
        ([[1, 2], 3], r"data\[1\] is a number but data\[0\] is a sequence"),
        ([1, [2]], r"data\[1\] is a sequence but data\[0\] is a number"),
        ([[[1], [2]], [[3], [4, 5]]], r"data\[1\]\[1\] has length 2 but data\[0\]\[0\] has length 1"),
        ([[], [1]], r"data\[1\] has length 1 but data\[0\] has length 0"),
    ])
    def test_ragged_data_names_the_position(self, data, message):
        with pytest.raises(ValueError, match=message):
            bp.tensor(data)

    @pytest.mark.parametrize("data, message", [
        (["a"], r"data\[0\] is a str; elements must be bool, int or float"),
        ([[1, None]], r"data\[0\]\[1\] is a NoneType"),
        ([1 + 2j], r"data\[0\] is a complex number; Backplane has no complex dtype"),
        ("abc", "data must be a number, a \\(nested\\) sequence of numbers or an array, not str"),
        (b"abc", "not bytes"),
        ({1: 2}, "data is a dict"),
        (np.array([1j]), "element type \\(buffer format 'Zd', 16 bytes\\) has no Backplane dtype"),
        (np.array([1, 2], dtype=">i4"), "buffer format '>i'"),
    ])
    def test_unsupported_elements_name_what_was_given(self, data, message):
        with pytest.raises(TypeError, match=message):
            bp.tensor(data)

    def test_bad_dtype_and_device_arguments(self):
        with pytest.raises(TypeError, match="dtype must be a backplane.dtype .* not str"):
            bp.tensor([1], dtype="float32")
        with pytest.raises(TypeError, match="device must be a str .* not int"):
            bp.tensor([1], device=0)
        with pytest.raises(bp.InvalidArgumentError):
            bp.tensor([1], device="nosuchdevice")


class TestTensorFromArrays:
    @pytest.mark.parametrize("np_dtype, dtype", [
        (np.bool_, bp.bool), (np.uint8, bp.uint8), (np.int8, bp.int8), (np.int16, bp.int16),
        (np.int32, bp.int32), (np.int64, bp.int64), (np.uint16, bp.uint16), (np.uint32, bp.uint32),
        (np.uint64, bp.uint64), (np.float16, bp.float16), (np.float32, bp.float32), (np.float64, bp.float64),
    ])
    def test_numpy_arrays_keep_their_dtype(self, np_dtype, dtype):
        a = (np.arange(6) % 4).astype(np_dtype).reshape(2, 3)
        t = bp.tensor(a)
        assert t.dtype is dtype and t.shape == (2, 3)
        assert t.tolist() == a.tolist()

    def test_numpy_arrays_are_copied(self):
        a = np.arange(4.0)
        t = bp.tensor(a)
        a[0] = 100
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
        t[1] = -1
        assert a[1] == 1.0

    @pytest.mark.parametrize("make", [
        lambda a: a[:, ::2],
        lambda a: a[::-1],
        lambda a: a[::-2, 1:],
        lambda a: a.T,
        lambda a: np.asfortranarray(a),
        lambda a: a[1],
        lambda a: a[:0],
        lambda a: np.array(a[1, 1]),  # 0-d
    ], ids=["step", "reversed", "reversed-step", "transposed", "fortran", "row", "empty", "0-d"])
    def test_strided_numpy_arrays(self, make):
        view = make(np.arange(12, dtype=np.int32).reshape(3, 4))
        t = bp.tensor(view)
        assert t.shape == view.shape and t.dtype is bp.int32
        assert t.tolist() == view.tolist()

    def test_numpy_object_arrays_are_read_as_sequences(self):
        t = bp.tensor(np.array([1, 2.5], dtype=object))
        assert t.dtype is bp.float32 and t.tolist() == [1.0, 2.5]
        with pytest.raises(TypeError, match=r"data\[1\] is a str"):
            bp.tensor(np.array([1, "x"], dtype=object))

    def test_numpy_scalar(self):
        t = bp.tensor(np.float64(2.5))
        assert t.shape == () and t.dtype is bp.float64 and t.item() == 2.5

    def test_dtype_and_device_convert_the_array(self):
        t = bp.tensor(np.arange(3, dtype=np.int16), dtype=bp.float64, device="cpu")
        assert t.dtype is bp.float64 and t.tolist() == [0.0, 1.0, 2.0]

    def test_objects_with_array_interface(self):
        class Wrapper:
            def __array__(self, dtype=None):
                return np.arange(4, dtype=np.uint8).reshape(2, 2)
        t = bp.tensor(Wrapper())
        assert t.dtype is bp.uint8 and t.tolist() == [[0, 1], [2, 3]]

    def test_buffer_protocol_objects(self):
        import array
        t = bp.tensor(array.array("h", [1, -2, 3]))
        assert t.dtype is bp.int16 and t.tolist() == [1, -2, 3]

    def test_a_tensor_is_copied(self):
        a = bp.tensor([1, 2, 3])
        b = bp.tensor(a)
        b[0] = 9
        assert a.tolist() == [1, 2, 3]
        c = bp.tensor(a, dtype=bp.float32)
        assert c.dtype is bp.float32 and c.tolist() == [1.0, 2.0, 3.0]


@device_test
def test_tensor_on_a_device(dev):
    t = bp.tensor([[1, 2], [3, 4]], dtype=bp.float32, device=dev)
    assert t.device == dev and t.dtype is bp.float32
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    u = bp.tensor(np.arange(3, dtype=np.int8), device=dev)
    assert u.device == dev and u.tolist() == [0, 1, 2]
    # device=None keeps a tensor's device, as torch.tensor does.
    assert bp.tensor(t).device == dev


# ------------------------------------------------------------ factories

class TestFactories:
    """The factories come from the operator table (Note [Calling operators
    from Python]); these are the calls users write with PyTorch's habits."""

    def test_zeros(self):
        t = bp.zeros(2, 3)
        assert t.shape == (2, 3) and t.dtype is bp.float32 and t.device == "cpu"
        assert t.tolist() == [[0.0] * 3] * 2
        t = bp.zeros((2, 3), dtype=bp.int32)
        assert t.shape == (2, 3) and t.dtype is bp.int32 and t.tolist() == [[0] * 3] * 2
        assert bp.zeros([4]).shape == (4,)
        assert bp.zeros(()).shape == ()

    def test_ones(self):
        assert bp.ones(2).tolist() == [1.0, 1.0]
        t = bp.ones(2, 2, dtype=bp.bool)
        assert t.dtype is bp.bool and t.tolist() == [[True, True]] * 2

    def test_full(self):
        t = bp.full((2,), 7)
        assert t.tolist() == [7, 7] and t.dtype is bp.int64  # an int fill gives int64, as PyTorch
        t = bp.full((2, 1), 0.5)
        assert t.dtype is bp.float32 and t.tolist() == [[0.5], [0.5]]
        assert bp.full((1,), True).dtype is bp.bool
        assert bp.full((3,), 2, dtype=bp.float64).tolist() == [2.0, 2.0, 2.0]

    def test_arange(self):
        t = bp.arange(5)
        assert t.dtype is bp.int64 and t.tolist() == [0, 1, 2, 3, 4]
        assert bp.arange(1, 5, 2).tolist() == [1, 3]
        assert bp.arange(1, 4).tolist() == [1, 2, 3]
        t = bp.arange(0, 1, 0.25)
        assert t.dtype is bp.float32 and t.tolist() == [0.0, 0.25, 0.5, 0.75]
        assert bp.arange(3, dtype=bp.float64).tolist() == [0.0, 1.0, 2.0]

    def test_rand_and_randn(self):
        t = bp.rand(3, device="cpu")
        assert t.shape == (3,) and t.dtype is bp.float32 and t.device == "cpu"
        assert all(0.0 <= v < 1.0 for v in t.tolist())
        t = bp.rand(1000)
        assert len(set(t.tolist())) > 900  # not a constant
        n = bp.randn(2, 500, dtype=bp.float64)
        assert n.shape == (2, 500) and n.dtype is bp.float64
        values = np.array(n.tolist())
        assert abs(values.mean()) < 0.2 and 0.8 < values.std() < 1.2
        assert (values < 0).any()

    def test_factory_on_a_device(self):
        t = bp.zeros(2, device=bp.Device("cpu"))
        assert t.device == "cpu"


# ------------------------------------------------------------- numpy()

class TestNumpy:
    @pytest.mark.parametrize("dtype, np_dtype", [
        (bp.bool, np.bool_), (bp.uint8, np.uint8), (bp.int8, np.int8), (bp.int16, np.int16),
        (bp.int32, np.int32), (bp.int64, np.int64), (bp.uint16, np.uint16), (bp.uint32, np.uint32),
        (bp.uint64, np.uint64), (bp.float16, np.float16), (bp.float32, np.float32), (bp.float64, np.float64),
    ])
    def test_every_dtype_shares_memory(self, dtype, np_dtype):
        t = bp.tensor([[0, 1, 0], [1, 1, 0]], dtype=dtype)
        a = t.numpy()
        assert a.dtype == np_dtype and a.shape == (2, 3)
        assert a.tolist() == t.tolist()
        assert a.flags.writeable
        a[0, 0] = 1  # through NumPy...
        assert t[0, 0].item() == 1
        t[1, 2] = 1  # ...and through Backplane
        assert a[1, 2] == 1

    def test_views_keep_their_strides(self):
        t = bp.arange(12, dtype=bp.float32).view(3, 4)
        a = t.T.numpy()
        assert a.shape == (4, 3) and a.strides == (4, 16)
        assert a.tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).T.tolist()
        s = t[1:, ::2].numpy()
        assert s.tolist() == [[4.0, 6.0], [8.0, 10.0]]
        s[0, 1] = -1
        assert t[1, 2].item() == -1

    def test_zero_d_and_empty(self):
        a = bp.tensor(2.5).numpy()
        assert a.shape == () and a.dtype == np.float32 and float(a) == 2.5
        assert bp.zeros(0, 3).numpy().shape == (0, 3)

    def test_the_array_keeps_the_memory_alive(self):
        t = bp.arange(1000)
        a = t.numpy()
        del t
        gc.collect()
        bp.zeros(1000)  # would reuse freed memory
        assert a.tolist() == list(range(1000))

    def test_asarray_views_too(self):
        t = bp.tensor([1.0, 2.0])
        a = np.asarray(t)
        a[0] = 5
        assert t.tolist() == [5.0, 2.0]
        assert np.asarray(t, dtype=np.float64).dtype == np.float64

    def test_bfloat16_has_no_numpy_dtype(self):
        with pytest.raises(TypeError, match="NumPy has no bfloat16 dtype.*t.to\\(backplane.float32\\).numpy\\(\\)"):
            bp.tensor([1.0], dtype=bp.bfloat16).numpy()

    def test_numpy_is_not_imported_by_the_package(self):
        code = ("import sys\n"
                "class Block:\n"
                "    def find_spec(self, name, path=None, target=None):\n"
                "        if name == 'numpy' or name.startswith('numpy.') or name == 'torch':\n"
                "            raise ImportError('blocked ' + name)\n"
                "sys.meta_path.insert(0, Block())\n"
                "import backplane as bp\n"
                "t = bp.tensor([[1, 2], [3, 4]])\n"
                "assert t[1, 0].item() == 3 and t.tolist() == [[1, 2], [3, 4]]\n"
                "assert 'numpy' not in sys.modules and 'torch' not in sys.modules\n"
                "try:\n"
                "    t.numpy()\n"
                "except ImportError as e:\n"
                "    assert 'numpy() needs NumPy' in str(e), e\n"
                "else:\n"
                "    raise AssertionError('numpy() worked without NumPy')\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@device_test
def test_numpy_of_a_device_tensor(dev):
    t = bp.tensor([1.0, 2.0], device=dev)
    if dev == "cpu":
        assert t.numpy().tolist() == [1.0, 2.0]
        return
    with pytest.raises(TypeError, match=f"can't convert a {dev} tensor to NumPy.*call .cpu\\(\\) first"):
        t.numpy()
    a = t.numpy(force=True)
    assert a.tolist() == [1.0, 2.0]


# ------------------------------------------------ tolist, item, numbers

@device_test
class TestPythonNumbers:
    def test_tolist(self, dev):
        assert bp.tensor([[1, 2], [3, 4]], device=dev).tolist() == [[1, 2], [3, 4]]
        assert bp.tensor(7, device=dev).tolist() == 7
        assert bp.zeros(2, 0, device=dev).tolist() == [[], []]
        assert bp.zeros(0, 2, device=dev).tolist() == []
        values = bp.tensor([True, False], device=dev).tolist()
        assert values == [True, False] and all(type(v) is bool for v in values)
        assert all(type(v) is float for v in bp.tensor([1, 2], dtype=bp.float16, device=dev).tolist())
        assert bp.tensor([2**64 - 1], dtype=bp.uint64, device=dev).tolist() == [2**64 - 1]
        t = bp.arange(6, device=dev).view(2, 3).T
        assert t.tolist() == [[0, 3], [1, 4], [2, 5]]

    def test_item(self, dev):
        assert bp.tensor(3, device=dev).item() == 3
        assert bp.tensor([[2.5]], device=dev).item() == 2.5
        assert bp.tensor([True], device=dev).item() is True
        with pytest.raises(ValueError, match="a Tensor with 2 elements cannot be converted to Scalar"):
            bp.tensor([1, 2], device=dev).item()
        with pytest.raises(ValueError, match="a Tensor with 0 elements cannot be converted to Scalar"):
            bp.zeros(0, device=dev).item()

    def test_bool(self, dev):
        assert bool(bp.tensor([1], device=dev)) is True
        assert bool(bp.tensor(0.0, device=dev)) is False
        assert bool(bp.tensor(float("nan"), device=dev)) is True  # as bool(float('nan'))
        with pytest.raises(ValueError, match="Boolean value of Tensor with more than one value is ambiguous"):
            bool(bp.tensor([1, 1], device=dev))
        with pytest.raises(ValueError, match="Boolean value of Tensor with no values is ambiguous"):
            bool(bp.zeros(0, device=dev))

    def test_float_and_int(self, dev):
        assert float(bp.tensor(3, device=dev)) == 3.0
        assert int(bp.tensor(-2.7, device=dev)) == -2
        assert int(bp.tensor([[5]], dtype=bp.uint8, device=dev)) == 5
        with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
            float(bp.tensor([1.0, 2.0], device=dev))
        with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
            int(bp.tensor([1, 2], device=dev))
        with pytest.raises(ValueError, match="NaN"):
            int(bp.tensor(float("nan"), device=dev))

    def test_index(self, dev):
        assert [10, 20, 30][bp.tensor(1, device=dev)] == 20
        assert list(range(bp.tensor([3], device=dev))) == [0, 1, 2]
        assert [10, 20][bp.tensor(True, device=dev)] == 20
        with pytest.raises(TypeError, match="only integer tensors of a single element can be converted to an index"):
            [1, 2][bp.tensor(1.0, device=dev)]
        with pytest.raises(TypeError, match="only integer tensors of a single element"):
            [1, 2][bp.tensor([0, 1], device=dev)]

    def test_iteration(self, dev):
        rows = list(bp.tensor([[1, 2], [3, 4]], device=dev))
        assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]
        with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
            iter(bp.tensor(1, device=dev))


# ------------------------------------------------------------ indexing

def _fresh(shape=(3, 4, 5), dev="cpu"):
    n = int(np.prod(shape))
    return np.arange(n, dtype=np.int64).reshape(shape), bp.arange(n, device=dev).view(*shape)


BASIC_INDICES = [
    0, -1, 2, slice(None), slice(1, None), slice(None, 2), slice(1, 3), slice(0, 3, 2), slice(None, None, 2),
    slice(-2, None), slice(-100, 100), slice(5, 1), slice(2, 2), slice(1, -1, 2), slice(10, 20),
    None, Ellipsis,
    (0, 1), (0, 1, 2), (-1, -1, -1), (1, slice(None), 2), (slice(None), 0), (slice(None), slice(1, 3), -1),
    (Ellipsis, 0), (0, Ellipsis), (Ellipsis, 1, 2), (0, Ellipsis, 4), (1, Ellipsis, slice(None, None, 3)),
    (None, 0), (0, None), (None, Ellipsis, None), (slice(None), None, slice(None), None),
    (None, None, 1, None, slice(1, 2)), (Ellipsis, None), (2, 3, None, 4),
    (), (Ellipsis,), (np.int64(1), np.int32(-1)), (slice(np.int64(1), np.int32(3)),),
    (slice(None, None, 4), slice(None, None, 3), slice(None, None, 2)),
    slice(None, None, sys.maxsize), (0, slice(1, None, 2**62), slice(-sys.maxsize, sys.maxsize)),
]


@device_test
@pytest.mark.parametrize("index", BASIC_INDICES, ids=repr)
def test_getitem_matches_numpy(index, dev):
    a, t = _fresh(dev=dev)
    view = t[index]
    assert view.device == dev
    expected = a[index]
    assert view.shape == expected.shape
    assert view.tolist() == np.asarray(expected).tolist()


@device_test
@pytest.mark.parametrize("index", BASIC_INDICES, ids=repr)
def test_getitem_returns_a_view(index, dev):
    """Writing through t[index] changes t where NumPy's view would change a."""
    a, t = _fresh(dev=dev)
    view = t[index]
    view[...] = -1
    a[index] = -1
    assert t.tolist() == a.tolist()


def test_getitem_shares_storage():
    t = bp.arange(20, dtype=bp.float32).view(4, 5)
    base = t.numpy().ctypes.data
    v = t[1:, 2::2]
    assert v.numpy().ctypes.data == base + (1 * 5 + 2) * 4
    assert v.stride() == (5, 2) and v.storage_offset() == 7
    assert t[2].numpy().ctypes.data == base + 2 * 5 * 4
    assert t[None, ..., 3].stride() == (20, 5)


def test_getitem_on_a_0d_tensor():
    t = bp.tensor(5)
    assert t[()].tolist() == 5 and t[...].tolist() == 5
    assert t[None].shape == (1,) and t[None, None].shape == (1, 1)
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        t[0]


def test_0d_integer_tensor_index_selects():
    a, t = _fresh()
    assert t[bp.tensor(2)].tolist() == a[2].tolist()
    assert t[1, bp.tensor(-1, dtype=bp.int32)].tolist() == a[1, -1].tolist()


class TestIndexErrors:
    @pytest.mark.parametrize("index, dim, size", [(3, 0, 3), (-4, 0, 3), ((0, 4), 1, 4), ((0, 0, -6), 2, 5),
                                                  ((Ellipsis, 5), 2, 5)])
    def test_out_of_range(self, index, dim, size):
        _, t = _fresh((3, 4, 5))
        bad = index[-1] if isinstance(index, tuple) else index
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension {dim} with size {size}"):
            t[index]

    def test_too_many_indices(self):
        _, t = _fresh((3, 4))
        with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
            t[0, 0, 0]
        with pytest.raises(IndexError, match="too many indices"):
            t[0, None, 0, :]

    def test_one_ellipsis(self):
        _, t = _fresh()
        with pytest.raises(IndexError, match=r"an index can only have a single ellipsis \('...'\)"):
            t[..., 0, ...]

    @pytest.mark.parametrize("index", [slice(None, None, -1), slice(3, 0, -1), (0, slice(None, None, -2))],
                             ids=repr)
    def test_negative_steps_are_refused(self, index):
        _, t = _fresh()
        with pytest.raises(ValueError, match=r"step must be greater than zero.*t\.flip\(dim\)"):
            t[index]

    def test_zero_step(self):
        _, t = _fresh()
        with pytest.raises(ValueError, match="slice step cannot be zero"):
            t[::0]

    @pytest.mark.parametrize("index, name", [(1.0, "float"), ("a", "str"), ({}, "dict")])
    def test_other_objects_are_not_indices(self, index, name):
        _, t = _fresh()
        with pytest.raises(IndexError, match=f"only integers, slices .* are valid indices \\(got {name}\\)"):
            t[index]

    def test_huge_int(self):
        _, t = _fresh()
        with pytest.raises(IndexError, match="does not fit int64"):
            t[2**70]


# ------------------------------------------------------------- setitem

@device_test
class TestSetitem:
    def test_numbers_fill_the_view(self, dev):
        a, t = _fresh((3, 4), dev)
        t[1] = 7
        t[:, 0] = -1
        t[2, 1:3] = 5.9  # truncated into int64, as fill_ does
        t[0, -1] = True
        a[1] = 7
        a[:, 0] = -1
        a[2, 1:3] = 5
        a[0, -1] = 1
        assert t.tolist() == a.tolist()

    def test_tensors_are_broadcast(self, dev):
        a, t = _fresh((3, 4), dev)
        t[0] = bp.tensor([10, 11, 12, 13], device=dev)
        t[1:, 1:3] = bp.tensor([[20], [21]], device=dev)
        t[..., 3] = bp.tensor(9, device=dev)
        t[None, 2, :1] = bp.tensor([[[99]]], device=dev)  # leading size-1 dims of the value drop, as in PyTorch
        a[0] = [10, 11, 12, 13]
        a[1:, 1:3] = [[20], [21]]
        a[..., 3] = 9
        a[2, :1] = 99
        assert t.tolist() == a.tolist()

    def test_value_dtype_and_device_are_converted(self, dev):
        t = bp.zeros(2, 3, device=dev)
        t[0] = bp.tensor([1, 2, 3])  # int64 on the CPU into float32 on dev
        t[1] = np.array([0.5, 1.5, 2.5])
        t[1, :2] = [7, 8]
        assert t.dtype is bp.float32 and t.device == dev
        assert t.tolist() == [[1.0, 2.0, 3.0], [7.0, 8.0, 2.5]]

    def test_overlapping_value_reads_the_old_elements(self, dev):
        t = bp.arange(6, device=dev)
        t[1:] = t[:-1]
        assert t.tolist() == [0, 0, 1, 2, 3, 4]

    def test_whole_tensor(self, dev):
        t = bp.zeros(2, 2, device=dev)
        t[...] = 3
        assert t.tolist() == [[3.0, 3.0], [3.0, 3.0]]
        s = bp.tensor(1.0, device=dev)
        s[()] = 4
        assert s.item() == 4.0

    def test_shape_mismatch(self, dev):
        t = bp.zeros(3, 4, device=dev)
        with pytest.raises(ValueError,
                           match=r"shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing "
                                 r"result of shape \[3, 4\]"):
            t[...] = bp.tensor([1.0, 2.0, 3.0], device=dev)
        with pytest.raises(ValueError, match="shape mismatch"):
            t[0] = bp.zeros(2, 4, device=dev)
        assert t.tolist() == [[0.0] * 4] * 3  # nothing written

    def test_bad_values(self, dev):
        t = bp.zeros(2, device=dev)
        with pytest.raises(TypeError, match="not str"):
            t[0] = "x"
        with pytest.raises(OverflowError, match="does not fit int64"):
            t[0] = 2**70

    def test_index_errors_write_nothing(self, dev):
        t = bp.zeros(2, device=dev)
        with pytest.raises(IndexError, match="out of bounds"):
            t[2] = 1
        with pytest.raises(ValueError, match="step must be greater than zero"):
            t[::-1] = 1
        assert t.tolist() == [0.0, 0.0]


# ------------------------------------------------ the rank limit

# NumPy's own rank limit: 32 dims before NumPy 2, 64 from NumPy 2 on.
NUMPY_MAX_DIMS = 64 if int(np.__version__.split(".")[0]) >= 2 else 32
RANKS = [0, 1, 32, 33, 63, 64]


def _shape(rank):
    """A shape of `rank` dims with a few sizes 2 and 3, so that values tell dims apart."""
    return tuple(2 if i % 13 == 0 else 3 if i % 13 == 5 else 1 for i in range(rank))


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _nested(values, shape):
    """values (row-major) as nested lists of `shape`, without recursion."""
    for size in reversed(shape[1:]):
        values = [values[i:i + size] for i in range(0, len(values), size)]
    return values if shape else values[0]


class TestRankLimit:
    """Note [Rank limit]: at most 64 dims, enforced at creation; the
    conversions are correct for every rank up to it."""

    def test_creation_past_64_dims_raises(self):
        assert bp.zeros(*[1] * 64).dim() == 64
        limit = "a tensor has at most 64 dimensions; got 65"
        with pytest.raises(ValueError, match=limit):
            bp.zeros(*[1] * 65)
        with pytest.raises(ValueError, match=limit):
            bp.zeros(*[1] * 64)[None]
        with pytest.raises(ValueError, match=limit):
            bp.zeros(*[1] * 64).unsqueeze(0)
        with pytest.raises(ValueError, match=limit):
            bp.zeros(1).view(*[1] * 65)
        with pytest.raises(ValueError, match=limit):
            bp.zeros(1).reshape([1] * 65)
        with pytest.raises(ValueError, match=limit):
            bp.zeros(1).expand(*[1] * 65)
        with pytest.raises(ValueError, match="got 100000"):
            bp.zeros(*[1] * 100000)

    @pytest.mark.parametrize("rank", RANKS)
    def test_numpy_round_trip(self, rank):
        shape = _shape(rank)
        t = bp.arange(_numel(shape), dtype=bp.int32).reshape(list(shape))
        assert t.shape == shape
        if rank > NUMPY_MAX_DIMS:
            with pytest.raises(ValueError, match=f"can't convert a tensor of {rank} dimensions to NumPy: NumPy "
                                                 f".* holds at most {NUMPY_MAX_DIMS}"):
                t.numpy()
            with pytest.raises(ValueError, match=f"holds at most {NUMPY_MAX_DIMS}"):
                np.asarray(t)
            return
        a = t.numpy()
        assert a.shape == shape and a.dtype == np.int32
        assert a.reshape(-1).tolist() == list(range(_numel(shape)))
        back = bp.tensor(a)
        assert back.shape == shape and back.tolist() == t.tolist()
        strided = bp.tensor(a.T)  # a strided buffer of the same rank
        assert strided.shape == shape[::-1] and strided.tolist() == t.permute(*range(rank)[::-1]).tolist()

    @pytest.mark.parametrize("rank", RANKS)
    def test_tolist_and_repr(self, rank):
        shape = _shape(rank)
        t = bp.arange(_numel(shape)).reshape(list(shape))
        assert t.tolist() == _nested(list(range(_numel(shape))), shape)
        assert bp.tensor(t.tolist()).tolist() == t.tolist()
        text = repr(t)
        assert text.startswith("tensor(" + "[" * rank) and text.endswith(", int64, cpu)")

    def test_long_lists_in_messages_are_elided(self):
        """Note [Long lists in messages]: a 1M-entry perm gives a short error."""
        with pytest.raises(ValueError) as e:
            bp.zeros(2, 3).permute(*range(10**6))
        assert len(str(e.value)) < 1024
        assert "[0, 1, 2, 3, 4, 5, 6, 7, ..., 999992, 999993, 999994, 999995, 999996, 999997, 999998, 999999] " \
               "(1000000 entries)" in str(e.value)

    def test_numpy_at_its_limit(self):
        """The deepest array NumPy holds converts both ways; one more dim is a clear error."""
        shape = (1,) * (NUMPY_MAX_DIMS - 1) + (3,)
        a = np.arange(3, dtype=np.float64).reshape(shape)
        t = bp.tensor(a)
        assert t.shape == shape and t.numpy().shape == shape and t.numpy().tolist() == a.tolist()
        assert bp.from_dlpack(a).shape == shape
        if NUMPY_MAX_DIMS < 64:
            with pytest.raises(ValueError, match=f"NumPy {np.__version__} holds at most {NUMPY_MAX_DIMS}"):
                t.unsqueeze(0).numpy()


# ------------------------------------------ the device tests on gpusim

def _gpusim_plugin():
    path = os.environ.get("BACKPLANE_GPUSIM_PLUGIN_PATH")
    if path:
        return path
    try:
        from backplane import _build_paths
    except ImportError:
        return None
    path = os.path.join(_build_paths.lib_dir, "backplane", "test_plugins", "backplane_gpusim.so")
    return path if os.path.exists(path) else None


@pytest.mark.skipif(ON_GPUSIM, reason="this is the run on gpusim")
def test_device_tests_on_gpusim():
    """The device tests again, on the gpusim test device, in a process of
    their own: loading a plugin changes what the process's `auto` device
    is, which other tests must not see."""
    plugin = _gpusim_plugin()
    if plugin is None:
        pytest.skip("the gpusim test plugin is not built (cmake --build build --target backplane_gpusim)")
    env = dict(os.environ, **{GPUSIM_ENV: plugin})
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    summary = r.stdout.strip().splitlines()[-1]
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed > 90, summary  # the device tests ran, not only skips
