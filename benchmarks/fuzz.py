"""Mutated model files and SoC profiles: every mutant either works or raises one NpukitError with a
one-line message, within 10 s, without exhausting memory (issue 14, item 11).

Mutations of the sample models: truncation, bit flips, corrupted length / offset fields, huge
declared dimensions, graph cycles, dangling inputs, zero and negative dims; of the bundled profiles:
deleted keys, wrong types, huge / negative numbers, unknown keys.  Each mutant runs in a forked child
(npukit and tvm imported once, before the fork) with a memory limit and a time limit.

    python benchmarks/fuzz.py [--n 300] [--seed 0] [--timeout 10]

prints one JSON document: mutants tried, successes, clear errors, other exceptions (goal 0), hangs
(goal 0), and the first few of each bad kind.  ``tests/test_fuzz_models.py`` runs a short seeded set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
PROFILES = ROOT / "npukit" / "profiles"
MODELS = ["digits_cnn.onnx", "tiny_detector.onnx", "digits_cnn_qop.onnx", "digits_cnn_float.tflite",
          "digits_cnn_int8.tflite", "families/shufflenet.onnx", "digits_cnn.pt2"]  # fmt: skip
MEMORY_LIMIT = 6 << 30  # address space of a mutant's process


# ---------------------------------------------------------------------------------------------
# mutations (each returns (label, bytes) or None when it does not apply)


def _bytes_mutations(data: bytes, rng: random.Random):
    n = len(data)
    cut = rng.randrange(1, n)
    yield f"truncate@{cut}", data[:cut]
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(n)
        b[i] ^= 1 << rng.randrange(8)
    yield "bitflip", bytes(b)
    b = bytearray(data)
    i = rng.randrange(min(n, 256))  # the header region: tags, lengths, offsets
    b[i] = rng.choice([0x00, 0xFF, 0x7F, 0x80])
    yield f"header-byte@{i}", bytes(b)
    b = bytearray(data)
    i = rng.randrange(0, n - 4)
    b[i : i + 4] = rng.choice([b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\x10\x27\x00\x00"])
    yield f"word@{i}", bytes(b)


def _onnx_mutations(data: bytes, rng: random.Random):
    import onnx

    def variant(label, edit):
        m = onnx.load_from_string(data)
        try:
            edit(m)
        except (IndexError, ValueError):
            return None
        return label, m.SerializeToString()

    def huge_input(m):
        for d in m.graph.input[0].type.tensor_type.shape.dim[1:]:
            d.Clear()
            d.dim_value = 10**6

    def huge_initializer(m):
        t = max(m.graph.initializer, key=lambda t: len(t.dims))
        del t.dims[:]
        t.dims.extend([10**6, 10**6])

    def cycle(m):
        n0, k = m.graph.node[0], rng.randrange(1, len(m.graph.node))
        n0.input[0] = m.graph.node[k].output[0]

    def dangling(m):
        n = m.graph.node[rng.randrange(len(m.graph.node))]
        n.input[rng.randrange(len(n.input))] = "nothing/makes/this"

    def negative_dim(m):
        m.graph.input[0].type.tensor_type.shape.dim[-1].dim_value = -7

    def zero_dim(m):
        m.graph.input[0].type.tensor_type.shape.dim[-1].dim_value = 0

    def duplicate_output(m):
        m.graph.node[-1].output[0] = m.graph.node[0].output[0]

    def wrong_attr(m):
        n = next(n for n in m.graph.node if n.attribute)
        n.attribute[0].ints[:] = [10**9] * max(1, len(n.attribute[0].ints))
        n.attribute[0].i = -(10**9)

    for label, edit in [("huge-input", huge_input), ("huge-initializer", huge_initializer), ("cycle", cycle),
                        ("dangling-input", dangling), ("negative-dim", negative_dim), ("zero-dim", zero_dim),
                        ("duplicate-output", duplicate_output), ("wrong-attribute", wrong_attr)]:  # fmt: skip
        v = variant(label, edit)
        if v is not None:
            yield v


def _profile_mutations(text: str, rng: random.Random):
    lines = text.splitlines()
    keys = [i for i, ln in enumerate(lines) if re.match(r"^\s*[A-Za-z_][\w-]*\s*=", ln)]
    i = rng.choice(keys)
    yield f"delete:{lines[i].split('=')[0].strip()}", "\n".join(lines[:i] + lines[i + 1 :])
    nums = [i for i in keys if re.search(r"=\s*-?[\d.]+\s*(#.*)?$", lines[i])]
    if nums:
        i = rng.choice(nums)
        key = lines[i].split("=")[0]
        for label, val in [("string", '"fast"'), ("huge", "1e308"), ("negative", "-12"), ("zero", "0"),
                           ("nan", "nan"), ("list", "[1, 2]"), ("bigint", str(10**30))]:  # fmt: skip
            yield f"{label}:{key.strip()}", "\n".join(lines[:i] + [f"{key}= {val}"] + lines[i + 1 :])
    j = rng.choice(keys)
    yield "unknown-key", "\n".join(lines[: j + 1] + ["frobnicate_factor = 3"] + lines[j + 1 :])


def mutants(seed: int, n: int):
    """Up to ``n`` (kind, label, suffix, payload) mutants, deterministic for ``seed``."""
    rng = random.Random(seed)
    pool = []
    for name in MODELS:
        if not (SAMPLES / name).exists():
            continue
        data = (SAMPLES / name).read_bytes()
        suffix = Path(name).suffix
        for label, b in _bytes_mutations(data, rng):
            pool.append(("model", f"{name}:{label}", suffix, b))
        if suffix == ".onnx":
            for label, b in _onnx_mutations(data, rng):
                pool.append(("model", f"{name}:{label}", suffix, b))
    for prof in sorted(PROFILES.glob("*.toml")):
        for label, t in _profile_mutations(prof.read_text(), rng):
            pool.append(("profile", f"{prof.name}:{label}", ".toml", t.encode()))
    rng.shuffle(pool)
    while len(pool) < n:  # more random byte mutants to reach n
        name = rng.choice(MODELS)
        data = (SAMPLES / name).read_bytes()
        label, b = rng.choice(list(_bytes_mutations(data, rng)))
        pool.append(("model", f"{name}:{label}", Path(name).suffix, b))
    return pool[:n]


# ---------------------------------------------------------------------------------------------
# running one mutant in a forked child


def _child(kind: str, path: str) -> dict:
    import npukit

    try:
        if kind == "model":
            study = npukit.Study(path, "arm-dsp-dla")
        else:
            study = npukit.Study(SAMPLES / "digits_cnn.onnx", npukit.load_soc(path))
        _ = study.placement, study.totals
        return {"status": "ok"}
    except npukit.NpukitError as e:
        msg = str(e)
        return {"status": "clear" if msg and "\n" not in msg else "other", "type": type(e).__name__, "message": msg}
    except BaseException as e:  # noqa: BLE001 - exactly what the fuzzer looks for
        return {"status": "other", "type": type(e).__name__, "message": str(e)[:300]}


def run_one(kind: str, suffix: str, payload: bytes, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mutant" + suffix)
        with open(path, "wb") as f:
            f.write(payload)
        r, w = os.pipe()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # child
            os.close(r)
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
                res = _child(kind, path)
            except BaseException as e:  # noqa: BLE001
                res = {"status": "other", "type": type(e).__name__, "message": str(e)[:300]}
            os.write(w, json.dumps(res).encode())
            os._exit(0)
        os.close(w)
        chunks, status = [], None
        deadline = t0 + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(r)
                return {"status": "hang", "seconds": timeout}
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        res = json.loads(b"".join(chunks) or b'{"status": "other", "type": "crash"}')
        if status != 0 and res.get("type") == "crash":
            res["message"] = f"child exited with status {status}"
        res["seconds"] = round(time.monotonic() - t0, 2)
        return res


def preload() -> None:
    """Import what every mutant needs once, before forking."""
    import npukit
    import npukit.tvm as T

    T.load()
    import onnx  # noqa: F401
    import tflite  # noqa: F401

    from npukit.tvm.frontends import onnx as _o  # noqa: F401

    try:  # .pt2 mutants need torch; importing it once here keeps every child fast
        import torch  # noqa: F401
        from tvm.relax.frontend.torch import exported_program_translator  # noqa: F401

        from npukit.tvm.frontends import torch as _p  # noqa: F401
    except ImportError:
        pass

    npukit.Study(SAMPLES / "digits_cnn.onnx", "arm-dsp-dla").placement  # noqa: B018 - warm every lazy import


def fuzz(seed: int = 0, n: int = 100, timeout: float = 10.0) -> dict:
    preload()
    counts = {"mutants": 0, "successes": 0, "clear_errors": 0, "other_exceptions": 0, "hangs": 0}
    bad: list[dict] = []
    slowest = 0.0
    for kind, label, suffix, payload in mutants(seed, n):
        res = run_one(kind, suffix, payload, timeout)
        counts["mutants"] += 1
        key = {"ok": "successes", "clear": "clear_errors", "hang": "hangs"}.get(res["status"], "other_exceptions")
        counts[key] += 1
        slowest = max(slowest, res.get("seconds", 0.0))
        if key in ("other_exceptions", "hangs"):
            bad.append({"mutant": label, **res})
    return {**counts, "slowest_s": slowest, "seed": seed, "bad": bad[:20]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    print(json.dumps(fuzz(a.seed, a.n, a.timeout), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
