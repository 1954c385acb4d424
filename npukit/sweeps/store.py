"""Sweep results on disk: one Parquet file, written incrementally and resumable.

While a sweep runs, every finished chunk of rows is written at once as its own small Parquet file
in ``<out>.parts/`` (written to a temporary name, then renamed, so a file there is always
complete).  A killed run therefore loses only the chunks in flight.  A re-run with the same model,
profile, grid and measurements reads ``<out>`` and ``<out>.parts/`` and skips every configuration
already there; at the end all rows are merged (each configuration once, in grid order) into
``<out>``, replaced atomically, and ``<out>.parts/`` is removed.  The sweep's identity is stored in
the file's schema metadata (``npukit.sweep``); a file of another sweep is refused, never mixed in.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..errors import NpukitError

META_KEY = b"npukit.sweep"


class SweepError(NpukitError):
    """A sweep cannot run or resume (e.g. its output file holds another sweep)."""


def arrow_schema(columns: list[tuple[str, str]], meta: dict):
    import pyarrow as pa  # noqa: PLC0415

    types = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(), "json": pa.string()}
    return pa.schema([pa.field(n, types[t]) for n, t in columns], metadata={META_KEY: json.dumps(meta, sort_keys=True)})


def table(rows: list[dict], schema):
    import pyarrow as pa  # noqa: PLC0415

    return pa.Table.from_pylist(rows, schema=schema)


def concat(tables: list, schema):
    """One table of chunk tables (``schema``'s, also when there are none)."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.concat_tables(tables) if tables else schema.empty_table()


def _meta_of(schema) -> dict | None:
    raw = (schema.metadata or {}).get(META_KEY)
    return json.loads(raw) if raw else None


def _differs(a: dict, b: dict) -> str:
    keys = [k for k in ("model", "soc", "grid", "error", "memory", "data") if a.get(k) != b.get(k)]
    words = {"error": "error setting", "memory": "memory setting"}
    return ", ".join(words.get(k, k) for k in keys) or "format"


class Store:
    """``<out>`` plus its ``<out>.parts/`` journal (see the module docstring)."""

    def __init__(self, out, schema, meta: dict):
        self.out = Path(out)
        self.parts = self.out.with_name(self.out.name + ".parts")
        self.schema = schema
        self.meta = meta
        self.seq = 0
        self.created = False  # did ``open`` start the journal (no earlier run of this sweep left one)

    def _check(self, found: dict | None, where: Path) -> None:
        ident = {k: v for k, v in self.meta.items() if k != "paths"}
        if found is None or {k: v for k, v in found.items() if k != "paths"} != ident:
            what = "is not an npukit sweep" if found is None else f"holds another sweep (another {_differs(found, ident)})"
            raise SweepError(f"{where}: {what}; choose another --out or remove it")

    def open(self) -> set[str]:
        """Check what is there, start the journal; the config ids already finished."""
        import pyarrow.parquet as pq  # noqa: PLC0415

        done: set[str] = set()
        if self.out.exists():
            try:
                sch = pq.read_schema(self.out)
            except Exception as e:  # noqa: BLE001 - pyarrow's errors are many
                raise SweepError(f"{self.out}: not a readable Parquet file ({e}); choose another --out or remove it") from None
            self._check(_meta_of(sch), self.out)
            done |= set(pq.read_table(self.out, columns=["config_id"]).column("config_id").to_pylist())
        if self.parts.exists():
            mf = self.parts / "sweep.json"
            found = json.loads(mf.read_text()) if mf.exists() else None
            self._check(found, self.parts)
            for p in self._part_files():
                done |= set(pq.read_table(p, columns=["config_id"]).column("config_id").to_pylist())
                self.seq = max(self.seq, int(p.stem.split("-")[1]) + 1)
        else:
            try:
                self.parts.mkdir(parents=True)
                self.created = True
                _atomic_bytes(self.parts / "sweep.json", json.dumps(self.meta, sort_keys=True, indent=1).encode())
            except OSError as e:  # (named by --out, as the user gave it, not by the journal beside it)
                self.abandon()
                raise SweepError(f"{self.out}: cannot write there: {e.strerror or e}") from None
        return done

    def abandon(self) -> None:
        """The run failed before anything was journaled: remove the journal ``open`` started (a
        journal holding results stays, for the re-run to resume from)."""
        import shutil  # noqa: PLC0415

        if self.created and not self._part_files():
            shutil.rmtree(self.parts, ignore_errors=True)

    def _part_files(self) -> list[Path]:
        return sorted(p for p in self.parts.glob("part-*.parquet"))

    def add(self, t) -> None:
        """Write one finished chunk (an Arrow table) now (atomically)."""
        import pyarrow.parquet as pq  # noqa: PLC0415

        if not t.num_rows:
            return
        path = self.parts / f"part-{self.seq:06d}.parquet"
        self.seq += 1
        tmp = path.with_suffix(".tmp")
        pq.write_table(t, tmp)
        os.replace(tmp, path)

    def finish(self):
        """Merge everything into ``<out>`` (each configuration once, grid order); the table."""
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.compute as pc  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        tables = []
        if self.out.exists():
            tables.append(pq.read_table(self.out).cast(self.schema))
        tables += [pq.read_table(p).cast(self.schema) for p in self._part_files()]
        t = pa.concat_tables(tables) if tables else self.schema.empty_table()
        t = dedupe(t.take(pc.sort_indices(t, [("index", "ascending")])))
        tmp = self.out.with_name(self.out.name + ".tmp")
        pq.write_table(t, tmp)
        os.replace(tmp, self.out)
        shutil.rmtree(self.parts, ignore_errors=True)
        return t


def dedupe(t):
    """Each config id once (the first)."""
    seen: set[str] = set()
    keep = []
    for i, cid in enumerate(t.column("config_id").to_pylist()):
        if cid not in seen:
            seen.add(cid)
            keep.append(i)
    return t if len(keep) == t.num_rows else t.take(keep)


def _atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
