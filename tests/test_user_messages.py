"""A new user's findings: the message of each names the file, node or field at fault in the model's own
words (never a raw Python error, never a stale or unrelated cause), and the study keeps working after it.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DIGITS_ONNX

import npukit


def _digits_rows(n: int = 6, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 1, 8, 8)).astype("float32")


# ---------------------------------------------------------------------------------------------
# the error figures name this study's data, not an earlier study's of the same content


def test_the_data_source_is_this_studys_own_whatever_measured_the_same_arrays_first(tmp_path):
    x = _digits_rows()
    np.savez(tmp_path / "mine.npz", x=x)
    first = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_data(tmp_path / "mine.npz")
    assert first.error_dict()["data_source"] == "mine.npz (6 samples)"
    other = npukit.Study(DIGITS_ONNX, "arm-dsp-dla").set_data(x)  # the same arrays, given as arrays
    assert other.data.key == first.data.key  # (so the measuring is shared)
    assert other.error_dict()["data_source"] == "user data"
    other.set_data(tmp_path / "mine.npz")
    assert other.error_dict()["data_source"] == "mine.npz (6 samples)"
    other.set_data({"input": x})
    assert other.error_dict()["data_source"] == "user data"
    assert first.error_dict()["data_source"] == "mine.npz (6 samples)"


# ---------------------------------------------------------------------------------------------
# a pin against a layer's bit-width: the pin is named as the conflict


PIN_VS_WIDTH = ("layer '/conv1/Conv' has bit-width int4 and is pinned to riscv, which cannot run int4 "
                "(processors.riscv.macs_per_cycle lists int8, int16, fp32): the pin and the bit-width conflict; "
                "unpin '/conv1/Conv', pin it to a processor that runs int4 and takes conv2d (accel), or give the "
                "layer a width riscv runs")  # fmt: skip


def test_a_pin_against_a_layer_bit_width_names_the_pin_whichever_edit_comes_second():
    s = npukit.Study(DIGITS_ONNX, "riscv-accel")
    s.set_bits("int4", layer="/conv1/Conv")
    assert s.placement.set_index("name").loc["/conv1/Conv", "processor"] == "accel"
    before = s.config
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/conv1/Conv", "riscv")
    assert str(e.value) == PIN_VS_WIDTH
    assert s.config == before and s.plan.processor[0] == "accel"
    s.reset().pin("/conv1/Conv", "riscv")
    before = s.config
    with pytest.raises(npukit.ConfigError) as e:
        s.set_bits("int4", layer="/conv1/Conv")
    assert str(e.value) == PIN_VS_WIDTH
    assert s.config == before
    s.set_bits("int16", layer="/conv1/Conv")  # the advice works: a width riscv runs
    assert s.plan.processor[0] == "riscv" and s.result.bits[0] == "int16"


def test_a_pin_of_a_whole_node_against_one_ops_width_names_that_pin():
    s = npukit.Study(DIGITS_ONNX, "riscv-accel")
    s.set_bits("int4", layer="/conv1/Conv/add")  # the bias add alone (stored as "#1")
    with pytest.raises(npukit.ConfigError) as e:
        s.pin("/conv1/Conv", "riscv")
    assert str(e.value) == ("layer '/conv1/Conv/add' has bit-width int4 and is pinned to riscv by the pin of "
                            "'/conv1/Conv', which cannot run int4 (processors.riscv.macs_per_cycle lists int8, int16, "
                            "fp32): the pin and the bit-width conflict; unpin '/conv1/Conv', pin it to a processor "
                            "that runs int4 and takes add (accel), or give the layer a width riscv runs")  # fmt: skip
    assert s.plan.processor[1] == "accel"
    s.pin(0, "accel")  # the study still edits
    assert s.plan.processor[0] == "accel"
