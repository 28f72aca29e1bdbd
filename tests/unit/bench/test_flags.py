"""Workloads from CLI flags, and flag overrides of a workload file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import tierctl.cli.bench as cli_bench
from tierctl.bench.flags import WorkloadFlags, workload_from_flags
from tierctl.bench.workload import BurstLane, HammerLane
from tierctl.cli.main import option_labels
from tierctl.errors import InputError

EXAMPLE = Path(__file__).parents[3] / "examples" / "workloads" / "burst-hammer.yaml"


def test_lane_flags_build_every_lane():
    wl = workload_from_flags(
        WorkloadFlags(
            burst="4x1000",
            output_tokens=32,
            hammer_concurrency=3,
            hammer_tokens="10:2",
            hammer_count=9,
            seed=5,
            probe="/health_generate@250ms",
        )
    )
    burst, hammer = wl.lanes
    assert isinstance(burst, BurstLane)
    assert (burst.count, burst.input_tokens, burst.output_tokens) == (4, 1000, 32)
    assert isinstance(hammer, HammerLane)
    assert (hammer.concurrency, hammer.count, hammer.input_tokens) == (3, 9, 10)
    assert wl.seed == 5
    assert (wl.probe.path, wl.probe.interval_s) == ("/health_generate", 0.25)


def test_flags_override_a_file_but_keep_its_lanes():
    wl = workload_from_flags(WorkloadFlags(workload_path=str(EXAMPLE), seed=99, no_probe=True))
    assert wl.seed == 99
    assert wl.probe.enabled is False
    assert [lane.name for lane in wl.lanes] == ["burst", "hammer"]
    assert wl.probe.timeout_s == 3.0  # the file's other probe settings survive


def test_file_and_lane_flags_together_are_refused():
    with pytest.raises(InputError, match="either `workload_path` or lane flags") as info:
        workload_from_flags(WorkloadFlags(workload_path=str(EXAMPLE), burst="1x5"))
    # the library names its parameters; the CLI shows its option names in their place
    assert "either --workload or lane flags" in info.value.format(option_labels(["bench", "run"]))


@pytest.mark.parametrize(
    ("command", "args"),
    [("run", ["--url", "http://127.0.0.1:9"]), ("ab", ["--a", "http://a:1", "--b", "http://b:1"])],
)
def test_cli_workload_options_are_the_dataclass_fields(command, args):
    """`bench run`/`bench ab` offer every WorkloadFlags field, with the same default."""
    cmd = getattr(cli_bench, command)
    given = cmd.make_context(command, list(args)).params  # defaults applied, as click passes them
    for f in dataclasses.fields(WorkloadFlags):
        assert f.name in given, f"{f.name} has no option on bench {command}"
        assert given[f.name] == f.default, f.name
