"""``sweep()``: a grid of configurations evaluated on local worker processes (the default), in this
process (``workers=0``) or on a Dask cluster (``client=`` a ``distributed.Client`` or a scheduler
address), one row per configuration.

Configurations are sorted so that those sharing a partition (the same support toggles, pins,
placement and partition-relevant profile fields) come together, then those sharing a profile, and
cut into chunks in that order: a worker re-partitions only when its chunk crosses into a new group.
Chunks are submitted a few at a time per worker; each finished chunk is written at once (see
``npukit.sweeps.store``) and advances the progress bar.
"""

from __future__ import annotations

import math
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

from .. import pipeline as pl
from ..config import Config
from ..soc import load_soc
from .check import check_grid
from .evaluate import ERROR_COLUMNS, MEMORY_COLUMNS, Job, flatten, run_chunk, run_remote
from .grid import PointKeys, has_placement, load_grid
from .opening import open_study
from .points import axis_type
from .store import Store, SweepError, arrow_schema, concat, dedupe


def sweep(model, soc, grid, client=None, error: bool = False, workers: int | None = None, out=None, *,
          memory: bool = False, data=None, progress: bool = True, chunk_size: int | None = None,
          input_shapes=None):  # fmt: skip
    """Evaluate every configuration of ``grid`` (a .toml path, TOML text, a dict or a Grid) for
    ``model`` on ``soc``; a pandas DataFrame, one row per configuration in grid order.

    Columns: ``index`` (grid order), ``config_id``, one per grid key (its values), ``config`` (the
    Config as JSON), the totals flattened (``latency_us``, ``energy_uj``, ``busy_us.<proc>``,
    ``transfer_us``, ``partitions``, ...), with ``error=True`` the numeric error (``snr_db``,
    ``max_abs_error``, ``top1_agreement``, ``accuracy``, ``error``), with ``memory=True`` the
    generated program's memory (``arena_bytes``, ``lower_bound_bytes``, ``weight_bytes``), and
    ``failure`` (None, or the error that configuration raised: the sweep goes on).

    ``workers``: local worker processes (0 runs in this process; default: this process while what is
    left would take under ``POOL_AFTER_S`` at the pace so far, then one worker per core).
    ``client``: a ``distributed.Client`` or a scheduler address (``"tcp://127.0.0.1:8786"``); its
    workers import npukit and read the model file from the same path (a shared file system).
    ``out``: a Parquet file, written incrementally; a re-run skips what it already holds.
    ``input_shapes``: the shapes of inputs whose dims the model leaves open, as ``Study`` takes them.
    """
    if out is not None and not Path(out).is_dir() and Path(out).suffix.lower() not in (".parquet", ".pq", ".parq"):
        raise SweepError(f"{out}: a sweep's results are written as Parquet; give the file the suffix .parquet")
    if out is not None:  # (a directory, or a file where its directory would be: named as given, before any work)
        from ..io import check_file_target  # noqa: PLC0415

        check_file_target(out)
    if client is None and workers is not None and int(workers) < 0:
        raise SweepError(f"workers must be 0 (this process) or a positive number, got {workers}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise SweepError(f"chunk_size must be a positive number of configurations, got {chunk_size!r}")
    if client is not None and not isinstance(client, (str, os.PathLike)) and not hasattr(client, "scheduler_info"):
        raise SweepError(f"client must be a distributed.Client or a scheduler address ('tcp://host:8786'), "
                         f"got {type(client).__name__} {client!r}")  # fmt: skip
    soc = load_soc(soc)
    m = pl.load(model, input_shapes)
    g = load_grid(grid)
    check_grid(g, m, soc)
    if data is not None and not hasattr(data, "key"):
        from .. import quant  # noqa: PLC0415

        data = quant.load_npz(m.graph, data) if isinstance(data, (str, os.PathLike)) else quant.make_data(m.graph, data)
    job = Job(m, soc, g.axes, bool(error), bool(memory), data)
    meta = {"model": m.key, "soc": soc.digest, "grid": g.digest, "error": bool(error), "memory": bool(memory),
            "data": data.key if data is not None else "", "paths": {"model": str(m.graph.path), "soc": soc.name,
                                                                     "grid": g.where}}  # fmt: skip
    schema = arrow_schema(columns(job), meta)
    job = replace(job, schema=schema)
    keys = PointKeys(g.axes)
    items = list(enumerate(g.positions()))  # (index, value positions): workers make the values and ids
    store = Store(out, schema, meta) if out is not None else None
    done = store.open() if store is not None else set()
    todo = [it for it in items if keys.config_id(it[1]) not in done] if done else items
    todo.sort(key=lambda it: (keys.sort_key(it[1]), it[0]))
    parts: list = []  # Arrow tables, one per finished chunk
    sink = store.add if store is not None else parts.append
    if todo:
        try:
            _run(job, todo, sink, client, workers, progress, chunk_size, total=len(items), initial=len(items) - len(todo))
        except BaseException:
            if store is not None:  # (a scheduler that cannot be reached: nothing half-written is left)
                store.abandon()
            raise
    if store is not None:
        t = store.finish()
    else:
        import pyarrow.compute as pc  # noqa: PLC0415

        t = concat(parts, schema)
        t = dedupe(t.take(pc.sort_indices(t, [("index", "ascending")])))
    return t.to_pandas()


def columns(job: Job) -> list[tuple[str, str]]:
    """(name, type) of every result column."""
    cols = [("index", "int"), ("config_id", "str")]
    cols += [(a.key, axis_type(a)) for a in job.axes]
    cols.append(("config", "str"))
    base = Config()
    if has_placement():  # the totals' columns do not depend on the policy: take the cheaper one
        base = replace(base, placement="first-fit")
    probe = flatten(pl.evaluate(pl.load(job.model), job.soc, base).totals, {})
    for k, v in probe.items():
        cols.append((k, "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"))
    if job.error:
        cols += [(c, "float") for c in ERROR_COLUMNS]
    if job.memory:
        cols += list(MEMORY_COLUMNS)
    cols.append(("failure", "str"))
    names = [n for n, _ in cols]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SweepError(f"grid key {dup[0]!r} clashes with a result column of the same name; rename it")
    return cols


def _chunks(todo: list, n_workers: int, chunk_size: int | None, slow: bool) -> list[list]:
    if chunk_size is None:
        cap = 16 if slow else 256
        chunk_size = max(1, min(cap, math.ceil(len(todo) / (4 * max(n_workers, 1)))))
    return [todo[i:i + chunk_size] for i in range(0, len(todo), chunk_size)]


def _bar(progress: bool, total: int, initial: int, desc: str):
    """A tqdm bar (a widget in a notebook) where someone can see it (``npukit.progress.enabled``),
    shown once the sweep has run for ``npukit.progress.DELAY_S`` seconds, as npukit's other long
    steps: a short sweep stays silent."""
    from .. import progress as pg  # noqa: PLC0415

    if not progress or not pg.enabled():
        return None
    from tqdm.auto import tqdm  # noqa: PLC0415

    return tqdm(total=total, initial=initial, desc=desc, unit="config", file=sys.stderr, dynamic_ncols=True,
                delay=pg.DELAY_S)  # fmt: skip


POOL_AFTER_S = 20.0  # default workers: the sweep stays in this process while what is left would take less


def _run(job: Job, todo, sink, client, workers, progress, chunk_size, total, initial) -> None:
    """Run the configurations ``todo``: on ``client``, on ``workers`` local processes (0: in this
    process), or by default in this process until what is left would take more than
    ``POOL_AFTER_S`` at the pace measured so far, then on a pool of one worker per core (none on one core).  A worker
    starts by importing npukit, TVM and the model and partitioning it afresh, so a short sweep in
    this process, whose model is imported and partitioned already, ends sooner: 256 configurations of
    the digits CNN took 6.8 s here and 34.5 s on two workers."""
    slow = job.error or job.memory
    if client is not None:
        return _run_dask(job, todo, sink, client, progress, chunk_size, slow, total, initial)
    n = (os.cpu_count() or 1) if workers is None else int(workers)  # (>= 0: ``sweep`` checked it first)
    chunks = _chunks(todo, n, chunk_size, slow)
    bar = _bar(progress, total, initial, "sweep" if n == 0 or workers is None else f"sweep ({n} workers)")
    try:
        t0, done, left = time.perf_counter(), 0, sum(map(len, chunks))
        while chunks and (n == 0 or (workers is None and (
                n == 1 or not done or (time.perf_counter() - t0) / done * left <= POOL_AFTER_S))):  # fmt: skip
            ch = chunks.pop(0)
            chunk = run_chunk(job, ch)
            sink(chunk)
            done, left = done + len(ch), left - len(ch)
            bar is not None and bar.update(chunk.num_rows)
        if chunks:
            return _run_pool(job, chunks, sink, min(n, len(chunks)), bar)
        return None
    finally:
        if bar is not None:
            bar.close()


def _run_pool(job: Job, chunks, sink, n: int, bar) -> None:
    import multiprocessing as mp  # noqa: PLC0415
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait  # noqa: PLC0415
    from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

    from .evaluate import init_local, run_local  # noqa: PLC0415

    # forkserver: workers start from a clean process that imported npukit and tvm once, never from
    # this one (forking a process whose TVM runtime may hold threads is not safe)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["npukit.pipeline", "npukit.sweeps.evaluate", "npukit.tvm.importers"])
    ex = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=init_local, initargs=(pickle.dumps(job),))
    pending: dict = {}
    it = iter(chunks)
    try:
        for ch in it:
            pending[ex.submit(run_local, ch)] = ch
            if len(pending) >= 2 * n:
                break
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                pending.pop(f)
                try:
                    chunk = f.result()
                except BrokenProcessPool as e:
                    raise SweepError(f"a worker process died ({e}); the finished configurations are kept: run the "
                                     "same sweep again to resume") from None  # fmt: skip
                sink(chunk)
                bar is not None and bar.update(chunk.num_rows)
                nxt = next(it, None)
                if nxt is not None:
                    pending[ex.submit(run_local, nxt)] = nxt
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _client(client):
    if isinstance(client, (str, os.PathLike)):
        try:
            from distributed import Client  # noqa: PLC0415
        except ImportError:
            raise SweepError("--dask needs dask.distributed: pip install 'dask[distributed]'") from None
        try:
            return Client(str(client), timeout=20), True
        except (OSError, ValueError, TypeError) as e:  # (unreachable, or not an address: 'missing port number')
            raise SweepError(f"cannot reach the Dask scheduler at {client}: {e}") from None
    return client, False


def _run_dask(job: Job, todo, sink, client, progress, chunk_size, slow, total, initial) -> None:
    from distributed import as_completed  # noqa: PLC0415

    client, own = _client(client)
    try:
        n = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
        chunks = _chunks(todo, n, chunk_size, slow)
        bar = _bar(progress, total, initial, f"sweep (dask, {n} workers)")
        link = getattr(client, "dashboard_link", None)
        if link and progress:  # (progress=False: nothing on the terminal)
            msg = f"npukit sweep: Dask dashboard {link}"
            if bar is not None:
                bar.write(msg, file=sys.stderr)
            else:
                print(msg, file=sys.stderr)
        [job_f] = client.scatter([job], broadcast=True, hash=False)
        it = iter(chunks)
        ac = as_completed()
        for ch in it:
            ac.add(client.submit(run_remote, job_f, pickle.dumps(ch), pure=False))
            if ac.count() >= 2 * n:
                break
        try:
            for f in ac:
                chunk = f.result()
                f.release()
                sink(chunk)
                bar is not None and bar.update(chunk.num_rows)
                nxt = next(it, None)
                if nxt is not None:
                    ac.add(client.submit(run_remote, job_f, pickle.dumps(nxt), pure=False))
        finally:
            if bar is not None:
                bar.close()
    finally:
        if own:
            client.close()


__all__ = ["sweep", "open_study", "SweepError"]
