#!/usr/bin/env python3
"""DLPack interop with NumPy, as users of backplane/runtime/dlpack.h rely on it.

Backplane tensors go to numpy.from_dlpack, and NumPy arrays' __dlpack__()
capsules come into Backplane, both without a copy. Python reaches Backplane
through the test-only library dlpack_interop (tests/api/dlpack_interop.cc)
with ctypes; BackplaneArray below is what a binding would offer: the DLPack
Python protocol (__dlpack__, __dlpack_device__) over a tensor handle.

Usage: dlpack_interop_test.py PATH/TO/libdlpack_interop.so [unittest args]
"""
import ctypes
import gc
import sys
import unittest
import weakref

import numpy as np

# Capsule names of the DLPack Python protocol. PyCapsule keeps the pointer,
# not a copy, so these bytes objects must live as long as any capsule.
DLTENSOR = b"dltensor"
USED_DLTENSOR = b"used_dltensor"

LIB = None  # the dlpack_interop library, set up by load_library()


class DLManagedTensor(ctypes.Structure):
    """The head of dlpack.h's struct, enough to reach the deleter."""


DLManagedTensor._fields_ = [
    ("data", ctypes.c_void_p),
    ("device_type", ctypes.c_int32),
    ("device_id", ctypes.c_int32),
    ("ndim", ctypes.c_int),
    ("dtype", ctypes.c_uint32),
    ("shape", ctypes.c_void_p),
    ("strides", ctypes.c_void_p),
    ("byte_offset", ctypes.c_uint64),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]

PY = ctypes.pythonapi
PY.PyCapsule_New.restype = ctypes.py_object
PY.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
PY.PyCapsule_GetPointer.restype = ctypes.c_void_p
PY.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
PY.PyCapsule_SetName.restype = ctypes.c_int
PY.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# The destructor gets the dying capsule as a raw pointer: no new references to it.
RAW_IS_VALID = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", PY))
RAW_GET_POINTER = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", PY))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def delete_unconsumed_capsule(capsule):
    # A consumer renames a capsule it took to "used_dltensor"; one still
    # called "dltensor" was never taken, so its tensor is still the
    # producer's to delete.
    if RAW_IS_VALID(capsule, DLTENSOR):
        managed = ctypes.cast(RAW_GET_POINTER(capsule, DLTENSOR), ctypes.POINTER(DLManagedTensor))
        managed.contents.deleter(managed)


class BackplaneError(Exception):
    pass


def check(result):
    if not result:
        raise BackplaneError(LIB.dlpi_last_error().decode())
    return result


class BackplaneArray:
    """A Backplane tensor handle that speaks the DLPack Python protocol."""

    def __init__(self, handle):
        self.handle = check(handle)

    def __del__(self):
        LIB.dlpi_free(self.handle)

    def __dlpack_device__(self):
        device_type, device_id = ctypes.c_int32(), ctypes.c_int32()
        if LIB.dlpi_dlpack_device(self.handle, ctypes.byref(device_type), ctypes.byref(device_id)) != 0:
            raise BackplaneError(LIB.dlpi_last_error().decode())
        return device_type.value, device_id.value

    def __dlpack__(self, stream=None):
        del stream  # CPU only: nothing to order
        managed = check(LIB.dlpi_to_dlpack(self.handle))
        return PY.PyCapsule_New(managed, DLTENSOR, ctypes.cast(delete_unconsumed_capsule, ctypes.c_void_p))

    @staticmethod
    def arange(dtype, shape):
        sizes = (ctypes.c_int64 * len(shape))(*shape)
        return BackplaneArray(LIB.dlpi_arange(dtype.encode(), sizes, len(shape)))

    @staticmethod
    def from_dlpack(producer):
        """Imports producer.__dlpack__() without a copy (the consumer's side of the protocol)."""
        capsule = producer.__dlpack__()
        handle = LIB.dlpi_from_dlpack(PY.PyCapsule_GetPointer(capsule, DLTENSOR))
        if not handle:  # fromDLPack took nothing: the capsule still deletes the tensor
            raise BackplaneError(LIB.dlpi_last_error().decode())
        PY.PyCapsule_SetName(capsule, USED_DLTENSOR)
        return BackplaneArray(handle)

    def transpose(self):
        return BackplaneArray(LIB.dlpi_transpose(self.handle))

    def slice(self, dim, start, end, step=1):
        return BackplaneArray(LIB.dlpi_slice(self.handle, dim, start, end, step))

    @property
    def data_ptr(self):
        return LIB.dlpi_data_ptr(self.handle)

    @property
    def dtype(self):
        return LIB.dlpi_dtype(self.handle).decode()

    @property
    def shape(self):
        return tuple(LIB.dlpi_size(self.handle, d) for d in range(LIB.dlpi_dim(self.handle)))

    @property
    def strides(self):
        """In elements, as Backplane counts them."""
        return tuple(LIB.dlpi_stride(self.handle, d) for d in range(LIB.dlpi_dim(self.handle)))

    def values(self):
        """Every element in row-major order, read in place."""
        count = int(np.prod(self.shape))
        return [LIB.dlpi_get(self.handle, i) for i in range(count)]

    def __setitem__(self, index, value):
        LIB.dlpi_set(self.handle, index, float(value))

    def storage_use_count(self):
        return LIB.dlpi_storage_use_count(self.handle)


def load_library(path):
    global LIB
    # PyDLL: calls keep the GIL, which the DLPack deleters they may run need
    # (NumPy 1.24's decrefs its array without taking the GIL).
    LIB = ctypes.PyDLL(path)
    signatures = {
        "dlpi_last_error": (ctypes.c_char_p, []),
        "dlpi_arange": (ctypes.c_void_p, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int]),
        "dlpi_transpose": (ctypes.c_void_p, [ctypes.c_void_p]),
        "dlpi_slice": (ctypes.c_void_p, [ctypes.c_void_p] + [ctypes.c_int64] * 4),
        "dlpi_free": (None, [ctypes.c_void_p]),
        "dlpi_to_dlpack": (ctypes.c_void_p, [ctypes.c_void_p]),
        "dlpi_dlpack_device": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32),
                                              ctypes.POINTER(ctypes.c_int32)]),
        "dlpi_from_dlpack": (ctypes.c_void_p, [ctypes.c_void_p]),
        "dlpi_data_ptr": (ctypes.c_size_t, [ctypes.c_void_p]),
        "dlpi_dtype": (ctypes.c_char_p, [ctypes.c_void_p]),
        "dlpi_dim": (ctypes.c_int64, [ctypes.c_void_p]),
        "dlpi_size": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int64]),
        "dlpi_stride": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int64]),
        "dlpi_get": (ctypes.c_double, [ctypes.c_void_p, ctypes.c_int64]),
        "dlpi_set": (None, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_double]),
        "dlpi_storage_use_count": (ctypes.c_uint32, [ctypes.c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(LIB, name)
        fn.restype, fn.argtypes = restype, argtypes


# Backplane dtypes NumPy has, by name in both.
SHARED_DTYPES = ["uint8", "int8", "int32", "int64", "float16", "float32", "float64"]


class BackplaneToNumPyTest(unittest.TestCase):
    def test_every_shared_dtype_arrives_without_a_copy(self):
        for dtype in SHARED_DTYPES:
            with self.subTest(dtype=dtype):
                t = BackplaneArray.arange(dtype, [2, 3])
                a = np.from_dlpack(t)
                self.assertEqual(a.dtype, np.dtype(dtype))
                self.assertEqual(a.shape, (2, 3))
                np.testing.assert_array_equal(a, np.arange(6, dtype=dtype).reshape(2, 3))
                self.assertEqual(a.ctypes.data, t.data_ptr)

    def test_the_array_sees_writes_through_the_tensor(self):
        t = BackplaneArray.arange("float32", [2, 3])
        a = np.from_dlpack(t)
        # NumPy makes every array it imports read-only (DLPack 0.6 cannot say
        # whether the producer allows writes), so writes go the other way.
        self.assertFalse(a.flags.writeable)
        t[5] = 42
        t[0] = -1
        np.testing.assert_array_equal(a, [[-1, 1, 2], [3, 4, 42]])

    def test_strided_views_keep_their_layout(self):
        base = BackplaneArray.arange("float32", [4, 6])
        expected = np.arange(24, dtype=np.float32).reshape(4, 6)
        cases = [
            ("transpose", base.transpose(), expected.T),
            ("slice with offset and step", base.slice(1, 1, 6, 2), expected[:, 1:6:2]),
            ("rows", base.slice(0, 2, 4), expected[2:4]),
        ]
        for name, view, want in cases:
            with self.subTest(view=name):
                a = np.from_dlpack(view)
                np.testing.assert_array_equal(a, want)
                self.assertEqual(a.strides, tuple(s * 4 for s in view.strides))
                self.assertEqual(a.ctypes.data, view.data_ptr)

    def test_zero_dim_and_empty(self):
        scalar = np.from_dlpack(BackplaneArray.arange("float64", []))
        self.assertEqual(scalar.shape, ())
        self.assertEqual(scalar[()], 0.0)
        empty = np.from_dlpack(BackplaneArray.arange("int32", [3, 0]))
        self.assertEqual(empty.shape, (3, 0))
        self.assertEqual(empty.dtype, np.int32)

    def test_the_array_keeps_the_storage_alive_after_the_tensor_is_gone(self):
        t = BackplaneArray.arange("int64", [300])
        probe = t.slice(0, 0, 1)  # another handle on the same storage, to count with
        before = probe.storage_use_count()
        a = np.from_dlpack(t)
        self.assertEqual(probe.storage_use_count(), before + 1)
        del t
        gc.collect()
        self.assertEqual(a[299], 299)
        del a
        gc.collect()
        self.assertEqual(probe.storage_use_count(), before - 1, "NumPy ran the deleter: the export let go")

    def test_an_unconsumed_capsule_deletes_its_tensor(self):
        t = BackplaneArray.arange("float32", [300])
        before = t.storage_use_count()
        capsule = t.__dlpack__()
        self.assertEqual(t.storage_use_count(), before + 1)
        del capsule
        gc.collect()
        self.assertEqual(t.storage_use_count(), before)

    def test_device_is_cpu(self):
        self.assertEqual(BackplaneArray.arange("float32", [1]).__dlpack_device__(), (1, 0))  # kDLCPU

    @unittest.skipIf(tuple(int(p) for p in np.__version__.split(".")[:2]) < (1, 25),
                     "NumPy understands DLPack's bool (kDLBool) from 1.25 on")
    def test_bool_arrives_as_bool(self):
        a = np.from_dlpack(BackplaneArray.arange("bool", [2]))
        self.assertEqual(a.dtype, np.bool_)


class NumPyToBackplaneTest(unittest.TestCase):
    def test_every_shared_dtype_arrives_without_a_copy(self):
        for dtype in SHARED_DTYPES:
            with self.subTest(dtype=dtype):
                arr = np.arange(6, dtype=dtype).reshape(2, 3)
                t = BackplaneArray.from_dlpack(arr)
                self.assertEqual(t.dtype, dtype)
                self.assertEqual(t.shape, (2, 3))
                self.assertEqual(t.strides, (3, 1))
                self.assertEqual(t.values(), list(range(6)))
                self.assertEqual(t.data_ptr, arr.ctypes.data)

    def test_writes_show_on_both_sides(self):
        arr = np.zeros((2, 3), dtype=np.float64)
        t = BackplaneArray.from_dlpack(arr)
        t[1] = 99
        self.assertEqual(arr[0, 1], 99)
        arr[1, 0] = 7
        self.assertEqual(t.values()[3], 7)

    def test_strided_views_keep_their_layout(self):
        arr = np.arange(24, dtype=np.int32).reshape(4, 6)
        for name, view in [("transpose", arr.T), ("every other column", arr[:, 1::2]), ("rows 1..3", arr[1:3])]:
            with self.subTest(view=name):
                t = BackplaneArray.from_dlpack(view)
                self.assertEqual(t.shape, view.shape)
                self.assertEqual(t.strides, tuple(s // 4 for s in view.strides))
                self.assertEqual(t.values(), view.ravel().tolist())
                self.assertEqual(t.data_ptr, view.ctypes.data)

    def test_zero_dim_and_empty(self):
        t = BackplaneArray.from_dlpack(np.array(2.5))
        self.assertEqual(t.shape, ())
        self.assertEqual(t.values(), [2.5])
        e = BackplaneArray.from_dlpack(np.zeros((0, 4), dtype=np.int64))
        self.assertEqual(e.shape, (0, 4))
        self.assertEqual(e.values(), [])

    def test_the_tensor_keeps_the_array_alive_until_it_dies(self):
        arr = np.arange(4, dtype=np.float32)
        alive = weakref.ref(arr)
        t = BackplaneArray.from_dlpack(arr)
        view = t.slice(0, 1, 3)
        del arr
        gc.collect()
        self.assertIsNotNone(alive(), "the imported tensor holds the array")
        del t
        gc.collect()
        self.assertIsNotNone(alive(), "a view of the imported tensor holds the array")
        self.assertEqual(view.values(), [1, 2])
        del view
        gc.collect()
        self.assertIsNone(alive(), "the last view let go: NumPy's deleter ran")

    def test_a_refused_import_leaves_the_capsule_to_delete_the_array(self):
        arr = np.arange(6, dtype=np.float32)
        alive = weakref.ref(arr)
        reversed_view = arr[::-1]
        del arr
        with self.assertRaisesRegex(BackplaneError, r"dl_tensor.strides\[0\] is -1 .* need strides >= 0"):
            BackplaneArray.from_dlpack(reversed_view)
        del reversed_view
        gc.collect()
        self.assertIsNone(alive(), "the unconsumed capsule deleted NumPy's tensor")


if __name__ == "__main__":
    load_library(sys.argv.pop(1))
    unittest.main()
