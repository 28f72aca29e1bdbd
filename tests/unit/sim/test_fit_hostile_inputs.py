"""``tierctl sim fit`` and cost model files on hostile paths: a FIFO with no writer, /dev/zero,
a directory, bad bytes, a file over the size limit. Each ends in a located input error (exit
2), never a hang, a traceback or unbounded memory: every one of them is read through
:mod:`tierctl.readers`."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tierctl.errors import InputError
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import DEFAULT_PRESET, preset
from tierctl.sim.costfile import read_cost_model
from tierctl.sim.fitting import fit_source

KINDS = ("auto", "steps", "bench", "sglang-log", "vllm-log")
#: A reader that blocks on a FIFO never returns: the test gives it this long, then fails.
PATIENCE_S = 60.0


def _refused(call: Callable[[], object]) -> InputError:
    """Run ``call`` in a thread; it must raise an InputError, and must not block."""
    raised: list[BaseException] = []

    def attempt() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(timeout=PATIENCE_S)
    assert not t.is_alive(), "the reader blocked"
    assert raised, "the hostile input was accepted"
    assert isinstance(raised[0], InputError), repr(raised[0])
    return raised[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _fit(path: Path | str, kind: str) -> Callable[[], object]:
    base, config = preset(DEFAULT_PRESET), EngineConfig.from_argv([])
    return lambda: fit_source(path, kind, base, config)


@pytest.mark.parametrize("kind", KINDS)
def test_a_fifo_is_refused_by_every_fit_source(kind: str, fifo: Path) -> None:
    err = _refused(_fit(fifo, kind))
    assert "not a regular file" in err.message
    assert err.location is not None
    assert err.location.file == str(fifo)


@pytest.mark.parametrize("kind", KINDS)
def test_dev_zero_is_refused_by_every_fit_source(kind: str) -> None:
    assert "not a regular file" in _refused(_fit("/dev/zero", kind)).message


@pytest.mark.parametrize("kind", KINDS)
def test_a_directory_is_refused_by_every_fit_source(kind: str, tmp_path: Path) -> None:
    assert "directory" in _refused(_fit(tmp_path, kind)).message


@pytest.mark.parametrize("kind", ["steps", "bench", "sglang-log", "vllm-log"])
def test_a_file_over_the_trace_limit_is_refused(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * (2 * 1024 * 1024))
    monkeypatch.setenv("TIERCTL_MAX_TRACE_MB", "1")
    err = _refused(_fit(big, kind))
    assert "larger than the 1 MiB limit" in err.message
    assert "TIERCTL_MAX_TRACE_MB" in str(err.fix)


def test_a_step_log_with_bad_bytes_names_the_line(tmp_path: Path) -> None:
    log = tmp_path / "steps.jsonl"
    log.write_bytes(
        b'{"kind": "decode", "batch_size": 1, "context_tokens": 1, "duration_s": 1}\n\xff\n'
    )
    err = _refused(_fit(log, "steps"))
    assert err.location is not None
    assert err.location.line == 2


def test_the_cli_refuses_a_fifo_with_exit_2(fifo: Path, run_cli: Callable[..., CliResult]) -> None:
    result: list[CliResult] = []
    t = threading.Thread(target=lambda: result.append(run_cli("sim", "fit", str(fifo))))
    t.daemon = True
    t.start()
    t.join(timeout=PATIENCE_S)
    assert not t.is_alive(), "sim fit blocked on a FIFO"
    assert result[0].code == 2
    assert "not a regular file" in result[0].err
    assert "Traceback" not in result[0].err


@pytest.mark.parametrize("where", ["fifo", "/dev/zero", "dir"])
def test_a_cost_model_file_on_a_hostile_path_is_refused(
    where: str, fifo: Path, tmp_path: Path
) -> None:
    path = {"fifo": fifo, "/dev/zero": Path("/dev/zero"), "dir": tmp_path}[where]
    err = _refused(lambda: read_cost_model(path))
    assert err.location is not None


def test_a_deeply_nested_cost_model_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "deep" in _refused(lambda: read_cost_model(deep)).message
