"""Read checkpoints written by PyTorch's ``torch.save`` (its zip format, PyTorch 1.6 and later).

Such a file is a zip archive holding ``<archive>/data.pkl`` (a pickle of the saved object)
and one file per tensor storage, ``<archive>/data/<key>`` (the raw bytes, in the order
``<archive>/byteorder`` names). In the pickle a tensor is a call of
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``
whose storage is a persistent reference ``("storage", torch.FloatStorage, key, location,
numel)``.

The pickle is read with an allow-list, as PyTorch's ``weights_only`` loading does: tensors,
Parameters, ``OrderedDict`` (state dicts, with their ``_metadata``), dtypes, devices and plain
data (dicts, lists, tuples, sets, numbers, strings, bytes). Any other reference (a whole
pickled module, a class of the saving script) raises ``pickle.UnpicklingError`` naming it:
nothing from the file is ever executed. Every tensor is a new, contiguous CPU tensor with
its own memory (views of one storage are copied apart), moved as ``map_location`` says or,
without one, to the device it was saved from (``"cuda"`` names ferrograd's GPU device).
"""

from __future__ import annotations

import codecs
import io
import pickle
import zipfile
import zlib
from collections import OrderedDict
from typing import Any, NamedTuple

import numpy as np

from . import _core

Tensor = _core.Tensor

# PyTorch storage class name -> safetensors dtype name of serialization._DTYPES
_STORAGES = {
    "FloatStorage": "F32",
    "DoubleStorage": "F64",
    "HalfStorage": "F16",
    "BFloat16Storage": "BF16",
    "ByteStorage": "U8",
    "CharStorage": "I8",
    "ShortStorage": "I16",
    "IntStorage": "I32",
    "LongStorage": "I64",
    "BoolStorage": "BOOL",
}

# torch.<name> dtype objects (pickled as globals) -> ferrograd dtypes
_DTYPE_NAMES = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "uint8": "uint8",
    "int8": "int8",
    "int16": "int16",
    "short": "int16",
    "int32": "int32",
    "int": "int32",
    "int64": "int64",
    "long": "int64",
    "bool": "bool",
}

#: Largest tensor storage read (bytes), against a file that claims a huge one.
MAX_STORAGE_BYTES = 1 << 34


def is_torch_zip(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a zip archive (PyTorch's checkpoint format)."""
    return head[:4] == b"PK\x03\x04"


class _Passthrough(Exception):  # noqa: N818 - carries an error raised by the caller's code
    """Wraps an exception of ``map_location`` so that it reaches the caller unchanged."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes, refusing one whose size could not come from its compressed size
    (deflate expands at most about 1032 times): no decompression bomb is inflated."""
    from .serialization import CheckpointError

    if info.file_size > 1100 * info.compress_size + 1024:
        raise CheckpointError(
            f"{zf.filename or '<stream>'}: PyTorch checkpoint member {info.filename!r} claims "
            f"{info.file_size} bytes from {info.compress_size} compressed"
        )
    return zf.read(info)


def _refused() -> type[Exception]:
    """The error for a reference outside the allow-list: a ``pickle.UnpicklingError`` (as
    PyTorch's weights-only loading raises) that is also a ``CheckpointError``."""
    global _Refused
    if _Refused is None:
        from .serialization import CheckpointError

        class RefusedPickle(CheckpointError, pickle.UnpicklingError):
            """A PyTorch checkpoint refers to something ferrograd does not load."""

        _Refused = RefusedPickle
    return _Refused


_Refused: type[Exception] | None = None


# PyTorch's legacy (before 1.6, or ``_use_new_zipfile_serialization=False``) format starts
# with its magic number 0x1950a86a20f9469cfc6c pickled (protocol 2, LONG1 of 10 bytes).
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"


def is_torch_legacy(head: bytes) -> bool:
    """Whether a file starting with ``head`` (16 bytes) is in PyTorch's legacy pickle format."""
    return head[: len(_LEGACY_MAGIC)] == _LEGACY_MAGIC


class _StorageType(NamedTuple):
    kind: str  # safetensors dtype name


class _Storage(NamedTuple):
    kind: str
    flat: np.ndarray  # native byte order
    location: str


def _rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks: Any, *state: Any) -> Tensor:
    from .nn import Parameter

    return Parameter(data, bool(requires_grad))


class _Unpickler(pickle.Unpickler):
    def __init__(
        self, f: Any, zf: zipfile.ZipFile, prefix: str, name: str, byteorder: str, map_location: Any
    ) -> None:
        super().__init__(f)
        self.zf = zf
        self.prefix = prefix
        self.name = name
        self.byteorder = byteorder
        self.map_location = map_location
        self.storages: dict[str, _Storage] = {}

    def _fail(self, msg: str) -> Exception:
        from .serialization import CheckpointError

        return CheckpointError(f"{self.name}: PyTorch checkpoint: {msg}")

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if module == "torch._utils":
            if name == "_rebuild_tensor_v2":
                return self._rebuild_tensor
            if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
                return _rebuild_parameter
        if module == "torch":
            if name in _STORAGES:
                return _StorageType(_STORAGES[name])
            if name in _DTYPE_NAMES:
                return getattr(_core, _DTYPE_NAMES[name])
            if name == "device":
                return _core.device
        if (module, name) == ("_codecs", "encode"):
            return codecs.encode
        if module == "builtins" and name in ("set", "frozenset", "slice"):
            return {"set": set, "frozenset": frozenset, "slice": slice}[name]
        raise _refused()(
            f"load: {self.name}: the PyTorch checkpoint refers to {module}.{name}, which ferrograd does not "
            "load: only tensors, Parameters, state dicts and plain data (dicts, lists, numbers, strings) are "
            "read from PyTorch files (save model.state_dict() rather than the model)"
        )

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self._fail(f"unknown persistent reference {pid!r}")
        _, stype, key, location, numel = pid
        if not isinstance(stype, _StorageType):
            raise self._fail(f"storage {key!r} has unsupported type {stype!r}")
        if not (isinstance(key, str) and isinstance(location, str) and isinstance(numel, int) and numel >= 0):
            raise self._fail(f"malformed storage reference {pid!r}")
        if key in self.storages:
            return self.storages[key]
        from .serialization import _DTYPES

        np_dtype = _DTYPES[stype.kind][1]
        nbytes = numel * np_dtype.itemsize
        if nbytes > MAX_STORAGE_BYTES:
            raise self._fail(f"storage {key!r} claims {nbytes} bytes")
        try:
            info = self.zf.getinfo(f"{self.prefix}data/{key}")
        except KeyError:
            raise self._fail(f"storage {key!r} is missing from the archive") from None
        if info.file_size != nbytes:
            raise self._fail(
                f"storage {key!r} holds {info.file_size} bytes, expected {nbytes} ({numel} elements)"
            )
        dt = (
            np_dtype.newbyteorder(">" if self.byteorder == "big" else "<")
            if np_dtype.itemsize > 1
            else np_dtype
        )
        flat = np.frombuffer(_read_member(self.zf, info), dtype=dt)
        if not flat.dtype.isnative:
            flat = flat.astype(flat.dtype.newbyteorder("="))
        if stype.kind == "BOOL" and bool(np.any(flat.view(np.uint8) > 1)):
            raise self._fail(f"storage {key!r}: bool data holds bytes other than 0 and 1")
        st = _Storage(stype.kind, flat, location)
        self.storages[key] = st
        return st

    def _rebuild_tensor(
        self,
        storage: Any,
        offset: Any,
        size: Any,
        stride: Any,
        requires_grad: Any = False,
        backward_hooks: Any = None,
        metadata: Any = None,
    ) -> Tensor:
        from .serialization import _DTYPES, _bf16_from_words, _map_location

        if not isinstance(storage, _Storage):
            raise self._fail(f"a tensor refers to {type(storage).__name__}, not a storage")
        ok = (
            isinstance(offset, int)
            and isinstance(size, tuple)
            and isinstance(stride, tuple)
            and len(size) == len(stride)
            and all(isinstance(v, int) and v >= 0 for v in (offset, *size, *stride))
        )
        if not ok:
            raise self._fail(f"malformed tensor (offset {offset!r}, size {size!r}, stride {stride!r})")
        flat = storage.flat
        if 0 in size:
            arr = np.zeros(size, dtype=flat.dtype)
        else:
            last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
            if last >= flat.size:
                raise self._fail(
                    f"tensor of size {size} and stride {stride} at offset {offset} overruns its storage "
                    f"of {flat.size} elements"
                )
            view = np.lib.stride_tricks.as_strided(
                flat[offset:], shape=size, strides=[s * flat.itemsize for s in stride], writeable=False
            )
            arr = np.array(view, order="C", copy=True)
        t = _bf16_from_words(arr) if storage.kind == "BF16" else _core.from_numpy(arr)
        if _DTYPES[storage.kind][0] != t.dtype:
            raise self._fail(f"storage dtype {storage.kind} read as {t.dtype}")
        try:
            if self.map_location is not None:
                t = _map_location(t, self.map_location, storage.location)
            elif storage.location != "cpu":
                t = t.to(storage.location)
        except Exception as e:  # the caller's map_location (or device) failed: not the file's fault
            raise _Passthrough(e) from e
        if requires_grad:
            t = t.requires_grad_(True)
        return t


# What reading a damaged archive or pickle raises besides CheckpointError (turned into one).
_CORRUPT = (
    zipfile.BadZipFile,
    zlib.error,
    NotImplementedError,  # an unknown compression method
    pickle.UnpicklingError,
    EOFError,
    OSError,
    ValueError,
    TypeError,
    IndexError,
    KeyError,
    AttributeError,
    OverflowError,
    MemoryError,
    RecursionError,
    UnicodeDecodeError,
    RuntimeError,  # e.g. zipfile's 'is encrypted, password required'
)


def load_zip(f: Any, name: str, map_location: Any) -> Any:
    """The object a PyTorch zip checkpoint holds (``f``: a seekable binary file at its start)."""
    from .serialization import CheckpointError

    try:
        return _load_zip(f, name, map_location)
    except _Passthrough as p:
        raise p.error from None
    except CheckpointError:
        raise
    except _CORRUPT as e:
        raise CheckpointError(
            f"{name}: not a readable PyTorch checkpoint ({type(e).__name__}: {e})"
        ) from None


def _load_zip(f: Any, name: str, map_location: Any) -> Any:
    from .serialization import CheckpointError

    try:
        zf = zipfile.ZipFile(f)
    except zipfile.BadZipFile as e:
        raise CheckpointError(f"{name}: not a PyTorch checkpoint (bad zip archive: {e})") from None
    with zf:
        pkls = [n for n in zf.namelist() if n.endswith("data.pkl") and n.count("/") <= 1]
        if len(pkls) != 1 or not (pkls[0] == "data.pkl" or pkls[0].endswith("/data.pkl")):
            raise CheckpointError(
                f"{name}: a zip archive without exactly one data.pkl: not a checkpoint written by torch.save"
            )
        prefix = pkls[0][: -len("data.pkl")]
        try:
            byteorder = _read_member(zf, zf.getinfo(prefix + "byteorder")).decode("ascii").strip()
        except KeyError:
            byteorder = "little"
        if byteorder not in ("little", "big"):
            raise CheckpointError(f"{name}: PyTorch checkpoint: unknown byte order {byteorder!r}")
        data = _read_member(zf, zf.getinfo(pkls[0]))
        return _Unpickler(io.BytesIO(data), zf, prefix, name, byteorder, map_location).load()
