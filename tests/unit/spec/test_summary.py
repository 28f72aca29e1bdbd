"""`tierctl show`'s summary: it reports every difference in the rendered argv, and only those."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SMALL_SPEC, CliResult
from tests.strategies import spec_dicts
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec_text, resolve_tier
from tierctl.spec.summary import argv_differences, summarise

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _summary(data: dict[str, Any]) -> tuple[Any, list[list[str]]]:
    tier = resolve_tier(load_spec_text(dump_yaml(data), "gen.yaml"))
    return summarise(tier), [r.argv for r in tier.replicas.values()]


def _argv_rows(summary: Any) -> list[Any]:
    return [d for d in summary.differences if not d.setting.startswith("env ")]


def test_a_flag_set_to_false_is_not_on(tmp_path: Any, run_cli: Callable[..., CliResult]) -> None:
    data = yaml.safe_load(SMALL_SPEC.read_text())
    data["replicas"]["r2"]["args"] = {"enable-metrics": False}
    summary, argvs = _summary(data)
    assert "--enable-metrics" in argvs[0]
    assert "--enable-metrics" not in argvs[1]
    rows = {d.setting: d.values for d in summary.differences}
    assert rows == {"--enable-metrics": ("on", "(unset)")}
    spec = tmp_path / "tier.yaml"
    spec.write_text(dump_yaml(data))
    result = run_cli("show", str(spec))
    assert result.code == 0
    assert "identical argv" not in result.out
    assert "--enable-metrics" in result.out


def test_the_unchanged_small_model_is_identical(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("show", str(SMALL_SPEC))
    assert "replicas run identical argv and env" in result.out


def test_argv_forms_and_order_are_differences() -> None:
    assert argv_differences([["x", "--a", "1"], ["x", "--a", "1"]]) == []
    # --a=1 and --a 1 mean the same to argparse but are not the same argv: still reported.
    assert argv_differences([["--a=1", "--b"], ["--a", "1", "--b"]])[0].setting == (
        "argv order or form"
    )
    assert argv_differences([["--a", "1", "--b"], ["--b", "--a", "1"]])[0].values == (
        "as first",
        "differs",
    )
    assert argv_differences([["serve", "m1", "--a"], ["serve", "m2", "--a"]])[0].values == (
        "serve m1",
        "serve m2",
    )
    rows = argv_differences([["--x", "1", "--x", "2"], ["--x", "1"]])
    assert rows[0].values == ("1 ; 2", "1")
    assert argv_differences([["--no-x"], ["--x"]])[0].setting == "--no-x"


@SETTINGS
@given(spec_dicts())
def test_no_argv_row_exactly_when_the_rendered_argv_are_equal(data: dict[str, Any]) -> None:
    summary, argvs = _summary(data)
    identical = all(argv == argvs[0] for argv in argvs)
    assert (not _argv_rows(summary)) == identical


@SETTINGS
@given(spec_dicts(), st.data())
def test_changing_one_replicas_flag_is_shown(data: dict[str, Any], draw: st.DataObject) -> None:
    if len(data["replicas"]) < 2:
        return
    mutated = copy.deepcopy(data)
    name = draw.draw(st.sampled_from(sorted(mutated["replicas"])))
    fixed = ("port", "prefill-decode-interval")  # the variant template needs these
    candidates = sorted(k for k in data["engine"]["args"] if k not in fixed)
    if not candidates:
        return  # a generated spec may carry only the fixed flags: nothing to change
    flag = draw.draw(st.sampled_from(candidates))
    value = draw.draw(st.sampled_from([False, True, 7, "other-value", None]))
    mutated["replicas"][name].setdefault("args", {})[flag] = value
    summary, argvs = _summary(mutated)
    if any(argv != argvs[0] for argv in argvs):
        rows = _argv_rows(summary)
        assert rows, argvs
        # The row names a flag whose tokens really differ (or the order), never a lookalike.
        for row in rows:
            assert len(set(row.values)) > 1
