"""``tf.gfile``: TF1's file helpers, on the local file system (programs use them for log and model dirs)."""

from __future__ import annotations

import glob as _glob
import os
import shutil
from typing import IO, Any

__all__ = [
    "Copy",
    "DeleteRecursively",
    "Exists",
    "GFile",
    "Glob",
    "IsDirectory",
    "ListDirectory",
    "MakeDirs",
    "Mkdir",
    "Open",
    "Remove",
    "Rename",
]


def Exists(filename: Any) -> bool:
    """Whether the path exists."""
    return os.path.exists(os.fspath(filename))


def IsDirectory(dirname: Any) -> bool:
    """Whether the path is a directory."""
    return os.path.isdir(os.fspath(dirname))


def MakeDirs(dirname: Any) -> None:
    """Make the directory and its parents (no error if it exists)."""
    os.makedirs(os.fspath(dirname), exist_ok=True)


def Mkdir(dirname: Any) -> None:
    """Make one directory (its parent must exist)."""
    os.mkdir(os.fspath(dirname))


def DeleteRecursively(dirname: Any) -> None:
    """Delete a directory and everything in it (or a file)."""
    p = os.fspath(dirname)
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p)
    else:
        os.remove(p)


def Remove(filename: Any) -> None:
    """Delete a file."""
    os.remove(os.fspath(filename))


def Rename(oldname: Any, newname: Any, overwrite: bool = False) -> None:
    """Rename a file (refused if ``newname`` exists unless ``overwrite``)."""
    if not overwrite and os.path.exists(os.fspath(newname)):
        raise FileExistsError(f"tf.gfile.Rename: {os.fspath(newname)} exists (pass overwrite=True)")
    os.replace(os.fspath(oldname), os.fspath(newname))


def Copy(oldpath: Any, newpath: Any, overwrite: bool = False) -> None:
    """Copy a file (refused if ``newpath`` exists unless ``overwrite``)."""
    if not overwrite and os.path.exists(os.fspath(newpath)):
        raise FileExistsError(f"tf.gfile.Copy: {os.fspath(newpath)} exists (pass overwrite=True)")
    shutil.copyfile(os.fspath(oldpath), os.fspath(newpath))


def ListDirectory(dirname: Any) -> list[str]:
    """The names in a directory (not full paths)."""
    return sorted(os.listdir(os.fspath(dirname)))


def Glob(filename: Any) -> list[str]:
    """The paths matching a pattern."""
    return sorted(_glob.glob(os.fspath(filename)))


def GFile(name: Any, mode: str = "r") -> IO[Any]:
    """Open a file (as Python's ``open``)."""
    return open(os.fspath(name), mode)  # noqa: SIM115 - the caller closes it, as with TF's GFile


Open = GFile
FastGFile = GFile
