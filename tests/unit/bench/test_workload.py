"""Workload files and flags: good files load, bad ones are located by line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.bench.plan import plan_requests
from tierctl.bench.workload import (
    HammerLane,
    load_workload,
    parse_burst,
    parse_probe,
    workload_from_dict,
)
from tierctl.errors import InputError

EXAMPLES = sorted((Path(__file__).parents[3] / "examples" / "workloads").glob("*.yaml"))

GOOD = """\
name: w
seed: 3
lanes:
  - kind: burst
    count: 2
    input_tokens: 100
    output_tokens: 8
  - kind: hammer
    rate_rps: 5
    count: 10
    input_tokens: 10
    output_tokens: 2
"""


def _file(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "w.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_examples_load_and_plan():
    assert len(EXAMPLES) >= 3
    for path in EXAMPLES:
        plan = plan_requests(load_workload(path))
        assert plan.size > 0, path


def test_good_file_defaults(tmp_path):
    wl = load_workload(_file(tmp_path, GOOD))
    assert wl.api == "chat"
    assert wl.probe.path == "/health"
    assert wl.probe.interval_s == 1.0
    assert wl.probe.timeout_s == 3.0
    assert wl.probe.unhealthy_after == 3
    assert isinstance(wl.lanes[1], HammerLane)


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("    count: 2\n", "    count: 2\n    colour: red\n", 6, "Extra inputs are not permitted"),
        (
            "    rate_rps: 5\n",
            "    rate_rps: 5\n    concurrency: 3\n",
            8,
            "exactly one of rate_rps",
        ),
        ("    count: 2\n", "    count: 0\n", 5, "greater than or equal to 1"),
        (
            "  - kind: hammer\n",
            "  - kind: hammer\n    name: burst\n",
            3,
            "lane names must be unique",
        ),
        ("kind: burst", "kind: blast", 4, "does not match any of the expected tags"),
    ],
)
def test_mutations_are_rejected_with_a_line(tmp_path, old, new, line, message):
    assert old in GOOD
    path = _file(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(InputError) as info:
        load_workload(path)
    text = info.value.format()
    assert f"w.yaml:{line}" in text
    assert message in text
    assert info.value.exit_code == 2


def test_not_yaml_and_not_a_mapping(tmp_path):
    with pytest.raises(InputError, match="not valid YAML") as info:
        load_workload(_file(tmp_path, "lanes: [\n  - {"))
    assert info.value.location is not None
    assert info.value.location.line is not None
    with pytest.raises(InputError, match="must be a mapping"):
        load_workload(_file(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(InputError, match="cannot read workload file"):
        load_workload(tmp_path / "nope.yaml")


def test_flags_dict_is_validated():
    with pytest.raises(InputError, match="at least 1 item"):
        workload_from_dict({"lanes": []})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/health", {"path": "/health"}),
        ("/health@2s", {"path": "/health", "interval_s": 2.0}),
        ("/health_generate@500ms", {"path": "/health_generate", "interval_s": 0.5}),
        ("/h@0.25", {"path": "/h", "interval_s": 0.25}),
    ],
)
def test_parse_probe(text, expected):
    assert parse_probe(text) == expected


@pytest.mark.parametrize("text", ["health", "/health@", "/health@-1s", "/health@fast"])
def test_parse_probe_rejects(text):
    with pytest.raises(InputError):
        parse_probe(text)


def test_parse_burst():
    assert parse_burst("8x20000") == (8, 20000)
    for bad in ("8", "x5", "0x5", "8x", "8*5"):
        with pytest.raises(InputError, match="COUNTxTOKENS"):
            parse_burst(bad)
