"""Line numbers of the keys of a TOML text (tomllib gives none): grid errors name the line."""

from __future__ import annotations


def _split_key(s: str) -> list[str]:
    """A TOML key (bare, quoted or dotted) as its parts."""
    parts, cur, i, q = [], "", 0, None
    while i < len(s):
        c = s[i]
        if q:
            if c == "\\" and q == '"' and i + 1 < len(s):
                cur += s[i + 1]
                i += 2
                continue
            if c == q:
                q = None
            else:
                cur += c
        elif c in "\"'":
            q = c
        elif c == ".":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur.strip())
    return parts


def _scan(line: str) -> tuple[str, int, int]:
    """(the line without its comment, index of the first top-level '=' or -1, bracket depth change)."""
    q, depth, eq = None, 0, -1
    for i, c in enumerate(line):
        if q:
            if c == q:
                q = None
            continue
        if c in "\"'":
            q = c
        elif c == "#":
            return line[:i], eq, depth
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "=" and eq < 0 and depth == 0:
            eq = i
    return line, eq, depth


def key_lines(text: str) -> dict[str, int]:
    """Dotted path (``grid.bits.dla``) -> 1-based line of every key and table header in ``text``."""
    out: dict[str, int] = {}
    table: list[str] = []
    depth = 0
    for n, raw in enumerate(text.splitlines(), 1):
        body, eq, delta = _scan(raw)
        if depth > 0:
            depth += delta
            continue
        s = body.strip()
        if not s:
            continue
        if s.startswith("["):
            inner = s.strip("[]").strip()
            table = _split_key(inner)
            out.setdefault(".".join(table), n)
            continue
        if eq >= 0:
            path = ".".join([*table, *_split_key(body[:eq].strip())])
            out.setdefault(path, n)
            depth = _scan(body[eq + 1:])[2]
    return out


