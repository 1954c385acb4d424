"""Issue 3: the bundled SoC profiles, the generated reference page and the op-name list."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from conftest import DIGITS_ONNX, ROOT, assert_cli_error, initializer, onnx_model, run_cli, save_onnx, tensor_info

import npukit
from npukit import soc as socmod
from npukit.opset import canonical, full_names, short_names

BUNDLED = sorted(socmod.bundled())


def test_the_required_profiles_are_bundled():
    assert {"arm-dsp-dla", "vsi-npu", "riscv-accel", "hexagon-like", "cortex-m7-cmsis-nn", "ethos-u55-256"} <= set(BUNDLED)
    assert any(len(npukit.load_soc(n).processors) >= 4 for n in BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_profile_is_valid(name):
    p = npukit.load_soc(name)
    assert p.name == name
    assert p.description.strip()
    hosts = [q for q in p.processors if q.host]
    assert [q.name for q in hosts] == [p.host]
    assert hosts[0].kind == "cpu"
    assert p.accelerators and set(p.order) == set(p.accelerators)
    for q in p.processors:
        assert q.name.isidentifier()
        assert q.clock_mhz > 0 and q.dram_bytes_per_cycle > 0
        assert q.bits and q.default_bits in q.macs_per_cycle
        if not q.host:
            assert q.ops, f"{name}: accelerator {q.name} supports no op"
            for op in q.ops:
                assert canonical(op) == op
    # every pair of processors is joined by a link
    for a in p.names:
        for b in p.names:
            if a != b:
                assert p.link(a, b).bandwidth_gbps > 0
    # a profile round-trips through its TOML
    again = socmod.parse_profile(tomllib.loads(p.to_toml()), "again")
    assert again == p and again.digest == p.digest


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_profile_cites_sources(name):
    p = npukit.load_soc(name)
    assert p.sources, f"{name}: no sources"
    assert all(isinstance(s, str) and len(s.strip()) > 10 for s in p.sources)
    text = socmod.bundled()[name].read_text()
    assert text.lstrip().startswith("#"), f"{name}: the file opens with no comment on where its figures come from"
    cites = sum(("http" in s) or any(w in s for w in ("TRM", "datasheet", "Datasheet", "manual", "brief", "Illustrative",
                                                       "illustrative", "SPRU", "Reference"))
                for s in p.sources)  # fmt: skip
    assert cites >= 1, p.sources


def test_reference_page_is_generated_from_the_schema():
    page = (ROOT / "docs" / "soc-profile.md").read_text(encoding="utf-8")
    assert page.rstrip("\n") == socmod.reference_markdown().rstrip("\n"), (
        "docs/soc-profile.md is stale: regenerate it with `python -m npukit.soc > docs/soc-profile.md`"
    )


def test_reference_page_documents_every_field():
    ref = socmod.reference_markdown()
    for section, fields in socmod.SECTION_FIELDS.items():
        for f in fields:
            assert f"| `{f.key}` |" in ref, (section, f.key)
            assert f.doc.strip(), (section, f.key)


def test_every_schema_field_is_accepted_by_the_loader():
    """The reference page and the loader agree: a field from the page is accepted, a typo is not."""
    base = tomllib.loads(socmod.bundled()["arm-dsp-dla"].read_text())
    base["processors"]["dla"]["onchip_bytes"] = 1024  # a documented field
    npukit.load_soc(base)
    base["processors"]["dla"]["onchip_byte"] = 1024
    with pytest.raises(npukit.ProfileError, match=r"processors\.dla\.onchip_byte: unknown field; .*'onchip_bytes'"):
        npukit.load_soc(base)


def test_what_if_edits_are_validated():
    p = npukit.load_soc("arm-dsp-dla")
    assert p.with_changes({"processors.dla.clock_mhz": 500}).processor("dla").clock_mhz == 500
    with pytest.raises(npukit.ProfileError, match=r"processors\.dla\.clock_mhz: must be a positive number, got -5"):
        p.with_changes({"processors.dla.clock_mhz": -5})


def test_unknown_processor_lists_valid_names():
    p = npukit.load_soc("arm-dsp-dla")
    with pytest.raises(npukit.ConfigError, match=r"unknown processor 'dlaa'; did you mean 'dla'\? valid names: 'arm', 'dla', 'dsp'"):
        p.processor("dlaa")


def test_relax_op_list_matches_the_installed_tvm():
    from npukit.tvm import load

    tvm = load()
    registry = set(tvm.ir.Op.list_op_names())
    listed = full_names()
    assert len(listed) > 100
    missing = [n for n in listed if n not in registry]
    assert missing == [], f"npukit/relax_ops.txt names ops this TVM does not register: {missing}"
    assert len(set(listed)) == len(listed)
    # short names are unambiguous, and the ops of the samples are known by both names
    assert len(short_names()) == len(listed)
    for full in ("relax.nn.conv2d", "relax.matmul", "relax.nn.softmax", "relax.topk",
                 "relax.vision.all_class_non_max_suppression", "relax.nn.max_pool2d", "relax.quantize"):  # fmt: skip
        assert full in listed
        assert canonical(full) == full.rsplit(".", 1)[1] == canonical(full.rsplit(".", 1)[1])


def test_unknown_op_name_lists_the_closest():
    with pytest.raises(npukit.ConfigError, match=r"unknown op 'sofmax'; closest valid names: 'softmax'"):
        canonical("sofmax")


def test_an_op_set_true_is_accepted_and_false_is_left_out():
    """``sigmoid = true`` accepts the op (documented); ``sigmoid = false`` was refused with "must be a
    table, got bool": it now leaves the op out, as omitting it does.  A misspelt op is still refused."""
    base = npukit.load_soc("arm-dsp-dla")
    assert "sigmoid" in base.processor("dla").ops
    off = base.with_changes({"processors.dla.ops.sigmoid": False})
    assert "sigmoid" not in off.processor("dla").ops
    assert set(off.processor("dla").ops) == set(base.processor("dla").ops) - {"sigmoid"}
    on = off.with_changes({"processors.dla.ops.sigmoid": True})
    assert "sigmoid" in on.processor("dla").ops and not on.processor("dla").ops["sigmoid"].ranks  # no limits
    with pytest.raises(npukit.ProfileError, match=r"processors\.dla\.ops\.sigmod: unknown op 'sigmod'"):
        base.with_changes({"processors.dla.ops.sigmod": False})


def test_a_json_profile_that_writes_a_processor_twice_is_refused(tmp_path):
    """JSON keeps the last of two equal keys silently (the first processor vanished and the second
    moved to the front); TOML refuses it, and so does npukit for JSON now."""
    import json

    doc = tomllib.loads((ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml").read_text())
    text = json.dumps(doc).replace('"processors": {', '"processors": {"dsp": {"kind": "dsp", "clock_mhz": 1}, ', 1)
    path = tmp_path / "twice.json"
    path.write_text(text)
    with pytest.raises(npukit.ProfileError) as e:
        npukit.load_soc(path)
    assert str(e.value) == f"{path}: 'dsp' is written twice in one JSON object (the second would replace the first); write it once"
    good = tmp_path / "once.json"
    good.write_text(json.dumps(doc))
    assert [p.name for p in npukit.load_soc(good).processors] == ["arm", "dsp", "dla"]


def test_a_directory_given_as_the_profile_is_refused_naming_it(tmp_path, monkeypatch):
    """Was Python's own words: "somedir: cannot read: [Errno 21] Is a directory: 'somedir'"."""
    (tmp_path / "somedir").mkdir()
    monkeypatch.chdir(tmp_path)
    want = ("somedir: is a directory, expected a SoC profile file (.toml or .json) or a bundled profile's name "
            f"({', '.join(BUNDLED)})")  # fmt: skip
    for spec in ("somedir/", Path("somedir")):
        with pytest.raises(npukit.ProfileError) as e:
            npukit.Study(DIGITS_ONNX, spec)
        assert str(e.value) == want
    assert assert_cli_error(run_cli("study", DIGITS_ONNX, "--soc", "somedir/", cwd=tmp_path)) == want
    # a directory that happens to bear a bundled profile's name (an output folder, say) leaves the name to the profile
    (tmp_path / "arm-dsp-dla").mkdir()
    assert npukit.load_soc("arm-dsp-dla").name == npukit.load_soc(ROOT / "npukit/profiles/arm-dsp-dla.toml").name
    with pytest.raises(npukit.ProfileError, match=r"^arm-dsp-dla: is a directory, expected a SoC profile file"):
        npukit.load_soc("arm-dsp-dla/")


def _arm_dsp_dla() -> dict:
    return tomllib.loads((ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml").read_text())


def _rename_dla(d: dict, name: str) -> None:
    """The DLA renamed, its kernel library left to default to its name."""
    dla = d["processors"].pop("dla")
    dla.pop("kernel_library", None)
    d["processors"][name] = dla
    d["placement"]["order"] = [name if x == "dla" else x for x in d["placement"]["order"]]
    for ops in d["placement"].get("prefer", {}).values():
        ops[:] = [name if x == "dla" else x for x in ops]


@pytest.mark.parametrize("edit,field,text", [
    (lambda d: d["processors"]["dsp"]["ops"].update(gelu={"kernel_max": [3, 3]}), "processors.dsp.ops.gelu.kernel_max",
     "does not apply to gelu: it limits convolutions and pools (an op of another kind never reads it)"),
    (lambda d: d["processors"]["dla"]["ops"]["conv2d"].update(max_k=4), "processors.dla.ops.conv2d.max_k",
     "does not apply to conv2d: it limits topk (an op of another kind never reads it)"),
    (lambda d: d.setdefault("placement", {}).setdefault("prefer", {}).update(softmax=["dla"]), "placement.prefer.softmax[0]",
     "'dla' does not run softmax (processors.dla.ops has no softmax), so preferring it changes nothing"),
    (lambda d: d["links"].append({"between": ["dla", "dla"], "bandwidth_gbps": 1.0}), "links[",
     "names 'dla' twice: a link joins two processors (no tensor crosses from a processor to itself)"),
    (lambda d: d["processors"]["arm"].update(ops={"relu": {}}), "processors.arm.ops",
     "the host runs every op, so its ops table is never read: remove it (limits belong to the accelerators)"),
    # two links joining the same processors (either way round): the first was used, the second ignored
    (lambda d: d["links"].append({**d["links"][0], "between": d["links"][0]["between"][::-1], "bandwidth_gbps": 0.5}),
     "links[", "joins "),
    (lambda d: d["links"].append({"between": ["*", "*"], "bandwidth_gbps": 9.0}) or d["links"].append(
        {"between": ["*", "*"], "bandwidth_gbps": 1.0}), "links[", "joins '*' and '*', as links["),
    # two links naming one processor each tie for the pair they both join: the first listed was used
    (lambda d: d["links"].extend([{"between": ["arm", "*"], "bandwidth_gbps": 1.0},
                                  {"between": ["*", "dla"], "bandwidth_gbps": 4.0}]), "links[2].between",
     "['*', 'dla'] and links[1]'s ['arm', '*'] both join 'arm' and 'dla', each naming one of them, so neither is the "
     "more specific and the first listed would be used: add a link with between = [\"arm\", \"dla\"]"),
    (lambda d: d["placement"].update(order=[]), "placement.order",
     "must not be empty (leave the field out for the order of the [processors.*] tables)"),
    # a preference listing nothing, or a processor twice (placement.order refuses both)
    (lambda d: d["placement"]["prefer"].update(softmax=[]), "placement.prefer.softmax",
     "must not be empty (leave softmax out for the placement order)"),
    (lambda d: d["placement"]["prefer"].update(softmax=["dsp", "dsp"]), "placement.prefer.softmax",
     "lists an entry twice: ['dsp', 'dsp']"),
    (lambda d: d["processors"]["dla"].update(clock_mhz=float("inf")), "processors.dla.clock_mhz",
     "must be a finite number, got inf"),
    # an accelerator's name is its kernel calls' C prefix unless kernel_library says otherwise
    (lambda d: _rename_dla(d, "npk"), "processors.npk",
     "its name is the C prefix of its generated kernel calls (kernel_library defaults to it), and kernel library prefix "
     "'npk' is reserved"),
])  # fmt: skip
def test_a_profile_entry_that_could_never_take_effect_is_refused(edit, field, text):
    """Such entries loaded without a word and changed nothing (a user's limit silently not applied)."""
    doc = _arm_dsp_dla()
    edit(doc)
    with pytest.raises(npukit.ProfileError) as e:
        npukit.load_soc(doc)
    assert field in str(e.value) and text in str(e.value)


def test_a_link_naming_both_processors_settles_two_that_name_one_each():
    doc = _arm_dsp_dla()
    doc["links"] += [{"between": ["arm", "*"], "bandwidth_gbps": 1.0}, {"between": ["*", "dla"], "bandwidth_gbps": 4.0},
                     {"between": ["dla", "arm"], "bandwidth_gbps": 2.0}]  # fmt: skip
    soc = npukit.load_soc(doc)
    assert [soc.link(a, b).bandwidth_gbps for a, b in [("arm", "dla"), ("dla", "arm"), ("arm", "dsp"), ("dsp", "dla")]] \
        == [2.0, 2.0, 1.0, 4.0]


def test_a_boundarys_transfer_names_the_link_it_crossed():
    """explain gave a transfer's formula and figures but not which [[links]] entry they came from: with a
    shared bus ["*", "*"] and a link of two processors, the reader matched numbers to find out."""
    doc = _arm_dsp_dla()
    doc["links"].append({"between": ["dla", "arm"], "bandwidth_gbps": 2.0, "via_dram": False})
    s = npukit.Study(DIGITS_ONNX, npukit.load_soc(doc), placement="first-fit").set_support("dla", "relu", False)
    b = s.boundaries.set_index("tensor").loc["/relu1/Relu_output_0"]
    assert (b.src, b.dst, b.bytes, b.transfer_us) == ("arm", "dla", 2048.0, 1.024)
    assert ('    transfer_us: over the link ["dla", "arm"]: latency_us + 1 * bytes / (bandwidth_gbps*1000) '
            '= 0 + 1*2,048/(2*1000) = 1.024 us\n') in s.explain("/conv2/Conv")  # fmt: skip
    shared = npukit.Study(DIGITS_ONNX, "arm-dsp-dla", placement="first-fit").set_support("dla", "relu", False)
    assert ('    transfer_us: over the link ["*", "*"]: latency_us + 2 * bytes / (bandwidth_gbps*1000) '
            '= 5 + 2*2,048/(8*1000) = 5.512 us (via shared DRAM: write + read)\n') in shared.explain("/conv2/Conv")  # fmt: skip


def test_an_accelerator_named_as_its_kernel_library_loads():
    doc = _arm_dsp_dla()
    _rename_dla(doc, "npu")
    assert npukit.load_soc(doc).processor("npu").kernel_library == "npu"


def test_axis_last_holds_a_layer_norm_to_the_innermost_axis(tmp_path):
    """The bundled DSPs say layer_norm = { axis = "last" }, which the rule never read for a norm (its
    axes attribute): a layer norm over axis 1 of a [1, 8, 16] tensor ran there."""
    from onnx import helper as h

    def study(axis: int):
        node = h.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln", axis=axis)
        m = onnx_model([node], [tensor_info("x", [1, 8, 16])], [tensor_info("y", [1, 8, 16])],
                       [initializer("g", [16] if axis == -1 else [8, 16]), initializer("b", [16] if axis == -1 else [8, 16])])  # fmt: skip
        return npukit.Study(save_onnx(m, tmp_path / f"ln{axis}.onnx"), "arm-dsp-dla", placement="first-fit")

    last = study(-1)
    assert list(last.placement["processor"]) == ["dsp"]
    inner = study(1)  # normalises over the last two axes
    v = inner.result.verdicts[(0, "dsp")]
    assert not v.ok and v.rule == "axis" and list(inner.placement["processor"]) == ["arm"]


@pytest.mark.parametrize("name", BUNDLED)
def test_an_accelerator_that_takes_reshape_takes_squeeze(name):
    """A squeeze is a reshape that drops unit dims (torch.export writes one for every select and
    unbind): no bundled accelerator took it, so an LSTM's squeezes crossed to the host and back
    (ethos-u55-256: 4 partitions, 18 boundaries, 126 us; 2, 2 and 89 us with them on the NPU)."""
    soc = npukit.load_soc(name)
    for p in soc.processors:
        if not p.host and "reshape" in p.ops:
            assert "squeeze" in p.ops, p.name


def test_an_npu_that_takes_constant_weights_only_refuses_an_activation_matmul(tmp_path):
    """ethos-u55-256's matmul is Vela's FULLY_CONNECTED (constant weights): its profile said an
    activation x activation matmul is not supported, but no rule could say it, and a rank-3
    q @ k^T was placed on the NPU.  const_weights = true says it; a weight read through a
    dequantize or a transpose is still the model's constant."""
    from conftest import initializer, onnx_model, save_onnx, tensor_info
    from onnx import helper as h

    nodes = [h.make_node("MatMul", ["x", "wq"], ["q"], name="q"), h.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
             h.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
             h.make_node("MatMul", ["q", "kt"], ["s"], name="scores")]  # fmt: skip
    m = onnx_model(nodes, [tensor_info("x", [1, 6, 8])], [tensor_info("s", [1, 6, 6])],
                   [initializer("wq", [8, 8], 1), initializer("wk", [8, 8], 2)])  # fmt: skip
    s = npukit.Study(save_onnx(m, tmp_path / "attn.onnx"), "ethos-u55-256", placement="first-fit")
    verdict = dict(zip(s.placement["name"], s.placement["npu"]))
    proc = dict(zip(s.placement["name"], s.placement["processor"]))
    assert verdict["q"] == verdict["k"] == "accepted" and proc["q"] == proc["k"] == "npu"
    assert verdict["scores"].startswith("both operands are activations (an activation x activation matmul); takes "
                                        "constant weights only")  # fmt: skip
    assert proc["scores"] == "m55"


@pytest.mark.parametrize("field,value,path", [
    ("processors.dla.ops.sigmod", {}, "processors.dla.ops.sigmod"),
    ("processors.dla.efficiency", {"conv2dd": 0.5}, "processors.dla.efficiency.conv2dd"),
    ("processors.dla.efficiency", {"conv2dd.depthwise": 0.5}, "processors.dla.efficiency.conv2dd.depthwise"),
    ("placement.prefer", {"softmaxx": ["dsp"]}, "placement.prefer.softmaxx"),
])  # fmt: skip
def test_a_misspelt_op_key_is_named_by_its_whole_path(field, value, path):
    """A misspelt op in an ops table, an efficiency key or a placement preference was named by the
    table it sits in ('processors.dla.ops: unknown op ...'); the error names the key itself, as every
    other profile error names its field."""
    with pytest.raises(npukit.ProfileError) as ei:
        npukit.load_soc("arm-dsp-dla").with_changes({field: value})
    op = path.rsplit(".", 1)[1] if "depthwise" not in path else "conv2dd"
    assert str(ei.value).startswith(f"{npukit.load_soc('arm-dsp-dla').path} (edited): {path}: unknown op {op!r}; "), str(ei.value)


@pytest.mark.parametrize("field,value,message", [
    ("sources", "a datasheet", "sources: must be a list of strings, got 'a datasheet'"),
    ("links.0.between", "arm,dsp", "links.0.between: must be a list of strings, got 'arm,dsp'"),
    ("processors.dla.ops.conv2d.strides", 2, "processors.dla.ops.conv2d.strides: must be a list of integers, got 2"),
])  # fmt: skip
def test_a_list_field_given_one_value_says_list_of_what_in_words(field, value, message):
    """A list field given a single value said 'must be a list of strs' / 'of ints' (the schema's type
    names); it says strings / integers."""
    soc = npukit.load_soc("arm-dsp-dla")
    with pytest.raises(npukit.ProfileError) as ei:
        soc.with_changes({field: value})
    assert str(ei.value) == f"{soc.path} (edited): {message}"


def test_processors_linked_in_a_chain_name_every_missing_pair():
    """A chain arm - dsp - dla (the DSP and the DLA reach each other only through the host) was
    refused naming only the first pair without a link, so a profile of several processors was
    fixed one error at a time; the error names every missing pair and says no tensor is routed
    through a third processor."""
    soc = npukit.load_soc("arm-dsp-dla")
    chain = [{"between": ["arm", "dsp"], "bandwidth_gbps": 8.0}, {"between": ["arm", "dla"], "bandwidth_gbps": 8.0}]
    with pytest.raises(npukit.ProfileError) as ei:
        soc.with_changes({"links": chain})
    assert str(ei.value) == (
        f"{soc.path} (edited): links: no link between 'dsp' and 'dla'; a tensor crosses one link from the processor "
        "that makes it to the one that reads it (npukit does not route it through a third processor): add [[links]] "
        "with between = [\"dsp\", \"dla\"] and the figures of that route, one for each pair (or [\"*\", \"*\"] for a "
        "shared bus)")  # fmt: skip
    with pytest.raises(npukit.ProfileError, match=r"links: no link between 'arm' and 'dsp', nor between 'dsp' and "
                                                  r"'dla'; a tensor crosses one link"):  # fmt: skip
        soc.with_changes({"links": chain[1:]})


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_profile_saved_with_a_byte_order_mark_loads(tmp_path, suffix):
    """A profile a Windows editor saved as 'UTF-8 with BOM' was refused as 'not valid TOML: Invalid
    statement (at line 1, column 1)' (JSON: 'Unexpected UTF-8 BOM'); the mark is dropped on reading,
    as for a sweep's grid and a saved config."""
    soc = npukit.load_soc("arm-dsp-dla")
    text = soc.to_toml() if suffix == ".toml" else json.dumps(npukit.soc.profile.thawed(soc.raw))
    path = tmp_path / f"soc{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert npukit.load_soc(path) == soc


def test_a_grid_and_a_config_saved_with_a_byte_order_mark_load(tmp_path):
    """The sweep's grid and a saved config are read as the profile is: a leading byte-order mark is
    dropped (it was 'Invalid statement (at line 1, column 1)')."""
    from npukit.sweeps.grid import load_grid  # noqa: PLC0415

    grid = tmp_path / "grid.toml"
    grid.write_bytes(b"\xef\xbb\xbf" + b'[grid]\n"soc.processors.dla.clock_mhz" = [500, 1000]\n')
    assert [a.key for a in load_grid(grid).axes] == ["soc.processors.dla.clock_mhz"]
    cfg = tmp_path / "cfg.toml"
    cfg.write_bytes(b"\xef\xbb\xbf" + npukit.Config().with_placement("first-fit").to_toml().encode())
    assert npukit.Config.read(cfg).placement == "first-fit"


def test_an_op_set_false_in_the_profile_is_refused_as_disabled_not_as_missing(tmp_path):
    """``relu = false`` in an accelerator's ops table read as a missing key: 'relu is not in
    processors.dsp.ops'.  A user who disabled it reads that it is disabled, and where."""
    text = (ROOT / "npukit" / "profiles" / "arm-dsp-dla.toml").read_text()
    text = text.replace("[processors.dsp.ops]\n", "[processors.dsp.ops]\nrelu = false\n", 1)
    (tmp_path / "soc.toml").write_text(text)
    s = npukit.Study(DIGITS_ONNX, npukit.load_soc(tmp_path / "soc.toml"))
    dsp = s.placement.set_index("name")["dsp"]
    assert dsp["/relu1/Relu"] == "relu is disabled in the profile (processors.dsp.ops.relu = false)"
    assert dsp["/conv1/Conv"].startswith("conv2d is not in processors.dsp.ops")  # (left out: as before)


def test_a_profiles_description_says_the_instruction_set_its_exports_build_for():
    """riscv-accel said 'Bare-metal RV32IMC MCU' while its exports build as static riscv64 Linux
    programs run under qemu-riscv64: its descriptions now say what the build does, and that the
    figures are those of an RV32IMC-class MCU."""
    soc = npukit.load_soc("riscv-accel")
    assert soc.target == "riscv64-linux"
    for text in (soc.description, soc.processor("riscv").description):
        assert "riscv64 Linux" in text and "RV32IMC-class" in text, text
        assert "Bare-metal" not in text
    r = run_cli("socs")
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("riscv-accel"))
    assert "riscv64 Linux" in line
