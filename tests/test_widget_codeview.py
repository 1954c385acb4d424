"""The Code tab's pure helpers (npukit.ui.codeview): the line diff against the previous version, the
statement under an [op N] marker, the cut of a long file, and the build report as rows.  No TVM, no
widget, no browser."""

from __future__ import annotations

import difflib

from npukit.ui import codeview as cv


def lines(*xs: str) -> str:
    return "".join(x + "\n" for x in xs)


def test_no_previous_version_marks_nothing():
    assert cv.line_diff(None, lines("a", "b")) == {"changed": [], "removed": [], "added_file": False}


def test_changed_and_removed_lines_are_difflibs():
    old = lines("a", "b", "c", "d", "e", "f")
    new = lines("a", "B", "c", "e", "f", "g")
    d = cv.line_diff(old, new)
    # b -> B (replace), d removed, g inserted
    assert d["changed"] == [2, 6]
    assert d["removed"] == [[1, ["b"], 0], [3, ["d"], 0]]
    assert cv.line_diff(old, old) == {"changed": [], "removed": [], "added_file": False}
    assert cv.line_diff(old, "")["removed"] == [[0, ["a", "b", "c", "d", "e", "f"], 0]]
    assert cv.line_diff("", new)["changed"] == [1, 2, 3, 4, 5, 6]


def test_common_ends_then_difflib_gives_the_same_lines_as_difflib_alone():
    old = [f"line {i}" for i in range(300)]
    new = old[:40] + ["new A", "new B"] + old[40:120] + old[125:250] + ["tail"] + old[250:]
    d = cv.line_diff("\n".join(old), "\n".join(new))
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    want = [j + 1 for tag, _, _, j1, j2 in sm.get_opcodes() if tag != "equal" for j in range(j1, j2)]
    assert d["changed"] == want == [41, 42, 248]
    assert d["removed"] == [[122, old[120:125], 0]]


def test_removed_lines_are_capped_and_counted():
    old = lines(*[f"x{i}" for i in range(100)])
    d = cv.line_diff(old, lines("x0", "x99"))
    ((after, shown, more),) = d["removed"]
    assert after == 1 and shown == [f"x{i}" for i in range(1, 1 + cv.MAX_REMOVED)] and more == 98 - cv.MAX_REMOVED


def test_a_huge_changed_block_is_marked_whole():
    n = cv.MAX_DIFF_LINES
    old = lines("head", *[f"a{i}" for i in range(n)], "tail")
    new = lines("head", *[f"b{i}" for i in range(n)], "tail")
    d = cv.line_diff(old, new)
    assert d["changed"] == list(range(2, n + 2))
    assert d["removed"][0][0] == 1 and len(d["removed"][0][1]) == cv.MAX_REMOVED


def test_statement_under_a_marker():
    src = [
        "    /* [ops 7] kernel dla.reshape: /flatten/Flatten */",  # 1
        "    /* to the model's axis order */",  # 2
        "    if ((st = nvdla_layout_convert(&t_t6, &t_t6_m)) != 0) return st;",  # 3
        "    /* [op 7] /flatten/Flatten (reshape) */",  # 4
        "    if ((st = nvdla_reshape(&t_t6_m_2,",  # 5
        "                            &t_t7)) != 0) return st;",  # 6
        "    /* [ops 13] kernel dsp.softmax: /softmax/Softmax */",  # 7
        "    /* [op 13] /softmax/Softmax (softmax) */",  # 8
        "    if ((st = xi_dsp_softmax(&t_t12, &t_t13, 1)) != 0) return st;",  # 9
        "    x = f(y); /* [op 2] trailing marker */",  # 10
        "    /* [op 3] before a block */",  # 11
        "    }",  # 12
    ]
    assert list(cv.statement_after(src, 1)) == [2, 3]
    assert list(cv.statement_after(src, 4)) == [5, 6]
    assert list(cv.statement_after(src, 7)) == []  # the next line is another marker
    assert list(cv.statement_after(src, 8)) == [9]
    assert list(cv.statement_after(src, 10)) == []  # the marker is on the statement itself
    assert list(cv.statement_after(src, 11)) == []
    assert list(cv.statement_after(src, 99)) == []


def test_a_long_file_is_cut_at_a_line_end():
    text = "".join(f"{i:07d}\n" for i in range(cv.MAX_TEXT // 8 + 10))
    cut, truncated = cv._cut(text)
    assert truncated and len(cut) <= cv.MAX_TEXT and cut.endswith("\n") and text.startswith(cut)
    assert cv._cut("short\n") == ("short\n", False)


def test_build_report_as_rows():
    report = {
        "directory": "/tmp/x",
        "samples": 4,
        "runs": {
            "host": {"outputs": {"y": {"max_abs": 0.0, "max_rel": 0.0, "argmax_agreement": 1.0}}},
            "cortex-m7-mps2": {
                "outputs": {"y": {"max_abs": 0.5, "max_rel": 0.2, "argmax_agreement": 0.75}},
                "bit_exact_with_host": False,
            },
            "riscv64-linux": {"skipped": "qemu-riscv64: not installed"},
        },
        "memory": {"arena_bytes": 2048, "lower_bound_bytes": 1024, "weight_bytes": 100, "note": "x"},
        "sections": {"text": 10, "bss": 2048, "sections": {".text": 10}},
        "fit": {"sram_over": True},
    }
    v = cv.build_view(report)
    assert v["state"] == "differs" and v["samples"] == 4
    host, m7, rv = v["runs"]
    assert (host["kind"], host["verdict"]) == ("exact", "bit-exact with the simulation")
    assert m7["kind"] == "differs" and m7["host"] == "DIFFERS from the host build"
    # a difference the host code's C library calls explain is said so, and is no failure
    exact = {"outputs": {"y": {"max_abs": 0.0, "max_rel": 0.0, "argmax_agreement": 1.0}}}
    near = {"runs": {"host": exact, "aarch64-linux": {**exact, "bit_exact_with_host": False,
                                                      "host_difference": {"explained": True, "max_ulp": 2, "libm": ["erff", "expf"]}}}}  # fmt: skip
    w = cv.build_view(near)
    assert w["state"] != "differs"
    assert w["runs"][1]["host"] == "within 2 ulp of the host build (the C libraries' erff, expf)"
    assert m7["verdict"] == "differs from the simulation (top-1 agreement 75%, max error 20.00% of the largest value)"
    assert rv == {
        "name": "riscv64-linux",
        "kind": "skipped",
        "verdict": "not run: qemu-riscv64: not installed",
        "outputs": [],
    }
    assert v["memory"] == [
        ["arena_bytes", "arena (working memory)", 2048],
        ["lower_bound_bytes", "lower bound (live tensors at the peak)", 1024],
        ["weight_bytes", "weights (constant memory)", 100],
    ]
    assert v["sections"] == [["text", "text", 10], ["bss", "bss", 2048]]
    assert v["extra"] == {} and v["fit"] == []  # a fit without figures shows nothing
    close = cv.build_view(
        {"runs": {"host": {"outputs": {"y": {"max_abs": 1e-4, "max_rel": 1e-4, "argmax_agreement": 1.0}}}}}
    )
    assert close["state"] == "ok" and close["runs"][0]["kind"] == "close"
    assert close["runs"][0]["verdict"] == "matches the simulation (same top-1, max error 0.01% of the largest value)"


def test_definitions_skip_declarations():
    src = [
        "int32_t npk_host_0(const float* in0, float* out0);",
        "int32_t __tvm_ffi_npk_host_0_f0(void* self_handle);",
        "/* npk_host_0: ops #3 conv2d */",
        "int32_t npk_host_0(const float* in0, float* out0) {",
        "  rc = npk_host_0(a, b);",
    ]
    defs = cv.definitions(src)
    assert defs["npk_host_0"] == 4 and "npk_host" not in defs and "__tvm_ffi_npk_host_0_f0" not in defs
    assert cv.definitions(["static inline int32_t *f(int x) {", "int g(void)", "{"]) == {"f": 1, "g": 2}


def test_file_tree_says_what_the_last_edit_did():
    prev = {"a.c": "x\n", "b.c": "y\n", "gone.c": "z\n"}
    files = {"a.c": "x\n", "b.c": "y2\n", "new/c.c": "w\nv\n"}
    assert cv.file_tree(files, prev) == [
        {"path": "a.c", "bytes": 2, "lines": 1, "change": ""},
        {"path": "b.c", "bytes": 3, "lines": 1, "change": "changed"},
        {"path": "gone.c", "bytes": 0, "lines": 0, "change": "removed"},
        {"path": "new/c.c", "bytes": 4, "lines": 2, "change": "added"},
    ]
    assert [e["change"] for e in cv.file_tree(files, None)] == ["", "", ""]


def test_fit_rows_from_memfit():
    from npukit.codegen.memfit import fit_report

    sizes = {"text": 40_000, "rodata": 20_000, "data": 1_000, "bss": 300_000, "heap": 0, "stack": 4_096}
    fit = fit_report(sizes, flash_bytes=2 * 1024 * 1024, sram_bytes=256 * 1024)
    rows = cv.fit_rows("cortex-m7-mps2", fit)
    assert rows == [
        {"run": "cortex-m7-mps2", "memory": "flash", "used": 61_000, "budget": 2_097_152, "over": False,
         "text": "2.9% · 2,036,152 B free"},
        {"run": "cortex-m7-mps2", "memory": "sram", "used": 305_096, "budget": 262_144, "over": True,
         "text": "116.4% · OVER by 42,952 B"},
    ]  # fmt: skip
    v = cv.build_view(
        {
            "runs": {
                "host": {"outputs": {"y": {"max_abs": 0.0}}},
                "cortex-m7-mps2": {"outputs": {"y": {"max_abs": 0.0}}, "fit": fit},
            }
        }
    )
    assert v["fit"] == rows and v["state"] == "over_budget"  # never shown as a plain success
