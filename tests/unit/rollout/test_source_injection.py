"""git:REF:PATH never hands git an option: REF and PATH are checked and read after
--end-of-options (once, git:--output=FILE:x wrote FILE)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.errors import InputError
from tierctl.rollout.source import check_git_source, read_source


@pytest.mark.parametrize(
    "spec",
    [
        "git:--output=/tmp/pwn:x",
        "git:-p:x",
        "git:a b:x",
        "git:v1:-x",
        "git:v1:a\x00b",
        "git:a..b:x",
    ],
)
def test_option_like_refs_and_paths_are_refused(spec: str, tmp_path: Path) -> None:
    with pytest.raises(InputError):
        check_git_source(spec)
    with pytest.raises(InputError):
        read_source(spec, tmp_path)


@pytest.mark.parametrize(
    "spec", ["git:v2026.11.1:prod/tier.yaml", "git:HEAD~2:a.yaml", "git:main@{1}:x"]
)
def test_plain_refs_pass(spec: str) -> None:
    ref, path = check_git_source(spec)
    assert spec == f"git:{ref}:{path}"


def test_nul_in_a_file_path_is_a_located_error() -> None:
    with pytest.raises(InputError, match="NUL byte"):
        read_source("compose\x00.yaml")
