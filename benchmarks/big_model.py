"""A ~10,000-op model for benchmarks only, generated on demand (never committed: ~12 MB).

The 40-layer transformer encoder of ``sample_models/make_transformer.py`` (29 Relax ops per layer)
repeated to 345 layers: 10,006 Relax ops after import.  Written once to
``benchmarks/.cache/transformer_10k.onnx`` (deterministic: the same seeded weights every time).

    python benchmarks/big_model.py        # prints the path
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(__file__).resolve().parent / ".cache"
LAYERS = 345


def path(layers: int = LAYERS) -> Path:
    out = CACHE / f"transformer_{layers}l.onnx"
    if out.exists():
        return out
    import onnx  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("make_transformer", ROOT / "sample_models" / "make_transformer.py")
    mt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mt)
    mt.N_LAYERS = layers
    model = mt.build()
    CACHE.mkdir(exist_ok=True)
    tmp = out.with_suffix(".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(out)
    return out


if __name__ == "__main__":
    print(path(int(sys.argv[1]) if len(sys.argv) > 1 else LAYERS))
