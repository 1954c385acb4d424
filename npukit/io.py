"""File output that is never half-written: write into a temporary sibling, then rename.

Files get the usual permissions (0666 minus the umask), not the 0600 of temporary files, and an
OS error becomes an NpukitError that names the path the user asked for.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .errors import NpukitError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _in_the_way(path: Path) -> str | None:
    """Why ``path``'s directory cannot be created: its nearest ancestor there is not a directory
    (``"afile is a file, not a directory"``); None where that ancestor is a directory."""
    for up in path.parents:
        if os.path.lexists(up):
            if up.is_dir():
                return None
            return f"{up} is {'a file, not' if up.is_file() else 'not'} a directory"
    return None


def _cannot_create_in(path: Path) -> str | None:
    """Why nothing can be created at ``path`` (a read-only or special file system, no permission), found
    by creating and removing a file in its nearest existing directory; None where that works.  Lets a
    command check every output before it writes the first, so a later one failing leaves no earlier
    one written."""
    for up in path.parents:
        if os.path.lexists(up):
            if not up.is_dir():
                return None  # (``_in_the_way`` says so)
            try:
                fd, probe = tempfile.mkstemp(prefix=".npukit-probe.", suffix=".tmp", dir=up)
            except OSError as e:
                return e.strerror or str(e)
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(probe)
            return None
    return None


def check_file_target(path: str | os.PathLike) -> Path:
    """An NpukitError unless a file can be written at ``path``: it is no directory, its directory
    exists or can be created (no file of that name is in the way), and a file can be created there."""
    path = Path(path)
    if path.is_dir():
        raise NpukitError(f"{path}: is a directory; give a file path to write to")
    why = _in_the_way(path)
    if why:
        raise NpukitError(f"{path}: cannot create its directory: {why}")
    why = _cannot_create_in(path)
    if why:
        raise NpukitError(f"{path}: cannot write there: {why}")
    return path


def _target(path: str | os.PathLike) -> Path:
    path = check_file_target(path)
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


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two directories (Linux renameat2 RENAME_EXCHANGE); False when unsupported."""
    import ctypes  # noqa: PLC0415

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _unremovable(d: Path, shown: Path) -> str | None:
    """Why this process could not remove the tree ``d`` (given as ``shown``) once an export has
    swapped it out: a directory in it, ``d`` too, that holds entries it cannot remove because it is
    not writable (``chmod -R a-w``), or that it cannot list (symbolic links are not followed); None
    where it can."""
    if not os.path.isdir(d):
        return None
    failed: list[OSError] = []
    for root, dirs, files in os.walk(d, onerror=failed.append):
        if (dirs or files) and not os.access(root, os.W_OK | os.X_OK):
            return f"{shown / os.path.relpath(root, d)} is not writable"
    if failed:
        e = failed[0]
        return f"{shown / os.path.relpath(e.filename, d)} cannot be read ({e.strerror or e})"
    return None


def _writable_dirs(tree: Path) -> None:
    """Give the owner write access to every directory of ``tree``, a temporary sibling of npukit's
    own (an earlier export moved aside keeps the modes it had), so that it can be removed; links are
    not followed, what cannot be changed is left."""
    if os.path.islink(tree):
        return
    with contextlib.suppress(OSError):
        os.chmod(tree, 0o700)
    for root, dirs, _files in os.walk(tree):
        for x in dirs:
            p = os.path.join(root, x)
            if not os.path.islink(p):
                with contextlib.suppress(OSError):
                    os.chmod(p, 0o700)


def _remove_tree(tree: Path) -> None:
    """Remove a temporary sibling of npukit's own whole (read-only directories in it too); an
    OSError where it cannot."""
    import shutil  # noqa: PLC0415

    try:
        shutil.rmtree(tree)
    except OSError:
        if not os.path.lexists(tree):
            return
        _writable_dirs(tree)
        shutil.rmtree(tree)


def _sweep_stale(parent: Path, name: str) -> None:
    """Remove the temporary siblings that exports of ``name`` killed mid-way left behind (their
    names carry the writing process's id; a live writer's are left alone).  Where the filesystem has
    no atomic exchange, an export killed between its two renames leaves ``name`` missing and the
    old tree in a ``.old`` sibling: that tree is put back first, so the directory is as it was."""
    prefix = f".{name}."
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return
    stale = []
    for e in entries:
        rest = e.name[len(prefix):] if e.name.startswith(prefix) else ""
        pid, _, tail = rest.partition(".")
        if pid.isdigit() and tail.endswith((".tmp", ".old")) and int(pid) != os.getpid() and not _alive(int(pid)):
            stale.append(e)
    target = parent / name
    olds = [e for e in stale if e.name.endswith(".old")]
    if olds and not os.path.lexists(target):
        newest = max(olds, key=lambda e: (e.lstat().st_mtime_ns, e.name))
        try:
            os.rename(newest, target)
            stale.remove(newest)
        except OSError:
            pass
    for e in stale:
        if e.is_symlink():  # (an export of a link before links were followed swapped the link itself)
            with contextlib.suppress(OSError):
                e.unlink()
        else:
            with contextlib.suppress(OSError):  # (what cannot be removed stays)
                _remove_tree(e)


def _stat_dir(p: Path) -> os.stat_result | None:
    """The directory's status, None where there is none."""
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st if stat.S_ISDIR(st.st_mode) else None
