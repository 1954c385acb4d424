"""Design-space sweeps (issue 16): grids, rows equal to single studies, resumable Parquet output,
Pareto sets, local processes and Dask clusters (in-process, LocalCluster, `dask scheduler` + `dask
worker` from the command line), a killed run resumed."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DETECTOR, DIGITS_ONNX, ROOT, SAMPLES, assert_cli_error, onnx_model, run_cli, save_onnx, tensor_info

import npukit
from npukit.sweeps import GridError, SweepError, load_grid, pareto, pareto_mask
from npukit.sweeps.grid import COST_FIELDS, has_placement
from npukit.sweeps.lines import key_lines

MOBILENET = SAMPLES / "mobilenet_v1_025_int8.tflite"

GRID = """\
[grid]
mode = "product"
"bits.dla" = ["int8", "fp16"]
"bits.dsp" = ["int8", "int16"]
"support.dsp.softmax" = [true, false]
"pin./relu3/Relu" = ["none", "arm"]
"soc.processors.dla.macs_per_cycle.int8" = [256, 1024]
"soc.processors.dla.onchip_bytes" = [4096, 524288]
"soc.links.0.bandwidth_gbps" = 4.0
"""


SMALL = """\
[grid]
"bits.dla" = ["int8", "fp16"]
"support.dsp.softmax" = [true, false]
"soc.processors.dla.onchip_bytes" = [4096, 524288]
"placement" = "first-fit"
"""


def write(tmp_path: Path, text: str, name: str = "grid.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------------------------
# grids


def grid_error(tmp_path, body: str, model=DIGITS_ONNX) -> str:
    p = write(tmp_path, "[grid]\n" + body)
    with pytest.raises(GridError) as ei:
        g = load_grid(p)
        from npukit import pipeline as pl
        from npukit.sweeps import check_grid

        check_grid(g, pl.load(model), npukit.load_soc("arm-dsp-dla"))
    return str(ei.value).replace(str(p), "grid.toml")


@pytest.mark.parametrize("body, message", [
    ('"bitz.dla" = ["int8"]\n', "grid.toml:2: bitz.dla: unknown key; did you mean 'bits'? valid names: 'bits', 'layer_bits', 'mode', "
     "'pin', 'placement', 'samples', 'seed', 'soc', 'support' (keys are bits.<processor>, layer_bits.<node>, "
     "support.<processor>.<op>, pin.<node>, placement, soc.<profile field>)"),
    ('"bits.dla" = ["int8", "int3"]\n', "grid.toml:2: bits.dla: unknown bit-width 'int3'; did you mean 'int2', 'int4' or 'int8'? valid names: 'fp16', "
     "'fp32', 'int16', 'int2', 'int4', 'int8'"),
    ('"bits.dlaa" = ["int8"]\n', "grid.toml:2: bits.dlaa: unknown processor 'dlaa'; did you mean 'dla'? valid names: 'arm', 'dla', 'dsp'"),
    ('"bits.dla" = ["int8", "int4"]\n', "grid.toml:2: bits.dla: dla cannot run int4: processors.dla.macs_per_cycle "
     "lists int8, fp16"),
    ('mode = "prodcut"\n"bits.dla" = ["int8"]\n', "grid.toml:2: mode: unknown mode 'prodcut'; did you mean 'product'? valid names: 'list', "
     "'product', 'random'"),
    ('"support.dsp.sofmax" = [true, false]\n', "grid.toml:2: support.dsp.sofmax: unknown op 'sofmax'; closest "
     "valid names: 'softmax', 'log_softmax', 'max', 'ewise_fma', 'argmax'"),
    ('"support.arm.conv2d" = [false]\n', "grid.toml:2: support.arm.conv2d: arm is the host: it runs every op no "
     "accelerator takes; toggle an accelerator (dsp, dla)"),
    ('"support.dsp.softmax" = ["yes"]\n', "grid.toml:2: support.dsp.softmax: must be true or false, got 'yes'"),
    # an op the model lacks: every row came out alike
    ('"support.dla.sigmoid" = [true, false]\n', "grid.toml:2: support.dla.sigmoid: the model has no sigmoid op, so "
     "toggling it changes no configuration; its ops: add, conv2d, matmul, max_pool2d, relu, reshape, softmax"),
    ('"pin./conv9/Conv" = ["dla"]\n', "grid.toml:2: pin./conv9/Conv: unknown node '/conv9/Conv'; closest valid "
     "names: '/conv2/Conv', '/conv1/Conv', '/conv2/Conv/add', '/conv1/Conv/add', '/fc2/Gemm'"),
    ('"pin./conv1/Conv" = ["dla", "npu"]\n', "grid.toml:2: pin./conv1/Conv: unknown processor 'npu'; valid names: "
     "'arm', 'dla', 'dsp', 'none'"),
    ('"bits.dla" = ["int8"]\n"soc.processors.dla.clock_mz" = [800]\n', "grid.toml:3: soc.processors.dla.clock_mz: "
     "unknown processor field 'clock_mz'; closest valid names: 'clock_mhz', 'static_mw', 'vector_lanes', 'onchip_bytes'"),
    ('"soc.processors.dla.clock_mhz" = [\n  800,\n  -1,\n]\n"bits.dla" = ["int8"]\n',
     "grid.toml:2: soc.processors.dla.clock_mhz: must be a positive number, got -1"),
    ('"soc.processors.npu.clock_mhz" = [800]\n', "grid.toml:2: soc.processors.npu.clock_mhz: unknown processor "
     "'npu'; valid names: 'arm', 'dla', 'dsp'"),
    ('"soc.clock_mhz" = [800]\n', "grid.toml:2: soc.clock_mhz: unknown profile field 'clock_mhz'; valid names: "
     "'conversion', 'flash_bytes', 'host', 'links', 'placement', 'processors', 'sram_bytes', 'target'"),
    ('"soc.links.1.bandwidth_gbps" = [4.0]\n', "grid.toml:2: soc.links.1.bandwidth_gbps: links is a list of 1; "
     "index it with 0..0"),
    ('"bits.dla" = ["int8", "int8"]\n', "grid.toml:2: bits.dla: value 'int8' is listed twice"),
    # 1000 and 1000.0 are one value (they ran twice as two configurations)
    ('"soc.processors.dla.clock_mhz" = [1000, 1000.0]\n', "grid.toml:2: soc.processors.dla.clock_mhz: value 1000.0 is "
     "listed twice"),
    # a field and the table holding it: one was ignored, silently, while its column showed its values
    ('"soc.processors.dla.macs_per_cycle.int8" = [256, 2048]\n"soc.processors.dla.macs_per_cycle" = [{ int8 = 1024, '
     'fp16 = 512 }]\n', "grid.toml:2: soc.processors.dla.macs_per_cycle.int8: sets a field inside "
     "'soc.processors.dla.macs_per_cycle', which the grid also sets whole: one of the two would be ignored; keep one"),
    # one key written twice, quoted and inside a table (it was blamed on a result column)
    ('"soc.processors.dla.clock_mhz" = [500, 1000]\n[grid.soc.processors.dla]\nclock_mhz = [700]\n',
     "grid.toml:2: soc.processors.dla.clock_mhz: is set twice (once as one quoted key, once inside a table); keep one"),
    # a bad value inside an inline table: the line of the key holding it
    ('"bits.dla" = ["int8", "fp16"]\n"soc.processors.dla.macs_per_cycle" = { int8 = 0, fp16 = 128 }\n',
     "grid.toml:3: soc.processors.dla.macs_per_cycle.int8: must be a positive number, got 0"),
    ('"bits.dla" = []\n', "grid.toml:2: bits.dla: must list at least one value"),
    ('mode = "list"\n"bits.dla" = ["int8", "fp16"]\n"bits.dsp" = ["int8", "int16", "fp16"]\n',
     "grid.toml:4: bits.dsp: mode = \"list\" zips the lists: 3 values, but bits.dla has 2"),
    ('mode = "random"\nsamples = 5\n"bits.dla" = ["int8", "fp16"]\n',
     "grid.toml:3: samples: 5 samples but the grid has only 2 configurations; lower samples or use mode = \"product\""),
    ('samples = 5\n"bits.dla" = ["int8", "fp16"]\n', "grid.toml:2: samples: only mode = \"random\" takes samples "
     "(mode is 'product')"),
])  # fmt: skip
def test_grid_errors_name_the_line(tmp_path, body, message):
    assert grid_error(tmp_path, body) == message


HOST_FIELDS = ("clock_mhz, macs_per_cycle, vector_ops_per_cycle, default_bits, mac_array, vector_lanes, efficiency, "
               "reduction, onchip_bytes, dram_bytes_per_cycle, onchip_bytes_per_cycle, weight_bytes_per_cycle, "
               "weight_port, output_elems_per_cycle, layout, op_overhead_cycles, energy_pj_per_mac, energy_pj_per_op, "
               "energy_pj_per_byte, energy_pj_per_onchip_byte, static_mw")  # fmt: skip
ACCEL_FIELDS = ("clock_mhz, macs_per_cycle, vector_ops_per_cycle, default_bits, mac_array, vector_lanes, efficiency, "
                "reduction, onchip_bytes, dram_bytes_per_cycle, onchip_bytes_per_cycle, weight_bytes_per_cycle, "
                "weight_port, output_elems_per_cycle, layout, op_overhead_cycles, call_overhead_cycles, "
                "energy_pj_per_mac, energy_pj_per_op, energy_pj_per_byte, energy_pj_per_onchip_byte, static_mw, "
                "max_tensor_bytes, max_partitions, dtypes, kernel_library, kernel_api, ops")  # fmt: skip


@pytest.mark.parametrize("body, message", [
    # the host never pays a partition call: every row came out alike, silently
    ('"soc.processors.arm.call_overhead_cycles" = [0, 1000]\n',
     "grid.toml:2: soc.processors.arm.call_overhead_cycles: not a figure to sweep on the host arm: call_overhead_cycles "
     f"is paid once per call of an offloaded partition, and the host's ops are never called as one; fields to sweep "
     f"on arm: {HOST_FIELDS}"),
    ('"soc.processors.arm.max_tensor_bytes" = [4096]\n',
     "grid.toml:2: soc.processors.arm.max_tensor_bytes: not a figure to sweep on the host arm: max_tensor_bytes limits "
     f"the ops an accelerator takes; the host takes every op, so it is never checked; fields to sweep on arm: {HOST_FIELDS}"),
    ('"soc.processors.arm.kernel_library" = ["a", "b"]\n',
     "grid.toml:2: soc.processors.arm.kernel_library: not a figure to sweep on the host arm: kernel_library names the C "
     f"library an accelerator's generated calls use; the host's ops are TVM's generated C; fields to sweep on arm: {HOST_FIELDS}"),
    ('"soc.processors.dla.kind" = ["dla", "dsp"]\n',
     "grid.toml:2: soc.processors.dla.kind: not a figure to sweep on dla: kind is what the processor is (cpu, dsp, dla, "
     f"npu, gpu), not a figure: no estimate reads it; fields to sweep on dla: {ACCEL_FIELDS}"),
    ('"soc.processors.arm.kind" = ["cpu"]\n',
     "grid.toml:2: soc.processors.arm.kind: not a figure to sweep on arm: kind is what the processor is (cpu, dsp, dla, "
     f"npu, gpu), not a figure: no estimate reads it; fields to sweep on arm: {HOST_FIELDS}"),
    ('"soc.processors.dsp.host" = [false, true]\n',
     "grid.toml:2: soc.processors.dsp.host: not a figure to sweep on dsp: host says which processor is the host, the "
     f"shape of the profile, not a figure; fields to sweep on dsp: {ACCEL_FIELDS}"),
    # the profile's own words: every row came out alike but for them
    ('"soc.description" = ["a", "b"]\n',
     "grid.toml:2: soc.description: not a figure to sweep: description is free text: no estimate reads it; top-level "
     "fields to sweep: host, target, flash_bytes, sram_bytes, placement, conversion, processors, links"),
    ('"soc.name" = ["a", "b"]\n',
     "grid.toml:2: soc.name: not a figure to sweep: name names the profile: no estimate reads it; top-level fields to "
     "sweep: host, target, flash_bytes, sram_bytes, placement, conversion, processors, links"),
    ('"soc.sources.0" = ["a", "b"]\n',
     "grid.toml:2: soc.sources.0: not a figure to sweep: sources lists where the figures come from: no estimate reads "
     "it; top-level fields to sweep: host, target, flash_bytes, sram_bytes, placement, conversion, processors, links"),
    ('"soc.processors.dla.ops.conv2d.note" = ["a", "b"]\n',
     "grid.toml:2: soc.processors.dla.ops.conv2d.note: not a figure to sweep on dla: note is free text appended to the "
     "op's verdicts: no estimate reads it; sweep the op's limits, or support.dla.conv2d"),
    # a layer width no processor runs failed every row that set it, one at a time
    ('"layer_bits./conv1/Conv" = ["int8", "int2"]\n',
     "grid.toml:2: layer_bits./conv1/Conv: no processor runs int2, so layer '/conv1/Conv' cannot run at it: arm runs "
     "int8, int16, fp16, fp32; dsp runs int8, int16, fp16, fp32; dla runs int8, fp16 (processors.<name>.macs_per_cycle)"),
])  # fmt: skip
def test_grid_fields_a_processor_never_reads_are_refused(tmp_path, body, message):
    assert grid_error(tmp_path, body) == message


@pytest.mark.parametrize("body, message", [
    # each suggested a field the sweep then refuses: 'description', 'call_overhead_cycles' (on the host), 'host',
    # 'kind', and 'note' (an unknown op field's message was the profile's own: "unknown field; ... 'note'")
    ('"soc.descripton" = ["a", "b"]\n', "grid.toml:2: soc.descripton: unknown profile field 'descripton'; valid names: "
     "'conversion', 'flash_bytes', 'host', 'links', 'placement', 'processors', 'sram_bytes', 'target'"),
    ('"soc.processors.arm.call_overhead_cycle" = [0, 100]\n', "grid.toml:2: soc.processors.arm.call_overhead_cycle: "
     "unknown processor field 'call_overhead_cycle'; closest valid names: 'op_overhead_cycles', 'macs_per_cycle', "
     "'vector_ops_per_cycle', 'dram_bytes_per_cycle', 'weight_bytes_per_cycle'"),
    ('"soc.processors.dla.hst" = [true]\n', "grid.toml:2: soc.processors.dla.hst: unknown processor field 'hst'; "
     "closest valid names: 'static_mw', 'ops'"),
    ('"soc.processors.dla.kinds" = ["dla"]\n', "grid.toml:2: soc.processors.dla.kinds: unknown processor field "
     "'kinds'; closest valid names: 'dtypes', 'max_partitions'"),
    ('"soc.processors.dla.ops.conv2d.notes" = ["a"]\n', "grid.toml:2: soc.processors.dla.ops.conv2d.notes: unknown op "
     "field 'notes'; closest valid names: 'dtypes', 'strides', 'max_boxes', 'ranks', 'max_channels'"),
])  # fmt: skip
def test_unknown_field_suggestions_are_fields_to_sweep(tmp_path, body, message):
    assert grid_error(tmp_path, body) == message


def test_fields_every_processor_reads_stay_sweepable(tmp_path):
    """The accelerator-only fields on an accelerator, the figures on the host, and a layer width some
    processor runs (int16: the host and the DSP, not the DLA) pass the check."""
    from npukit import pipeline as pl
    from npukit.sweeps import check_grid

    body = ('"soc.processors.dla.call_overhead_cycles" = [0, 1000]\n"soc.processors.dsp.max_tensor_bytes" = [65536]\n'
            '"soc.processors.arm.op_overhead_cycles" = [0, 100]\n"soc.processors.arm.clock_mhz" = [800, 1600]\n'
            '"layer_bits./conv1/Conv" = ["int8", "int16"]\n"soc.processors.dla.kernel_library" = ["nvdla", "dla2"]\n')
    check_grid(load_grid(write(tmp_path, "[grid]\n" + body)), pl.load(DIGITS_ONNX), npukit.load_soc("arm-dsp-dla"))


def test_a_partition_limit_sweeps_under_the_cost_policy():
    """max_partitions moves ops under the cost placement, which holds its plans to it: one NPU call
    puts the NPU's first ops on the host, two keep the cost model's plan."""
    grid = '[grid]\n"soc.processors.npu.max_partitions" = [1, 2]\n"pin.#26" = "a53"\n'
    df = npukit.sweep(MOBILENET, "vsi-npu", grid, workers=0, progress=False)
    soc = npukit.load_soc("vsi-npu")
    lats = []
    for lim in (1, 2):
        s = npukit.Study(MOBILENET, soc.with_changes({"processors.npu.max_partitions": lim}), {"pins": {"#26": "a53"}})
        assert s.partition_limits == ()
        lats.append(s.totals["latency_us"])
    assert df["latency_us"].tolist() == lats and lats[0] > lats[1]
    assert df["partitions"].tolist() == [2, 3]


def test_the_host_reads_none_of_the_accelerator_only_fields():
    """What the grid refuses on the host changes no figure and no generated line of a study."""
    from npukit.soc.schema import ACCELERATOR_ONLY

    soc = npukit.load_soc("arm-dsp-dla")
    base = npukit.Study(DIGITS_ONNX, soc)
    changes = {"call_overhead_cycles": 123456, "max_tensor_bytes": 16, "dtypes": ["int8"], "kernel_library": "zz",
               "kernel_api": "cmsis-nn", "max_partitions": 1}  # fmt: skip
    assert set(changes) == set(ACCELERATOR_ONLY) - {"ops"}  # (an ops table on the host is refused by the loader)
    changed = npukit.Study(DIGITS_ONNX, soc.with_changes({f"processors.arm.{k}": v for k, v in changes.items()}))
    assert changed.totals == base.totals
    assert changed.placement.equals(base.placement)
    profile = {"profile.toml", "manifest.json"}  # (the project carries the profile it was made from)
    assert {k: v for k, v in changed.code.items() if k not in profile} == {k: v for k, v in base.code.items() if k not in profile}


def test_grid_placement_key(tmp_path):
    if has_placement():
        assert grid_error(tmp_path, '"placement" = ["cost", "fastest"]\n').startswith(
            "grid.toml:2: placement: unknown placement 'fastest'; ")
    else:
        assert grid_error(tmp_path, '"bits.dla" = ["int8"]\n"placement" = ["cost", "first-fit"]\n') == (
            "grid.toml:3: placement: this npukit has no placement policy yet (Config has no 'placement' field); "
            "remove the key")


def test_grid_file_level_errors(tmp_path):
    p = write(tmp_path, "[grids]\n'bits.dla' = ['int8']\n")
    with pytest.raises(GridError, match=r"grid.toml:1: grids: unknown table; a grid file has one table, \[grid\]"):
        load_grid(p)
    with pytest.raises(GridError, match="no such grid file"):
        load_grid(tmp_path / "missing.toml")
    with pytest.raises(GridError, match="not valid TOML"):
        load_grid(write(tmp_path, "[grid]\nbits.dla = [\n"))


def test_key_lines_bare_quoted_and_tables():
    text = ('# a comment = 1\n[grid]\nmode = "product"  # trailing = comment\nbits.dla = ["int8",\n "fp16"]\n'
            '"pin./softmax/Softmax" = ["dsp"]\n[grid.soc.processors.dla]\nclock_mhz = [800, 1000]\n'
            "'onchip_bytes' = { x = 1 }\n")  # fmt: skip
    lines = key_lines(text)
    assert lines["grid.mode"] == 3 and lines["grid.bits.dla"] == 4 and lines["grid.pin./softmax/Softmax"] == 6
    assert lines["grid.soc.processors.dla.clock_mhz"] == 8 and lines["grid.soc.processors.dla.onchip_bytes"] == 9
    g = load_grid(text.replace("'onchip_bytes' = { x = 1 }\n", ""))
    assert [a.key for a in g.axes] == ["bits.dla", "pin./softmax/Softmax", "soc.processors.dla.clock_mhz"]
    assert [a.line for a in g.axes] == [4, 6, 8]


def test_grid_modes():
    base = '"bits.dla" = ["int8", "fp16"]\n"bits.dsp" = ["int8", "int16", "fp16"]\n"soc.processors.dla.clock_mhz" = 800\n'
    g = load_grid("[grid]\n" + base)
    assert len(g) == 6 and g.points()[:4] == [("int8", "int8", 800), ("int8", "int16", 800), ("int8", "fp16", 800),
                                             ("fp16", "int8", 800)]  # fmt: skip
    g = load_grid('[grid]\nmode = "list"\n"bits.dla" = ["int8", "fp16"]\n"bits.dsp" = ["int8", "int16"]\n')
    assert g.points() == [("int8", "int8"), ("fp16", "int16")]
    with pytest.raises(GridError, match="configurations 0 and 1 are the same"):
        load_grid('[grid]\nmode = "list"\n"bits.dla" = ["int8", "int8"]\n"bits.dsp" = ["int8", "int8"]\n')
    base = base.replace("= 800", "= [800, 900, 1000]")
    r = [load_grid(f'[grid]\nmode = "random"\nsamples = 5\nseed = {s}\n' + base).points() for s in (1, 1, 2)]
    assert r[0] == r[1] and r[0] != r[2] and len(set(r[0])) == 5
    full = load_grid("[grid]\n" + base).points()
    assert len(full) == 18 and set(r[0]) <= set(full) and r[0] == sorted(r[0], key=full.index)



def test_point_keys_keep_config_ids_and_group_partitions_first():
    """The sweep's fast keys give the same ids as ``config_id`` (a resumed sweep finds the rows an
    earlier version wrote), tell 1, 1.0 and true apart (one grid cannot list both 1 and 1.0, but a
    stored sweep written with one is another sweep than the other), and sort partition-moving keys
    first."""
    from npukit.sweeps.grid import PointKeys, config_id

    g = load_grid({"grid": {"bits.dla": ["int8", "fp16"], "soc.links.0.bandwidth_gbps": [1, 2.0, 2.5],
                            "soc.processors.dla.macs_per_cycle": [{"int8": 64}, {"fp16": 32, "int8": 128}],
                            "support.dla.softmax": [True, False]}})  # fmt: skip
    keys = PointKeys(g.axes)
    pts, pos = g.points(), g.positions()
    assert [keys.values(p) for p in pos] == pts
    ids = [keys.config_id(p) for p in pos]
    assert ids == [config_id(g.axes, v) for v in pts]
    assert len(set(ids)) == len(pts) == 2 * 3 * 2 * 2
    # the known id of one point: sha256 of its canonical JSON text
    import hashlib

    text = '[["bits.dla","int8"],["soc.links.0.bandwidth_gbps",2.0],["soc.processors.dla.macs_per_cycle",' \
           '{"int8":64}],["support.dla.softmax",true]]'  # fmt: skip
    assert keys.config_id((0, 1, 0, 0)) == hashlib.sha256(text.encode()).hexdigest()[:16]
    one = list(pts[0])
    assert one[1] == 1 and type(one[1]) is int
    ids_of = {config_id(g.axes, [*one[:1], v, *one[2:]]) for v in (1, 1.0, True)}
    assert len(ids_of) == 3
    # sorted by the key, points sharing the support toggle and the DLA's bit-widths (both can move
    # ops) come together, then those sharing the link bandwidth (a profile change that cannot)
    order = sorted(range(len(pts)), key=lambda i: keys.sort_key(pos[i]))
    runs = [(json.dumps(pts[i][2]), pts[i][3], repr(pts[i][1])) for i in order]
    for n in (2, 3):
        heads = [r[:n] for r in runs]
        starts = [h for k, h in enumerate(heads) if k == 0 or heads[k - 1] != h]
        assert len(starts) == len(set(starts)) == {2: 4, 3: 12}[n]

# ---------------------------------------------------------------------------------------------
# Pareto


def test_pareto_hand_made_table():
    df = pd.DataFrame({
        "index": range(8),
        "latency_us": [10.0, 20.0, 10.0, 30.0, 5.0, 12.0, np.nan, 1.0],
        "energy_uj": [5.0, 2.0, 6.0, 1.0, 9.0, 5.0, 0.1, 0.1],
        "accuracy": [0.90, 0.90, 0.95, 0.80, 0.70, 0.99, 0.99, 0.99],
        "failure": [None, None, None, None, None, None, None, "ConfigError: boom"],
    })  # fmt: skip
    # latency, energy: 2 is dominated by 0, 5 by 0; 6 has no latency, 7 failed
    assert pareto(df, ("latency_us", "energy_uj"))["index"].tolist() == [0, 1, 3, 4]
    # accuracy is maximized: 2 (more accurate than 0) and 5 (the most accurate) join
    assert pareto(df, ("latency_us", "energy_uj", "accuracy"))["index"].tolist() == [0, 1, 2, 3, 4, 5]
    assert pareto(df, ("latency_us", "min:accuracy"))["index"].tolist() == [4]
    assert pareto(df, ("energy_uj", "min:accuracy"))["index"].tolist() == [3, 4, 6]  # 6 lacks only latency
    assert pareto(df, ("max:latency_us",))["index"].tolist() == [3]
    near = df.iloc[[0, 2]].assign(accuracy=[0.9, 0.9 + 1e-9])  # float noise: equal at 6 significant digits
    assert pareto(near, ("latency_us", "energy_uj", "accuracy"))["index"].tolist() == [0]
    assert pareto(near, ("latency_us", "energy_uj", "accuracy"), digits=None)["index"].tolist() == [0, 2]
    dup = pd.concat([df.iloc[[0]], df.iloc[[0]].assign(index=9)])
    assert pareto(dup, ("latency_us", "energy_uj"))["index"].tolist() == [0, 9]  # equal points: both stay
    assert pareto_mask(df).tolist() == pareto_mask(df, ("latency_us", "energy_uj")).tolist()  # default: those present
    with pytest.raises(npukit.ConfigError) as ei:
        pareto(df, ("latency", "energy_uj"))
    assert str(ei.value) == ("pareto: no column 'latency' in the table; did you mean 'latency_us'? valid names: 'accuracy', 'energy_uj', "
                             "'failure', 'index', 'latency_us'")


# ---------------------------------------------------------------------------------------------
# rows


@pytest.fixture(scope="module")
def digits_rows():
    return npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", GRID, workers=0, progress=False)


def study_of_row(row, soc) -> npukit.Study:
    """The Study of a row built through the Study's own edit methods, from the grid values alone."""
    changes = {"links.0.bandwidth_gbps": 4.0}
    changes["processors.dla.macs_per_cycle.int8"] = int(row["soc.processors.dla.macs_per_cycle.int8"])
    changes["processors.dla.onchip_bytes"] = int(row["soc.processors.dla.onchip_bytes"])
    s = npukit.Study(DIGITS_ONNX, npukit.load_soc(soc).with_changes(changes))
    s.set_bits(row["bits.dla"], processor="dla").set_bits(row["bits.dsp"], processor="dsp")
    s.set_support("dsp", "softmax", bool(row["support.dsp.softmax"]))
    if row["pin./relu3/Relu"] != "none":
        s.pin("/relu3/Relu", row["pin./relu3/Relu"])
    return s


def test_rows_equal_single_studies(digits_rows):
    df = digits_rows
    assert len(df) == 64 and df["index"].tolist() == list(range(64)) and df["failure"].isna().all()
    assert df["config_id"].is_unique
    for i in random.Random(16).sample(range(len(df)), 8):
        row = df.iloc[i]
        s = study_of_row(row, "arm-dsp-dla")
        t = s.totals
        assert row["config"] == npukit.sweeps.grid.canon(s.config.to_dict())
        for k, v in t.items():
            if k == "memory":  # the Study's build target and budgets; a sweep's memory=True columns are tested below
                continue
            if isinstance(v, dict):
                for p, x in v.items():
                    assert row[f"{k}.{p}"] == x, (i, k, p)
            else:
                assert row[k] == v, (i, k)
        o = npukit.sweep_study(row, DIGITS_ONNX, "arm-dsp-dla")  # "open this configuration"
        assert o.config == s.config and o.totals == t


def test_first_fit_rows_share_a_partition_and_equal_studies():
    """Under "first-fit" the on-chip size moves no op: one partition serves both profiles."""
    from npukit import pipeline as pl

    pl.clear_caches()
    df = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL, workers=0, progress=False)
    assert len(pl.PARTS.d) == 2  # one per support set, not per profile
    soc = npukit.load_soc("arm-dsp-dla")
    for row in df.itertuples():
        s = npukit.Study(DIGITS_ONNX, soc.with_changes({"processors.dla.onchip_bytes": row._5}))
        s.set_placement("first-fit").set_bits(row._3, processor="dla").set_support("dsp", "softmax", bool(row._4))
        assert (row.latency_us, row.energy_uj, row.transfer_us) == (s.totals["latency_us"], s.totals["energy_uj"],
                                                                    s.totals["transfer_us"])  # fmt: skip
        assert npukit.sweep_study(df.iloc[row.Index], DIGITS_ONNX, "arm-dsp-dla").totals == s.totals


def test_clear_caches_forgets_the_partitions_a_sweep_kept():
    """A sweep keeps one evaluator per grid keys (its profiles, partitions, checks): a grid of other
    values under the same keys shares it.  clear_caches() forgets it too, so the sweep after it
    partitions anew and the count above holds whatever ran before."""
    npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL.replace("4096", "2048"), workers=0, progress=False)
    test_first_fit_rows_share_a_partition_and_equal_studies()


def test_error_rows_equal_study_error(tmp_path):
    grid = '[grid]\n"bits.dla" = ["int8", "fp16"]\n"bits.dsp" = ["int8", "int16"]\n'
    df = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=0, error=True, progress=False)
    for row in df.itertuples():
        s = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_bits(row._3, processor="dla").set_bits(row._4, processor="dsp")
        e = s.error_dict()
        assert row.snr_db == e["outputs"][0]["snr_db"] and row.max_abs_error == e["outputs"][0]["max_abs"]
        assert row.accuracy == e["accuracy"] and row.error == 1 - e["accuracy"]
        assert row.top1_agreement == e["outputs"][0]["top1_agreement"]


def test_memory_rows_equal_study_project():
    grid = ('[grid]\n"bits.dla" = ["int8", "fp16"]\n"support.dsp.softmax" = [true, false]\n'
            '"soc.sram_bytes" = [1024, 1048576]\n')  # fmt: skip
    df = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=0, memory=True, progress=False)
    assert df["failure"].isna().all() and str(df["arena_bytes"].dtype) == "int64"
    for row in df.itertuples():
        soc = npukit.load_soc("arm-dsp-dla").with_changes({"sram_bytes": int(row._5)})
        s = npukit.Study(DIGITS_ONNX, soc).set_bits(row._3, processor="dla")
        s.set_support("dsp", "softmax", bool(row._4))
        p = s.project
        assert (row.arena_bytes, row.lower_bound_bytes, row.weight_bytes) == (p.arena_bytes, p.lower_bound, p.weight_bytes)
        est = s.memory["estimate"]  # the fit a Study reports, in the row's own budgets
        assert (row.flash_over, row.sram_over) == (est["flash_over"], est["sram_over"])
    assert df["sram_over"].tolist() == [b == 1024 for b in df["soc.sram_bytes"]]  # the arena is over 1 KiB only
    assert not df["flash_over"].any()


def test_failing_configurations_record_their_error():
    grid = '[grid]\n"pin./softmax/Softmax" = ["dsp", "dla", "none"]\n"layer_bits./conv1/Conv" = ["int8", "int16"]\n'
    if has_placement():
        grid += '"placement" = "first-fit"\n'
    df = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=0, progress=False)
    fail = dict(zip(df["index"], df["failure"]))
    assert pd.isna(fail[0]) and pd.isna(fail[4])  # dsp / none with int8
    assert fail[2].startswith("ConfigError: cannot pin '/softmax/Softmax' (softmax) to dla: dla: softmax is not in processors.dla.ops")
    assert fail[3] == fail[2]
    # conv1 at int16, which the DLA cannot run: first-fit gives it to the next processor that takes it
    # and runs int16 (arm), slower than the DLA at int8
    assert pd.isna(fail[1]) and pd.isna(fail[5])
    lat = dict(zip(df["index"], df["latency_us"]))
    assert lat[1] == lat[5] > lat[0] == lat[4]
    assert df.loc[df["failure"].notna(), "latency_us"].isna().all()
    assert pareto(df)["index"].tolist() == [0, 4]  # the same placement


def test_profile_cost_fields_never_move_ops():
    """Configurations that differ only in COST_FIELDS share one partition: check that changing each
    (on every processor) leaves the first-fit partition as it was."""
    from npukit import pipeline as pl

    m = pl.load(DETECTOR)
    soc = npukit.load_soc("arm-dsp-dla")
    cfg = npukit.Config()
    if has_placement():
        import dataclasses

        cfg = dataclasses.replace(cfg, placement="first-fit")
    base = pl.partition(m, soc, cfg).plan
    values = {"description": "x", "clock_mhz": 77.0, "default_bits": "fp16", "mac_array": {"channels_in": 8},
              "vector_lanes": 3, "efficiency": {"*": 0.3}, "reduction": {"unroll": 4, "serial": 0.5, "exponent": 1.0},
              "onchip_bytes": 1, "dram_bytes_per_cycle": 0.5, "onchip_bytes_per_cycle": 0.5,
              "weight_bytes_per_cycle": 0.5, "weight_port": "separate", "output_elems_per_cycle": 2.0, "layout": "NCHW",
              "op_overhead_cycles": 99999, "call_overhead_cycles": 99999, "energy_pj_per_byte": 999.0,
              "energy_pj_per_onchip_byte": 999.0, "static_mw": 999.0, "kernel_library": "zz", "max_partitions": 1}  # fmt: skip
    for p in soc.processors:
        per_bits = {"macs_per_cycle": {b: 0.5 for b in p.macs_per_cycle},
                    "vector_ops_per_cycle": {b: 0.5 for b in p.macs_per_cycle},
                    "energy_pj_per_mac": {b: 99.0 for b in p.macs_per_cycle},
                    "energy_pj_per_op": {b: 99.0 for b in p.macs_per_cycle}}  # fmt: skip
        for f in sorted(COST_FIELDS):
            v = per_bits.get(f, values.get(f))
            if f == "default_bits":
                v = p.bits[-1]
            changed = soc.with_changes({f"processors.{p.name}.{f}": v})
            assert changed.rules_digest == soc.rules_digest
            pl.PARTS.clear()  # a real partition of the changed profile, not the cached one
            assert pl.partition(m, changed, cfg).plan == base, (p.name, f)
    changed = soc.with_changes({"links.0.bandwidth_gbps": 0.01, "conversion.layout_on": "host", "name": "x"})
    pl.PARTS.clear()
    assert changed.rules_digest == soc.rules_digest and pl.partition(m, changed, cfg).plan == base
    moved = soc.with_changes({"processors.dla.ops.conv2d.kernel_max": 1})
    assert moved.rules_digest != soc.rules_digest and pl.partition(m, moved, cfg).plan != base


# ---------------------------------------------------------------------------------------------
# output files


def test_parquet_resume_and_refusal(tmp_path):
    out = tmp_path / "r.parquet"
    ref = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL, workers=0, progress=False)
    df = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL, workers=0, out=out, progress=False)
    assert len(df) == 8 and df.equals(ref) and pd.read_parquet(out).equals(ref)
    assert not (tmp_path / "r.parquet.parts").exists()
    before = out.read_bytes()
    again = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL, workers=0, out=out, progress=False)
    assert again.equals(ref) and out.read_bytes() == before
    with pytest.raises(SweepError) as ei:
        npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL.replace("4096", "8192"), workers=0, out=out, progress=False)
    assert str(ei.value) == f"{out}: holds another sweep (another grid); choose another --out or remove it"
    with pytest.raises(SweepError, match=r"holds another sweep \(another error setting\)"):
        npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL, workers=0, out=out, error=True, progress=False)
    # a journal left by an interrupted run (here: one chunk of 3 rows) is picked up, the rest computed
    import pyarrow.parquet as pq

    from npukit.sweeps.store import Store

    t = pq.read_table(out)
    out2 = tmp_path / "r2.parquet"
    store = Store(out2, t.schema, json.loads(t.schema.metadata[b"npukit.sweep"]))
    assert store.open() == set()
    store.add(t.slice(0, 3))
    resumed = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", SMALL, workers=0, out=out2, progress=False)
    assert resumed.equals(ref) and not (tmp_path / "r2.parquet.parts").exists()


@pytest.mark.slow
def test_cli_sweep_summary_report_and_errors(tmp_path):
    grid = write(tmp_path, SMALL)
    out, rep = tmp_path / "r.parquet", tmp_path / "r.html"
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out, "--workers", "0",
                "--report", rep, "--no-progress", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    df = pd.read_parquet(out)
    assert doc["configurations"] == 8 and doc["failed"] == 0
    assert doc["pareto_index"] == pareto(df)["index"].tolist()
    # the fastest: the lowest latency, of those the lowest energy (a Pareto point), by its grid values
    want = df.sort_values(["latency_us", "energy_uj", "index"], kind="stable").iloc[0]
    f = doc["fastest"]
    assert f["index"] == int(want["index"]) and f["index"] in doc["pareto_index"]
    grid_cols = list(df.columns[df.columns.get_loc("config_id") + 1 : df.columns.get_loc("config")])
    assert list(f["grid"]) == grid_cols and grid_cols
    assert all(f["grid"][k] == (want[k].item() if hasattr(want[k], "item") else want[k]) for k in grid_cols)
    r2 = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out, "--workers", "0",
                 "--no-progress")  # fmt: skip
    line = next(ln for ln in r2.stdout.splitlines() if ln.startswith("fastest:"))
    assert line.endswith("(" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in f["grid"].items()) + ")")
    text = rep.read_text()
    assert "Plotly.newPlot('view0'" in text and "Plotly.newPlot('view1'" not in text  # no error: one view
    bad = write(tmp_path, '[grid]\n"bits.dla" = ["int8"]\n"pin./conv1/Conv" = ["dla", "npu"]\n', "bad.toml")
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", bad, "--out", tmp_path / "x.parquet")
    assert assert_cli_error(r, limit_s=30) == (f"{bad}:3: pin./conv1/Conv: unknown processor 'npu'; valid names: "
                                              "'arm', 'dla', 'dsp', 'none'")  # fmt: skip
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out, "--error", "--workers", "0")
    assert assert_cli_error(r, limit_s=30) == f"{out}: holds another sweep (another error setting); choose another --out or remove it"


# ---------------------------------------------------------------------------------------------
# workers: local processes, LocalCluster, a cluster started from the command line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.slow
def test_identical_rows_on_processes_localcluster_and_cli_cluster(tmp_path, digits_rows, capsys):
    from distributed import Client, LocalCluster

    local = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", GRID, workers=2, progress=False)
    assert local.equals(digits_rows)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, Client(cl) as c:
        on_dask = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", GRID, client=c, progress=False)
        assert len(c.scheduler_info()["workers"]) == 2
    assert on_dask.equals(digits_rows)
    assert "Dask dashboard" not in capsys.readouterr().err  # progress=False: nothing on the terminal
    port = _free_port()
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--dashboard-address", ":0"], env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    try:
        for _ in range(2):
            procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                           f"tcp://127.0.0.1:{port}", "--nthreads", "1", "--nworkers", "1",
                                           "--no-dashboard"], env=_env(), stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))  # fmt: skip
        with Client(f"tcp://127.0.0.1:{port}", timeout=60) as c:
            c.wait_for_workers(2, timeout=120)
        grid, out = write(tmp_path, GRID), tmp_path / "cli.parquet"
        r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out,
                    "--dask", f"tcp://127.0.0.1:{port}", timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert "Dask dashboard http://" in r.stderr
        assert pd.read_parquet(out).equals(digits_rows)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


KILL_GRID = """\
[grid]
"pin./conv1/Conv" = ["none", "arm"]
"pin./relu1/Relu" = ["none", "arm"]
"pin./conv2/Conv" = ["none", "arm"]
"pin./relu2/Relu" = ["none", "arm"]
"pin./pool/MaxPool" = ["none", "arm"]
"pin./fc1/Gemm" = ["none", "arm"]
"pin./softmax/Softmax" = ["dsp", "arm"]
"bits.dla" = ["int8", "fp16"]
"""


@pytest.mark.slow
def _sweep_stopped(tmp_path, name: str, sig: int):
    """`npukit sweep` of KILL_GRID on two workers, sent ``sig`` once two chunks are saved: (the
    command, the process, its stderr, the output path, its parts directory)."""
    grid, out = write(tmp_path, KILL_GRID), tmp_path / f"{name}.parquet"
    parts = tmp_path / f"{name}.parquet.parts"
    cmd = [sys.executable, "-m", "npukit", "sweep", str(DIGITS_ONNX), "--soc", "arm-dsp-dla", "--grid", str(grid),
           "--out", str(out), "--workers", "2", "--no-progress"]  # fmt: skip
    p = subprocess.Popen(cmd, env=_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)  # fmt: skip
    try:
        t0 = time.time()
        while len(list(parts.glob("part-*.parquet"))) < 2 and time.time() - t0 < 240 and p.poll() is None:
            time.sleep(0.05)
        assert p.poll() is None, "the sweep ended before it could be stopped"
        os.kill(p.pid, sig)
        if sig == signal.SIGKILL:  # (its workers may hold the pipes open a while: wait for it alone)
            p.wait(30)
            err = ""
        else:
            _out, err = p.communicate(timeout=60)
    finally:
        time.sleep(2)  # its worker processes notice their parent is gone and exit; kill any left
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return cmd, p, err, grid, out, parts


def test_interrupted_sweep_says_what_it_kept(tmp_path):
    """Ctrl-C (SIGINT) on `npukit sweep`: exit 130 and one line saying how many configurations are
    saved in <out>.parts and that the same command resumes."""
    _cmd, p, err, _grid, out, parts = _sweep_stopped(tmp_path, "i", signal.SIGINT)
    import pyarrow.parquet as pq

    n = sum(pq.read_table(f).num_rows for f in parts.glob("part-*.parquet"))
    assert p.returncode == 130 and 0 < n < 256
    assert err.strip().splitlines()[-1] == (f"npukit: interrupted: {n} configurations saved in {parts}; run the same "
                                            "command again to resume")  # fmt: skip
    assert not out.exists()


def test_killed_sweep_resumes_with_every_row_once(tmp_path):
    cmd, p, _err, grid, out, parts = _sweep_stopped(tmp_path, "k", signal.SIGKILL)
    assert not out.exists()
    import pyarrow.parquet as pq

    written = sum(pq.read_table(f).num_rows for f in parts.glob("part-*.parquet"))
    assert 0 < written < 256
    r = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    df = pd.read_parquet(out)
    assert len(df) == 256 and df["config_id"].is_unique and df["index"].tolist() == list(range(256))
    assert not parts.exists()
    ref = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=0, progress=False)
    assert df.equals(ref)


@pytest.mark.slow
def test_a_sweep_that_fails_before_any_result_leaves_no_journal(tmp_path):
    """A sweep refused before it starts (a bad worker count) or that cannot reach its Dask scheduler
    leaves no ``<out>.parts/`` behind (a new user found one after each); the same sweep then runs."""
    out = tmp_path / "r.parquet"
    grid = {"bits.dla": ["int8", "fp16"]}
    with pytest.raises(SweepError, match=r"^workers must be 0 \(this process\) or a positive number, got -1$"):
        npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=-1, out=out, progress=False)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SweepError, match=rf"^cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
        npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, client=f"tcp://127.0.0.1:{port}", out=out, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    df = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=0, out=out, progress=False)
    assert len(df) == 2 and df["failure"].isna().all()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]


def test_results_go_to_a_parquet_file_by_name(tmp_path):
    """``out`` must name a .parquet file: a new user's ``--out r.csv`` was written as Parquet without a
    word; now it is refused before anything runs."""
    grid = write(tmp_path, GRID)
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", "r.csv", cwd=tmp_path)
    msg = assert_cli_error(r, limit_s=30)
    assert msg == "r.csv: a sweep's results are written as Parquet; give the file the suffix .parquet"
    assert sorted(p.name for p in tmp_path.iterdir()) == [grid.name]


def test_the_report_is_checked_before_the_sweep_and_never_written_over_its_inputs(tmp_path):
    """--report wrote its page at the end over any file it was given: the results' Parquet, the model,
    the grid."""
    grid = write(tmp_path, SMALL)
    out = tmp_path / "r.parquet"
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out, "--report", out)
    assert_cli_error(r, f"{out}: --report writes one HTML page; give the file the suffix .html")
    assert not out.exists()
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out, "--report", grid)
    assert_cli_error(r, "--report writes one HTML page")
    assert grid.read_text() == SMALL


def test_a_model_with_symbolic_dims_is_swept_with_its_input_shapes(tmp_path):
    """A model whose batch dim is symbolic could not be swept: the error said to pin it with
    "--input-shape x=1,4", which npukit sweep did not take ("unrecognized arguments"), nor npukit.sweep."""
    from onnx import helper as h

    nodes = [h.make_node("Mul", ["x", "mask"], ["t"], name="mul"), h.make_node("Relu", ["t"], ["y"], name="relu")]
    model = save_onnx(onnx_model(nodes, [tensor_info("x", ["N", 4]), tensor_info("mask", ["N", 4])],
                                 [tensor_info("y", ["N", 4])]), tmp_path / "two.onnx")  # fmt: skip
    grid = write(tmp_path, '[grid]\n"bits.arm" = ["int8", "fp32"]\n')
    shapes = {"x": (1, 4), "mask": (1, 4)}
    r = run_cli("sweep", model, "--soc", "arm-dsp-dla", "--grid", grid, "--out", tmp_path / "r.parquet", "--workers", "0",
                "--input-shape", "x=1,4;mask=1,4", "--no-progress", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["configurations"] == 2
    df = npukit.sweep(model, "arm-dsp-dla", grid, workers=0, input_shapes=shapes, progress=False)
    assert df.equals(pd.read_parquet(tmp_path / "r.parquet"))
    for i in range(2):
        s = npukit.sweep_study(df.iloc[i], model, "arm-dsp-dla", input_shapes=shapes)
        assert s.totals["latency_us"] == df.iloc[i]["latency_us"]
    r = run_cli("sweep", model, "--soc", "arm-dsp-dla", "--grid", grid, "--out", tmp_path / "s.parquet")
    assert assert_cli_error(r).endswith("or --input-shape x=1,4")  # (an option sweep takes)


def test_an_out_path_that_cannot_be_written_is_named_as_given(tmp_path):
    """--out under a file, or naming a directory, was reported by the journal's own path or pyarrow's
    words ("afile/r.parquet.parts: Not a directory", "not a readable Parquet file (Cannot open for
    reading: path 'd.parquet' is a directory)")."""
    grid = write(tmp_path, SMALL)
    (tmp_path / "afile").write_text("mine")
    (tmp_path / "d.parquet").mkdir()
    args = ("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--workers", "0", "--out")
    out = tmp_path / "afile" / "r.parquet"
    assert assert_cli_error(run_cli(*args, out)) == f"{out}: cannot create its directory: {tmp_path / 'afile'} is a file, not a directory"  # fmt: skip
    assert assert_cli_error(run_cli(*args, tmp_path / "d.parquet")) == f"{tmp_path / 'd.parquet'}: is a directory; give a file path to write to"  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "d.parquet", grid.name]
    assert (tmp_path / "afile").read_text() == "mine" and not list((tmp_path / "d.parquet").iterdir())


def test_an_integer_beyond_64_bits_is_refused_naming_its_line(tmp_path):
    """TOML integers are 64-bit, but Python's reader takes any: 99999999999999999999 bytes of on-chip memory
    passed every check, and the sweep ended in pyarrow's traceback (OverflowError: Python int too large to
    convert to C long) when it stored the row."""
    assert grid_error(tmp_path, '"soc.processors.dla.onchip_bytes" = [65536, 99999999999999999999]\n') == (
        "grid.toml:2: soc.processors.dla.onchip_bytes: 99999999999999999999 is beyond a TOML integer (64-bit: "
        "-9223372036854775808 .. 9223372036854775807)")  # fmt: skip
    grid = write(tmp_path, '[grid]\n"soc.processors.dla.onchip_bytes" = [99999999999999999999]\n')
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", tmp_path / "r.parquet", "--workers", "0")  # fmt: skip
    assert assert_cli_error(r).startswith(f"{grid}:2: soc.processors.dla.onchip_bytes: 99999999999999999999 is beyond")
    assert sorted(p.name for p in tmp_path.iterdir()) == [grid.name]


def test_a_long_axis_is_checked_for_repeated_values_in_linear_time():
    """Each value was compared with every value before it: 8,000 values took 1 s, 40,000 some 25 s, and
    an axis of a million (within the limit of a sweep) hours, before the sweep started."""
    t0 = time.perf_counter()
    g = load_grid({"soc.processors.dla.onchip_bytes": range(1024, 1024 + 16 * 40_000, 16)})
    assert len(g) == 40_000 and time.perf_counter() - t0 < 8
    # what it refuses is unchanged: equal values of one kind (1000 and 1000.0 are one number), not true and 1
    with pytest.raises(GridError, match=r"^<grid>: soc.processors.dla.onchip_bytes: value 1000.0 is listed twice$"):
        load_grid({"soc.processors.dla.onchip_bytes": [1000, 2000, 1000.0]})
    with pytest.raises(GridError, match=r"value \{'fp16': 2, 'int8': 4.0\} is listed twice$"):
        load_grid({"soc.processors.dla.macs_per_cycle": [{"int8": 4, "fp16": 2}, {"fp16": 2, "int8": 4.0}]})
    with pytest.raises(GridError, match=r"value \['a', 1.0\] is listed twice$"):
        load_grid({"soc.processors.dla.ops.conv2d.kernels": [["a", 1], ["a", 1.0]]})
    assert len(load_grid({"support.dla.softmax": [True, False]})) == 2


def test_a_grid_too_large_to_sweep_is_refused_at_once(tmp_path):
    """Four axes of 200 values (1.6e9 configurations): the sweep listed and sorted every configuration
    before running any, and sat silent until the machine ran out of memory."""
    vals = ", ".join(str(1024 * i) for i in range(1, 201))
    body = "".join(f'"soc.processors.{p}.onchip_bytes" = [{vals}]\n' for p in ("arm", "dsp", "dla"))
    big = "[grid]\n" + body + f'"soc.links.0.bandwidth_gbps" = [{", ".join(f"{i}.0" for i in range(1, 201))}]\n'
    with pytest.raises(GridError) as ei:
        load_grid(big)
    assert str(ei.value) == (
        "<grid>: the grid makes 1,600,000,000 configurations (200 x 200 x 200 x 200), more than a sweep runs "
        '(1,000,000); sweep fewer values, or draw some: mode = "random" with samples = N')  # fmt: skip
    with pytest.raises(GridError, match=r'^<grid>:3: samples: 2,000,000 samples, more than a sweep runs \(1,000,000\)'):  # fmt: skip
        load_grid(big.replace("[grid]\n", '[grid]\nmode = "random"\nsamples = 2000000\n'))
    assert len(load_grid(big.replace("[grid]\n", '[grid]\nmode = "random"\nsamples = 8\n'))) == 8  # fmt: skip
    grid = write(tmp_path, big)
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", tmp_path / "r.parquet")
    assert assert_cli_error(r, limit_s=30).startswith(f"{grid}: the grid makes 1,600,000,000 configurations")
    assert sorted(p.name for p in tmp_path.iterdir()) == [grid.name]


def test_the_json_summary_gives_the_fastest_config_as_an_object(tmp_path):
    """--json printed the fastest configuration's config as a string holding JSON, where npukit study
    --json (and the summary's own grid values) give objects: `jq .fastest.config.bits` failed."""
    grid = write(tmp_path, '[grid]\n"bits.dla" = ["int8", "fp16"]\n"placement" = "first-fit"\n')
    out = tmp_path / "r.parquet"
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out, "--workers", "0",
                "--no-progress", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)["fastest"]
    row = pd.read_parquet(out).set_index("index").loc[f["index"]]
    assert f["config"] == json.loads(row["config"]) == {"bits": {"dla": f["grid"]["bits.dla"]}, "placement": "first-fit"}  # fmt: skip
    assert npukit.Config.from_dict(f["config"]).to_dict() == f["config"]  # (it opens as a Study's config)


def test_a_report_path_that_is_a_directory_is_refused_before_the_sweep(tmp_path):
    """--report DIR passed the check made before the sweep (only a file's suffix was checked): the whole
    sweep ran, wrote its results, and then failed with exit 2 on writing the page."""
    grid = write(tmp_path, SMALL)
    out, rep = tmp_path / "r.parquet", tmp_path / "pages"
    rep.mkdir()
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", grid, "--out", out, "--report", rep)
    assert assert_cli_error(r) == f"{rep}: is a directory; give a file path to write to"
    assert not out.exists() and not Path(str(out) + ".parts").exists() and list(rep.iterdir()) == []


def test_bad_dask_addresses_and_arguments_are_named(tmp_path):
    r = run_cli("sweep", DIGITS_ONNX, "--soc", "arm-dsp-dla", "--grid", ROOT / "sample_models" / "dla_sizing.toml",
                "--out", tmp_path / "r.parquet", "--dask", "nonsense")  # fmt: skip
    assert_cli_error(r, "cannot reach the Dask scheduler at nonsense", limit_s=60)
    with pytest.raises(SweepError, match=r"^chunk_size must be a positive number of configurations, got 0$"):
        npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", {"bits.dla": ["int8"]}, workers=0, chunk_size=0)
    with pytest.raises(SweepError, match=r"^client must be a distributed.Client or a scheduler address"):
        npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", {"bits.dla": ["int8"]}, client=42)


def test_opening_a_failed_row_read_back_from_parquet_says_it_failed():
    """A failed row's config reads back from a DataFrame as NaN, not None: it raised a TypeError."""
    row = {"index": 3, "config": float("nan"), "failure": "ConfigError: dla cannot run int4"}
    with pytest.raises(SweepError, match=r"^configuration 3 failed \(ConfigError: dla cannot run int4\)"):
        npukit.sweep_study(row, DIGITS_ONNX, "arm-dsp-dla")


@pytest.mark.parametrize("delay, shown", [(60.0, False), (0.0, True)], ids=["short", "long"])
def test_the_progress_bar_waits_like_npukits_other_long_steps(monkeypatch, capsys, delay, shown):
    """A sweep's bar appears once the sweep has run for ``npukit.progress.DELAY_S`` seconds, as every
    other long step's: a short sweep stays silent (a 2-configuration sweep drew a bar at once)."""
    import npukit.progress

    monkeypatch.setenv("NPUKIT_PROGRESS", "1")
    monkeypatch.setattr(npukit.progress, "DELAY_S", delay)
    df = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", '[grid]\n"bits.dla" = ["int8", "fp16"]\nplacement = "first-fit"\n',
                      workers=0)  # fmt: skip
    assert len(df) == 2 and df["failure"].isna().all()
    err = capsys.readouterr().err
    assert ("sweep: 100%" in err and "2/2" in err) is shown, err
    if not shown:
        assert err == ""


def test_a_grid_written_in_python_takes_tuples_ranges_and_numpy_values():
    """A dict grid's values as a Python user writes them: a tuple, a range, a numpy array, numpy
    numbers (inside tables too) are the same grid as the TOML lists (they were refused: 'must be a
    number, got range(256, 1025, 256)', 'must be a number, got np.int64(256)')."""
    from npukit import pipeline as pl
    from npukit.sweeps import check_grid

    toml = load_grid('[grid]\n"soc.processors.dla.macs_per_cycle.int8" = [256, 512, 768, 1024]\n"bits.dla" = ["int8", "fp16"]\n'
                     '"soc.processors.dla.onchip_bytes" = [4096, 8192]\n"soc.processors.dla.clock_mhz" = [500, 1000.0]\n'
                     '"soc.processors.dsp.mac_array" = [{ channels_out = 32 }, { channels_out = 64 }]\n')  # fmt: skip
    py = load_grid({"soc.processors.dla.macs_per_cycle.int8": range(256, 1025, 256), "bits.dla": ("int8", "fp16"),
                    "soc.processors.dla.onchip_bytes": np.array([4096, 8192]),
                    "soc.processors.dla.clock_mhz": [np.int64(500), np.float64(1000.0)],
                    "soc.processors.dsp.mac_array": ({"channels_out": np.int32(32)}, {"channels_out": 64})})  # fmt: skip
    same = lambda g: [(a.key, a.kind, a.target, a.values) for a in g.axes]  # noqa: E731 - (no line in a dict)
    assert same(py) == same(toml)
    assert [type(v) for a in py.axes for v in a.values] == [type(v) for a in toml.axes for v in a.values]
    check_grid(py, pl.load(DIGITS_ONNX), npukit.load_soc("arm-dsp-dla"))


def test_a_default_sweep_stays_in_this_process_while_it_is_short(monkeypatch):
    """Worker processes start by importing the model and partitioning it afresh: 256 configurations
    took 6.8 s in this process and 34.5 s on two workers.  By default a sweep runs here while what
    is left would take under POOL_AFTER_S, then hands the rest to one worker per core."""
    from npukit.sweeps import run as sweep_run

    grid = SMALL.replace("4096", "2048")
    ref = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=0, progress=False)
    handed = []

    def pool(job, chunks, sink, n, bar):  # a stand-in pool that runs the chunks it is given here
        handed.append((n, sum(map(len, chunks))))
        for ch in chunks:
            sink(sweep_run.run_chunk(job, ch))

    monkeypatch.setattr(sweep_run, "_run_pool", pool)
    monkeypatch.setattr(sweep_run.os, "cpu_count", lambda: 2)
    short = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, progress=False)
    assert handed == [] and short.equals(ref)  # 8 configurations: all of them here
    monkeypatch.setattr(sweep_run, "POOL_AFTER_S", 0.0)  # what is left always looks long
    long = npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, progress=False, chunk_size=2)
    assert handed == [(2, 6)] and long.equals(ref)  # the first chunk here, the other 6 to two workers
    handed.clear()
    npukit.sweep(DIGITS_ONNX, "arm-dsp-dla", grid, workers=2, progress=False, chunk_size=2)
    assert handed == [(2, 8)]  # workers given: all of it on them


def test_a_grid_message_spells_a_list_index_as_the_grid_key_does(tmp_path):
    """'soc.links.0.bandwidth_gbps: -1.0: links[0].bandwidth_gbps: must be ...': the grid's key and the
    profile's field, one index in two spellings.  The profile's word is now the grid's own: the
    message says the field once, as the key does."""
    assert grid_error(tmp_path, '"soc.links.0.bandwidth_gbps" = [-1.0, 4.0]\n') == (
        "grid.toml:2: soc.links.0.bandwidth_gbps: must be a positive number, got -1.0")
    assert grid_error(tmp_path, '"soc.links.0.between" = [["arm", "dzp"]]\n') == (
        "grid.toml:2: soc.links.0.between: [\"arm\",\"dzp\"]: links.0.between.1: no processor named 'dzp'; did you mean "
        "'dsp'? valid names: '*', 'arm', 'dla', 'dsp'")
    soc = npukit.load_soc("arm-dsp-dla")
    with pytest.raises(npukit.ProfileError) as e:
        soc.with_changes({"links.0.bandwidth_gbps": 0})
    assert str(e.value) == f"{soc.path} (edited): links.0.bandwidth_gbps: must be a positive number, got 0"
    # only the field's index is spelt so: a value the user wrote with brackets is quoted as written
    with pytest.raises(npukit.ProfileError) as e:
        soc.with_changes({"processors.dla.dtypes": ["int8[2]"]})
    assert str(e.value).startswith(f"{soc.path} (edited): processors.dla.dtypes.0: unknown dtype 'int8[2]'; one of ")
    # a profile file names the field as its readers know it
    path = tmp_path / "soc.toml"
    text = soc.to_toml()
    assert 'dtypes = [\n    "float32",' in text
    path.write_text(text.replace('dtypes = [\n    "float32",', 'dtypes = [\n    "int8[2]",', 1))
    with pytest.raises(npukit.ProfileError, match=r"processors\.\w+\.dtypes\[0\]: unknown dtype 'int8\[2\]'"):
        npukit.load_soc(path)
