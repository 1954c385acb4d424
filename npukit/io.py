"""File output that is never half-written: write into a temporary sibling, then rename.

Files get the usual permissions (0666 minus the umask), not the 0600 of temporary files, and an
OS error becomes an NpukitError that names the path the user asked for.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .errors import NpukitError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _target(path: str | os.PathLike) -> Path:
    path = Path(path)
    if path.is_dir():
        raise NpukitError(f"{path}: is a directory; give a file path to write to")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NpukitError(f"{path}: cannot create its directory: {e.strerror or e}") from None
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = _target(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise NpukitError(f"{path}: cannot write there: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise NpukitError(f"{path}: cannot write: {e.strerror or e}") from None
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_files(directory: str | os.PathLike, files: Mapping[str, bytes]) -> Path:
    """Write ``files`` (name -> bytes) into ``directory``: every file is written to a temporary name
    first and only renamed into place once all of them are on disk; other files there are kept."""
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise NpukitError(f"{d}: is a file; give a directory to write into")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NpukitError(f"{d}: cannot create the directory: {e.strerror or e}") from None
    temps: list[tuple[str, Path]] = []
    mode = 0o666 & ~_umask()
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=d)
            temps.append((name, Path(tmp)))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
        for name, tmp in temps:
            os.replace(tmp, d / name)
    except OSError as e:
        raise NpukitError(f"{d}: cannot write: {e.strerror or e}") from None
    finally:
        for _name, tmp in temps:
            tmp.unlink(missing_ok=True)
    return d
