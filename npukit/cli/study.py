"""``npukit socs``, ``npukit inspect`` and ``npukit study``."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ShapeError
from .text import finite, fmt_int, jsonable, records, show, table


def cmd_socs(args) -> int:
    from ..soc import bundled, load_soc, reference_markdown  # noqa: PLC0415

    if args.reference and args.json:
        from ..errors import NpukitError  # noqa: PLC0415

        raise NpukitError("socs: --reference prints the profile field reference as markdown, --json the bundled "
                          "profiles as JSON; give one of them")  # fmt: skip
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


def input_shapes(args) -> dict | None:
    """The --input-shape options as input_shapes; an input given twice with two shapes is refused, not the last kept."""
    out: dict = {}
    for name, dims in (pair for given in args.input_shape for pair in given):
        if name in out and out[name] != dims:
            raise ShapeError(f"--input-shape gives input {name!r} twice ({','.join(map(str, out[name]))} and "
                             f"{','.join(map(str, dims))}); give each input once")  # fmt: skip
        out[name] = dims
    return out or None


def cmd_inspect(args) -> int:
    from ..opset import work  # noqa: PLC0415
    from ..pipeline import load  # noqa: PLC0415
    from ..quant.data import unread_inputs  # noqa: PLC0415

    g = load(args.model, input_shapes(args)).graph
    rows = []
    for op in g.ops:
        w = work(op, g)
        out = g.tensors[op.outputs[0]]
        rows.append({"op_id": op.op_id, "name": op.name, "op": op.kind, "source": op.source, "source_op": op.source_op,
                     "shape": list(out.shape), "dtype": out.dtype, "macs": w.macs, "vector_ops": w.vector_ops,
                     "macs_formula": w.formula})  # fmt: skip
    totals = {"ops": len(rows), "macs": sum(r["macs"] for r in rows), "vector_ops": sum(r["vector_ops"] for r in rows),
              "params": _parameters(g)}  # fmt: skip
    idle = unread_inputs(g)
    ins = [{"name": g.tensors[t].name, "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype} for t in g.inputs]
    outs = [
        {"name": g.output_name(k), "shape": list(g.tensors[t].shape), "dtype": g.tensors[t].dtype}
        for k, t in enumerate(g.outputs)
    ]
    if args.json:
        print(json.dumps({"model": str(args.model), "format": g.source_format, "inputs": ins, "outputs": outs,
                          "unread_inputs": idle, "ops": rows, "elided": dict(g.elided), "totals": totals}, indent=2,
                         ensure_ascii=False))  # fmt: skip
        return 0
    print(f"{args.model}: {g.source_format}, {len(rows)} ops")
    for i in ins:
        note = "  (no op reads it: data may leave it out, and it is fed zeros)" if i["name"] in idle else ""
        print(f"  input  {i['name']!r} {i['shape']} {i['dtype']}{note}")
    for o in outs:
        print(f"  output {o['name']!r} {o['shape']} {o['dtype']}")
    table(["op_id", "name", "op", "shape", "dtype", "macs"], right=("macs",), rows=
           [[r["op_id"], show(r["name"]), r["op"], "x".join(map(str, r["shape"])), r["dtype"], fmt_int(r["macs"])] for r in rows])  # fmt: skip
    if g.elided:
        print(f"model nodes without an op of their own: {len(g.elided)}")
        for k, v in sorted(g.elided.items()):
            print(f"  {show(k)}: {v}")
    print(f"total: {totals['ops']} op{'s' * (totals['ops'] != 1)}, {fmt_int(totals['macs'])} MACs, {fmt_int(totals['vector_ops'])} vector ops, "
          f"{fmt_int(totals['params'])} parameters")  # fmt: skip
    return 0


def _no_contradiction(flag: str, pairs, key) -> None:
    """Two ``flag``s giving one node (or processor) different values are refused, as --disable and
    --enable of one op are: else the last one silently won."""
    from ..errors import ConfigError  # noqa: PLC0415

    seen: dict[str, tuple[str, str]] = {}
    for name, value in pairs:
        k = key(name)
        if k in seen and seen[k][1] != value:
            first = seen[k]
            same = f" (both name {k!r})" if first[0] != name or k != name else ""
            raise ConfigError(f"{flag} {first[0]}={first[1]} and {flag} {name}={value} contradict each other{same}; "
                              "give one")  # fmt: skip
        seen.setdefault(k, (name, value))


def _build_study(args):
    from .. import Study  # noqa: PLC0415
    from ..config import Config  # noqa: PLC0415
    from ..errors import ConfigError, in_config  # noqa: PLC0415

    cfg = Config.read(args.config) if args.config else None
    try:
        s = Study(args.model, args.soc, cfg, input_shapes=input_shapes(args), placement=args.placement)
    except ConfigError as e:  # (--placement is one of argparse's choices) the config's edits do not fit
        if cfg is None:  # this model or profile: a config saved from another one
            raise
        raise in_config(args.config, e) from None
    from ..opset import canonical  # noqa: PLC0415

    both = {(p, canonical(o)) for p, o in args.disable} & {(p, canonical(o)) for p, o in args.enable}
    if both:
        p, o = sorted(both)[0]
        raise ConfigError(f"--disable {p}:{o} and --enable {p}:{o} contradict each other; give one")
    _no_contradiction("--pin", args.pin, s._node_key)
    _no_contradiction("--bits", args.bits, str)
    _no_contradiction("--bits-layer", args.bits_layer, s._node_key)
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


def cmd_study(args) -> int:
    from ..errors import NpukitError  # noqa: PLC0415

    # (a directory given gets its own message below)
    if args.save_config and not Path(args.save_config).is_dir() and Path(args.save_config).suffix.lower() not in (".toml", ".json"):
        raise NpukitError(f"{args.save_config}: --save-config writes TOML (.toml) or JSON (.json); give the file "
                          "one of those suffixes")  # fmt: skip
    if args.report and not Path(args.report).is_dir() and Path(args.report).suffix.lower() not in (".html", ".htm"):
        raise NpukitError(f"{args.report}: --report writes one HTML page; give the file the suffix .html")
    for opt, out, what in (("--save-config", args.save_config, "config"), ("--report", args.report, "report")):
        for named, p in (("the model", args.model), ("the --soc profile", args.soc), ("the --data file", args.data)):
            if out and p and Path(p).is_file() and Path(out).resolve() == Path(p).resolve():
                raise NpukitError(f"{out}: {opt} would write over {named}; give the {what} a file of its own")
    s = _build_study(args)
    for node in args.explain:  # a bad name fails before anything is printed or written
        if not s.graph.resolve(node) and str(node) not in s.graph.elided:
            from ..pipeline import resolve  # noqa: PLC0415

            resolve(s.graph, node)
    want_error = args.error or args.data is not None
    doc = {
        "model": str(args.model), "soc": s.soc.name, "config": s.config.to_dict(),
        "placement": records(s.placement), "partitions": records(s.partitions), "costs": records(s.costs),
        "boundaries": records(s.boundaries), "timeline": records(s.timeline), "totals": s.totals,
        "partition_limits": list(s.partition_limits),
    }  # fmt: skip
    if want_error:  # the model outputs' figures, and study.error's per-op rows
        doc["error"] = {**s.error_dict(), "per_op": records(s.error)}
    if args.explain:
        doc["explain"] = {str(node): s.explain(node) for node in args.explain}
    if args.export:  # what can fail -- the directory, code generation -- fails before anything is written
        from ..export_dir import check_export_target  # noqa: PLC0415

        check_export_target(args.export)
        box = Path(args.export).resolve()
        for out in (args.save_config, args.report):
            if out and box in Path(out).resolve().parents:
                raise NpukitError(f"{out}: inside the --export directory {args.export}, which the export writes; "
                                  "write it elsewhere")  # fmt: skip
        from ..codegen.project import check_io_dtypes  # noqa: PLC0415

        check_io_dtypes(s.graph)
        _ = s.project
    html = None
    if args.report:
        from ..report import report_html  # noqa: PLC0415

        html = report_html(s, want_error)
    from ..io import atomic_write_text, check_file_target  # noqa: PLC0415
    from ..pipeline import calibrated_tensors  # noqa: PLC0415
    from ..quant.data import sidecar  # noqa: PLC0415

    for out in (args.save_config, args.report):  # (a directory, or a file where its directory would be)
        if out:
            check_file_target(out)

    if args.save_config:
        p = Path(args.save_config)
        atomic_write_text(p, s.config.to_json() if p.suffix.lower() == ".json" else s.config.to_toml())
    if html is not None:
        atomic_write_text(args.report, html)
    if args.export:
        import warnings  # noqa: PLC0415

        from ..errors import PartitionLimitWarning  # noqa: PLC0415

        with warnings.catch_warnings():  # said below as a note (--json: partition_limits), not as Python's warning
            warnings.simplefilter("ignore", PartitionLimitWarning)
            proj = s.export(args.export)
        doc["export"] = {"directory": args.export, "files": len(proj.files), **proj.manifest["memory"]}
    if args.json:
        print(json.dumps(finite(doc), indent=2, ensure_ascii=False, default=jsonable, allow_nan=False))
        return 0
    pl = s.placement
    n, k = len(pl), len(s.plan.partitions)
    print(f"{args.model} on {s.soc.name}: {n} op{'s' * (n != 1)} in {k} partition{'s' * (k != 1)}")
    table(["op_id", "name", "op", "processor", "part", "reason"], rows=
           [[r.op_id, show(r.name, 40), r.op, r.processor, r.partition, show(r.reason, 70, keep_end=False)] for r in pl.itertuples()])  # fmt: skip
    print()
    print("partitions:")
    pw = max(len(p) for p in s.soc.names)
    for r in s.partitions.itertuples():
        ops = f"{r.ops:>4} {'op ' if r.ops == 1 else 'ops'}"
        print(f"  {r.partition:>3} {r.processor:<{pw}} {ops}  {r.latency_us:>10.2f} us  {show(r.first, 40)} .. {show(r.last, 40)}")
    b = s.boundaries
    if len(b):
        print("boundaries:")
        tw = max(len(show(x, 40)) for x in b["tensor"])
        sd = max(len(f"{x}->{y}") for x, y in zip(b["src"], b["dst"]))
        for r in b.itertuples():
            print(f"  {show(r.tensor, 40):<{tw}} {r.src + '->' + r.dst:<{sd}}  {r.bytes:>10,.0f} B  transfer {r.transfer_us:8.2f} us"
                  + (f"  layout {r.layout_us:.2f} us" if r.layout_us else "")
                  + (f"  {r.conversion.split(',')[-1].strip()} {r.quantize_us:.2f} us" if r.quantize_us else ""))  # fmt: skip
    for text in s.partition_limits:
        print(f"note: {text}")
    t = s.totals
    print(f"totals: latency {t['latency_us']:.2f} us, energy {t['energy_uj']:.3f} uJ, MACs {t['macs']:,}")
    print("  busy: " + ", ".join(f"{p} {t['busy_us'][p]:.2f} us ({100 * t['utilisation'][p]:.0f}%)" for p in s.soc.names))
    print(f"  transfers {t['transfer_us']:.2f} us, layout {t['layout_us']:.2f} us, quantize {t['quantize_us']:.2f} us")
    # (the model's sidecar is not read to say so: a study that measures nothing does not need its
    # data, and --json printed the study whole where a sidecar unlike the model's inputs failed here)
    if not args.data and not sidecar(s.graph.path) and calibrated_tensors(s.result):
        print(f"note: integer scales calibrated on {s.data.source}")
    if want_error:
        e = s.error_dict()
        for o in e["outputs"]:
            # an output whose shape depends on the data (the rows NMS selects) is compared only on the
            # samples where it has the float model's shape: on none, its "SNR inf, max abs 0" said the
            # width changed nothing
            off, n = o.get("shape_mismatches", 0), e["samples"]
            if off and off >= n:
                print(f"error: output {o['name']!r}: not compared: its shape differs from the float model's on all "
                      f"{n} samples")  # fmt: skip
                continue
            line = f"error: output {o['name']!r}: SNR {o['snr_db']:.1f} dB, max abs {o['max_abs']:.3g}"
            if o.get("top1_agreement") is not None:
                line += f", top-1 agreement {100 * o['top1_agreement']:.1f}%"
            if off:
                line += f" (on the {n - off} of {n} samples where its shape is the float model's)"
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


def _parameters(g) -> int:
    """The model's parameters: the elements of the constant tensors its ops read, scalars left out
    (a GELU's 0.5, an attention scale: the importers of two formats write them differently)."""
    read = {t for op in g.ops for t in op.inputs}
    return int(sum(g.tensors[t].size for t in read if g.tensors[t].kind == "const" and g.tensors[t].size > 1))
