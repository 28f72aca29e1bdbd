"""One set of exit codes (tierctl.errors.ExitCode), turned into the process status by main() only."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

import tierctl
from tests.conftest import CliResult
from tierctl.cli.readout import VERDICT_EXIT
from tierctl.errors import (
    CannotJudge,
    ComposeInputError,
    ContractViolation,
    ExitCode,
    GateFailed,
    InputError,
    RuntimeFailure,
    SpecError,
    TierctlError,
)

SRC = Path(tierctl.__file__).parent
EXAMPLE = Path(__file__).parents[3] / "examples" / "glm53-long-context" / "tier.yaml"


def test_the_codes_are_the_documented_numbers() -> None:
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0,
        "FAILURE": 1,
        "USAGE": 2,
        "INCONCLUSIVE": 3,
        "AWAITING_APPROVAL": 4,
        "INTERRUPTED": 130,
    }


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (TierctlError, 1),
        (InputError, 2),
        (SpecError, 2),
        (ComposeInputError, 2),
        (ContractViolation, 1),
        (RuntimeFailure, 1),
        (GateFailed, 1),
        (CannotJudge, 3),
    ],
)
def test_each_error_carries_its_code(error: type[TierctlError], code: int) -> None:
    assert error("x").exit_code == code


def test_readout_verdicts_map_to_ok_failure_inconclusive() -> None:
    assert VERDICT_EXIT == {"pass": 0, "fail": 1, "inconclusive": 3}


def _exits_outside_main(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # A module's own script entry point (``if __name__ == "__main__":``) may exit: it is a
    # process of its own (a helper run in the engine's virtualenv), not a tierctl command.
    scripts = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"
        for sub in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in scripts:
            continue
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = ast.unparse(target)
            if name in ("SystemExit", "click.exceptions.Exit", "Exit"):
                found.append(f"{path.name}:{node.lineno}: raise {name}")
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "ctx.exit"):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func)}()")
    return found


def test_only_main_exits() -> None:
    offenders = [
        hit
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "cli" / "main.py"
        for hit in _exits_outside_main(path)
    ]
    assert offenders == []


def test_a_returned_exit_code_becomes_the_status(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    # render --check on a file that is not the rendered output: stale -> FAILURE (1)
    stale = tmp_path / "compose.yaml"
    stale.write_text("services: {}\n", encoding="utf-8")
    result = run_cli("render", str(EXAMPLE), "--check", "-o", str(stale))
    assert result.code == ExitCode.FAILURE, result.err
    assert "stale" in result.err
    fresh = run_cli("render", str(EXAMPLE), "-o", str(stale), "--write", "--force")
    assert fresh.code == ExitCode.OK, fresh.err
    again = run_cli("render", str(EXAMPLE), "--check", "-o", str(stale))
    assert again.code == ExitCode.OK, again.err
    assert "up to date" in again.out
