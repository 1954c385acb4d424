"""``npukit build``, ``npukit sweep`` and ``npukit calibrate``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .text import finite, jsonable


def cmd_build(args) -> int:
    from ..codegen.build import study_of_export  # noqa: PLC0415

    s, directory = study_of_export(args.dir)
    from ..codegen.build import build_and_compare  # noqa: PLC0415

    r = build_and_compare(s, directory, samples=args.samples, target=args.target, regenerate=False)
    if args.json:
        print(json.dumps(finite(r), indent=2, allow_nan=False))
        return _status(r)
    print(f"{args.dir}: built and ran the first {r['samples']} inputs of the study's data: {s.data.source}")
    for run, res in r["runs"].items():
        if "skipped" in res:
            print(f"  {run}: skipped ({res['skipped']})")
            continue
        for name, o in res["outputs"].items():
            print(f"  {run}: output {name!r}: max abs {o['max_abs']:.3g}, max rel {o['max_rel']:.3g} vs the simulation, "
                  f"argmax agreement {100 * o['argmax_agreement']:.0f}%, relative RMS {o['rel_rms']:.3g} "
                  f"(tolerance {o['tolerance']:.3g}){'' if o['within_tolerance'] else ' MISMATCH'}")  # fmt: skip
        if "bit_exact_with_host" in res:
            d = res.get("host_difference")
            if res["bit_exact_with_host"]:
                print(f"  {run}: bit-exact with the host build")
            elif d is not None and d["explained"]:
                print(f"  {run}: within {d['max_ulp']} ulp of the host build, not bit-exact: {d['why']}")
            else:
                print(f"  {run}: DIFFERS from the host build ({d['text'] if d else 'outputs differ'})")
    mem = r["memory"]
    print(f"  memory: arena {mem['arena_bytes']:,} B (lower bound {mem['lower_bound_bytes']:,} B), weights {mem['weight_bytes']:,} B")
    if "fit" in r:
        print(f"  fit of the {r['fit']['target']} build ({r['fit']['program']}, from size):")
        print("\n".join("    " + ln for ln in r["fit"]["text"].splitlines()))
    return _status(r)


def _status(r: dict) -> int:
    """0: every program ran and agrees; 1: an output disagrees (``_disagree``); 2: ``--target`` was
    asked for and the target's program could not be built (its tools are missing), named on stderr:
    a script that goes on to deploy must not read the host's run alone as the target's."""
    if not r["outputs_agree"]:
        return _disagree(r)
    skipped = [f"{run}: {res['skipped']}" for run, res in r["runs"].items() if "skipped" in res]
    if skipped:
        print(f"npukit: build: --target: the target's program was not built or run ({'; '.join(skipped)})",
              file=sys.stderr)  # fmt: skip
        return 2
    return 0


def _disagree(r: dict) -> int:
    """One line on stderr naming the outputs beyond their tolerance of the simulation, or a target build
    that differs from the host build beyond what the C libraries explain; exit status 1."""
    print(f"npukit: build: the program's outputs disagree: {'; '.join(r['mismatches'])}", file=sys.stderr)
    return 1


def cmd_sweep(args) -> int:
    from ..errors import ConfigError  # noqa: PLC0415
    from ..sweeps import pareto_mask, sweep  # noqa: PLC0415

    if args.dask and args.workers is not None:
        raise ConfigError("--dask and --workers: the Dask cluster has its own workers; give one of them")
    if args.report:  # (before the sweep runs: it only wrote the page at the end, over any file named)
        from ..io import check_file_target  # noqa: PLC0415

        rep = check_file_target(args.report)  # (a directory, or a file where its directory would be)
        if rep.suffix.lower() not in (".html", ".htm"):
            raise ConfigError(f"{args.report}: --report writes one HTML page; give the file the suffix .html")
        for what, p in (("--out", args.out), ("the model", args.model), ("--grid", args.grid)):
            if p and rep.resolve() == Path(p).resolve():
                raise ConfigError(f"{args.report}: --report would write over {what}; give the report a file of its own")
    from .study import input_shapes  # noqa: PLC0415

    try:
        df = sweep(args.model, args.soc, args.grid, client=args.dask, error=args.error, workers=args.workers, out=args.out,
                   memory=args.memory, data=args.data, progress=not args.no_progress,
                   input_shapes=input_shapes(args))  # fmt: skip
    except KeyboardInterrupt:
        print(f"npukit: interrupted: {_saved(args.out)}", file=sys.stderr)
        return 130
    front = df[pareto_mask(df)]
    failed = df[df["failure"].notna()]
    if args.report:
        from ..sweeps.report import write_sweep_report  # noqa: PLC0415

        write_sweep_report(df, args.report, title=f"{Path(args.model).name} on {args.soc}")
    summary = {"out": args.out, "configurations": len(df), "failed": len(failed), "pareto": len(front),
               "pareto_index": [int(i) for i in front["index"]], "report": args.report}  # fmt: skip
    if len(df) > len(failed):  # the lowest latency, of those the lowest energy: a Pareto point (its config an object)
        best = df[df["failure"].isna()].sort_values(["latency_us", "energy_uj", "index"], kind="stable").iloc[0]
        cols = list(df.columns)
        axes = cols[cols.index("config_id") + 1 : cols.index("config")]  # the grid's keys, in its order
        summary["fastest"] = {"index": int(best["index"]), "latency_us": float(best["latency_us"]),
                              "energy_uj": float(best["energy_uj"]), "grid": {k: _plain(best[k]) for k in axes},
                              "config": json.loads(best["config"])}  # fmt: skip
    if args.json:
        print(json.dumps(finite(summary), indent=2, allow_nan=False))
        return 0
    print(f"{args.out}: {len(df)} configurations, {len(failed)} failed, {len(front)} in the Pareto set")
    if "fastest" in summary:
        f = summary["fastest"]
        where = ", ".join(f"{k} = {json.dumps(v)}" for k, v in f["grid"].items())
        print(f"fastest: #{f['index']} {f['latency_us']:.2f} us, {f['energy_uj']:.3f} uJ  ({where})")
    for r in failed.head(3).itertuples():
        print(f"failed: #{r.index} {r.failure}")
    if args.report:
        print(f"report: {args.report}")
    return 0


def _plain(v):
    """A grid value from the table as JSON has it (numpy scalars as numbers, tables as parsed)."""
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _saved(out) -> str:
    """What an interrupted sweep kept: the configurations in ``<out>.parts/``, and how to go on."""
    parts = Path(str(out) + ".parts") if out else None
    if parts is None or not parts.is_dir():
        return "no configuration was saved" + ("" if out else " (no --out)")
    import pyarrow.parquet as pq  # noqa: PLC0415

    n = 0
    for f in sorted(parts.glob("part-*.parquet")):
        try:
            n += pq.ParquetFile(f).metadata.num_rows
        except Exception:  # noqa: BLE001 - a part being written when interrupted is not counted
            continue
    return f"{n} configuration{'s' * (n != 1)} saved in {parts}; run the same command again to resume"


def cmd_calibrate(args) -> int:
    from ..calibrate import calibrate  # noqa: PLC0415

    res = calibrate(args.model, args.soc, repeat=args.repeat, out=args.out, holdout=args.holdout)
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "profile"}, indent=2, default=jsonable))
    else:
        print(f"fitted {res['processor']} of {res['soc']}: efficiency {res['efficiency']}")
        for m in res["models"]:
            print(f"  {m['model']}{'' if m.get('fit', True) else ' (held out)'}: measured {m['measured_us']:.1f} us, "
                  f"estimated {m['estimated_us']:.1f} us (ratio {m['ratio']:.2f}), "
                  f"median per-op error {100 * m['median_op_error']:.0f}%")  # fmt: skip
        if args.out:
            print(f"profile: {args.out}")
    return 0
