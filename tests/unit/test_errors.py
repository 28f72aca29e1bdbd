"""Error messages: the library names its parameters, the CLI shows its own option names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tierctl.cli.main import option_labels
from tierctl.errors import InputError, Location, SpecError, SpecErrors


def test_format_puts_the_callers_names_for_declared_params_only() -> None:
    err = InputError(
        "`repetitions` must be at least 1 (see `output`)",
        rule="`repetitions` counts the order",
        fix="pass `repetitions` 2",
        value=0,
        params=("repetitions",),
    )
    assert err.format() == (
        "`repetitions` must be at least 1 (see `output`)\n"
        "  rule: `repetitions` counts the order\n"
        "  found: 0\n"
        "  fix: pass `repetitions` 2"
    )
    labelled = err.format({"repetitions": "--repeat", "output": "--output"})
    # `output` is not a declared parameter of this error: it stays as the library wrote it
    assert labelled.splitlines() == [
        "--repeat must be at least 1 (see `output`)",
        "  rule: --repeat counts the order",
        "  found: 0",
        "  fix: pass --repeat 2",
    ]


def test_spec_errors_pass_labels_to_each_problem() -> None:
    errs = SpecErrors(
        [
            SpecError("`a` bad", location=Location(file="t.yaml", line=3), params=("a",)),
            SpecError("`b` bad", params=("b",)),
        ]
    )
    assert errs.format({"a": "--a"}).splitlines() == [
        "t.yaml:3: --a bad",
        "`b` bad",
        "2 problems in the spec",
    ]


def test_option_labels_follow_the_invoked_command() -> None:
    ab = option_labels(["--debug", "bench", "ab", "--a", "http://x"])
    assert ab["repetitions"] == "--repeat"
    assert ab["a_url"] == "--a"
    assert option_labels(["rollout", "--plan", "p.json"])["plan_path"] == "--plan"
    assert option_labels(["render", "x.yaml"])["output"] == "--output"  # the long form wins
    assert "repetitions" not in option_labels(["no-such-command"])  # the group's own only


def test_the_cli_shows_option_names(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("bench", "ab", "--a", "http://127.0.0.1:9", "--b", "ftp://x", "--burst", "1x5")
    assert result.code == 2
    assert "--b must be an http(s) base URL" in result.err
    assert "`b_url`" not in result.err


def test_a_journal_error_reaches_the_cli_in_its_option_names(tmp_path: Path) -> None:
    from tierctl.rollout.journal import Journal

    path = tmp_path / "j.jsonl"
    path.write_text('{"plan": "other", "event": "begin"}\n', encoding="utf-8")
    with pytest.raises(InputError) as info:
        Journal(path, "this-plan").read()
    assert "`resume` continues the plan" in info.value.format()  # the library's own words
    assert "--resume continues the plan" in info.value.format(option_labels(["rollout"]))


def test_import_without_an_engine_names_the_engine_option(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  web:\n    image: nginx:1.27\n", encoding="utf-8")
    result = run_cli("import", str(compose), "--out", str(tmp_path / "tier.yaml"))
    assert result.code == 2, result.err
    assert "or pass --engine KIND==VERSION" in result.err
    assert "`engine`" not in result.err
