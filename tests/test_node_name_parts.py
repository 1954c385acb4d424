"""An unknown node that is the end or a part of a few long names (a TFLite node's ';'-joined name,
shortened by a table to "…<its end>") is answered with those names, their ends kept, and the op ids
that reach them; the op id then works."""

from __future__ import annotations

from pathlib import Path

import pytest

import npukit
from npukit.errors import ConfigError

MOBILENET = Path(__file__).resolve().parent.parent / "sample_models" / "mobilenet_v1_025_int8.tflite"
DW6 = "mobilenet_v1_025_96_1/conv_dw_6_bn_1/batchnorm/sub1"


@pytest.fixture(scope="module")
def study():
    return npukit.Study(MOBILENET, "vsi-npu", placement="first-fit")


def test_the_end_of_a_long_name_names_it_and_its_op_ids(study):
    with pytest.raises(ConfigError) as e:
        study.pin("…_1/conv_dw_6_bn_1/batchnorm/sub1/add", "a53")
    assert str(e.value) == (
        "unknown node '…_1/conv_dw_6_bn_1/batchnorm/sub1/add'; it is part of this name: "
        "'…mul;mobilenet_v1_025_96_1/conv_dw_6_bn_1/batchnorm/sub1/add' (op #57); "
        "give the whole name or an op id (\"#<op id>\")")  # fmt: skip
    study.pin("#57", "a53")
    assert study.placement.loc[57, "processor"] == "a53" and study.placement.loc[57, "name"].endswith(DW6 + "/add")
    study.unpin("#57")


def test_a_part_of_several_names_lists_them_ends_first(study):
    with pytest.raises(ConfigError) as e:
        study.set_bits("int16", layer="conv_dw_6_bn_1/batchnorm/sub1")
    msg = str(e.value)
    assert msg.startswith("unknown node 'conv_dw_6_bn_1/batchnorm/sub1'; it is part of these names: "
                          "'…orm/mul;mobilenet_v1_025_96_1/conv_dw_6_bn_1/batchnorm/sub1' (ops #55, #56, #57, #58, #59); ")
    assert msg.count("(op #") == 4


def test_a_name_part_of_many_names_keeps_the_closest_names(study):
    with pytest.raises(ConfigError, match=r"^unknown node 'batchnorm'; some of the 146 valid names: "):
        study.pin("batchnorm", "a53")
