"""Resume after faults: never over a service in an unknown state, never after a failed gate,
nor after a failed apply that was rolled back (docs/rollout.md: a journal ending in a rollback
is refused); a failed dry run changed nothing and is retried."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.errors import InputError
from tierctl.rollout.executor import _open_journal
from tierctl.rollout.journal import Journal


def _journal(tmp_path: Path, events: list[tuple[str, str | None]]) -> Journal:
    j = Journal(tmp_path / "plan.journal.jsonl", "digest")
    for event, step in events:
        j.write(event, step)
    return j


def test_killed_during_rollback_of_a_failed_canary_is_refused(tmp_path: Path) -> None:
    j = _journal(
        tmp_path,
        [
            ("start", None),
            ("begin", "01-recreate-r2"),
            ("applied", "01-recreate-r2"),
            ("gate-failed", "01-recreate-r2"),
        ],
    )
    assert j.read().unfinished_rollback == "01-recreate-r2"
    with pytest.raises(InputError, match="rollback to OLD did not finish") as info:
        _open_journal(j, resume=True)
    assert "by hand" in (info.value.fix or "")


def test_failed_rollback_is_refused(tmp_path: Path) -> None:
    j = _journal(
        tmp_path,
        [("start", None), ("begin", "01-x"), ("failed", "01-x"), ("rollback-failed", "01-x")],
    )
    with pytest.raises(InputError, match="did not finish"):
        _open_journal(j, resume=True)


def test_failed_gate_rolled_back_is_refused(tmp_path: Path) -> None:
    j = _journal(
        tmp_path,
        [("start", None), ("begin", "01-x"), ("gate-failed", "01-x"), ("rolled-back", "01-x")],
    )
    with pytest.raises(InputError, match="rolled back after a failed gate"):
        _open_journal(j, resume=True)


def test_failed_apply_rolled_back_is_refused(tmp_path: Path) -> None:
    j = _journal(
        tmp_path,
        [
            ("start", None),
            ("begin", "00-a"),
            ("done", "00-a"),
            ("begin", "01-x"),
            ("failed", "01-x"),
            ("rolled-back", "01-x"),
        ],
    )
    assert j.read().rolled_back == "01-x"
    assert j.read().rolled_back_after == "failed"
    with pytest.raises(InputError, match="01-x rolled back after a failed apply") as info:
        _open_journal(j, resume=True)
    assert "new plan" in (info.value.fix or "")


def test_failed_dry_run_is_retried(tmp_path: Path) -> None:
    j = _journal(
        tmp_path,
        [
            ("start", None),
            ("begin", "00-a"),
            ("done", "00-a"),
            ("begin", "01-x"),
            ("dry-run-failed", "01-x"),
        ],
    )
    assert _open_journal(j, resume=True) == frozenset({"00-a"})
