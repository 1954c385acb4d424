"""File output that is never half-written: write into a temporary sibling, then rename.

Files get the usual permissions (0666 minus the umask), not the 0600 of temporary files, and an
OS error becomes an NpukitError that names the path the user asked for.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
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


def check_file_target(path: str | os.PathLike) -> Path:
    """An NpukitError unless a file can be written at ``path``: it is no directory and its directory
    exists or can be created (no file of that name is in the way)."""
    path = Path(path)
    if path.is_dir():
        raise NpukitError(f"{path}: is a directory; give a file path to write to")
    why = _in_the_way(path)
    if why:
        raise NpukitError(f"{path}: cannot create its directory: {why}")
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


def _manifest_problem(d: Path) -> str | None:
    """Why ``d``'s ``manifest.json`` is not an npukit manifest (the reason in the words of ``npukit
    build``'s message, e.g. the JSON parse error), ``""`` where there is no such file, None where it
    is one."""
    man = d / "manifest.json"
    if not os.path.lexists(man):
        return ""
    try:
        m = json.loads(man.read_text(encoding="utf-8"))
    except OSError as e:
        return f"cannot read it: {e.strerror or e}"
    except ValueError as e:  # (JSON and UTF-8 decoding errors)
        return str(e)
    if not isinstance(m, dict):
        return f"a JSON {type(m).__name__}, not an object"
    missing = [k for k in ("files", "profile", "ops") if k not in m]
    if missing:
        return f"missing {', '.join(repr(k) for k in missing)}"
    if not isinstance(m["files"], list):
        return "'files' is not a list"
    return None


def is_export(d: Path) -> bool:
    """Did an npukit export write ``d``?  Its ``manifest.json`` lists the files it wrote, the profile
    and the ops."""
    return _manifest_problem(d) is None


def check_export_target(directory: str | os.PathLike) -> None:
    """An NpukitError unless ``directory`` can take an export: it does not exist yet, or is an empty
    directory, or one an earlier export wrote (``is_export``: what that export and its build wrote is
    replaced, the user's own files in it are kept: ``atomic_write_tree``).  A directory holding
    anything else -- the model, the user's notes -- is never replaced."""
    shown = Path(directory)
    d = Path(os.path.realpath(directory))  # (a link to a directory: the directory it names)
    cwd = Path(os.path.realpath(os.getcwd()))
    if d == cwd or d in cwd.parents:
        raise NpukitError(f"{shown}: is the current directory or holds it; an export replaces its directory "
                          f"whole, so give a new directory (e.g. {shown / 'export'})")  # fmt: skip
    if not os.path.lexists(d):
        why = _in_the_way(d)  # the nearest one there must be a directory to create it in
        if why:
            raise NpukitError(f"{shown}: cannot create a directory there: {why}")
        return
    if not d.is_dir():
        raise NpukitError(f"{shown}: is a file; give a directory to export into")
    try:
        with os.scandir(d) as entries:
            empty = next(entries, None) is None
    except OSError as e:
        raise NpukitError(f"{shown}: cannot read the directory: {e.strerror or e}") from None
    why = None if empty else _manifest_problem(d)
    if why == "":
        raise NpukitError(f"{shown}: the directory is not empty and no npukit export wrote it (no npukit "
                          "manifest.json); an export replaces its directory whole, so give a new or empty "
                          "directory")  # fmt: skip
    if why is not None:  # (as npukit build says it of the same file)
        raise NpukitError(f"{shown}: the directory is not empty and its manifest.json is not an npukit manifest "
                          f"({why}); an export replaces its directory whole, so give a new or empty directory")  # fmt: skip


def users_files(d: Path, built: Iterable[str] = ()) -> list[str]:
    """Entries in the earlier export ``d`` that neither the export (its manifest's files, the manifest
    and README) nor its build (``built``: the paths a build of it writes, a directory's as
    ``"name/"``) wrote: the user's, such as notes, inputs or ``make run`` outputs -- files, symbolic
    links (never followed) and empty directories (relative paths, sorted).  An export over ``d``
    keeps them."""
    m = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    ours = {str(f) for f in m["files"]} | {"manifest.json", "README.md"} | {b for b in built if not b.endswith("/")}
    dirs_ours = tuple(b for b in built if b.endswith("/"))
    out = []
    for root, dirs, files in os.walk(d):  # (symbolic links to directories are listed in dirs, not entered)
        here = Path(root).relative_to(d)
        links = [x for x in dirs if os.path.islink(os.path.join(root, x))]
        entries = [(here / f).as_posix() for f in files + links]
        if not files and not dirs and here != Path("."):
            entries = [here.as_posix() + "/"]  # an empty directory
        out += [e for e in entries if e not in ours and not e.startswith(dirs_ours)]
    return sorted(out)


def _clashes(keep: list[str], files: Mapping[str, object]) -> list[str]:
    """The user's entries an export of ``files`` would overwrite or bury: the same path, a path the
    export makes a directory of, or one inside a path the export writes as a file."""
    made_dirs = {str(p) for rel in files for p in Path(rel).parents if str(p) != "."}
    out = []
    for rel in keep:
        r = rel.rstrip("/")
        if r in files or (r in made_dirs and not rel.endswith("/")) or any(str(p) in files for p in Path(r).parents):
            out.append(r)
    return out


def _keep(src: Path, dst: Path, rel: str) -> None:
    """Copy one of the user's entries into the new tree as it is (a link stays a link)."""
    import shutil  # noqa: PLC0415

    if rel.endswith("/"):
        dst.mkdir(parents=True, exist_ok=True)
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)


def atomic_write_tree(directory: str | os.PathLike, files: Mapping[str, bytes | str], built: Iterable[str] = ()) -> Path:
    """Replace ``directory`` with ``files`` (relative path -> content), atomically: the tree is
    written into a temporary sibling, then swapped into place in one step (renameat2 exchange; a
    plain rename where the directory does not exist yet).  Only a new or empty directory, or one an
    earlier export wrote (``check_export_target``), is replaced: anything else there is the user's.
    Over an earlier export, what that export and its build (``built``, see ``users_files``) wrote
    goes and the user's own files in it (notes, inputs, ``make run`` outputs) are copied into the
    new tree; one where the new export writes a file is refused, and so is an earlier export this
    process could not remove once swapped out (a directory in it not writable: ``chmod -R a-w``).
    A path that is absolute or climbs out of the directory (``..``) is refused before anything is
    written.  An export that returns left no temporary sibling behind.  Killed at any point, the
    directory is either as it was or complete; two exports at once leave one complete result.  The
    temporary siblings a killed export leaves (``.<name>.<pid>.*.tmp``) are removed by the next one."""
    shown = Path(directory)
    for rel in files:
        p = Path(rel)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise NpukitError(f"{shown}: refusing to write {rel!r}: outside the export directory")
    check_export_target(directory)
    # "." and "dir/.." name the directory itself; a symbolic link, the directory it names (the export
    # is written there: the link stays a link)
    d = Path(os.path.realpath(directory))
    keep = users_files(d, built) if is_export(d) else []
    clash = _clashes(keep, files)
    if clash:
        raise NpukitError(f"{shown}: the export would write {clash[0]}, where the directory holds a file of "
                          "yours (no earlier export wrote it); move it out first or give a new directory")  # fmt: skip
    stuck = _unremovable(d, shown)
    if stuck:
        raise NpukitError(f"{shown}: cannot replace the earlier export: {stuck}, so its files cannot be removed; "
                          f"make it writable (chmod -R u+w {shown}) or give a new directory")  # fmt: skip
    parent = d.parent
    stem = f".{d.name}.{os.getpid()}."
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _sweep_stale(parent, d.name)
        tmp = Path(tempfile.mkdtemp(prefix=stem, suffix=".tmp", dir=parent))
    except OSError as e:
        raise NpukitError(f"{shown}: cannot create a directory there: {e.strerror or e}") from None
    replaced: Path | None = None
    try:
        mode = 0o666 & ~_umask()
        before = _stat_dir(parent / d.name)
        for rel, data in sorted(files.items()):
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
            os.chmod(p, mode)
        for rel in keep:  # the user's own files stay
            try:
                _keep(d / rel.rstrip("/"), tmp / rel.rstrip("/"), rel)
            except OSError as e:
                raise NpukitError(f"{shown}: cannot keep your {rel} in the new export: {e.strerror or e}; nothing "
                                  "was changed") from None  # fmt: skip
        target = parent / d.name
        # the directory keeps its mode and group (a shared, setgid or -- where this process may replace
        # it -- read-only one stays so); a new one gets the umask's
        os.chmod(tmp, stat.S_IMODE(before.st_mode) if before is not None else 0o777 & ~_umask())
        if before is not None and before.st_gid != os.stat(tmp).st_gid:
            with contextlib.suppress(OSError):
                os.chown(tmp, -1, before.st_gid)
        if target.exists():
            if not _exchange(tmp, target):
                old = Path(tempfile.mkdtemp(prefix=stem, suffix=".old", dir=parent))
                os.rmdir(old)
                os.rename(target, old)
                os.rename(tmp, target)
                tmp = old
            replaced = tmp  # the tree that was there, now in the temporary sibling
        else:
            try:
                os.rename(tmp, target)
                tmp = None
            except OSError:  # another export created it meanwhile: swap with theirs
                if not _exchange(tmp, target):
                    raise
                replaced = tmp
    except OSError as e:
        raise NpukitError(f"{shown}: cannot write the export: {e.strerror or e}") from None
    finally:
        if tmp is not None and tmp is not replaced:  # a failed export's own new tree (an error is raised)
            with contextlib.suppress(OSError):
                _remove_tree(tmp)
    if replaced is not None:
        try:
            _remove_tree(replaced)
        except OSError as e:  # the export is in place, but not cleanly: no success reported
            raise NpukitError(f"{shown}: the export is written, but the tree it replaced, moved to {replaced}, "
                              f"could not be removed ({e.filename}: {e.strerror or e}); remove it") from None  # fmt: skip
    return shown
