"""DLPack interop: zero-copy exchange with NumPy and with ferrograd itself."""

from __future__ import annotations

import ctypes
import gc
import weakref

import ferrograd as fg
import numpy as np
import pytest

NP_DTYPES = [np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64]
FG_DTYPES = [fg.bool, fg.int32, fg.int64, fg.float16, fg.bfloat16, fg.float32, fg.float64]


def vals(t) -> np.ndarray:
    if t.dtype == fg.bfloat16:
        t = t.float()
    return np.array(np.asarray(t), copy=True)


def capsule_name(cap) -> str:
    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype = ctypes.c_char_p
    get.argtypes = [ctypes.py_object]
    return get(cap).decode()


def test_dlpack_device():
    assert fg.ones(2).__dlpack_device__() == (1, 0)


def test_numpy_consumer_shares_memory():
    t = fg.arange(12, dtype=fg.float32).reshape(3, 4)
    a = np.from_dlpack(t)
    assert a.shape == (3, 4) and a.dtype == np.float32
    assert a.__array_interface__["data"][0] == t.data_ptr()
    a[1, 2] = -5.0
    assert vals(t)[1, 2] == -5.0
    t.fill_(3.0)
    assert (a == 3.0).all()


@pytest.mark.parametrize(
    "make",
    [
        lambda t: t.t(),
        lambda t: t[:, ::2],
        lambda t: t[::-1],
        lambda t: t.flip(1),
        lambda t: t[1:, 1:3],
        lambda t: t.unsqueeze(0).expand(2, 4, 6),
        lambda t: t[2],
        lambda t: t[2, 3],
    ],
    ids=["transpose", "step", "reverse", "flip", "slice", "expand", "row", "scalar"],
)
def test_strided_views_round_trip(make):
    base = fg.arange(24, dtype=fg.float64).reshape(4, 6)
    v = make(base)
    a = np.from_dlpack(v)
    assert a.shape == tuple(v.shape)
    assert np.array_equal(a, vals(v))
    back = fg.from_dlpack(v.__dlpack__())
    assert back.shape == v.shape and back.stride() == v.stride()
    assert np.array_equal(vals(back), vals(v))
    assert back.data_ptr() == v.data_ptr()


def test_from_numpy_array_shares_memory():
    a = np.arange(20, dtype=np.float64).reshape(4, 5)
    t = fg.from_dlpack(a)
    assert t.shape == (4, 5) and t.dtype == fg.float64
    assert t.data_ptr() == a.__array_interface__["data"][0]
    a[0, 0] = 99.0
    assert vals(t)[0, 0] == 99.0
    t.add_(1.0)
    assert a[0, 0] == 100.0 and a[3, 4] == 20.0


def test_from_numpy_strided_and_offset_views():
    a = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    for v in [a[:, ::2, 1:], a.transpose(2, 0, 1), a[::-1, :, ::-2], a[1:, 2]]:
        t = fg.from_dlpack(v)
        assert t.shape == v.shape
        assert np.array_equal(vals(t), v)
        assert t.data_ptr() == v.__array_interface__["data"][0]


@pytest.mark.parametrize("dt", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_round_trip_with_numpy(dt):
    a = (np.arange(10) % 3).astype(dt)
    t = fg.from_dlpack(a)
    assert t.dtype.name == np.dtype(dt).name
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype
    assert np.array_equal(a, b)


@pytest.mark.parametrize("dt", FG_DTYPES, ids=lambda d: d.name)
def test_dtypes_round_trip_with_ferrograd(dt):
    t = (fg.arange(10) % 3).to(dt)
    for cap in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0))):
        u = fg.from_dlpack(cap)
        assert u.dtype == dt
        assert np.array_equal(vals(u), vals(t))
        assert u.data_ptr() == t.data_ptr()


def test_bfloat16_export():
    t = fg.tensor([1.5, -2.0, 3.25]).to(fg.bfloat16)
    u = fg.from_dlpack(t.__dlpack__())
    assert u.dtype == fg.bfloat16
    assert vals(u).tolist() == [1.5, -2.0, 3.25]
    u.mul_(2.0)  # shared memory
    assert vals(t).tolist() == [3.0, -4.0, 6.5]
    # NumPy has no bfloat16: it refuses the import rather than misreading it
    with pytest.raises((TypeError, RuntimeError, BufferError)):
        np.from_dlpack(t)


def test_unsupported_numpy_dtype():
    with pytest.raises(TypeError, match="from_dlpack"):
        fg.from_dlpack(np.arange(3, dtype=np.uint16))
    with pytest.raises(TypeError, match="from_dlpack"):
        fg.from_dlpack(np.ones(3, dtype=np.complex64))


def test_producer_outlives_original_object():
    t = fg.arange(1000, dtype=fg.float32)
    a = np.from_dlpack(t)
    del t
    gc.collect()
    fg.rand(100_000)  # reuse freed memory if it had been released
    assert np.array_equal(a, np.arange(1000, dtype=np.float32))

    arr = np.arange(1000, dtype=np.float64)
    ref = weakref.ref(arr)
    u = fg.from_dlpack(arr)
    del arr
    gc.collect()
    assert ref() is not None  # kept alive by the tensor
    assert vals(u)[999] == 999.0
    del u
    gc.collect()
    assert ref() is None  # the producer's deleter ran


def test_views_of_imported_tensors_keep_producer_alive():
    arr = np.arange(100, dtype=np.float32)
    ref = weakref.ref(arr)
    v = fg.from_dlpack(arr)[10:20]
    del arr
    gc.collect()
    assert ref() is not None
    assert vals(v)[0] == 10.0
    del v
    gc.collect()
    assert ref() is None


def test_unconsumed_capsule_releases_the_tensor():
    fg.empty_cache()
    before = fg.memory_stats()["cpu.in_use_bytes"]
    t = fg.zeros(1 << 20)  # 4 MiB
    cap = t.__dlpack__()
    del t
    gc.collect()
    assert fg.memory_stats()["cpu.in_use_bytes"] >= before + (4 << 20)  # the capsule holds it
    del cap
    gc.collect()
    assert fg.memory_stats()["cpu.in_use_bytes"] < before + (4 << 20)


def test_consumed_capsule_memory_lives_with_consumer():
    fg.empty_cache()
    before = fg.memory_stats()["cpu.in_use_bytes"]
    cap = fg.ones(1 << 20).__dlpack__()
    u = fg.from_dlpack(cap)
    del cap
    gc.collect()
    assert (vals(u) == 1.0).all()
    assert fg.memory_stats()["cpu.in_use_bytes"] >= before + (4 << 20)
    del u
    gc.collect()
    assert fg.memory_stats()["cpu.in_use_bytes"] < before + (4 << 20)


def test_capsule_cannot_be_consumed_twice():
    t = fg.ones(3)
    for cap in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0))):
        name = capsule_name(cap)
        assert name in ("dltensor", "dltensor_versioned")
        fg.from_dlpack(cap)
        assert capsule_name(cap) == "used_" + name
        with pytest.raises(ValueError, match="already consumed"):
            fg.from_dlpack(cap)
    cap = t.__dlpack__()
    np.from_dlpack(_Wrap(cap))
    with pytest.raises(ValueError, match="already consumed"):
        fg.from_dlpack(cap)


class _Wrap:
    """An object exposing a pre-made capsule through the protocol."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, **kwargs):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)


def test_capsule_kinds():
    t = fg.ones(2)
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(2, 3))) == "dltensor_versioned"


def test_copy_argument():
    t = fg.arange(4, dtype=fg.float32)
    u = fg.from_dlpack(t.__dlpack__(copy=True))
    assert u.data_ptr() != t.data_ptr()
    u.fill_(7.0)
    assert vals(t).tolist() == [0.0, 1.0, 2.0, 3.0]
    a = np.from_dlpack(t, copy=False)
    assert a.__array_interface__["data"][0] == t.data_ptr()
    c = fg.from_dlpack(np.arange(3.0), copy=True)
    assert c.dtype == fg.float64 and vals(c).tolist() == [0.0, 1.0, 2.0]


def test_readonly_memory():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = fg.from_dlpack(a)  # NumPy flags it read-only in a versioned capsule
    with pytest.raises(ValueError, match="read-only"):
        t.add_(1.0)
    assert np.array_equal(a, np.arange(4, dtype=np.float32))
    # exporting read-only memory: versioned carries the flag, unversioned refuses
    ro = fg.from_numpy(a)
    b = np.from_dlpack(ro)
    assert not b.flags.writeable
    with pytest.raises(BufferError):
        ro.__dlpack__()
    w = fg.from_dlpack(ro.__dlpack__(copy=True))
    w.add_(1.0)
    assert vals(w).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_export_arguments():
    t = fg.ones(2)
    with pytest.raises(BufferError):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    cap = t.__dlpack__(stream=None, dl_device=(1, 0), copy=False)
    assert capsule_name(cap) == "dltensor"
    with pytest.raises(TypeError):
        t.__dlpack__(max_version="1.0")


def test_zero_size_and_scalar():
    for t in [fg.zeros(0), fg.zeros(3, 0, 2), fg.tensor(2.5)]:
        a = np.from_dlpack(t)
        assert a.shape == tuple(t.shape)
        u = fg.from_dlpack(t.__dlpack__())
        assert u.shape == t.shape
        assert np.array_equal(vals(u), vals(t))
    e = fg.from_dlpack(np.zeros((0, 4)))
    assert e.shape == (0, 4)
    s = fg.from_dlpack(np.array(3.0, dtype=np.float32))
    assert s.shape == () and s.item() == 3.0


def test_from_dlpack_of_a_tensor_shares_storage():
    t = fg.arange(5)
    u = fg.from_dlpack(t)
    assert u._shares_storage(t)


def test_bad_inputs():
    with pytest.raises(TypeError, match="from_dlpack"):
        fg.from_dlpack([1, 2, 3])

    class BadDevice:
        def __dlpack__(self, **kw):
            raise AssertionError("must not be called")

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(RuntimeError, match="CUDA"):
        fg.from_dlpack(BadDevice())

    class NotCapsule:
        def __dlpack__(self, **kw):
            return 5

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(TypeError, match="from_dlpack"):
        fg.from_dlpack(NotCapsule())
    with pytest.raises(RuntimeError, match="from_dlpack"):
        fg.from_dlpack(np.ones(2), device="gpu")


def test_legacy_producer_without_keywords():
    class Legacy:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    a = np.arange(6.0)
    t = fg.from_dlpack(Legacy(a))
    a[2] = -1
    assert vals(t)[2] == -1.0


# ---------------------------------------------------------------------------
# A hand-made producer (ctypes), to reach corners NumPy never produces
# ---------------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Managed(ctypes.Structure):
    pass


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedV(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_DELETER_V = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ManagedV))
_Managed._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_ManagedV._fields_ = [
    ("version", _Version),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DELETER_V),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", _DLTensor),
]

_NAMES = {False: ctypes.c_char_p(b"dltensor"), True: ctypes.c_char_p(b"dltensor_versioned")}
_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class _Producer:
    """Owns a buffer and a managed tensor describing part of it; counts deleter calls."""

    def __init__(self, buf: np.ndarray, shape, strides=None, byte_offset=0, code=2, bits=32,
                 device=1, versioned=False, major=1, flags=0):
        self.buf = buf
        self.deleted = 0
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        t = _DLTensor(
            ctypes.c_void_p(buf.__array_interface__["data"][0]),
            _DLDevice(device, 0),
            len(shape),
            _DLDataType(code, bits, 1),
            self.shape,
            self.strides,
            byte_offset,
        )
        if versioned:
            self.deleter = _DELETER_V(self._delete)
            self.m = _ManagedV(_Version(major, 0), None, self.deleter, flags, t)
        else:
            self.deleter = _DELETER(self._delete)
            self.m = _Managed(t, None, self.deleter)
        self.capsule = _new_capsule(ctypes.addressof(self.m), _NAMES[versioned], None)

    def _delete(self, _ptr):
        self.deleted += 1


def test_byte_offset_and_null_strides():
    buf = np.arange(12, dtype=np.float32)
    p = _Producer(buf, (2, 3), None, byte_offset=8)
    t = fg.from_dlpack(p.capsule)
    assert np.array_equal(vals(t), [[2, 3, 4], [5, 6, 7]])
    t.mul_(10.0)
    assert buf[2] == 20.0 and buf[7] == 70.0 and buf[8] == 8.0
    assert p.deleted == 0
    del t
    gc.collect()
    assert p.deleted == 1


def test_explicit_negative_strides_from_producer():
    buf = np.arange(10, dtype=np.int64)
    p = _Producer(buf, (4,), (-2,), byte_offset=8 * 9, code=0, bits=64)
    t = fg.from_dlpack(p.capsule)
    assert vals(t).tolist() == [9, 7, 5, 3]
    del t
    gc.collect()
    assert p.deleted == 1


def test_versioned_read_only_flag_from_producer():
    buf = np.arange(4, dtype=np.float64)
    p = _Producer(buf, (4,), versioned=True, bits=64, flags=1)
    t = fg.from_dlpack(p.capsule)
    with pytest.raises(ValueError, match="read-only"):
        t.fill_(0.0)
    assert vals(t).tolist() == [0.0, 1.0, 2.0, 3.0]
    del t
    gc.collect()
    assert p.deleted == 1


def test_rejected_imports_still_release_the_producer():
    buf = np.zeros(4, dtype=np.float32)
    cases = [
        (dict(device=2), RuntimeError, "CUDA"),
        (dict(code=1, bits=16), TypeError, "uint16"),
        (dict(code=5, bits=64), TypeError, "complex"),
        (dict(versioned=True, major=2), BufferError, "version"),
    ]
    for kw, exc, msg in cases:
        p = _Producer(buf, (4,), **kw)
        with pytest.raises(exc, match=msg):
            fg.from_dlpack(p.capsule)
        assert p.deleted == 1, kw
        assert capsule_name(p.capsule).startswith("used_")


def test_import_dropped_at_once_releases_once():
    buf = np.zeros(4, dtype=np.float32)
    p = _Producer(buf, (4,))
    fg.from_dlpack(p.capsule)  # consume and drop at once
    gc.collect()
    assert p.deleted == 1
