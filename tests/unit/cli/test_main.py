"""The entry point: startup cost, missing extras, --debug anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, SMALL_SPEC, CliResult
from tierctl.cli.main import EXTRA_MODULES, _split_debug, missing_extra_message

SRC = str(ROOT / "src")
# Modules whose import is what made `tierctl --version` take a second: none may be loaded to
# print the version or the top-level help.
HEAVY = (
    "pydantic",
    "rich",
    "rich.table",
    "jsonschema",
    "httpx",
    "numpy",
    "aiohttp",
    "scipy",
    "tokenizers",
    "ruamel",
    "yaml",
    "tierctl.spec",
    "tierctl.catalog",
    "tierctl.rollout",
)


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


EXTRAS = ("numpy", "aiohttp", "scipy", "tokenizers", "matplotlib", "tierctl.spec")


@pytest.mark.parametrize(
    ("args", "heavy"),
    [(["--version"], HEAVY), (["--help"], HEAVY), (["bench", "--help"], EXTRAS)],
)
def test_version_and_help_import_nothing_heavy(args: list[str], heavy: tuple[str, ...]) -> None:
    code = (
        "import sys\n"
        "from tierctl.cli.main import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"heavy = [m for m in {heavy!r} if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout


def test_help_still_lists_every_command(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("--help")
    assert result.code == 0
    for name in ("render", "show", "validate", "sim", "bench", "rollout", "readout", "demo"):
        assert f"  {name} " in result.out


def test_a_missing_extra_is_one_line_and_exit_2() -> None:
    # Simulate a base install: importing aiohttp fails as it would when it is not installed.
    code = (
        "import sys\n"
        "sys.modules['aiohttp'] = None\n"
        "from tierctl.cli.main import main\n"
        "main(['bench', 'run', '--url', 'http://127.0.0.1:9', '--hammer-rate', '1',"
        " '--hammer-count', '1'])\n"
    )
    out = _python(code)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.strip() == (
        "error: tierctl bench needs the 'bench' extra: in the tierctl checkout, pip install -e '.[bench]'"
    )
    assert "Traceback" not in out.stderr


def test_a_missing_extra_names_the_commands_own_extra() -> None:
    assert missing_extra_message("sim", "numpy.random") == (
        "tierctl sim needs the 'sim' extra: in the tierctl checkout, pip install -e '.[sim]'"
    )
    assert missing_extra_message("readout", "scipy") == (
        "tierctl readout needs the 'readout' extra: in the tierctl checkout, pip install -e '.[readout]'"
    )
    # A module tierctl does not depend on optionally is a bug, not an install problem.
    assert missing_extra_message("bench", "not_a_dependency") is None


def test_extra_modules_match_pyproject() -> None:
    extras = tomllib.loads(Path(ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for module, names in EXTRA_MODULES.items():
        dist = module.replace("_", "-")
        for extra in names:
            assert any(req.startswith(dist) for req in extras[extra]), (module, extra)
    for extra, reqs in extras.items():
        for req in reqs:
            if req.startswith("tierctl["):
                continue
            dist = req.split(">")[0].split("=")[0].split("[")[0].replace("-", "_")
            assert extra in EXTRA_MODULES.get(dist, ()), (req, extra)


def test_debug_is_accepted_after_the_subcommand(run_cli: Callable[..., CliResult]) -> None:
    assert _split_debug(["show", "x", "--debug"]) == (["--debug", "show", "x"], True)
    assert _split_debug(["sim", "--", "--debug"]) == (["sim", "--", "--debug"], False)
    result = run_cli("show", str(SMALL_SPEC), "--debug")
    assert result.code == 0
    assert "small" in result.out
    # With --debug after the subcommand a tierctl error raises (traceback) instead of exit 2.
    with pytest.raises(Exception, match="spec"):
        run_cli("show", "/nonexistent/tier.yaml", "--debug")
    assert run_cli("show", "/nonexistent/tier.yaml").code == 2
