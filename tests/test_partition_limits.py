"""``processors.<name>.max_partitions``: an accelerator whose runtime takes a limited number of
offloaded partitions (vsi-npu's NPU: one TIM-VX NBG graph, as the VeriSilicon RFC says).  A plan over
the limit is estimated all the same and flagged: ``study.partition_limits``, a
``PartitionLimitWarning`` from ``export()``, a note from ``npukit study``."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES, run_cli

import npukit

MOBILENET = SAMPLES / "mobilenet_v1_025_int8.tflite"
OVER = ("npu is given 2 offloaded partitions (0, 2), and its runtime takes at most 1 (processors.npu.max_partitions "
        "= 1): the chip would refuse this plan; pins or support toggles that leave npu 1 partition fix it")  # fmt: skip


def test_a_pin_that_splits_the_npu_in_two_is_flagged_and_still_estimated(tmp_path):
    s = npukit.Study(MOBILENET, "vsi-npu", {"placement": "first-fit"})
    assert s.soc.processor("npu").max_partitions == 1
    assert list(s.partitions["processor"]) == ["npu"] and s.partition_limits == ()
    s.pin("#26", "a53")  # an op in the middle of the network: the NPU's ops before and after it are two calls
    assert list(s.partitions["processor"]) == ["npu", "a53", "npu"]
    assert s.partition_limits == (OVER,)
    assert s.totals["latency_us"] > 0  # estimated all the same
    with pytest.warns(npukit.PartitionLimitWarning) as rec:
        s.export(tmp_path / "e")
    assert [str(w.message) for w in rec] == [f"npukit: the exported program: {OVER}"]
    assert (tmp_path / "e" / "manifest.json").is_file()  # written all the same
    s.unpin("#26")
    assert s.partition_limits == ()
    # a runtime that takes two calls: the same plan holds
    two = s.soc.with_changes({"processors.npu.max_partitions": 2})
    assert npukit.Study(MOBILENET, two, {"placement": "first-fit", "pins": {"#26": "a53"}}).partition_limits == ()


def test_max_partitions_must_be_a_positive_count():
    soc = npukit.load_soc("vsi-npu")
    for bad in (0, -1, 1.5, "one"):
        with pytest.raises(npukit.ProfileError) as e:
            soc.with_changes({"processors.npu.max_partitions": bad})
        assert "processors.npu.max_partitions" in str(e.value), str(e.value)


@pytest.mark.slow
def test_npukit_study_notes_a_plan_over_the_limit():
    r = run_cli("study", MOBILENET, "--soc", "vsi-npu", "--placement", "first-fit", "--pin", "#26=a53")
    assert r.returncode == 0, r.stderr
    assert f"note: {OVER}\n" in r.stdout
    r = run_cli("study", MOBILENET, "--soc", "vsi-npu", "--placement", "first-fit", "--pin", "#26=a53", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["partition_limits"] == [OVER]
    r = run_cli("study", MOBILENET, "--soc", "vsi-npu", "--json")
    assert json.loads(r.stdout)["partition_limits"] == []


@pytest.mark.slow
def test_npukit_study_export_notes_a_plan_over_the_limit_without_a_python_warning(tmp_path):
    """``npukit study ... --export`` printed the limit twice: as its note and, on stderr, as Python's
    warning with npukit's own source line ('npukit/cli/study.py:206: PartitionLimitWarning: ...
    proj = s.export(args.export)').  Only the note is printed; the export is written."""
    for extra in ((), ("--json",)):
        out = tmp_path / f"e{len(extra)}"
        r = run_cli("study", MOBILENET, "--soc", "vsi-npu", "--placement", "first-fit", "--pin", "#26=a53",
                    "--export", out, *extra)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        assert (out / "manifest.json").is_file()
        if extra:
            assert json.loads(r.stdout)["partition_limits"] == [OVER]
        else:
            assert f"note: {OVER}\n" in r.stdout


HELD = "the cost model's choice held to npu's max_partitions = 1"


def test_the_cost_policy_holds_its_plan_to_the_limit_and_says_so():
    s = npukit.Study(MOBILENET, "vsi-npu", {"placement": "cost", "pins": {"#26": "a53"}})
    # the search's plan (npu, a53, npu) and first-fit's are both over the limit: the chip would refuse
    # them; of the two NPU partitions the held plan keeps the one that gives the faster plan
    assert list(s.partitions["processor"]) == ["a53", "npu"] and s.partition_limits == ()
    assert list(s.partitions["ops"]) == [27, 119]
    pl = s.placement
    assert set(pl["processor"][:27]) == {"a53"} and set(pl["processor"][27:]) == {"npu"}
    npu_macs = int(s.costs["macs"][27:].sum())
    assert npu_macs == 5_989_504 and int(s.costs["macs"].sum()) == 7_491_712
    limit = (f"npu: its runtime takes at most 1 partition (processors.npu.max_partitions = 1): npu keeps ops "
             f"#27..#145 ({npu_macs:,} MACs)")  # fmt: skip
    lat = s.totals["latency_us"]
    why = s.reasons()
    assert why[0].startswith("a53: estimated ") and why[0].endswith(f": kept {HELD}; {limit}")
    assert "us with the cost model's choice (over a partition limit), " in why[0]
    assert f", {lat:,.1f} us with {HELD}, " in why[0]
    assert why[26] == "pinned to a53 by the user"
    assert why[27].startswith("npu: accepted as npu.add; estimated ")
    # the held plan is the plan of its own verdicts: first-fit with the same ops pinned gives its figures
    ff = npukit.Study(MOBILENET, "vsi-npu", {"placement": "first-fit", "pins": {f"#{i}": "a53" for i in range(27)}})
    assert list(ff.partitions["ops"]) == [27, 119] and ff.totals["latency_us"] == lat


def test_a_plan_whose_pins_break_the_limit_stays_flagged_under_the_cost_policy():
    s = npukit.Study(MOBILENET, "vsi-npu", {"placement": "cost", "pins": {"#6": "npu", "#26": "a53", "#120": "npu"}})
    assert list(s.partitions["processor"]) == ["npu", "a53", "npu"]
    assert s.partition_limits == (OVER,)


def test_a_plan_within_the_limit_is_not_held():
    two = npukit.load_soc("vsi-npu").with_changes({"processors.npu.max_partitions": 2})
    s = npukit.Study(MOBILENET, two, {"placement": "cost", "pins": {"#26": "a53"}})
    free = npukit.Study(MOBILENET, two.with_changes({"processors.npu.max_partitions": 100}),
                        {"placement": "cost", "pins": {"#26": "a53"}})  # fmt: skip
    assert list(s.partitions["processor"]) == ["npu", "a53", "npu"] and s.partition_limits == ()
    assert s.totals["latency_us"] == free.totals["latency_us"]
    assert "held to" not in " ".join(s.reasons())
    assert str(free.soc.path).endswith("vsi-npu.toml (edited)")  # edited twice: said once
