"""One generated C function body and the tensor copies it reads and writes (no tvm).

``Fn`` is one C function of the program: an offloaded partition's wrapper, or a host function that
runs npukit's reference kernels; it declares tensor descriptors over the arena and holds the
statements, with data pointers resolved once the memory plan is made.  ``Copy`` is one tensor's
buffer on one processor (in the arena, or bound to the model's inputs / outputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .names import Names, comment
from .storage import Format

if TYPE_CHECKING:
    from .program import Program


@dataclass
class Copy:
    key: tuple[str, str, str]  # (tensor id, processor, tag: "" main copy, "k" kernel scratch, "m" model view)
    fmt: Format
    bound: str = ""  # a C pointer expression when not in the arena (inputs->x, outputs->y)
    uses: list[int] = field(default_factory=list)




class Fn:
    """One generated C function body: tensor descriptors over the arena, then statements."""

    def __init__(self, prog: Program, where: str, lib: str, arena: str):
        self.p, self.where, self.lib, self.arena = prog, where, lib, arena
        self.names = Names(reserved=("st", "arena", "inputs", "outputs"))
        self.decls: dict[str, tuple] = {}  # var -> ("copy", key, view) | ("const", symbol, dtype, shape)
        self.by_key: dict[tuple, str] = {}
        self.body: list[str] = []
        self.after: list[str] = []
        self.kernel: set[int] = set()  # op ids of the kernel being lowered
        self.writes: set[str] = set()  # tensors the op being lowered writes
        self.refs: list[tuple] = []  # copies whose data pointers the body names (see ``data``)
        self.op: int | None = None  # the op being lowered: its calls carry an "[op N]" marker

    def var(self, role: str) -> str:
        return self.names.ident(role)

    def line(self, s: str) -> None:
        self.body.append(s)

    def _copy(self, tid: str) -> Copy:
        g = self.p.g
        t = g.tensors[tid]
        internal = t.producer is not None and t.producer in self.kernel and (
            tid not in self.writes or all(c in self.kernel for c in g.consumers(tid)) and tid not in g.outputs)
        if internal and not self.p.escapes(tid, self.kernel):
            return self.p.scratch(tid, self.where)
        return self.p.copies[(tid, self.where, "")]

    def desc(self, tid: str, view: str = "model") -> str:
        c = self._copy(tid)
        self.p.use(c)
        if view == "model" and not c.fmt.model_view_ok:
            m = self.p.model_view(c)
            self.p.use(m)
            # the same buffer seen two ways: (N, C, H, W) in the model's layout for the conversion,
            # the model's own shape row-major for the op
            src, conv = self._decl(c, "spatial"), self._decl(m, "spatial")
            if tid in self.writes:
                self.after.append(self._call_line(f"{self.lib}_layout_convert", [conv, src], "back to the kernel layout"))
            else:
                self.body.append(self._call_line(f"{self.lib}_layout_convert", [src, conv], "to the model's axis order"))
            return self._decl(m, "model")
        return self._decl(c, view)

    def data(self, tid: str) -> str:
        """A C expression of a tensor's data pointer (resolved when rendering: offsets come from the
        memory plan, made after every use is known)."""
        c = self._copy(tid)
        self.p.use(c)
        self.refs.append(c.key)
        return f"@@data{len(self.refs) - 1}@@"

    def resolve(self, text: str) -> str:
        for k, key in enumerate(self.refs):
            text = text.replace(f"@@data{k}@@", self.p.data_expr(self.p.copies[key], self.arena))
        return text

    def render_body(self) -> list[str]:
        return [self.resolve(ln) for ln in self.body]

    def _decl(self, c: Copy, view: str) -> str:
        k = (c.key, view)
        v = self.by_key.get(k)
        if v is None:
            v = self.by_key[k] = self.names.ident("t", c.key[0] + "_" + c.key[2])
            self.decls[v] = ("copy", c.key, view)
        return "&" + v

    def const_desc(self, sym: str, dtype: str, shape) -> str:
        k = ("const", sym, dtype, tuple(shape))
        v = self.by_key.get(k)
        if v is None:
            v = self.by_key[k] = self.names.ident("k", sym)
            self.decls[v] = ("const", sym, dtype, tuple(shape))
        return "&" + v

    def workspace(self, size_expr: str, nbytes: int) -> str:
        c = self.p.workspace_copy(self.where, nbytes)
        self.p.use(c)
        self.refs.append(c.key)
        return f"(void *)(@@data{len(self.refs) - 1}@@)"

    def _call_line(self, fname: str, args, note: str) -> str:
        return f"/* {comment(note)} */\n    if ((st = {fname}({', '.join(args)})) != 0) return st;"

    def call(self, fname: str, *args, note: str = "") -> None:
        if self.op is not None:
            note = f"[op {self.op}] {note}"
        self.body.append(self._call_line(fname, args, note))
        self.body += self.after
        self.after = []

    # -- rendering -----------------------------------------------------------------------------
    def render_decls(self) -> list[str]:
        out = []
        L = self.lib
        for v, d in self.decls.items():
            if d[0] == "const":
                _, sym, dtype, shape = d
                shp = tuple(shape) or ()
                out.append(f"{L}_tensor {v} = {{(void *){sym}, {L.upper()}_{dtype}, {len(shp)}, {_dims(shp)}, "
                           f"{L.upper()}_ROW_MAJOR, 1, 1.0f, 0}};")  # fmt: skip
                continue
            _, key, view = d
            c = self.p.copies[key]
            f = c.fmt
            if view == "model" or not f.spatial:
                shape, layout, block = f.model_shape, "ROW_MAJOR", 1
            else:
                shape, layout, block = f.shape, f.layout, f.block
            out.append(f"{L}_tensor {v} = {{(void *)({self.p.data_expr(c, self.arena)}), {L.upper()}_{f.dtype}, "
                       f"{len(shape)}, {_dims(shape)}, {L.upper()}_{layout}, {block}, {_float(f.scale)}, {f.zero}}};"
                       f"  /* {comment(self.p.label(key[0]))} */")  # fmt: skip
        return out


def _dims(shape) -> str:
    return "{" + ", ".join(str(int(d)) for d in shape) + "}" if shape else "{0}"


def _float(x: float) -> str:
    import numpy as np  # noqa: PLC0415

    return f"{float(np.float32(x))!r}f"
