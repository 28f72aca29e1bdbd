"""`catalog build` when pip's download does not finish: a located failure (exit code, the
reason, what to do), never a traceback (#41). The timeout is real: a real pip process is
killed when its time is up (0.05 s: before it can reach any index)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tierctl.catalog import wheel
from tierctl.errors import ExitCode, RuntimeFailure


def test_a_download_that_does_not_finish_is_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wheel, "PIP_TIMEOUT_S", 0.05)
    with pytest.raises(RuntimeFailure) as caught:
        wheel.download_wheel("sglang", "0.5.23", tmp_path)
    assert "sglang==0.5.23" in str(caught.value)
    assert "no answer within 0.05 s" in str(caught.value)
    assert caught.value.fix is not None
    assert "wheel" in caught.value.fix


def test_the_cli_says_so_without_a_traceback(
    run_cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wheel, "PIP_TIMEOUT_S", 0.05)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    result = run_cli("catalog", "build", "sglang==0.5.23", "--out", str(tmp_path / "c.json"))
    assert result.code == int(ExitCode.FAILURE), result.err
    assert "Traceback" not in result.err
    assert "no answer within" in result.err
    assert not (tmp_path / "c.json").exists()
