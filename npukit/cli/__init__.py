"""The console script: ``npukit socs | inspect | study | sweep | build | calibrate``.

Bad input prints ``npukit: error: <message>`` and exits 2; nothing from inside TVM reaches the user
unexplained.  ``npukit build`` exits 1 when an output of the built program is beyond its tolerance
of the simulation (``codegen.build``), naming it on stderr.
"""

from __future__ import annotations

import argparse
import sys

from .runs import cmd_build, cmd_calibrate, cmd_sweep
from .study import cmd_inspect, cmd_socs, cmd_study


def _die(msg: str) -> int:
    print(f"npukit: error: {msg}", file=sys.stderr)
    return 2


def _path(s: str) -> str:
    """A path argument: an empty one (an unset shell variable) is refused, not taken as "not given"."""
    if not s.strip():
        raise argparse.ArgumentTypeError("an empty path; give a file or directory")
    return s


def _shape_arg(s: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``NAME=D1,D2,...``, or several of them separated by ';' (``x=1,4;mask=1,8``): the (name, dims)
    pairs.  A ';' splits only where every piece is ``NAME=...`` (an input named ``a;b`` is one name);
    each piece is read as one option (``cli.study.input_shapes`` refuses an input given twice)."""
    pieces = s.split(";")
    if len(pieces) > 1 and all("=" in p for p in pieces):
        try:
            return tuple(_one_shape(p) for p in pieces)
        except argparse.ArgumentTypeError as e:  # the piece is quoted; so is the whole option
            raise argparse.ArgumentTypeError(f"{e} (in {s!r})") from None
    return (_one_shape(s),)


def _one_shape(s: str) -> tuple[str, tuple[int, ...]]:
    if "=" not in s:
        raise argparse.ArgumentTypeError(f"--input-shape {s!r}: expected NAME=D1,D2,... e.g. x=1,3,224,224")
    name, dims = s.rsplit("=", 1)
    if not name:
        raise argparse.ArgumentTypeError(f"--input-shape {s!r}: no input name before '='; expected NAME=D1,D2,...")
    if not dims.strip():
        raise argparse.ArgumentTypeError(f"--input-shape {s!r}: no dims after '='; expected NAME=D1,D2,... e.g. "
                                         f"{name}=1,3,224,224")  # fmt: skip
    parts = dims.split(",")
    empty = [i for i, d in enumerate(parts) if not d.strip()]
    if empty:
        raise argparse.ArgumentTypeError(f"--input-shape {s!r}: dim {empty[0]} is empty")
    try:
        shape = tuple(int(d) for d in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--input-shape {s!r}: dims must be integers") from None
    return name, shape


_SHAPE_HELP = ("the shape of an input whose dims the model leaves open; repeat the option for several inputs, "
               "or separate them with ';' (x=1,3,8,8;mask=1,8); an input given twice with two shapes is refused")


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


class _Once(argparse._StoreAction):
    """An option that takes one value: given twice with two values it is refused, not the last one
    silently kept (``--save-config a.toml --save-config b.json`` wrote only b.json)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given", {})
        if option_string is not None and self.dest in given and given[self.dest] != values:  # (the same twice: one)
            raise argparse.ArgumentError(self, f"given twice ({given[self.dest]!r}, then {values!r}); give it once")
        given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, ``npukit: error: ...`` (exit 2), like every other error.  An option that
    takes one value is refused when given twice (``_Once``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def error(self, message: str):
        print(f"npukit: error: {self.prog.removeprefix('npukit').strip() + ': ' if self.prog != 'npukit' else ''}"
              f"{message} (see {self.prog} --help)", file=sys.stderr)  # fmt: skip
        sys.exit(2)


DATA_HELP = (".npz with x (the inputs; or one array per input name), optionally y (class labels) and calib "
             "(calibration inputs, else the first 32 of x): they calibrate the integer scales and give the error "
             "figures; default: the model's sidecar <stem>.npz beside it, else seeded random inputs")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="npukit", description="What-if offload studies of ML models on edge SoCs.")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", required=True, parser_class=_Parser)

    p = sub.add_parser("socs", help="list the bundled SoC profiles")
    p.add_argument("--json", action="store_true", help="print the profiles as JSON")
    p.add_argument("--reference", action="store_true", help="print the SoC profile field reference (markdown)")

    p = sub.add_parser("inspect", help="ops, shapes and MACs of a model (no SoC needed)")
    p.add_argument("model", type=_path, help="the model (ONNX, TFLite, .pt2)")
    p.add_argument("--input-shape", action="append", type=_shape_arg, default=[], metavar="NAME=D1,D2,...",
                   help=_SHAPE_HELP)
    p.add_argument("--json", action="store_true", help="print the ops and totals as JSON")

    p = sub.add_parser("study", help="partition a model on an SoC and estimate its cost")
    p.add_argument("model", type=_path, help="the model (ONNX, TFLite, .pt2)")
    p.add_argument("--soc", type=_path, required=True, help="bundled profile name or path to a .toml profile")
    p.add_argument("--config", type=_path, help="start from a saved config (.toml or .json)")
    p.add_argument("--disable", action="append", type=_pair(":", "PROC:OP"), default=[], metavar="PROC:OP",
                   help="take op support away from a processor (repeatable)")
    p.add_argument("--enable", action="append", type=_pair(":", "PROC:OP"), default=[], metavar="PROC:OP",
                   help="give a processor op support (repeatable)")
    p.add_argument("--pin", action="append", type=_pair("=", "NODE=PROC"), default=[], metavar="NODE=PROC",
                   help="run a node (a model node name, an op name or #op_id) on a processor (repeatable)")
    p.add_argument("--bits", action="append", type=_pair("=", "PROC=BITS"), default=[], metavar="PROC=BITS",
                   help="a processor's bit-width: int2 int4 int8 int16 fp16 fp32 (repeatable)")
    p.add_argument("--bits-layer", action="append", type=_pair("=", "NODE=BITS"), default=[], metavar="NODE=BITS",
                   help="a layer's bit-width, over its processor's (repeatable)")
    p.add_argument("--input-shape", action="append", type=_shape_arg, default=[], metavar="NAME=D1,D2,...",
                   help=_SHAPE_HELP)
    p.add_argument("--placement", choices=("cost", "first-fit"),
                   help="cost (default): the cost model chooses among the processors the rules allow; "
                        "first-fit: the profile's preference order")  # fmt: skip
    p.add_argument("--data", type=_path, metavar="FILE.npz", help=DATA_HELP)
    p.add_argument("--error", action="store_true", help="measure the numeric error of the bit-widths (runs the model)")
    p.add_argument("--report", type=_path, help="write an HTML report here")
    p.add_argument("--save-config", type=_path, help="write the resulting config (.toml or .json)")
    p.add_argument("--explain", action="append", default=[], metavar="NODE", help="print explain(NODE)")
    p.add_argument("--export", type=_path, metavar="DIR", help="write the generated C project here (make builds it)")
    p.add_argument("--json", action="store_true", help="print everything as JSON")

    p = sub.add_parser("sweep", help="evaluate a grid of configurations; Parquet results, Pareto set, HTML report")
    p.add_argument("model", type=_path, help="the model (ONNX, TFLite, .pt2)")
    p.add_argument("--soc", type=_path, required=True, help="bundled profile name or path to a .toml profile")
    p.add_argument("--grid", type=_path, required=True, help="the grid (.toml with a [grid] table of dotted keys)")
    p.add_argument("--input-shape", action="append", type=_shape_arg, default=[], metavar="NAME=D1,D2,...",
                   help=_SHAPE_HELP)
    p.add_argument("--out", type=_path, required=True, help="results (.parquet); a re-run skips the configurations it holds")
    p.add_argument("--dask", metavar="ADDRESS", help="run on this Dask scheduler (tcp://HOST:PORT)")
    p.add_argument("--workers", type=int, help="local worker processes (0: this process; default: this process while the rest would take under 20 s, then one per core)")
    p.add_argument("--error", action="store_true", help="measure each configuration's numeric error (runs the model)")
    p.add_argument("--memory", action="store_true", help="generate each configuration's C program: arena and weight bytes")
    p.add_argument("--data", type=_path, metavar="FILE.npz", help=DATA_HELP)
    p.add_argument("--report", type=_path, help="write the sweep's HTML report here (Pareto views and the table)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = sub.add_parser("build", help="build and run an exported project; its outputs against the simulation")
    p.add_argument("dir", type=_path, help="a directory written by `npukit study ... --export DIR` or study.export()")
    p.add_argument("--samples", type=_at_least_one, default=16, help="inputs of the study's data to run (default 16)")
    p.add_argument("--target", action="store_true", help="also build and run for the profile's target")
    p.add_argument("--json", action="store_true", help="print the build report as JSON")

    p = sub.add_parser("calibrate", help="measure this machine's CPU per op and fit a host profile",
                       description="Run the models with TVM on this machine's CPU, time every kernel, and fit the "
                                   "profile's host processor to those times: its clock (read from the machine), "
                                   "memory bandwidth (measured), op overhead, per-kernel-class efficiency and "
                                   "reduction law. Prints the fit's error per model; --out writes the fitted "
                                   "profile. See npukit/calibrate/ and docs/soc-profile.md.")  # fmt: skip
    p.add_argument("model", nargs="+", type=_path, help="models to fit to (ONNX, TFLite, .pt2)")
    p.add_argument("--soc", type=_path, default="arm-dsp-dla", help="profile whose host processor is fitted")
    p.add_argument("--out", type=_path, help="write the fitted profile (.toml)")
    p.add_argument("--repeat", type=int, default=20, help="timed runs of each model (the fastest counts; default 20)")
    p.add_argument("--holdout", action="append", type=_path, default=[], metavar="MODEL",
                   help="a model to report on without fitting to it (repeatable)")
    p.add_argument("--json", action="store_true", help="print the fit as JSON")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # argparse already printed "npukit: error: ..." for bad usage
        return int(e.code or 0)
    from ..errors import NpukitError  # noqa: PLC0415

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


if __name__ == "__main__":
    sys.exit(main())
