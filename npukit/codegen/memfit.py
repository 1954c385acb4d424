"""Memory fit of a built program: section sizes from the toolchain's ``size -A``, and a report
against a board's flash and SRAM.

``section_sizes`` takes the numbers from ``size -A -d`` and classifies each allocated section by
its ELF flags (read from the file's section headers) exactly as GNU ``size``'s Berkeley format
does: executable -> ``text``; read-only -> ``rodata`` (Berkeley counts both as text); writable with
contents -> ``data``; without contents (NOBITS) -> ``bss``, except the linker script's ``.heap``
and ``.stack`` reservations, reported apart.  So ``text + rodata``, ``data`` and ``bss + heap +
stack`` equal the text / data / bss columns ``size`` prints.
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from npukit.errors import NpukitError

SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 0x1, 0x2, 0x4
SHT_NOBITS = 8
WEIGHTS_SECTION = ".rodata.npk_weights"
ARENA_SECTION = ".bss.npk_arena"
RESERVED = {".heap": "heap", ".stack": "stack"}


class BuildError(NpukitError):
    """A built program cannot be measured (not an ELF file, the size tool failed)."""


def elf_sections(path: str | Path) -> list[tuple[str, int, int, int]]:
    """``(name, type, flags, size)`` of every section in the ELF file's section header table."""
    p = Path(path)
    data = p.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise BuildError(f"{p}: not an ELF file")
    bits64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    try:
        if bits64:
            shoff, = struct.unpack_from(end + "Q", data, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
            fmt = end + "IIQQQQ"
        else:
            shoff, = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
            fmt = end + "IIIIII"
        if shoff == 0:
            return []
        headers = []
        first = struct.unpack_from(fmt, data, shoff)
        if shnum == 0:  # more than 0xff00 sections: the count is in section 0
            shnum = first[5]
        if shstrndx == 0xFFFF:
            link_off = 0x28 if bits64 else 0x18
            shstrndx, = struct.unpack_from(end + "I", data, shoff + link_off)
        for i in range(shnum):
            name, typ, flags, _addr, offset, size = struct.unpack_from(fmt, data, shoff + i * shentsize)
            headers.append((name, typ, flags, offset, size))
        strtab_off = headers[shstrndx][3]
        out = []
        for name, typ, flags, _offset, size in headers[1:]:
            stop = data.index(b"\0", strtab_off + name)
            out.append((data[strtab_off + name:stop].decode("utf-8", "replace"), typ, flags, size))
        return out
    except (struct.error, IndexError, ValueError) as e:
        raise BuildError(f"{p}: malformed ELF section headers ({e})") from None


def parse_size_sysv(text: str) -> list[tuple[str, int]]:
    """``(section, size)`` rows of ``size -A -d`` output (the header and Total lines dropped)."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            rows.append((parts[0], int(parts[1])))
    return rows


def parse_size_berkeley(text: str) -> dict[str, int]:
    """``{"text", "data", "bss", "dec"}`` from GNU ``size`` (Berkeley format) output for one file."""
    lines = [ln.split() for ln in text.strip().splitlines()]
    if len(lines) < 2 or lines[0][:4] != ["text", "data", "bss", "dec"]:
        raise BuildError(f"unexpected Berkeley size output: {text.strip()[:200]!r}")
    return dict(zip(("text", "data", "bss", "dec"), map(int, lines[1][:4])))


def section_sizes(elf_path: str | Path, size_tool: str = "size") -> dict:
    """Sizes of the program at ``elf_path`` as measured by ``size_tool -A -d``:

    ``{"text", "rodata", "data", "bss", "heap", "stack": bytes, "sections": {name: bytes}}`` where
    ``sections`` holds every allocated section in file order (e.g. ``.rodata.npk_weights`` and
    ``.bss.npk_arena`` on bare metal, where the linker script keeps them apart)."""
    elf = elf_sections(elf_path)
    try:
        proc = subprocess.run([size_tool, "-A", "-d", str(elf_path)], capture_output=True, text=True,
                              timeout=60, check=False)
    except OSError as e:
        raise BuildError(f"{size_tool}: cannot run ({e.strerror})") from None
    if proc.returncode != 0:
        raise BuildError(f"{size_tool} -A {elf_path}: {proc.stderr.strip() or 'failed'}")
    rows = parse_size_sysv(proc.stdout)
    flags_by_name: dict[str, list[tuple[int, int]]] = {}
    for name, typ, flags, _size in elf:
        flags_by_name.setdefault(name, []).append((typ, flags))
    out = {"text": 0, "rodata": 0, "data": 0, "bss": 0, "heap": 0, "stack": 0}
    sections: dict[str, int] = {}
    for name, size in rows:
        candidates = flags_by_name.get(name)
        if not candidates:
            raise BuildError(f"{elf_path}: {size_tool} lists section {name!r} that the ELF headers do not")
        typ, flags = candidates.pop(0)
        if not flags & SHF_ALLOC:
            continue
        if flags & SHF_EXECINSTR:
            kind = "text"
        elif not flags & SHF_WRITE:
            kind = "rodata"
        elif typ != SHT_NOBITS:
            kind = "data"
        else:
            kind = RESERVED.get(name, "bss")
        out[kind] += size
        sections[name] = sections.get(name, 0) + size
    out["sections"] = sections
    return out


def fit_report(sizes: dict, flash_bytes: int, sram_bytes: int, *, reserve_bytes: int = 0) -> dict:
    """How the program fits a board: code + constants + the load image of .data against flash;
    .data + .bss + heap + stack (+ ``reserve_bytes`` for a stack / heap the linker did not reserve)
    against SRAM.  ``*_over`` flags a budget exceeded; ``over_budget`` is either."""
    for name, v in (("flash_bytes", flash_bytes), ("sram_bytes", sram_bytes), ("reserve_bytes", reserve_bytes)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"fit_report: {name} must be a non-negative integer, got {v!r}")
    flash_used = sizes["text"] + sizes["rodata"] + sizes["data"]
    sram_used = sizes["data"] + sizes["bss"] + sizes["heap"] + sizes["stack"] + reserve_bytes
    sections = sizes.get("sections", {})
    report = {
        "flash_bytes": flash_bytes,
        "flash_used": flash_used,
        "flash_free": flash_bytes - flash_used,
        "flash_over": flash_used > flash_bytes,
        "sram_bytes": sram_bytes,
        "sram_used": sram_used,
        "sram_free": sram_bytes - sram_used,
        "sram_over": sram_used > sram_bytes,
        "weights_bytes": sections.get(WEIGHTS_SECTION),
        "arena_bytes": sections.get(ARENA_SECTION),
    }
    report["over_budget"] = report["flash_over"] or report["sram_over"]
    return report


def fit_text(report: dict) -> str:
    """Two lines for people: used / budget per memory, with OVER where a budget is exceeded."""
    lines = []
    for mem in ("flash", "sram"):
        used, total = report[f"{mem}_used"], report[f"{mem}_bytes"]
        pct = 100.0 * used / total if total else float("inf")
        flag = f"  OVER by {used - total:d} bytes" if report[f"{mem}_over"] else ""
        lines.append(f"{mem:5s} {used:>10d} / {total:d} bytes ({pct:.1f}%){flag}")
    return "\n".join(lines)
