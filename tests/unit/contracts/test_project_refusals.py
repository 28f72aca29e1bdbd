"""``validate`` refuses what Compose refuses beyond the schema (issue #22, session 11).

A file whose every key passes the compose-spec schema can still be refused by Compose when it
decodes the project (a ulimit or a file mode past int64). ``tierctl compose config`` refused
it; ``validate`` said "ok" (exit 0), and then ``docker compose up`` refused the file. Now the
whole reading is part of TC007, with or without the binary's cross-check.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

RunCli = Callable[..., CliResult]
ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "examples" / "tiny-vllm"

_PAST_INT64 = str(2**63)


def _ulimit(path: Path, soft: str) -> Path:
    path.write_text(
        "services:\n  a:\n    image: x\n    ulimits:\n      nofile:\n"
        f'        soft: "{soft}"\n        hard: 5\n'
    )
    return path


def test_a_ulimit_past_int64_is_a_schema_violation(run_cli: RunCli, tmp_path: Path) -> None:
    r = run_cli("validate", "--no-compose-binary", str(_ulimit(tmp_path / "c.yaml", _PAST_INT64)))
    assert r.code == 1, r.out + r.err
    (line,) = [x for x in r.out.splitlines() if "TC007 schema:" in x]
    assert "c.yaml:4:" in line
    assert "Compose would refuse the project" in line
    assert "value out of range" in line


def test_a_ulimit_at_int64s_top_is_fine(run_cli: RunCli, tmp_path: Path) -> None:
    r = run_cli(
        "validate", "--no-compose-binary", str(_ulimit(tmp_path / "c.yaml", str(2**63 - 1)))
    )
    assert r.code == 0, r.out + r.err


def test_an_unset_required_variable_is_not_a_refusal(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generated file holds ``${VAR:?required}`` for the host's environment: validating it
    where the variable is unset is not a refused project."""
    monkeypatch.delenv("TIERCTL_TINY_MODEL", raising=False)
    r = run_cli("validate", "--no-compose-binary", str(TINY / "compose.yaml"))
    assert "TC007" not in r.out, r.out
    assert r.code == 0, r.out + r.err


def test_with_a_spec_too(run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERCTL_TINY_MODEL", str(tmp_path))
    shutil.copy(TINY / "tier.yaml", tmp_path / "tier.yaml")
    text = (TINY / "compose.yaml").read_text()
    text = text.replace(
        "    logging:\n      driver: json-file\n",
        f"    logging:\n      driver: json-file\n    ulimits:\n      nofile: {_PAST_INT64}\n",
    )  # both replicas, so that they still share their runtime (TC003)
    (tmp_path / "compose.yaml").write_text(text)
    r = run_cli(
        "validate", "--no-compose-binary", "--spec", str(tmp_path / "tier.yaml"),
        str(tmp_path / "compose.yaml"),
    )  # fmt: skip
    assert r.code == 1, r.out + r.err
    assert "Compose would refuse the project" in r.out
    assert "ulimits.nofile" in r.out


def test_a_schema_error_is_reported_once(run_cli: RunCli, tmp_path: Path) -> None:
    """The whole reading stops at the first schema error, which TC007 names already."""
    path = tmp_path / "c.yaml"
    path.write_text("services:\n  a:\n    image: x\n    ulimits: 5x\n")
    r = run_cli("validate", "--no-compose-binary", str(path))
    assert r.code == 1
    assert "Compose would refuse" not in r.out
    assert r.out.count("TC007 schema:") == 1


@pytest.mark.parametrize(
    ("text", "files", "said"),
    [
        # the secret Compose refuses comes after the unset required variable
        (
            "services:\n  a:\n    image: x:${TAG:?set TAG}\nsecrets:\n  s: {name: x}\n",
            {},
            "one of file|environment",
        ),
        # an env file: a required variable first, an unterminated quote after it
        (
            "services:\n  a:\n    image: x\n    env_file: e.env\n",
            {"e.env": 'A=${TOKEN_X:?}\nB="open\n'},
            "unterminated quoted value",
        ),
    ],
)
def test_an_unset_required_variable_hides_no_other_refusal(
    run_cli: RunCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    files: dict[str, str],
    said: str,
) -> None:
    """Issue #42: validate stopped at the unset ``${VAR:?}`` (not a refusal) and said "ok" to
    a project Compose refuses for another reason; the reading goes on with a stand-in."""
    monkeypatch.delenv("TAG", raising=False)
    monkeypatch.delenv("TOKEN_X", raising=False)
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    (tmp_path / "c.yaml").write_text(text)
    r = run_cli("validate", "--no-compose-binary", str(tmp_path / "c.yaml"))
    assert r.code == 1, r.out + r.err
    assert "Compose would refuse the project" in r.out, r.out
    assert said in r.out, r.out


@pytest.mark.parametrize(
    "mount",
    ["${MODELS_DIR:?set it}:/models", "${MODELS_DIR:?set it}"],
)
def test_a_stand_in_value_is_never_blamed(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mount: str
) -> None:
    """A required variable used where only some values are valid (a volume source: a path
    is fine, a bare word names an undeclared volume) is not a refusal: the stand-ins differ
    in what they break, and a refusal counts only when both readings make it."""
    monkeypatch.delenv("MODELS_DIR", raising=False)
    (tmp_path / "c.yaml").write_text(f'services:\n  a:\n    image: x\n    volumes: ["{mount}"]\n')
    r = run_cli("validate", "--no-compose-binary", str(tmp_path / "c.yaml"))
    assert "TC007" not in r.out, r.out
