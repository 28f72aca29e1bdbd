"""Reproducers found in session 7 of issue #22 (by the sweep generator, tests/sweep_fuzz.py,
and the long runs of the other two), each now a located exit 2 or a plain result.

Each test is the minimal file or argv that crashed or hung a command; it names the exception
it pinned, and fails again if the reader or model that now refuses the value stops doing so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, CliResult

SMALL = EXAMPLES / "small-model"
RunCli = Callable[..., CliResult]


def _refused(result: CliResult, *words: str) -> None:
    assert result.code == 2, result
    assert "Traceback" not in result.err
    for word in words:
        assert word in result.err, (word, result.err)


def _compose_with(tmp_path: Path, tail: str) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text((SMALL / "compose.yaml").read_text() + tail)
    return path


@pytest.mark.parametrize(
    "tail",
    [
        # ValueError: embedded null byte (Path.resolve in compose/loader.py _apply_include)
        'include:\n- path: "a\\0b"\n',
        'include:\n- path: ok.yaml\n  project_directory: "p\\0q"\n',
    ],
)
@pytest.mark.parametrize("command", ["validate", "compose", "import", "plan-as-old"])
def test_a_nul_in_an_include_path_is_refused_with_its_line(
    tmp_path: Path, run_cli: RunCli, tail: str, command: str
) -> None:
    path = _compose_with(tmp_path, tail)
    (tmp_path / "ok.yaml").write_text("services: {}\n")
    argv = {
        "validate": ["validate", "--no-compose-binary", str(path)],
        "compose": ["compose", "config", str(path)],
        "import": ["import", "--engine", "sglang==0.5.23", str(path)],
        "plan-as-old": ["plan", "--from", str(path), "--to", str(SMALL / "compose.yaml")],
    }[command]
    _refused(run_cli(*argv), "NUL", "compose.yaml:")


def test_a_nul_in_an_extends_file_is_refused(tmp_path: Path, run_cli: RunCli) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(
        'services:\n  a:\n    image: x\n    extends:\n      file: "b\\0"\n      service: a\n'
    )
    _refused(run_cli("compose", "config", str(path)), "NUL")
