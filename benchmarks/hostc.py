"""Host C generation time with every op on the host (npukit.tvm.hostc.host_kernels).

For each model: the import, a cold generation (empty lowering cache) with one group per op and
with the default chains, a warm regeneration of the same groups, and an "edit" that takes one
group off the host (every other group comes from the cache).  Prints one JSON document.

    python benchmarks/hostc.py [--repeat 3]
"""

from __future__ import annotations

import argparse

from _common import SAMPLES, emit, summary, timed

from npukit.tvm import hostc
from npukit.tvm.importers import import_model


def bench(model: str, repeat: int) -> dict:
    holder = {}
    t_import = timed(lambda: holder.setdefault("imp", import_model(SAMPLES / model)))
    imp = holder["imp"]
    g = imp.graph
    out = {"model": model, "ops": len(g.ops), "import_s": round(t_import, 3)}
    for name, groups in (("per_op", [(i,) for i in range(len(g.ops))]), ("chains", hostc.chain_groups(g))):
        cold, warm, edit = [], [], []
        for _ in range(repeat):
            hostc.cache_clear()
            cold.append(timed(lambda groups=groups: hostc.host_kernels(imp.mod, g, groups)))
            lowered = hostc.cache_info()["misses"]
            warm.append(timed(lambda groups=groups: hostc.host_kernels(imp.mod, g, groups)))
            edit.append(timed(lambda groups=groups: hostc.host_kernels(imp.mod, g, groups[1:])))
        hc = hostc.host_kernels(imp.mod, g, groups)
        out[name] = {"groups": len(groups), "distinct_lowerings": lowered, "cold": summary(cold),
                     "warm": summary(warm), "edit_one_group_off": summary(edit),
                     "source_lines": hc.source.count("\n"), "wrapper_lines": hc.wrappers.count("\n"),
                     "workspace_bytes": hc.workspace_bytes, "unsupported": sorted(hc.unsupported)}  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    models = ["digits_cnn.onnx", "mobilenet_v1_025_int8.tflite", "tiny_detector.onnx"]
    emit({"benchmark": "hostc", "results": [bench(m, a.repeat) for m in models]})


if __name__ == "__main__":
    main()
