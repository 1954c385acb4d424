"""The console script: ``npukit socs | inspect | study | sweep | build | calibrate``.

Bad input prints ``npukit: error: <message>`` and exits 2; nothing from inside TVM reaches the user
unexplained.  ``npukit build`` exits 1 when an output of the built program is beyond its tolerance
of the simulation (``codegen.build``), naming it on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _die(msg: str) -> int:
    print(f"npukit: error: {msg}", file=sys.stderr)
    return 2


def _shape_arg(s: str) -> tuple[str, tuple[int, ...]]:
    if "=" not in s:
        raise argparse.ArgumentTypeError(f"--input-shape {s!r}: expected NAME=D1,D2,... e.g. x=1,3,224,224")
    name, dims = s.rsplit("=", 1)
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--input-shape {s!r}: dims must be integers") from None
    return name, shape


def _pair(sep: str, what: str):
    def parse(s: str) -> tuple[str, str]:
        if sep not in s:
            raise argparse.ArgumentTypeError(f"{s!r}: expected {what}")
        a, b = s.rsplit(sep, 1) if sep == "=" else s.split(sep, 1)
        if not a or not b:
            raise argparse.ArgumentTypeError(f"{s!r}: expected {what}")
        return a, b

    return parse


def _at_least_one(s: str) -> int:
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: must be at least 1")
    return n


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, ``npukit: error: ...`` (exit 2), like every other error."""

    def error(self, message: str):
        print(f"npukit: error: {self.prog.removeprefix('npukit').strip() + ': ' if self.prog != 'npukit' else ''}"
              f"{message} (see {self.prog} --help)", file=sys.stderr)  # fmt: skip
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="npukit", description="What-if offload studies of ML models on edge SoCs.")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    p = sub.add_parser("socs", help="list the bundled SoC profiles")
    p.add_argument("--json", action="store_true")
    p.add_argument("--reference", action="store_true", help="print the SoC profile field reference (markdown)")

    p = sub.add_parser("inspect", help="ops, shapes and MACs of a model (no SoC needed)")
    p.add_argument("model")
    p.add_argument("--input-shape", action="append", type=_shape_arg, default=[], metavar="NAME=D1,D2,...")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("study", help="partition a model on an SoC and estimate its cost")
    p.add_argument("model")
    p.add_argument("--soc", required=True, help="bundled profile name or path to a .toml profile")
    p.add_argument("--config", help="start from a saved config (.toml or .json)")
    p.add_argument("--disable", action="append", type=_pair(":", "PROC:OP"), default=[], metavar="PROC:OP")
    p.add_argument("--enable", action="append", type=_pair(":", "PROC:OP"), default=[], metavar="PROC:OP")
    p.add_argument("--pin", action="append", type=_pair("=", "NODE=PROC"), default=[], metavar="NODE=PROC")
    p.add_argument("--bits", action="append", type=_pair("=", "PROC=BITS"), default=[], metavar="PROC=BITS")
    p.add_argument("--bits-layer", action="append", type=_pair("=", "NODE=BITS"), default=[], metavar="NODE=BITS")
    p.add_argument("--input-shape", action="append", type=_shape_arg, default=[], metavar="NAME=D1,D2,...")
    p.add_argument("--placement", choices=("cost", "first-fit"),
                   help="cost (default): the cost model chooses among the processors the rules allow; "
                        "first-fit: the profile's preference order")  # fmt: skip
    p.add_argument("--data", help=".npz with x (inputs) and optionally y (labels) for the error figures")
    p.add_argument("--error", action="store_true", help="measure the numeric error of the bit-widths (runs the model)")
    p.add_argument("--report", help="write an HTML report here")
    p.add_argument("--save-config", help="write the resulting config (.toml or .json)")
    p.add_argument("--explain", action="append", default=[], metavar="NODE", help="print explain(NODE)")
    p.add_argument("--export", metavar="DIR", help="write the generated C project here (make builds it)")
    p.add_argument("--json", action="store_true", help="print everything as JSON")

    p = sub.add_parser("sweep", help="evaluate a grid of configurations; Parquet results, Pareto set, HTML report")
    p.add_argument("model")
    p.add_argument("--soc", required=True, help="bundled profile name or path to a .toml profile")
    p.add_argument("--grid", required=True, help="the grid (.toml with a [grid] table of dotted keys)")
    p.add_argument("--out", required=True, help="results (.parquet); a re-run skips the configurations it holds")
    p.add_argument("--dask", metavar="ADDRESS", help="run on this Dask scheduler (tcp://HOST:PORT)")
    p.add_argument("--workers", type=int, help="local worker processes (default: the core count; 0: this process)")
    p.add_argument("--error", action="store_true", help="measure each configuration's numeric error (runs the model)")
    p.add_argument("--memory", action="store_true", help="generate each configuration's C program: arena and weight bytes")
    p.add_argument("--data", help=".npz with x (inputs) and optionally y (labels) for the error figures")
    p.add_argument("--report", help="write the sweep's HTML report here (Pareto views and the table)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = sub.add_parser("build", help="build and run an exported project; its outputs against the simulation")
    p.add_argument("dir", help="a directory written by `npukit study ... --export DIR` or study.export()")
    p.add_argument("--samples", type=_at_least_one, default=16, help="inputs of the study's data to run (default 16)")
    p.add_argument("--target", action="store_true", help="also build and run for the profile's target")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("calibrate", help="measure this machine's CPU per op and fit a host profile",
                       description="Run the models with TVM on this machine's CPU, time every kernel, and fit the "
                                   "profile's host processor to those times: its clock (read from the machine), "
                                   "memory bandwidth (measured), op overhead, per-kernel-class efficiency and "
                                   "reduction law. Prints the fit's error per model; --out writes the fitted "
                                   "profile. See npukit/calibrate.py and docs/soc-profile.md.")  # fmt: skip
    p.add_argument("model", nargs="+", help="models to fit to (ONNX, TFLite, .pt2)")
    p.add_argument("--soc", default="arm-dsp-dla", help="profile whose host processor is fitted")
    p.add_argument("--out", help="write the fitted profile (.toml)")
    p.add_argument("--repeat", type=int, default=20, help="timed runs of each model (the fastest counts; default 20)")
    p.add_argument("--holdout", action="append", default=[], metavar="MODEL",
                   help="a model to report on without fitting to it (repeatable)")
    p.add_argument("--json", action="store_true", help="print the fit as JSON")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # argparse already printed "npukit: error: ..." for bad usage
        return int(e.code or 0)
    from .errors import NpukitError  # noqa: PLC0415

    try:
        return {"socs": cmd_socs, "inspect": cmd_inspect, "study": cmd_study, "calibrate": cmd_calibrate,
                "build": cmd_build, "sweep": cmd_sweep}[args.cmd](args)  # fmt: skip
    except NpukitError as e:
        return _die(str(e))
    except BrokenPipeError:  # `npukit inspect m.onnx | head` (before OSError: it is one)
        _quiet_stdout()
        return 0
    except OSError as e:  # a path we were asked to read or write: say which and why
        where = e.filename or ""
        return _die(f"{where}: {e.strerror or e}" if where else str(e))
    except KeyboardInterrupt:
        return 130


def _quiet_stdout() -> None:
    """The reader of our output went away: send what is left of stdout nowhere, so that the flush
    at exit does not raise again."""
    import os  # noqa: PLC0415

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def cmd_socs(args) -> int:
    from .soc import bundled, load_soc, reference_markdown  # noqa: PLC0415

    if args.reference:
        print(reference_markdown())
        return 0
    rows = []
    for name in sorted(bundled()):
        p = load_soc(name)
        rows.append({"name": name, "processors": [f"{q.name}:{q.kind}" for q in p.processors], "host": p.host,
                     "description": p.description})  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        w = max(len(r["name"]) for r in rows)
        for r in rows:
            procs = ",".join(x.split(":")[0] for x in r["processors"])
            print(f"{r['name']:<{w}}  [{procs}]  {r['description']}")
    return 0


def _fmt_int(n) -> str:
    return f"{int(n):,}"


def cmd_inspect(args) -> int:
    from .opset import work  # noqa: PLC0415
    from .pipeline import load  # noqa: PLC0415

    g = load(args.model, dict(args.input_shape) or None).graph
    rows = []
    for op in g.ops:
        w = work(op, g)
        out = g.tensors[op.outputs[0]]
        rows.append({"op_id": op.op_id, "name": op.name, "op": op.kind, "source": op.source, "source_op": op.source_op,
                     "shape": list(out.shape), "dtype": out.dtype, "macs": w.macs, "vector_ops": w.vector_ops,
                     "macs_formula": w.formula})  # fmt: skip
    totals = {"ops": len(rows), "macs": sum(r["macs"] for r in rows), "vector_ops": sum(r["vector_ops"] for r in rows),
              "params": int(sum(g.tensors[t].size for t in g.tensors if g.tensors[t].kind == "const"))}  # fmt: skip
    ins = [{"name": g.tensors[t].name, "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype} for t in g.inputs]
    outs = [
        {"name": g.output_name(k), "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype}
        for k, t in enumerate(g.outputs)
    ]
    if args.json:
        print(json.dumps({"model": str(args.model), "format": g.source_format, "inputs": ins, "outputs": outs,
                          "ops": rows, "elided": dict(g.elided), "totals": totals}, indent=2, ensure_ascii=False))  # fmt: skip
        return 0
    print(f"{args.model}: {g.source_format}, {len(rows)} ops")
    for i in ins:
        print(f"  input  {i['name']!r} {i['shape']} {i['dtype']}")
    for o in outs:
        print(f"  output {o['name']!r} {o['shape']} {o['dtype']}")
    _table(["op_id", "name", "op", "shape", "dtype", "macs"],
           [[r["op_id"], _show(r["name"]), r["op"], "x".join(map(str, r["shape"])), r["dtype"], _fmt_int(r["macs"])] for r in rows])  # fmt: skip
    if g.elided:
        print(f"model nodes without an op of their own: {len(g.elided)}")
        for k, v in sorted(g.elided.items()):
            print(f"  {_show(k)}: {v}")
    print(f"total: {totals['ops']} ops, {_fmt_int(totals['macs'])} MACs, {_fmt_int(totals['vector_ops'])} vector ops, "
          f"{_fmt_int(totals['params'])} parameters")  # fmt: skip
    return 0


def _show(s: str, n: int = 60, keep_end: bool = True) -> str:
    """A name for a terminal table: control characters escaped, long names shortened (model names
    keep their distinctive end, sentences their start)."""
    r = s.encode("unicode_escape").decode("ascii") if any(ord(c) < 32 or c == "\x7f" for c in s) else s
    if len(r) <= n:
        return r
    return "…" + r[-(n - 1):] if keep_end else r[: n - 1] + "…"


def _table(header, rows) -> None:
    cols = list(zip(*([header] + [[str(c) for c in r] for r in rows]))) if rows else [[h] for h in header]
    widths = [max(len(str(c)) for c in col) for col in cols]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(str(c).rjust(w) if isinstance(c, str) and c.replace(",", "").replace(".", "").isdigit()
                        else str(c).ljust(w) for c, w in zip(r, widths)))  # fmt: skip


def _build_study(args):
    from . import Study  # noqa: PLC0415
    from .config import Config  # noqa: PLC0415
    from .errors import ConfigError  # noqa: PLC0415

    cfg = None
    if args.config:
        path = Path(args.config)
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a text file; a config is TOML or JSON (see --save-config)") from None
        try:
            cfg = Config.from_json(text) if path.suffix.lower() == ".json" else Config.from_toml(text)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
    try:
        s = Study(args.model, args.soc, cfg, input_shapes=dict(args.input_shape) or None, placement=args.placement)
    except ConfigError as e:  # (--placement is one of argparse's choices) the config's edits do not fit
        if cfg is None:  # this model or profile: a config saved from another one
            raise
        raise ConfigError(f"{args.config}: {e}") from None
    for proc, op in args.disable:
        s.set_support(proc, op, False)
    for proc, op in args.enable:
        s.set_support(proc, op, True)
    for node, proc in args.pin:
        s.pin(node, proc)
    for proc, bits in args.bits:
        s.set_bits(bits, processor=proc)
    for node, bits in args.bits_layer:
        s.set_bits(bits, layer=node)
    if args.data:
        s.set_data(args.data)
    return s


def _records(df) -> list[dict]:
    out = []
    for rec in df.to_dict(orient="records"):
        out.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()})
    return out


def cmd_study(args) -> int:
    from .errors import NpukitError  # noqa: PLC0415

    # (a directory given gets its own message below)
    if args.save_config and not Path(args.save_config).is_dir() and Path(args.save_config).suffix.lower() not in (".toml", ".json"):
        raise NpukitError(f"{args.save_config}: --save-config writes TOML (.toml) or JSON (.json); give the file "
                          "one of those suffixes")  # fmt: skip
    if args.report and not Path(args.report).is_dir() and Path(args.report).suffix.lower() not in (".html", ".htm"):
        raise NpukitError(f"{args.report}: --report writes one HTML page; give the file the suffix .html")
    s = _build_study(args)
    for node in args.explain:  # a bad name fails before anything is printed or written
        if not s.graph.resolve(node) and str(node) not in s.graph.elided:
            from .pipeline import resolve  # noqa: PLC0415

            resolve(s.graph, node)
    want_error = args.error or args.data is not None
    doc = {
        "model": str(args.model), "soc": s.soc.name, "config": s.config.to_dict(),
        "placement": _records(s.placement), "partitions": _records(s.partitions), "costs": _records(s.costs),
        "boundaries": _records(s.boundaries), "timeline": _records(s.timeline), "totals": s.totals,
    }  # fmt: skip
    if want_error:
        doc["error"] = s.error_dict()
    if args.explain:
        doc["explain"] = {str(node): s.explain(node) for node in args.explain}
    if args.export:  # what can fail -- the directory, code generation -- fails before anything is written
        from .io import check_export_target  # noqa: PLC0415

        check_export_target(args.export)
        box = Path(args.export).resolve()
        for out in (args.save_config, args.report):
            if out and box in Path(out).resolve().parents:
                raise NpukitError(f"{out}: inside the --export directory {args.export}, which the export writes; "
                                  "write it elsewhere")  # fmt: skip
        from .codegen.project import check_io_dtypes  # noqa: PLC0415

        check_io_dtypes(s.graph)
        _ = s.project
    html = None
    if args.report:
        from .report import report_html  # noqa: PLC0415

        html = report_html(s, want_error)
    from .io import atomic_write_text  # noqa: PLC0415

    for out in (args.save_config, args.report):
        if out and Path(out).is_dir():
            raise NpukitError(f"{out}: is a directory; give a file path to write to")

    if args.save_config:
        p = Path(args.save_config)
        atomic_write_text(p, s.config.to_json() if p.suffix.lower() == ".json" else s.config.to_toml())
    if html is not None:
        atomic_write_text(args.report, html)
    if args.export:
        proj = s.export(args.export)
        doc["export"] = {"directory": args.export, "files": len(proj.files), **proj.manifest["memory"]}
    if args.json:
        print(json.dumps(_finite(doc), indent=2, ensure_ascii=False, default=_jsonable, allow_nan=False))
        return 0
    pl = s.placement
    n, k = len(pl), len(s.plan.partitions)
    print(f"{args.model} on {s.soc.name}: {n} op{'s' * (n != 1)} in {k} partition{'s' * (k != 1)}")
    _table(["op_id", "name", "op", "processor", "part", "reason"],
           [[r.op_id, _show(r.name, 40), r.op, r.processor, r.partition, _show(r.reason, 70, keep_end=False)] for r in pl.itertuples()])  # fmt: skip
    print()
    print("partitions:")
    for r in s.partitions.itertuples():
        ops = f"{r.ops:>4} {'op ' if r.ops == 1 else 'ops'}"
        print(f"  {r.partition:>3} {r.processor:<6} {ops}  {r.latency_us:>10.2f} us  {_show(r.first, 40)} .. {_show(r.last, 40)}")
    b = s.boundaries
    if len(b):
        print("boundaries:")
        for r in b.itertuples():
            print(f"  {_show(r.tensor, 40):<40} {r.src}->{r.dst}  {r.bytes:>10,.0f} B  transfer {r.transfer_us:8.2f} us"
                  + (f"  layout {r.layout_us:.2f} us" if r.layout_us else "")
                  + (f"  {r.conversion.split(',')[-1].strip()} {r.quantize_us:.2f} us" if r.quantize_us else ""))  # fmt: skip
    t = s.totals
    print(f"totals: latency {t['latency_us']:.2f} us, energy {t['energy_uj']:.3f} uJ, MACs {t['macs']:,}")
    print("  busy: " + ", ".join(f"{p} {t['busy_us'][p]:.2f} us ({100 * t['utilisation'][p]:.0f}%)" for p in s.soc.names))
    print(f"  transfers {t['transfer_us']:.2f} us, layout {t['layout_us']:.2f} us, quantize {t['quantize_us']:.2f} us")
    if want_error:
        e = s.error_dict()
        for o in e["outputs"]:
            line = f"error: output {o['name']!r}: SNR {o['snr_db']:.1f} dB, max abs {o['max_abs']:.3g}"
            if o.get("top1_agreement") is not None:
                line += f", top-1 agreement {100 * o['top1_agreement']:.1f}%"
            print(line)
        if e.get("accuracy") is not None:
            print(f"accuracy: {100 * e['accuracy']:.2f}% (fp32 {100 * e['accuracy_fp32']:.2f}%) on {e['samples']} samples")
    for node in args.explain:
        print()
        print(s.explain(node))
    if args.report:
        print(f"report: {args.report}")
    if args.export:
        m = doc["export"]
        print(f"export: {args.export} ({m['files']} files; arena {m['arena_bytes']:,} B, live-tensor lower bound "
              f"{m['lower_bound_bytes']:,} B, weights {m['weight_bytes']:,} B); build it with make")  # fmt: skip
    return 0


def cmd_build(args) -> int:
    from .codegen.build import study_of_export  # noqa: PLC0415

    s, directory = study_of_export(args.dir)
    from .codegen.build import build_and_compare  # noqa: PLC0415

    r = build_and_compare(s, directory, samples=args.samples, target=args.target, regenerate=False)
    if args.json:
        print(json.dumps(_finite(r), indent=2, allow_nan=False))
        return 0 if r["outputs_agree"] else _disagree(r)
    print(f"{args.dir}: built and ran {r['samples']} inputs of {s.data.source}")
    for run, res in r["runs"].items():
        if "skipped" in res:
            print(f"  {run}: skipped ({res['skipped']})")
            continue
        for name, o in res["outputs"].items():
            print(f"  {run}: output {name!r}: max abs {o['max_abs']:.3g}, max rel {o['max_rel']:.3g} vs the simulation, "
                  f"argmax agreement {100 * o['argmax_agreement']:.0f}%, relative RMS {o['rel_rms']:.3g} "
                  f"(tolerance {o['tolerance']:.3g}){'' if o['within_tolerance'] else ' MISMATCH'}")  # fmt: skip
        if "bit_exact_with_host" in res:
            print(f"  {run}: {'bit-exact with' if res['bit_exact_with_host'] else 'DIFFERS from'} the host build")
    mem = r["memory"]
    print(f"  memory: arena {mem['arena_bytes']:,} B (lower bound {mem['lower_bound_bytes']:,} B), weights {mem['weight_bytes']:,} B")
    if "fit" in r:
        print(f"  fit of the {r['fit']['target']} build ({r['fit']['program']}, from size):")
        print("\n".join("    " + ln for ln in r["fit"]["text"].splitlines()))
    return 0 if r["outputs_agree"] else _disagree(r)


def _disagree(r: dict) -> int:
    """One line on stderr naming the outputs beyond their tolerance of the simulation; exit status 1."""
    print(f"npukit: build: the program's outputs disagree with the simulation: {'; '.join(r['mismatches'])}",
          file=sys.stderr)  # fmt: skip
    return 1


def _finite(o):
    """JSON has no inf / nan: non-finite numbers (an SNR of identical outputs is inf) become null."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        return _finite(o.item())
    return o


def _jsonable(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def cmd_sweep(args) -> int:
    from .sweeps import pareto_mask, sweep  # noqa: PLC0415

    if args.dask and args.workers is not None:
        from .errors import ConfigError  # noqa: PLC0415

        raise ConfigError("--dask and --workers: the Dask cluster has its own workers; give one of them")
    try:
        df = sweep(args.model, args.soc, args.grid, client=args.dask, error=args.error, workers=args.workers, out=args.out,
                   memory=args.memory, data=args.data, progress=not args.no_progress)  # fmt: skip
    except KeyboardInterrupt:
        print(f"npukit: interrupted: {_saved(args.out)}", file=sys.stderr)
        return 130
    front = df[pareto_mask(df)]
    failed = df[df["failure"].notna()]
    if args.report:
        from .sweeps.report import write_sweep_report  # noqa: PLC0415

        write_sweep_report(df, args.report, title=f"{Path(args.model).name} on {args.soc}")
    summary = {"out": args.out, "configurations": len(df), "failed": len(failed), "pareto": len(front),
               "pareto_index": [int(i) for i in front["index"]], "report": args.report}  # fmt: skip
    if len(df) > len(failed):
        best = df.loc[df["latency_us"].idxmin()]
        summary["fastest"] = {"index": int(best["index"]), "latency_us": float(best["latency_us"]),
                              "energy_uj": float(best["energy_uj"]), "config": best["config"]}  # fmt: skip
    if args.json:
        print(json.dumps(_finite(summary), indent=2, allow_nan=False))
        return 0
    print(f"{args.out}: {len(df)} configurations, {len(failed)} failed, {len(front)} in the Pareto set")
    if "fastest" in summary:
        f = summary["fastest"]
        print(f"fastest: #{f['index']} {f['latency_us']:.2f} us, {f['energy_uj']:.3f} uJ  {f['config']}")
    for r in failed.head(3).itertuples():
        print(f"failed: #{r.index} {r.failure}")
    if args.report:
        print(f"report: {args.report}")
    return 0


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
    from .calibrate import calibrate  # noqa: PLC0415

    res = calibrate(args.model, args.soc, repeat=args.repeat, out=args.out, holdout=args.holdout)
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "profile"}, indent=2, default=_jsonable))
    else:
        print(f"fitted {res['processor']} of {res['soc']}: efficiency {res['efficiency']}")
        for m in res["models"]:
            print(f"  {m['model']}{'' if m.get('fit', True) else ' (held out)'}: measured {m['measured_us']:.1f} us, "
                  f"estimated {m['estimated_us']:.1f} us (ratio {m['ratio']:.2f}), "
                  f"median per-op error {100 * m['median_op_error']:.0f}%")  # fmt: skip
        if args.out:
            print(f"profile: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
