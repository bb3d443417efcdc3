"""Zero-copy exchange through DLPack's Python protocol: Tensor.__dlpack__,
Tensor.__dlpack_device__ and backplane.from_dlpack, with NumPy and PyTorch
(Note [DLPack from Python] in python/src/dlpack.cc, Note [DLPack mapping] in
backplane/runtime/dlpack.h).

"Shares memory" is checked the way a user relies on it: a write through one
side is read through the other, and the data pointers agree.
"""
import ctypes
import gc
import sys

import numpy as np
import pytest

import backplane as bp

PY_CAPSULE_IS_VALID = ctypes.pythonapi.PyCapsule_IsValid
PY_CAPSULE_IS_VALID.restype = ctypes.c_int
PY_CAPSULE_IS_VALID.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name_is(capsule, name):
    return PY_CAPSULE_IS_VALID(capsule, name.encode()) == 1


def data_ptr(t):
    """A CPU tensor's first element's address, through NumPy's view."""
    return t.numpy().ctypes.data


# Dtypes NumPy and Backplane share. NumPy 1.24's DLPack has no bool (and
# NumPy from 1.25 has it): tested apart.
NUMPY_DTYPES = [
    (bp.uint8, np.uint8), (bp.int8, np.int8), (bp.int16, np.int16), (bp.int32, np.int32), (bp.int64, np.int64),
    (bp.uint16, np.uint16), (bp.uint32, np.uint32), (bp.uint64, np.uint64), (bp.float16, np.float16),
    (bp.float32, np.float32), (bp.float64, np.float64),
]


# ------------------------------------------------------------- protocol

class TestProtocol:
    def test_dlpack_device(self):
        assert bp.zeros(2).__dlpack_device__() == (1, 0)  # kDLCPU

    def test_capsule_is_the_legacy_one(self):
        t = bp.zeros(2)
        assert capsule_name_is(t.__dlpack__(), "dltensor")
        # A consumer asking for versioned DLPack gets the legacy capsule, as the protocol allows.
        assert capsule_name_is(t.__dlpack__(max_version=(1, 0)), "dltensor")
        assert capsule_name_is(t.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None), "dltensor")

    def test_cpu_takes_no_stream(self):
        t = bp.zeros(2)
        with pytest.raises(ValueError, match="stream must be None for a CPU tensor"):
            t.__dlpack__(stream=1)
        with pytest.raises(ValueError, match="stream must be None"):
            t.__dlpack__(stream=-1)

    def test_keywords_only(self):
        with pytest.raises(TypeError):
            bp.zeros(2).__dlpack__(None)

    def test_bad_argument_types(self):
        t = bp.zeros(2)
        with pytest.raises(TypeError, match="max_version must be a \\(major, minor\\) tuple"):
            t.__dlpack__(max_version=1)
        with pytest.raises(TypeError, match="copy must be True, False or None"):
            t.__dlpack__(copy=1)
        with pytest.raises(TypeError, match="dl_device must be a \\(device_type, device_id\\) tuple"):
            t.__dlpack__(dl_device="cpu")

    def test_copy_true_exports_a_copy(self):
        t = bp.tensor([1.0, 2.0])
        a = np.from_dlpack(_Producer(t.__dlpack__(copy=True), (1, 0)))
        t[0] = 5
        assert a.tolist() == [1.0, 2.0]
        b = np.from_dlpack(_Producer(t.__dlpack__(dl_device=(1, 0), copy=False), (1, 0)))
        t[1] = 6
        assert b.tolist() == [5.0, 6.0]  # the tensor's own device: no copy

    def test_dl_device_elsewhere(self):
        t = bp.zeros(2)
        with pytest.raises(BufferError, match="copy=False forbids the copy"):
            t.__dlpack__(dl_device=(2, 0), copy=False)
        if not any(d.device.type == "cuda" for d in bp.devices()):
            with pytest.raises(BufferError, match="cannot export to dl_device \\(2, 0\\)"):
                t.__dlpack__(dl_device=(2, 0))

    def test_unconsumed_capsule_frees_the_tensor(self):
        a = np.arange(5.0)
        base = sys.getrefcount(a)
        t = bp.from_dlpack(a)
        capsule = t.__dlpack__()
        del t
        gc.collect()
        assert sys.getrefcount(a) == base + 1  # the capsule's tensor holds the array
        del capsule  # never consumed: its destructor deletes the tensor
        gc.collect()
        assert sys.getrefcount(a) == base


    def test_deleter_runs_without_the_gil(self):
        """A consumer may call the deleter on any thread, without the GIL; for
        memory imported from NumPy that ends in NumPy's deleter, which needs
        the GIL: Backplane's wrapper takes it."""
        a = np.arange(8.0)
        base = sys.getrefcount(a)
        capsule = bp.from_dlpack(a)[2:].__dlpack__()
        pointer = ctypes.pythonapi.PyCapsule_GetPointer
        pointer.restype, pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        managed = ctypes.cast(pointer(capsule, b"dltensor"), ctypes.POINTER(_DLManagedTensor))
        rename = ctypes.pythonapi.PyCapsule_SetName
        rename.restype, rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
        assert rename(capsule, b"used_dltensor") == 0  # this test is the consumer now
        gc.collect()
        assert sys.getrefcount(a) == base + 1
        assert ctypes.cast(managed.contents.data, ctypes.POINTER(ctypes.c_double))[0] == 2.0
        managed.contents.deleter(managed)  # a CFUNCTYPE call: ctypes releases the GIL around it
        assert sys.getrefcount(a) == base


class _DLManagedTensor(ctypes.Structure):
    """DLPack 0.x's DLManagedTensor, as dlpack.h lays it out."""


_DLManagedTensor._fields_ = [
    ("data", ctypes.c_void_p),
    ("device_type", ctypes.c_int32),
    ("device_id", ctypes.c_int32),
    ("ndim", ctypes.c_int),
    ("dtype", ctypes.c_uint32),
    ("shape", ctypes.c_void_p),
    ("strides", ctypes.c_void_p),
    ("byte_offset", ctypes.c_uint64),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))),
]


class _Producer:
    """Hands NumPy a capsule made beforehand (np.from_dlpack wants an object)."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


# ------------------------------------------------------------------ NumPy

class TestNumPy:
    @pytest.mark.parametrize("dtype, np_dtype", NUMPY_DTYPES, ids=lambda x: getattr(x, "name", None))
    def test_numpy_from_dlpack_shares_memory(self, dtype, np_dtype):
        t = bp.tensor([[0, 1, 2], [3, 4, 5]], dtype=dtype)  # arange has no uint16..uint64, as in PyTorch
        a = np.from_dlpack(t)
        assert a.dtype == np_dtype and a.shape == (2, 3)
        assert a.tolist() == t.tolist()
        assert a.ctypes.data == data_ptr(t)
        t[1, 2] = 42  # NumPy 1.24 makes imported arrays read-only: write through the tensor
        assert a[1, 2] == 42

    @pytest.mark.parametrize("dtype, np_dtype", NUMPY_DTYPES, ids=lambda x: getattr(x, "name", None))
    def test_from_dlpack_of_numpy_shares_memory(self, dtype, np_dtype):
        a = np.arange(6).astype(np_dtype).reshape(2, 3)
        t = bp.from_dlpack(a)
        assert t.dtype is dtype and t.shape == (2, 3) and t.device == "cpu"
        assert t.tolist() == a.tolist()
        assert data_ptr(t) == a.ctypes.data
        a[0, 1] = 9
        assert t[0, 1].item() == 9
        t[1, 0] = 7
        assert a[1, 0] == 7

    def test_bool(self):
        t = bp.tensor([True, False])
        a = np.array([True, False])
        if np.lib.NumpyVersion(np.__version__) < "1.25.0":
            # NumPy 1.24's DLPack has no bool either way; its refusal reaches the user.
            with pytest.raises((BufferError, RuntimeError, TypeError)):
                np.from_dlpack(t)
            with pytest.raises(BufferError):
                bp.from_dlpack(a)
            return
        assert np.from_dlpack(t).tolist() == [True, False]
        u = bp.from_dlpack(a)
        assert u.dtype is bp.bool
        a[1] = True
        assert u.tolist() == [True, True]

    @pytest.mark.parametrize("view", [
        lambda t: t.T,
        lambda t: t[:, 1::2],
        lambda t: t[1],
        lambda t: t[:, None, 2],
        lambda t: t[2:, 3:],
    ], ids=["transposed", "step", "row", "new-axis", "offset"])
    def test_strided_views_to_numpy(self, view):
        t = bp.arange(20, dtype=bp.float32).view(4, 5)
        v = view(t)
        a = np.from_dlpack(v)
        expected = view(np.arange(20, dtype=np.float32).reshape(4, 5))
        assert a.shape == expected.shape
        assert [s for s, n in zip(a.strides, a.shape) if n > 1] == [s for s, n in zip(expected.strides, a.shape)
                                                                     if n > 1]  # a size-1 dim's stride is free
        assert a.tolist() == expected.tolist()
        if v.numel():
            assert a.ctypes.data == data_ptr(v)
            v[...] = -1
            assert (a == -1).all()

    @pytest.mark.parametrize("view", [
        lambda a: a.T,
        lambda a: a[:, 1::2],
        lambda a: a[1:, 2:],
        lambda a: np.asfortranarray(a),
    ], ids=["transposed", "step", "offset", "fortran"])
    def test_strided_numpy_to_backplane(self, view):
        a = view(np.arange(20, dtype=np.int32).reshape(4, 5))
        t = bp.from_dlpack(a)
        assert t.shape == a.shape
        assert t.stride() == tuple(s // a.itemsize for s in a.strides)
        assert t.tolist() == a.tolist()
        t[0, 0] = 100
        assert a[0, 0] == 100

    def test_negative_strides_are_refused_with_the_fix(self):
        with pytest.raises(ValueError, match="strides >= 0.*numpy.ascontiguousarray"):
            bp.from_dlpack(np.arange(4)[::-1])

    def test_zero_d_and_empty(self):
        t = bp.tensor(3.5)
        a = np.from_dlpack(t)
        assert a.shape == () and float(a) == 3.5
        assert bp.from_dlpack(np.array(2, dtype=np.int16)).tolist() == 2
        e = np.from_dlpack(bp.zeros(0, 3))
        assert e.shape == (0, 3)
        u = bp.from_dlpack(np.zeros((2, 0)))
        assert u.shape == (2, 0) and u.tolist() == [[], []]

    def test_lifetimes(self):
        # The array outlives the tensor...
        t = bp.arange(1000)
        a = np.from_dlpack(t)
        del t
        gc.collect()
        bp.zeros(1000, dtype=bp.int64)
        assert a.tolist() == list(range(1000))
        # ...and the tensor (and its views) the array, which it keeps alive until they die.
        b = np.arange(100.0)
        base = sys.getrefcount(b)
        u = bp.from_dlpack(b)
        view = u[10:]
        del u
        gc.collect()
        assert view[0].item() == 10.0 and sys.getrefcount(b) == base + 1
        del view
        gc.collect()
        assert sys.getrefcount(b) == base

    def test_legacy_capsule(self):
        a = np.arange(3)
        capsule = a.__dlpack__()
        t = bp.from_dlpack(capsule)
        assert capsule_name_is(capsule, "used_dltensor")
        a[0] = 5
        assert t.tolist() == [5, 1, 2]
        with pytest.raises(ValueError, match="already consumed.*a capsule can be imported once"):
            bp.from_dlpack(capsule)

    def test_a_refused_capsule_is_not_taken(self):
        a = np.arange(4)[::-1]
        base = sys.getrefcount(a)
        capsule = a.__dlpack__()
        with pytest.raises(ValueError, match="strides"):
            bp.from_dlpack(capsule)
        assert capsule_name_is(capsule, "dltensor")  # still the producer's: its destructor frees it
        del capsule
        gc.collect()
        assert sys.getrefcount(a) == base

    def test_not_a_producer(self):
        with pytest.raises(TypeError, match="expected an object with __dlpack__ .* not int"):
            bp.from_dlpack(3)
        with pytest.raises(TypeError, match="not list"):
            bp.from_dlpack([1, 2])

    def test_wrong_capsule(self):
        import datetime  # any C capsule that is not DLPack's
        with pytest.raises(TypeError, match="expected a DLPack capsule named 'dltensor', got a capsule named "
                                            "'datetime.datetime_CAPI'"):
            bp.from_dlpack(datetime.datetime_CAPI)

    def test_from_dlpack_of_a_tensor_is_a_view(self):
        t = bp.tensor([1, 2, 3])
        u = bp.from_dlpack(t)
        u[0] = 7
        assert t.tolist() == [7, 2, 3] and u is not t


# ------------------------------------------------------------- devices

def test_device_memory_outside_backplane_is_refused(gpusim_plugin):
    """A device whose memory means nothing outside Backplane (gpusim: host
    memory behind a simulated device) has no DLPack export: BufferError with
    the fix, not a silent copy. Runs in a process of its own: loading a
    plugin changes the process's `auto` device."""
    import subprocess
    plugin = gpusim_plugin
    code = f"""
import backplane as bp
bp.load_plugin({plugin!r})
t = bp.tensor([1.0, 2.0], device="gpusim:0")
for call in (lambda: t.__dlpack__(), lambda: t.__dlpack_device__()):
    try:
        call()
    except BufferError as e:
        assert "not addressable outside Backplane" in str(e) and "t.cpu()" in str(e), e
    else:
        raise AssertionError("exported gpusim memory")
# dl_device asks for a copy on the CPU: allowed unless copy=False.
import numpy as np
class P:
    def __init__(self, c): self.c = c
    def __dlpack__(self, stream=None): return self.c
    def __dlpack_device__(self): return (1, 0)
a = np.from_dlpack(P(t.__dlpack__(dl_device=(1, 0))))
assert a.tolist() == [1.0, 2.0], a
try:
    t.__dlpack__(dl_device=(1, 0), copy=False)
except BufferError as e:
    assert "copy=False forbids" in str(e)
else:
    raise AssertionError("copied with copy=False")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


# --------------------------------------------------------------- PyTorch

TORCH_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _strides(strides, shape):
    """The strides that matter: a size-1 dim's stride moves nothing, and torch normalizes it."""
    return [s for s, n in zip(strides, shape) if n > 1]


def _torch_exports_bool(torch):
    try:
        torch.zeros(1, dtype=torch.bool).__dlpack__()
        return True
    except (RuntimeError, BufferError, TypeError):
        return False


class TestTorch:
    @pytest.mark.parametrize("name", TORCH_DTYPES)
    def test_torch_from_dlpack_shares_memory(self, torch, name):
        t = bp.arange(6, dtype=getattr(bp, name)).view(2, 3)
        x = torch.from_dlpack(t)
        assert x.dtype == getattr(torch, name) and tuple(x.shape) == (2, 3)
        assert x.tolist() == t.tolist()
        x[0, 1] = 9  # torch's imports are writable: both directions
        assert t[0, 1].item() == 9
        t[1, 2] = 8
        assert x[1, 2].item() == 8

    @pytest.mark.parametrize("name", TORCH_DTYPES)
    def test_from_dlpack_of_torch_shares_memory(self, torch, name):
        x = torch.arange(6).to(getattr(torch, name)).reshape(2, 3)
        t = bp.from_dlpack(x)
        assert t.dtype is getattr(bp, name) and t.shape == (2, 3)
        assert t.tolist() == x.tolist()
        x[1, 1] = 5
        assert t[1, 1].item() == 5
        t[0, 0] = 4
        assert x[0, 0].item() == 4
        assert torch.from_dlpack(t).data_ptr() == x.data_ptr()  # and back again, still no copy

    def test_bool(self, torch):
        if not _torch_exports_bool(torch):
            pytest.skip(f"torch {torch.__version__}'s DLPack has no bool (kDLBool came with torch 2)")
        x = torch.tensor([True, False])
        t = bp.from_dlpack(x)
        assert t.dtype is bp.bool and t.tolist() == [True, False]
        y = torch.from_dlpack(t)
        assert y.dtype == torch.bool
        t[1] = True
        assert y.tolist() == [True, True]

    def test_tensor_of_a_torch_bool_tensor(self, torch):
        # torch 1.13's __dlpack__ refuses bool; tensor() then reads its __array__.
        for x in (torch.tensor([True, False]), torch.tensor([[True], [False]]).t()):
            t = bp.tensor(x)
            assert t.dtype is bp.bool and t.tolist() == x.tolist()
        assert bp.tensor(torch.tensor([True, False]), dtype=bp.float32).tolist() == [1.0, 0.0]

    def test_views(self, torch):
        t = bp.arange(20, dtype=bp.float32).view(4, 5)
        for make in (lambda v: v.T, lambda v: v[1:, ::2], lambda v: v[2], lambda v: v[None, :, 3]):
            v = make(t)
            x = torch.from_dlpack(v)
            assert tuple(x.shape) == v.shape and _strides(x.stride(), v.shape) == _strides(v.stride(), v.shape)
            assert x.tolist() == v.tolist()
        x = torch.arange(20.0).reshape(4, 5)
        for make in (lambda v: v.t(), lambda v: v[1:, ::2], lambda v: v[2], lambda v: v[None, :, 3]):
            xv = make(x)
            t = bp.from_dlpack(xv)
            assert t.shape == tuple(xv.shape) and _strides(t.stride(), t.shape) == _strides(xv.stride(), t.shape)
            assert t.tolist() == xv.tolist()
            t[...] = -1
            assert (xv == -1).all()

    def test_zero_d_and_empty(self, torch):
        assert torch.from_dlpack(bp.tensor(2.5)).item() == 2.5
        assert bp.from_dlpack(torch.tensor(7)).tolist() == 7
        assert tuple(torch.from_dlpack(bp.zeros(0, 2)).shape) == (0, 2)
        assert bp.from_dlpack(torch.zeros(3, 0)).shape == (3, 0)

    def test_lifetimes(self, torch):
        t = bp.arange(1000)
        x = torch.from_dlpack(t)
        del t
        gc.collect()
        bp.zeros(1000, dtype=bp.int64)
        assert x.tolist() == list(range(1000))
        y = torch.arange(1000)
        u = bp.from_dlpack(y)
        del y
        gc.collect()
        torch.zeros(1000, dtype=torch.int64)
        assert u.tolist() == list(range(1000))

    def test_tensor_copies_a_torch_tensor(self, torch):
        x = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
        t = bp.tensor(x)
        assert t.dtype is bp.bfloat16 and t.tolist() == [1.0, 2.0]
        x[0] = 9
        assert t.tolist() == [1.0, 2.0]
        assert bp.tensor(x, dtype=bp.float32).tolist() == [9.0, 2.0]


# ---------------------------------------------------------------- ranks

@pytest.mark.parametrize("rank", [0, 1, 32, 33, 63, 64])
def test_every_rank_up_to_the_limit_round_trips(rank):
    """Note [Rank limit]: DLPack export and import are correct for every rank
    a tensor can have, shape, strides and values."""
    shape = tuple(2 if i % 13 == 0 else 3 if i % 13 == 5 else 1 for i in range(rank))
    numel = 1
    for s in shape:
        numel *= s
    t = bp.arange(numel, dtype=bp.float32).reshape(list(shape))
    capsule = t.__dlpack__()
    u = bp.from_dlpack(capsule)
    assert capsule_name_is(capsule, "used_dltensor")
    assert u.shape == shape and u.stride() == t.stride() and u.tolist() == t.tolist()
    u.fill_(7)  # the same memory
    assert t.sum().item() == 7 * numel
    if rank:
        v = bp.from_dlpack(t.permute(*range(rank)[::-1]).__dlpack__())  # strided
        assert v.shape == shape[::-1] and v.tolist() == t.permute(*range(rank)[::-1]).tolist()


@pytest.mark.parametrize("rank", [33, 63, 64])
def test_torch_round_trips_past_numpys_rank(torch, rank):
    shape = tuple(2 if i % 13 == 0 else 1 for i in range(rank))
    x = torch.arange(2 ** len([s for s in shape if s == 2]), dtype=torch.int64).reshape(shape)
    t = bp.from_dlpack(x)
    assert t.shape == shape and t.reshape(-1).tolist() == x.reshape(-1).tolist()
    y = torch.from_dlpack(t)
    assert tuple(y.shape) == shape and y.reshape(-1).tolist() == x.reshape(-1).tolist()
    assert y.data_ptr() == x.data_ptr()  # no copy either way
