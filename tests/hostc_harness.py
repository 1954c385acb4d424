"""Test harness for host C: write a HostC export plus a tiny main() that runs the kernels in group
order on given samples, compile it with a real compiler, run it (natively or under qemu) and read
the printed tensors back.  Everything is real: gcc / cross gcc / qemu, no mocks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"]
M7 = ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"]


def _cname(tid: str) -> str:
    return "b_" + tid.replace(".", "_")


def _lit(v, dtype: str) -> str:
    if dtype == "float32":
        return float(np.float32(v)).hex() + "f"
    if dtype == "float64":
        return float(v).hex()
    if dtype == "bool":
        return "1" if v else "0"
    if dtype == "int64":
        iv = int(v)
        return "(-9223372036854775807LL - 1)" if iv == -(2**63) else f"{iv}LL"
    return str(int(v))


def _array(values: np.ndarray, dtype: str) -> str:
    flat = np.asarray(values).reshape(-1)
    rows = [", ".join(_lit(x, dtype) for x in flat[i : i + 8]) for i in range(0, len(flat), 8)]
    return "{\n  " + ",\n  ".join(rows) + "\n}" if rows else "{0}"


def write_project(hc, graph, out: Path, feeds: dict[str, np.ndarray], outputs: list[str]) -> Path:
    """Write ``hc.files`` and ``main.c`` into ``out``.

    ``feeds[tid]`` is an array [N, *shape] of per-sample values for every tensor no kernel
    produces (model inputs, outputs of ops left to someone else); constants come from
    ``graph.consts``.  main() runs every kernel of every sample and prints ``tid v v v ...``
    lines for ``outputs`` (floats as %.9g, which round-trips float32)."""
    from npukit.tvm.hostc_emit import c_type

    out.mkdir(parents=True, exist_ok=True)
    for rel, text in hc.files.items():
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    kernels = [k for k in hc.kernels if k is not None]
    tids = sorted({p.tid for k in kernels for p in k.params} | set(outputs) | set(feeds))
    n = len(next(iter(feeds.values())))
    lines = ["#include <stdbool.h>", "#include <stdint.h>", "#include <stdio.h>", "#include <string.h>",
             f'#include "{hc.prefix}.h"', ""]  # fmt: skip
    for t in tids:
        tt = graph.tensors[t]
        ct, size = c_type(tt.dtype), max(tt.size, 1)
        if tt.kind == "const":
            lines.append(f"static const {ct} {_cname(t)}[{size}] = {_array(graph.consts[t], tt.dtype)};")
        else:
            lines.append(f"static {ct} {_cname(t)}[{size}];")
        if t in feeds:
            lines.append(f"static const {ct} feed_{_cname(t)}[{n}][{size}] = {{")
            lines += [_array(feeds[t][s], tt.dtype) + "," for s in range(n)]
            lines.append("};")
    lines += ["", "int main(void) {", f"  for (int s = 0; s < {n}; s++) {{"]
    for t in sorted(feeds):
        lines.append(f"    memcpy({_cname(t)}, feed_{_cname(t)}[s], sizeof({_cname(t)}));")
    for k in kernels:
        args = ", ".join(_cname(p.tid) for p in k.params)
        lines += [f"    if ({k.symbol}({args}) != 0) {{",
                  f'      printf("error {k.symbol} %s\\n", {hc.prefix}_last_error());',
                  "      return 1;", "    }"]  # fmt: skip
    for t in outputs:
        tt = graph.tensors[t]
        if "float" in tt.dtype:
            fmt, cast = "%.9g", "(double)"
        else:
            fmt, cast = "%lld", "(long long)"
        lines += [f'    printf("{t}");', f"    for (int i = 0; i < {max(tt.size, 1)}; i++) "
                  f'printf(" {fmt}", {cast}{_cname(t)}[i]);', '    printf("\\n");']  # fmt: skip
    lines += ["  }", "  return 0;", "}", ""]
    (out / "main.c").write_text("\n".join(lines))
    return out


def build(hc, out: Path, cc: str = "gcc", extra: tuple[str, ...] = (), name: str = "prog") -> Path:
    """Compile every C file of the export plus main.c into ``out/name`` (link with -lm)."""
    srcs = [str(out / f) for f in hc.c_files] + [str(out / "main.c")]
    exe = out / name
    cmd = [
        cc,
        *FLAGS,
        *extra,
        *(f"-I{out / d}" for d in hc.include_dirs),
        f"-I{out}",
        *srcs,
        "-o",
        str(exe),
        *(f"-l{lib}" for lib in hc.libs),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-4000:]}"
    return exe


def compile_only(hc, out: Path, cc: str, extra: tuple[str, ...] = ()) -> None:
    """``-c`` every C file of the export (no main, no link): the bare-metal check."""
    for f in hc.c_files:
        cmd = [cc, *FLAGS, *extra, *(f"-I{out / d}" for d in hc.include_dirs), "-c", str(out / f),
               "-o", str(out / (Path(f).stem + ".o"))]  # fmt: skip
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-4000:]}"


def run(exe: Path, graph, outputs: list[str], runner: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Run the program; returns tid -> array [N, *shape] in the tensor's dtype."""
    p = subprocess.run([*runner, str(exe)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    got: dict[str, list] = {t: [] for t in outputs}
    for line in p.stdout.splitlines():
        tid, *vals = line.split()
        tt = graph.tensors[tid]
        dtype = np.dtype(tt.dtype)
        got[tid].append(
            np.array([float(v) if dtype.kind == "f" else int(v) for v in vals]).astype(dtype).reshape(tt.shape)
        )
    return {t: np.stack(v) for t, v in got.items()}


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def vm_values(mod, graph, samples: list[list[np.ndarray]]) -> dict[str, np.ndarray]:
    """Every op output of the tagged module, computed by TVM itself (``tvm.compile`` with the
    default CPU pipeline + ``relax.VirtualMachine``) for each sample (a list of model inputs):
    tid -> array [N, *shape]."""
    import tvm
    from tvm import relax

    from npukit.tvm.importers import op_id_of_span

    f = relax.transform.ToNonDataflow()(mod)["main"]
    outs, tids = [], []
    for blk in f.body.blocks:
        for b in blk.bindings:
            i = op_id_of_span(getattr(b.value, "span", None))
            if i is not None:
                outs.append(b.var)
                tids.append(graph.ops[i].outputs)
    res = relax.Tuple(outs)
    body = relax.SeqExpr(f.body.blocks, res)
    ret = relax.TupleType([v.ty for v in outs])
    m = tvm.IRModule({"main": relax.Function(f.params, body, ret).with_attr("global_symbol", "main")})
    target = tvm.target.Target({"kind": "llvm"})
    ex = tvm.compile(m, target=target, relax_pipeline=relax.get_default_pipeline(target))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    got: dict[str, list] = {}
    for arrays in samples:
        res = vm["main"](*[tvm.runtime.tensor(np.asarray(a)) for a in arrays])
        for r, ts in zip(res, tids, strict=True):
            vals = [r[k] for k in range(len(ts))] if len(ts) > 1 else [r]
            for t, v in zip(ts, vals, strict=True):
                got.setdefault(t, []).append(v.numpy())
    return {t: np.stack(v) for t, v in got.items()}


# Cortex-M7 firmware for qemu-system-arm -M mps2-an500 (code at 0x0, RAM at 0x20000000; newlib's
# rdimon crt0 zeroes .bss and calls main; printf goes to the host through semihosting)
_STARTUP = """#include <stdint.h>
extern uint32_t __StackTop;
extern void _start(void);
void Reset_Handler(void);
static void Default_Handler(void) {
  for (;;) {
  }
}
__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(&__StackTop), Reset_Handler, Default_Handler, Default_Handler, Default_Handler,
    Default_Handler, Default_Handler, 0, 0, 0, 0, Default_Handler, Default_Handler, 0, Default_Handler,
    Default_Handler};
void Reset_Handler(void) {
  volatile uint32_t* cpacr = (volatile uint32_t*)0xE000ED88u;
  *cpacr |= (0xFu << 20); /* CP10 / CP11 full access: the FPU, before any hard-float code */
  __asm volatile("dsb\\n isb");
  _start();
}
"""
_LDSCRIPT = """MEMORY {
  FLASH (rx) : ORIGIN = 0x00000000, LENGTH = 4M
  RAM (rwx)  : ORIGIN = 0x20000000, LENGTH = 4M
}
ENTRY(Reset_Handler)
SECTIONS {
  .text : {
    KEEP(*(.vectors))
    *(.text*)
    KEEP(*(.init)) KEEP(*(.fini))
    *(.rodata*)
    . = ALIGN(4);
    __preinit_array_start = .; KEEP(*(.preinit_array)) __preinit_array_end = .;
    __init_array_start = .; KEEP(*(SORT(.init_array.*))) KEEP(*(.init_array)) __init_array_end = .;
    __fini_array_start = .; KEEP(*(SORT(.fini_array.*))) KEEP(*(.fini_array)) __fini_array_end = .;
  } > FLASH
  .ARM.exidx : { *(.ARM.exidx* .gnu.linkonce.armexidx.*) } > FLASH
  .data : { *(.data*) } > RAM
  .bss (NOLOAD) : { __bss_start__ = .; *(.bss*) *(COMMON) . = ALIGN(4); __bss_end__ = .; } > RAM
  . = ALIGN(8);
  end = .; __end__ = .;
  __StackTop = ORIGIN(RAM) + LENGTH(RAM);
  __stack = __StackTop;
}
"""


def build_m7_firmware(hc, out: Path) -> Path:
    """The export + main.c as Cortex-M7 firmware (hard float, semihosting printf)."""
    (out / "startup.c").write_text(_STARTUP)
    (out / "fw.ld").write_text(_LDSCRIPT)
    srcs = [str(out / f) for f in hc.c_files] + [str(out / "main.c"), str(out / "startup.c")]
    exe = out / "fw.elf"
    cmd = ["arm-none-eabi-gcc", *FLAGS, *M7, "--specs=rdimon.specs", *(f"-I{out / d}" for d in hc.include_dirs),
           f"-I{out}", "-T", str(out / "fw.ld"), *srcs, "-o", str(exe), *(f"-l{lib}" for lib in hc.libs)]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stderr[-4000:]}"
    return exe


QEMU_M7 = ("qemu-system-arm", "-M", "mps2-an500", "-nographic", "-semihosting", "-kernel")
