"""The write-ahead journal: what it records, how it is read back, what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.errors import InputError
from tierctl.rollout.journal import Journal


def test_done_and_begun_steps_are_read_back(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl", "digest-a")
    j.write("start")
    j.write("begin", "01")
    j.write("done", "01")
    j.write("begin", "02")
    state = Journal(tmp_path / "j.jsonl", "digest-a").read()
    assert state.done == {"01"}
    assert state.begun == {"02"}
    assert state.rolled_back is None
    assert not state.completed


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    j = Journal(path, "d")
    j.write("done", "01")
    with path.open("a") as f:
        f.write('{"event": "do')
    assert j.read().done == {"01"}


def test_a_journal_of_another_plan_is_refused(tmp_path: Path) -> None:
    Journal(tmp_path / "j.jsonl", "digest-a").write("start")
    with pytest.raises(InputError, match="different plan"):
        Journal(tmp_path / "j.jsonl", "digest-b").read()


def test_secret_values_never_reach_the_file(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl", "d", secrets=["s3cret-token"])
    j.write("failed", "01", error="agent said: bad token s3cret-token")
    text = (tmp_path / "j.jsonl").read_text()
    assert "s3cret-token" not in text
    assert "bad token ***" in text


def test_the_file_is_private(tmp_path: Path) -> None:
    Journal(tmp_path / "j.jsonl", "d").write("start")
    assert (tmp_path / "j.jsonl").stat().st_mode & 0o077 == 0
