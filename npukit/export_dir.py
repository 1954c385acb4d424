"""An export's directory: whether an earlier export wrote it (its manifest), which files in it are
the user's, and its replacement by a new export in one step (``atomic_write_tree``), keeping those."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from . import io as fsio  # (through the module: the fault tests replace its steps)
from .errors import NpukitError


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
        why = fsio._in_the_way(d) or fsio._cannot_create_in(d)  # the nearest one there: a directory we can write in
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
    stuck = fsio._unremovable(d, shown)
    if stuck:
        raise NpukitError(f"{shown}: cannot replace the earlier export: {stuck}, so its files cannot be removed; "
                          f"make it writable (chmod -R u+w {shown}) or give a new directory")  # fmt: skip
    parent = d.parent
    stem = f".{d.name}.{os.getpid()}."
    before_exists = os.path.lexists(d)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fsio._sweep_stale(parent, d.name)
        tmp = Path(tempfile.mkdtemp(prefix=stem, suffix=".tmp", dir=parent))
    except OSError as e:
        if before_exists:  # (the directory is there: what failed is the new tree beside it)
            raise NpukitError(f"{shown}: cannot write the new export beside it in {parent} (it is written there "
                              f"first, then swapped in): {e.strerror or e}; make {parent} writable or give "
                              "another directory") from None  # fmt: skip
        raise NpukitError(f"{shown}: cannot create a directory there: {e.strerror or e}") from None
    replaced: Path | None = None
    try:
        mode = 0o666 & ~fsio._umask()
        before = fsio._stat_dir(parent / d.name)
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
        os.chmod(tmp, stat.S_IMODE(before.st_mode) if before is not None else 0o777 & ~fsio._umask())
        if before is not None and before.st_gid != os.stat(tmp).st_gid:
            with contextlib.suppress(OSError):
                os.chown(tmp, -1, before.st_gid)
        if target.exists():
            if not fsio._exchange(tmp, target):
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
                if not fsio._exchange(tmp, target):
                    raise
                replaced = tmp
    except OSError as e:
        raise NpukitError(f"{shown}: cannot write the export: {e.strerror or e}") from None
    finally:
        if tmp is not None and tmp is not replaced:  # a failed export's own new tree (an error is raised)
            with contextlib.suppress(OSError):
                fsio._remove_tree(tmp)
    if replaced is not None:
        try:
            fsio._remove_tree(replaced)
        except OSError as e:  # the export is in place, but not cleanly: no success reported
            raise NpukitError(f"{shown}: the export is written, but the tree it replaced, moved to {replaced}, "
                              f"could not be removed ({e.filename}: {e.strerror or e}); remove it") from None  # fmt: skip
    return shown
