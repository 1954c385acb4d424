"""Configs that say two things at once, or edits that have nothing to undo: refused, naming both
sides in the user's own words, the study as it was; and a listener's failure is not the edit's."""

from __future__ import annotations

import pytest
from conftest import DETECTOR, DIGITS_ONNX

import npukit
from npukit.cli import main as cli_main

SOC = "arm-dsp-dla"


def _study():
    return npukit.Study(DIGITS_ONNX, SOC, placement="first-fit")


@pytest.mark.parametrize("config", [{"disabled": ["arm:conv2d"]}, {"enabled": ["arm:topk"]}])
def test_a_config_toggling_the_host_is_refused_as_the_edit_is(config):
    which, entry = next(iter(config.items()))
    with pytest.raises(npukit.ConfigError) as ei:
        npukit.Study(DIGITS_ONNX, SOC, config)
    assert str(ei.value) == (f"{which}: {entry[0]}: arm is the host: it runs every op no accelerator takes; "
                             "toggle an accelerator (dsp, dla)")  # fmt: skip


def test_a_config_disabling_and_enabling_one_op_is_refused():
    with pytest.raises(npukit.ConfigError) as ei:
        npukit.Study(DIGITS_ONNX, SOC, {"disabled": ["dla:conv2d"], "enabled": ["dla:relax.nn.conv2d"]})
    assert str(ei.value) == ("support of conv2d on dla is both disabled and enabled (disabled: dla:conv2d; "
                             "enabled: dla:relax.nn.conv2d); keep one")  # fmt: skip


@pytest.mark.parametrize(("table", "a", "b"), [("pins", "dla", "arm"), ("layer_bits", "fp16", "int8")])
def test_two_entries_naming_one_op_with_different_values_are_refused(table, a, b):
    name = _study().graph.ops[0].name
    with pytest.raises(npukit.ConfigError) as ei:
        npukit.Study(DIGITS_ONNX, SOC, {table: {"0": a, "#0": b}, "placement": "first-fit"})
    assert str(ei.value) == f"{table}: '#0' = {b!r} and '0' = {a!r} name the same op(s) ({name!r}); keep one"


def test_removing_a_bit_width_a_layer_does_not_have_says_so():
    s = _study()
    with pytest.raises(npukit.ConfigError, match=r"^'/fc1/Gemm' is not given a bit-width; given a bit-width: none$"):
        s.set_bits(None, layer="/fc1/Gemm")
    s.set_bits("fp16", layer="/conv1/Conv")
    before = s.config
    with pytest.raises(npukit.ConfigError) as ei:
        s.set_bits(None, layer="/conv1/Conv/add")
    assert str(ei.value) == ("'/conv1/Conv/add' is not given a bit-width itself; it is held by the bit-width of "
                             "'/conv1/Conv': remove that one (set_bits(None, layer='/conv1/Conv'))")  # fmt: skip
    assert s.config == before


def test_errors_name_one_op_of_a_node_by_its_own_name():
    s = _study()
    with pytest.raises(npukit.ConfigError, match=r"^layer '/conv1/Conv/add' would run on arm, which cannot run its bit-width int2"):
        s.set_bits("int2", layer="/conv1/Conv/add")  # (one op of the node /conv1/Conv, stored by its own name)
    s.pin("/conv2/Conv/add", "dla")
    with pytest.raises(npukit.ConfigError) as ei:
        s.unpin("/flatten/Flatten")
    assert str(ei.value) == "'/flatten/Flatten' is not pinned; pinned: '/conv2/Conv/add'"


def test_disabling_an_op_a_pin_holds_there_is_said_as_this_edits_conflict():
    s = _study()
    s.pin("/conv2/Conv/add", "dla")
    before = (s.config, s.plan)
    with pytest.raises(npukit.ConfigError) as ei:
        s.set_support("dla", "add", False)
    assert str(ei.value) == "cannot disable add on dla: '/conv2/Conv/add' (add) is pinned to dla; unpin it first"
    assert (s.config, s.plan) == before


def test_a_listener_that_fails_neither_undoes_the_edit_nor_silences_the_others():
    s = _study()
    heard = []

    def broken(study):
        raise RuntimeError("view gone")

    s.subscribe(broken)
    s.subscribe(heard.append)
    with pytest.warns(RuntimeWarning, match=r"a listener of this study failed after the edit, which stands .*view gone"):
        s.set_bits("fp16", processor="dla")
    assert dict(s.config.bits) == {"dla": "fp16"}
    assert heard == [s]


def test_the_cli_refuses_disabling_and_enabling_one_op(capsys):
    rc = cli_main(["study", str(DIGITS_ONNX), "--soc", SOC, "--disable", "dla:conv2d", "--enable", "dla:conv2d"])
    assert rc == 2
    assert "--disable dla:conv2d and --enable dla:conv2d contradict each other; give one" in capsys.readouterr().err


def test_a_pin_refused_for_its_layers_width_says_where_the_pin_would_put_the_op_not_where_it_is():
    """backbone/conv1 runs on the C7x at fp32 (a layer width); a pin to the MMA (int8 / int16 only)
    would leave it to the host.  The message said "the partition placed it on a72" while the study,
    and the widget, showed it on c7x."""
    s = npukit.Study(DETECTOR, "tda4vm-like")
    s.set_bits("fp32", layer="backbone/conv1")
    assert s.placement.set_index("name").loc["backbone/conv1", "processor"] == "c7x"
    before = s.config
    with pytest.raises(npukit.ConfigError) as ei:
        s.pin("backbone/conv1", "mma")
    # (said as the pin and the width's conflict, as a pin to the host is: test_user_messages.PIN_VS_WIDTH)
    assert str(ei.value) == ("layer 'backbone/conv1' has bit-width fp32 and is pinned to mma, which cannot run fp32 "
                             "(processors.mma.macs_per_cycle lists int8, int16): the pin and the bit-width conflict; "
                             "unpin 'backbone/conv1', pin it to a processor that runs fp32 and takes conv2d (a72, c7x), "
                             "or give the layer a width mma runs")  # fmt: skip
    assert s.config == before


def test_a_support_edit_given_whole_by_the_ops_full_name_takes_effect():
    """'dla:relax.nn.conv2d' (an op's full Relax name, which the edits accept) and 'dla: conv2d' were
    validated and stored as given, and then matched no op: the conv stayed on the DLA, no word said."""
    for spelling in ("relax.nn.conv2d", " conv2d"):
        s = npukit.Study(DIGITS_ONNX, SOC, {"disabled": [f"dla:{spelling}"]})
        assert s.config.disabled == frozenset({("dla", "conv2d")})
        assert s.plan.processor[0] == "arm" and s.verdict_texts("dla")[0] == "user disabled conv2d on dla"
        assert s.config == npukit.Study(DIGITS_ONNX, SOC).set_support("dla", "conv2d", False).config
    cfg = npukit.Config(enabled=frozenset({("dla", "relax.nn.softmax")}), pins=(("/softmax/Softmax", "dla"),))
    assert npukit.Study(DIGITS_ONNX, SOC, cfg).plan.processor[-1] == "dla"
    with pytest.raises(npukit.ConfigError, match=r"^support of conv2d on dla is both disabled and enabled"):
        npukit.Study(DIGITS_ONNX, SOC, {"disabled": ["dla:relax.nn.conv2d"], "enabled": ["dla:conv2d"]})


def test_a_config_files_path_of_another_suffix_is_read_as_the_file(tmp_path):
    """Study(model, soc, "edits.cfg"): the path was parsed as TOML text ("config: not valid TOML")."""
    path = tmp_path / "edits.cfg"
    path.write_text('disabled = ["dla:conv2d"]\n')
    s = npukit.Study(DIGITS_ONNX, SOC, str(path))
    assert s.config.disabled == frozenset({("dla", "conv2d")})
    path.write_text('[pins]\n"/nope" = "dla"\n')
    with pytest.raises(npukit.ConfigError) as ei:
        npukit.Study(DIGITS_ONNX, SOC, str(path))
    assert str(ei.value).startswith(f"{path}: pins.\"/nope\": unknown node '/nope'")
