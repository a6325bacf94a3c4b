"""Checkpoints: ``save(obj, path)`` / ``load(path)`` in the safetensors format.

The file layout is exactly safetensors'::

    8 bytes    N, the header length (little-endian u64)
    N bytes    a UTF-8 JSON object, padded with spaces to a multiple of 8:
               {name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
                ..., "__metadata__": {str: str}}
    the rest   the tensors' bytes, little-endian, row-major, back to back

so a flat ``dict[str, Tensor]`` (a module's ``state_dict()``) written by
:func:`save` is read by any safetensors loader, and safetensors files from
elsewhere load with :func:`load`.

Anything else — an optimizer's ``state_dict()``, ``{"model": ..., "optimizer":
..., "epoch": 3}`` — is split in two: its tensors go into the tensor section
under generated, unique names (the path joined with dots, as in
``"optimizer.state.0.exp_avg"``), and the rest of the structure (dicts with
``str`` or ``int`` keys, lists, tuples, ``int``/``float``/``bool``/``None``/``str``
leaves, and references to the tensors by name) goes as JSON into
``__metadata__["ferrograd"]``. :func:`load` rebuilds the same structure: int keys
stay ints, tuples stay tuples. Nothing is pickled and nothing in such a file is
ever executed.

The one exception is a whole ``nn.Module`` or a NumPy array (``torch.save(model,
f)``, ``torch.save(array, f)``, as PyTorch examples do): it is pickled, with its tensors in the tensor section
and the pickle (base64) in ``__metadata__["ferrograd.pickle"]``, and loading it
needs ``weights_only=False``, as in PyTorch.

:func:`load` checks the whole file before it returns anything (header length,
JSON, dtypes, shapes, offsets that tile the data section exactly, the
structure's references) and reports any problem as :class:`CheckpointError`, a
``ValueError`` naming the file. :func:`save` writes to a temporary file in the
target's directory and renames it into place, so a failed save never leaves a
half-written checkpoint.
"""

from __future__ import annotations

import base64
import ctypes
import io
import json
import math
import os
import pickle
import secrets
import struct
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np

from . import _core, _torch_zip

Tensor = _core.Tensor
PathLike = str | os.PathLike[str]

__all__ = ["CheckpointError", "load", "save"]

#: Largest header accepted by :func:`load` (the limit safetensors uses too).
MAX_HEADER_BYTES = 100_000_000
#: Deepest nesting of the saved structure (dicts, lists, tuples) accepted.
MAX_DEPTH = 200

_METADATA_KEY = "__metadata__"
_SKELETON_KEY = "ferrograd"
_PICKLE_KEY = "ferrograd.pickle"
_FORMAT_VERSION = 1

# safetensors dtype name -> (ferrograd dtype, little-endian NumPy dtype used to move the bytes)
_DTYPES: dict[str, tuple[Any, np.dtype]] = {
    "F32": (_core.float32, np.dtype("<f4")),
    "F64": (_core.float64, np.dtype("<f8")),
    "F16": (_core.float16, np.dtype("<f2")),
    "BF16": (_core.bfloat16, np.dtype("<u2")),  # NumPy has no bfloat16: moved as raw 16-bit words
    "U8": (_core.uint8, np.dtype("|u1")),
    "I8": (_core.int8, np.dtype("|i1")),
    "I16": (_core.int16, np.dtype("<i2")),
    "I32": (_core.int32, np.dtype("<i4")),
    "I64": (_core.int64, np.dtype("<i8")),
    "BOOL": (_core.bool, np.dtype("|b1")),
}
_NAME_OF_DTYPE = {str(fg_dtype): name for name, (fg_dtype, _) in _DTYPES.items()}


class CheckpointError(ValueError):
    """A checkpoint file is malformed: truncated, corrupt, or not a safetensors file."""


# ----------------------------------------------------------------------------- save


def save(obj: Any, path: PathLike | BinaryIO) -> None:
    """Write ``obj`` to ``path`` as a safetensors file, atomically.

    ``obj`` is a flat ``dict[str, Tensor]`` (stored as plain safetensors,
    readable by other safetensors loaders) or any nesting of dicts (``str``
    or ``int`` keys), lists and tuples whose leaves are tensors, ``int``,
    ``float``, ``bool``, ``None`` or ``str`` (tensors go into the tensor section,
    the structure into the header's metadata). Tensors are stored detached,
    contiguous, on the CPU, bit for bit; a tensor that appears twice is
    stored twice. Mappings come back as plain dicts.

    The file is written to a temporary file next to ``path`` and renamed
    over it, so ``path`` holds either the old or the new checkpoint, never a
    partial one. ``path`` may also be a binary file object opened for
    writing (``open(p, "wb")``, ``io.BytesIO()``): the checkpoint is written
    at its position. Raises ``TypeError`` for values that cannot be stored.

    A whole ``nn.Module`` (``torch.save(model, f)``) or a NumPy array, or a
    structure holding one, is stored as PyTorch stores it: the object is pickled, its tensors
    go into the tensor section (shared ones once, so tied weights stay tied;
    ``Parameter`` and ``requires_grad`` kept) and the pickle, which refers to
    them by name, into the header's metadata. Such a file loads only with
    ``load(path, weights_only=False)``, since unpickling can run code from
    the file; its classes must be importable where it is loaded.
    """
    stream = path if _is_writable_stream(path) else None
    path = "<stream>" if stream is not None else os.fspath(path)  # type: ignore[arg-type]
    entries: list[tuple[str, Tensor]] = []
    if _is_flat(obj):
        entries = list(obj.items())
        metadata = {"format": "ferrograd"}
    else:
        try:
            skeleton = _encode(obj, entries, set(), "obj", 0, set())
            metadata = {
                "format": "ferrograd",
                _SKELETON_KEY: json.dumps({"version": _FORMAT_VERSION, "root": skeleton}, allow_nan=False),
            }
        except _NeedsPickle:
            entries = []
            metadata = {"format": "ferrograd", _PICKLE_KEY: _pickle_object(obj, entries)}

    header: dict[str, Any] = {_METADATA_KEY: metadata}
    offset = 0
    prepared: list[Tensor] = []
    for name, t in entries:
        t = t.detach()
        if not t.is_cpu:
            t = t.cpu()
        t = t.contiguous()
        dtype_name = _NAME_OF_DTYPE.get(str(t.dtype))
        if dtype_name is None:
            raise TypeError(f"save: tensor {name!r} has dtype {t.dtype}, which safetensors cannot store")
        nbytes = t.numel() * _DTYPES[dtype_name][1].itemsize
        header[name] = {
            "dtype": dtype_name,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
        prepared.append(t)
    blob = json.dumps(header, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    blob += b" " * (-(8 + len(blob)) % 8)

    if stream is not None:
        _write_to(stream, blob, prepared)
    else:
        _atomic_write(path, blob, prepared)


def _is_module(obj: Any) -> bool:
    from .nn.modules.module import Module

    return isinstance(obj, Module)


class _NeedsPickle(Exception):
    """Raised by :func:`_encode` when the structure holds a module or a NumPy array: it is pickled instead."""


class _TensorPickler(pickle.Pickler):
    """Pickles an object with its tensors replaced by names in the checkpoint's tensor section."""

    def __init__(self, f: Any, entries: list[tuple[str, Tensor]]) -> None:
        super().__init__(f, protocol=4)
        self.entries = entries
        self.names: dict[int, str] = {}
        self.keep: list[Tensor] = []  # holds the tensors alive so their ids stay unique

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, Tensor):
            return None
        name = self.names.get(id(obj))
        if name is None:
            name = f"pickle.{len(self.entries)}"
            self.names[id(obj)] = name
            self.keep.append(obj)
            self.entries.append((name, obj))
        return ("tensor", name, type(obj), bool(obj.requires_grad), str(obj.device))


def _pickle_object(obj: Any, entries: list[tuple[str, Tensor]]) -> str:
    """The pickle of ``obj`` (base64 text); its tensors are appended to ``entries``."""
    buf = io.BytesIO()
    try:
        _TensorPickler(buf, entries).dump(obj)
    except (pickle.PicklingError, AttributeError, TypeError) as e:
        raise TypeError(
            f"save: cannot pickle the {type(obj).__name__} object ({e}); classes defined inside a function "
            "cannot be pickled: save its state_dict() instead, or define the class at module level"
        ) from e
    return base64.b64encode(buf.getvalue()).decode("ascii")


class _TensorUnpickler(pickle.Unpickler):
    """Reads what :class:`_TensorPickler` wrote, taking tensors from the checkpoint's tensor section."""

    def __init__(self, f: Any, tensors: Mapping[str, Tensor], map_location: Any) -> None:
        super().__init__(f)
        self.tensors = tensors
        self.map_location = map_location
        self.made: dict[str, Tensor] = {}

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "tensor" and pid[1] in self.tensors):
            raise pickle.UnpicklingError(f"load: the pickle refers to an unknown tensor {pid!r}")
        _, name, cls, requires_grad, location = pid
        if name in self.made:
            return self.made[name]
        t = self.tensors[name]
        if self.map_location is not None:
            t = _map_location(t, self.map_location, location)
        elif location != "cpu":
            t = t.to(location)
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise pickle.UnpicklingError(f"load: tensor {name!r} has class {cls!r}, not a Tensor class")
        if cls is not Tensor:
            t = cls(t, requires_grad)
        elif requires_grad:
            t = t.requires_grad_(True)
        self.made[name] = t
        return t


def _is_writable_stream(path: Any) -> bool:
    return hasattr(path, "write") and not isinstance(path, (str, bytes, os.PathLike))


def _write_to(f: Any, header: bytes, tensors: list[Tensor]) -> None:
    f.write(struct.pack("<Q", len(header)))
    f.write(header)
    for t in tensors:
        f.write(_tensor_bytes(t))


def _is_flat(obj: Any) -> bool:
    return (
        isinstance(obj, Mapping)
        and _METADATA_KEY not in obj
        and all(isinstance(k, str) and isinstance(v, Tensor) for k, v in obj.items())
    )


def _encode(
    obj: Any, entries: list[tuple[str, Tensor]], names: set[str], where: str, depth: int, active: set[int]
) -> Any:
    """The JSON skeleton of ``obj``; its tensors are appended to ``entries`` under unique names."""
    if depth > MAX_DEPTH:
        raise ValueError(f"save: {where} is nested more than {MAX_DEPTH} levels deep")
    if _is_module(obj) or isinstance(obj, np.ndarray):
        raise _NeedsPickle
    if isinstance(obj, Tensor):
        name = where[4:] if where.startswith("obj.") else (where[3:] or "tensor")
        base, i = name, 0
        while name in names or name == _METADATA_KEY:
            i += 1
            name = f"{base}#{i}"
        names.add(name)
        entries.append((name, obj))
        return {"tensor": name}
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        v = float(obj)
        if math.isfinite(v):
            return v
        return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(obj, np.bool_):
        return bool(obj)
    if not isinstance(obj, Mapping | list | tuple):
        raise TypeError(
            f"save: {where} is a {type(obj).__name__}; checkpoints hold only tensors, dicts, lists, tuples, "
            "int, float, bool, None and str"
        )
    if id(obj) in active:
        raise ValueError(f"save: {where} contains itself (a reference cycle)")
    active.add(id(obj))
    try:
        if isinstance(obj, Mapping):
            items = []
            for k, v in obj.items():
                if isinstance(k, bool) or not isinstance(k, str | int | np.integer):
                    raise TypeError(
                        f"save: {where} has a key {k!r} of type {type(k).__name__}; keys must be str or int"
                    )
                k = k if isinstance(k, str) else int(k)
                items.append([k, _encode(v, entries, names, f"{where}.{k}", depth + 1, active)])
            return {"dict": items}
        encoded = [_encode(v, entries, names, f"{where}.{i}", depth + 1, active) for i, v in enumerate(obj)]
        return {"tuple": encoded} if isinstance(obj, tuple) else encoded
    finally:
        active.discard(id(obj))


def _tensor_bytes(t: Tensor) -> Any:
    """The bytes of a contiguous CPU tensor, little-endian, as a buffer."""
    if t.numel() == 0:
        return b""
    if t.dtype == _core.bfloat16:
        # NumPy has no bfloat16 and widening to float32 would quiet signalling NaNs: copy the raw words.
        raw = np.frombuffer(ctypes.string_at(t.data_ptr(), t.nbytes), dtype=np.uint16)
        return raw.astype("<u2", copy=False).reshape(-1).view(np.uint8)
    arr = t.numpy().reshape(-1)
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).view(np.uint8)


def _atomic_write(path: str, header: bytes, tensors: list[Tensor]) -> None:
    directory, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{base}.{secrets.token_hex(6)}.tmp")
    # os.open with mode 0o666 lets the umask decide the permissions, as a plain open() would.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_to(f, header, tensors)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename durable; best effort (not possible on every platform)
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


# ----------------------------------------------------------------------------- load


def load(
    path: PathLike | BinaryIO,
    map_location: Any = None,
    weights_only: bool | None = None,
    mmap: bool | None = None,
) -> Any:
    """Read a checkpoint written by :func:`save` (or any safetensors file).

    Returns what was saved: for a plain safetensors file a ``dict[str,
    Tensor]`` in header order, otherwise the saved structure rebuilt (int keys
    stay ints, tuples stay tuples). Tensors are new CPU tensors with their
    own, writable memory, not requiring grad; ``map_location`` (``None``,
    ``"cpu"``, a device, a ``{location: device}`` dict or a function
    ``(tensor, location) -> tensor``, where the location is ``"cpu"``) moves
    them after loading. ``path`` may also be a
    seekable binary file object (``open(p, "rb")``, ``io.BytesIO``), read
    from its current position.

    A file holding a pickled object (a whole module or a NumPy array saved
    with :func:`save`) loads only with ``weights_only=False``, as in PyTorch:
    unpickling can run code from the file, so the default (``None``, meaning
    ``True``) raises ``pickle.UnpicklingError`` saying so. Its tensors come
    back on the device they were saved from (or as ``map_location`` says),
    shared ones shared. For every other file ``weights_only`` changes
    nothing: it holds only tensors and plain data and loading never runs
    code. ``mmap`` is accepted and ignored; tensors are always read into memory.

    A checkpoint written by PyTorch's ``torch.save`` (its zip format) loads too:
    state dicts, optimizer states and nested dicts/lists of tensors, with
    PyTorch's ``weights_only`` restrictions whatever ``weights_only`` says (a
    pickled module or other class raises ``pickle.UnpicklingError`` naming it;
    see :mod:`ferrograd._torch_zip`).

    The whole file is validated before anything is returned; a truncated or
    corrupt file, a foreign format or an unsupported dtype raises
    :class:`CheckpointError` (a ``ValueError``) naming the file and the problem.
    """
    if hasattr(path, "read") and not isinstance(path, (str, bytes, os.PathLike)):
        stream: Any = path
        name = str(getattr(stream, "name", "<stream>"))
        if not (hasattr(stream, "seekable") and stream.seekable()):
            raise TypeError(f"load: the file object {name} is not seekable; read it into io.BytesIO first")
        # Offsets in the file are relative to where the checkpoint starts.
        start = stream.tell()
        size = stream.seek(0, os.SEEK_END) - start
        stream.seek(start)
        head = stream.read(16)
        if _torch_zip.is_torch_zip(head):
            stream.seek(start)
            return _torch_zip.load_zip(stream, name, map_location)
        _refuse_torch_legacy(name, head)
        stream.seek(start)
        entries, metadata, data_start, tensors = _read_all(_Shifted(stream, start), name, size)
        stream.seek(start + data_start + max((e[3] for e in entries.values()), default=0))
    else:
        fpath = os.fspath(path)  # type: ignore[arg-type]
        with open(fpath, "rb") as f:
            head = f.read(16)
            if _torch_zip.is_torch_zip(head):
                f.seek(0)
                return _torch_zip.load_zip(f, fpath, map_location)
            _refuse_torch_legacy(fpath, head)
            f.seek(0)
            size = os.fstat(f.fileno()).st_size
            entries, metadata, data_start, tensors = _read_all(f, fpath, size)
        name = fpath
    pickled = metadata.get(_PICKLE_KEY)
    if pickled is not None:
        return _unpickle(name, pickled, tensors, map_location, weights_only)
    skeleton = _read_skeleton(name, metadata, entries)
    if map_location is not None:
        tensors = {k: _map_location(t, map_location) for k, t in tensors.items()}
    if skeleton is None:
        return tensors
    return _decode(skeleton, tensors)


def _refuse_torch_legacy(name: str, head: bytes) -> None:
    if _torch_zip.is_torch_legacy(head):
        raise CheckpointError(
            f"{name}: a PyTorch checkpoint in the legacy format (before PyTorch 1.6, or saved with "
            "_use_new_zipfile_serialization=False), which ferrograd does not read: load it in PyTorch and "
            "torch.save it again in the default (zip) format"
        )


def _unpickle(
    name: str, pickled: str, tensors: dict[str, Tensor], map_location: Any, weights_only: bool | None
) -> Any:
    if weights_only is None or weights_only:
        raise pickle.UnpicklingError(
            f"load: weights-only load failed: {name} holds a pickled Python object (saved with save(obj) "
            "of a whole module or a NumPy array), and unpickling can run arbitrary code from the file. If "
            "you trust its source, load it with weights_only=False; otherwise save and load "
            "obj.state_dict() (or tensors) instead"
        )
    try:
        raw = base64.b64decode(pickled.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as e:
        raise _fail(name, f"the pickled object in '__metadata__' is not valid base64: {e}") from None
    return _TensorUnpickler(io.BytesIO(raw), tensors, map_location).load()


def _map_location(t: Tensor, where: Any, location: str = "cpu") -> Tensor:
    """Move a loaded (CPU) tensor as PyTorch's ``map_location`` says: a device, a
    ``{saved location: device}`` dict (tensors are saved from the CPU: its ``"cpu"``
    entry applies) or a function ``(tensor, "cpu") -> tensor``."""
    if isinstance(where, Mapping):
        where = where.get(location)
        return t if where is None else t.to(where)
    if callable(where) and not isinstance(where, (str, _core.device)):
        out = where(t, location)
        if not isinstance(out, Tensor):
            raise TypeError(f"load: map_location returned {type(out).__name__}, expected a tensor")
        return out
    return t.to(where)


def _read_all(
    f: Any, path: str, size: int
) -> tuple[dict[str, tuple[str, list[int], int, int]], dict[str, str], int, dict[str, Tensor]]:
    entries, metadata, data_start = _read_header(f, path, size)
    tensors: dict[str, Tensor] = {}
    for name, (dtype_name, shape, begin, end) in entries.items():
        tensors[name] = _read_tensor(f, path, name, dtype_name, shape, data_start + begin, end - begin)
    return entries, metadata, data_start, tensors


class _Shifted:
    """A file object seen from ``start``: ``seek(0)`` goes to ``start``."""

    def __init__(self, f: Any, start: int) -> None:
        self.f = f
        self.start = start

    def read(self, n: int) -> bytes:
        return self.f.read(n)

    def readinto(self, buf: Any) -> int:
        if hasattr(self.f, "readinto"):
            return self.f.readinto(buf)
        data = self.f.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def seek(self, pos: int) -> int:
        return self.f.seek(self.start + pos) - self.start


def _fail(path: str, msg: str) -> CheckpointError:
    return CheckpointError(f"{path}: {msg}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(text: str | bytes) -> Any:
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _read_header(
    f: Any, path: str, size: int
) -> tuple[dict[str, tuple[str, list[int], int, int]], dict[str, str], int]:
    """Parse and check the header; return ``{name: (dtype, shape, begin, end)}``, metadata, data start."""
    if size < 8:
        raise _fail(path, f"not a safetensors file: {size} bytes, too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > size - 8:
        raise _fail(
            path,
            f"not a safetensors file or truncated: header length {n} exceeds the {size - 8} bytes that follow it",
        )
    if n > MAX_HEADER_BYTES:
        raise _fail(path, f"header length {n} exceeds the limit of {MAX_HEADER_BYTES} bytes")
    raw = f.read(n)
    if len(raw) != n:
        raise _fail(path, f"file truncated while reading the {n}-byte header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _fail(path, f"header is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    if not text.startswith("{"):
        raise _fail(path, "not a safetensors file: the header is not a JSON object")
    try:
        header = _parse_json(text)
    except (ValueError, RecursionError) as e:
        raise _fail(path, f"header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise _fail(path, "header is not a JSON object")

    metadata = header.pop(_METADATA_KEY, {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _fail(path, "'__metadata__' must be an object mapping strings to strings")

    entries: dict[str, tuple[str, list[int], int, int]] = {}
    for name, info in header.items():
        where = f"tensor {name!r}"
        if not isinstance(info, dict):
            raise _fail(path, f"{where}: entry must be an object, got {type(info).__name__}")
        if set(info) != {"dtype", "shape", "data_offsets"}:
            raise _fail(
                path,
                f"{where}: entry must have exactly the keys dtype, shape and data_offsets, got {sorted(info)}",
            )
        dtype_name, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype_name not in _DTYPES:
            raise _fail(path, f"{where}: unsupported dtype {dtype_name!r} (supported: {', '.join(_DTYPES)})")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise _fail(path, f"{where}: shape must be a list of non-negative integers, got {shape!r}")
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(_is_int(o) and o >= 0 for o in offsets)
            or offsets[0] > offsets[1]
        ):
            raise _fail(
                path, f"{where}: data_offsets must be [begin, end] with 0 <= begin <= end, got {offsets!r}"
            )
        expected = math.prod(shape) * _DTYPES[dtype_name][1].itemsize
        if offsets[1] - offsets[0] != expected:
            raise _fail(
                path,
                f"{where}: data_offsets {offsets} span {offsets[1] - offsets[0]} bytes, but shape {shape} "
                f"of {dtype_name} needs {expected}",
            )
        entries[name] = (dtype_name, shape, offsets[0], offsets[1])

    data_size = size - 8 - n
    pos = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if begin != pos:
            what = (
                "overlaps the previous tensor"
                if begin < pos
                else f"leaves a gap (bytes {pos}..{begin} unused)"
            )
            raise _fail(path, f"tensor {name!r}: data_offsets [{begin}, {end}] {what}")
        pos = end
    if pos != data_size:
        if pos > data_size:
            raise _fail(path, f"file truncated: tensors need {pos} bytes of data, the file has {data_size}")
        raise _fail(path, f"{data_size - pos} bytes after the last tensor are not covered by any tensor")
    return entries, metadata, 8 + n


def _read_skeleton(path: str, metadata: dict[str, str], entries: Mapping[str, Any]) -> Any:
    """The saved structure from the metadata (checked against the tensors), or None for a flat file."""
    text = metadata.get(_SKELETON_KEY)
    if text is None:
        return None
    try:
        doc = _parse_json(text)
    except (ValueError, RecursionError) as e:
        raise _fail(path, f"the structure in '__metadata__' is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or set(doc) != {"version", "root"}:
        raise _fail(path, "the structure in '__metadata__' must be an object with 'version' and 'root'")
    if doc["version"] != _FORMAT_VERSION:
        raise _fail(
            path,
            f"checkpoint structure version {doc['version']!r} is not supported (expected {_FORMAT_VERSION})",
        )
    used: set[str] = set()
    try:
        _check_node(doc["root"], entries, used, 0)
    except ValueError as e:
        raise _fail(path, f"the structure in '__metadata__' is inconsistent: {e}") from None
    missing = set(entries) - used
    if missing:
        raise _fail(
            path, f"the structure in '__metadata__' does not refer to tensor(s) {sorted(missing)[:5]}"
        )
    return doc["root"]


def _check_node(node: Any, entries: Mapping[str, Any], used: set[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    if node is None or isinstance(node, bool | int | float | str):
        return
    if isinstance(node, list):
        for v in node:
            _check_node(v, entries, used, depth + 1)
        return
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError(f"unexpected node {_short(node)}")
    ((tag, val),) = node.items()
    if tag == "tensor":
        if not isinstance(val, str) or val not in entries:
            raise ValueError(f"refers to tensor {val!r}, which the file does not contain")
        if val in used:
            raise ValueError(f"refers to tensor {val!r} more than once")
        used.add(val)
    elif tag == "tuple":
        if not isinstance(val, list):
            raise ValueError(f"tuple node must hold a list, got {_short(val)}")
        for v in val:
            _check_node(v, entries, used, depth + 1)
    elif tag == "dict":
        if not isinstance(val, list):
            raise ValueError(f"dict node must hold a list of [key, value] pairs, got {_short(val)}")
        keys: set[Any] = set()
        for item in val:
            if not isinstance(item, list) or len(item) != 2:
                raise ValueError(f"dict node item must be a [key, value] pair, got {_short(item)}")
            k = item[0]
            if not (isinstance(k, str) or _is_int(k)):
                raise ValueError(f"dict key must be a string or an integer, got {_short(k)}")
            if (type(k), k) in keys:
                raise ValueError(f"dict key {k!r} appears twice")
            keys.add((type(k), k))
            _check_node(item[1], entries, used, depth + 1)
    elif tag == "float":
        if val not in ("nan", "inf", "-inf"):
            raise ValueError(f"float node must be 'nan', 'inf' or '-inf', got {_short(val)}")
    else:
        raise ValueError(f"unknown node type {tag!r}")


def _short(x: Any) -> str:
    r = repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def _decode(node: Any, tensors: Mapping[str, Tensor]) -> Any:
    """Rebuild a structure that :func:`_check_node` accepted."""
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if not isinstance(node, dict):
        return node
    ((tag, val),) = node.items()
    if tag == "tensor":
        return tensors[val]
    if tag == "tuple":
        return tuple(_decode(v, tensors) for v in val)
    if tag == "dict":
        return {k: _decode(v, tensors) for k, v in val}
    return float(val)  # "float": nan / inf / -inf


def _read_tensor(
    f: Any, path: str, name: str, dtype_name: str, shape: list[int], pos: int, nbytes: int
) -> Tensor:
    fg_dtype, np_dtype = _DTYPES[dtype_name]
    if nbytes == 0:
        return _core.zeros(shape, dtype=fg_dtype)
    buf = np.empty(nbytes, dtype=np.uint8)  # the new tensor's memory: fresh, owned, writable
    f.seek(pos)
    got = f.readinto(memoryview(buf))
    if got != nbytes:
        raise _fail(path, f"file truncated while reading tensor {name!r}")
    if dtype_name == "BOOL" and bool(np.any(buf > 1)):
        raise _fail(path, f"tensor {name!r}: BOOL data holds bytes other than 0 and 1")
    arr = buf.view(np_dtype).reshape(shape)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if dtype_name == "BF16":
        return _bf16_from_words(arr)
    return _core.from_numpy(arr)


# The start of DLPack's DLManagedTensor (a DLTensor), enough to reach its dtype field.
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
    ]


_KDL_UINT, _KDL_BFLOAT = 1, 4
# A private prototype (setting argtypes on ctypes.pythonapi's shared function object would affect others).
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


def _bf16_from_words(words: np.ndarray) -> Tensor:
    """A bfloat16 tensor over the raw 16-bit words of ``words`` (a uint16 array), bit for bit.

    NumPy has no bfloat16, and converting from float32 (or cloning a
    bfloat16 tensor) quiets signalling NaNs, so the array is exported through
    DLPack, its dtype relabelled from uint16 to bfloat16, and imported by
    ferrograd zero-copy: the tensor owns ``words`` from then on.
    """
    words = np.require(
        words, dtype=np.uint16, requirements="C"
    )  # (ascontiguousarray would make 0-d arrays 1-d)
    capsule = words.__dlpack__()  # unversioned: a "dltensor" capsule holding a DLManagedTensor
    dl = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    if (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes, dl.ndim) != (_KDL_UINT, 16, 1, words.ndim):
        raise RuntimeError("unexpected DLPack layout while importing bfloat16 data")
    dl.dtype.code = _KDL_BFLOAT
    t = _core.from_dlpack(capsule)
    if t.dtype != _core.bfloat16 or tuple(t.shape) != words.shape:
        raise RuntimeError("bfloat16 import through DLPack went wrong")
    return t
