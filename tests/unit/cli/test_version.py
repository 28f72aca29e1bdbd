"""``tierctl --version``: the release pyproject.toml names, without importlib.metadata."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import tierctl
from tierctl.release import VERSION

ROOT = Path(tierctl.__file__).resolve().parents[2]


def test_the_release_is_pyprojects() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == VERSION


def test_version_prints_it_without_importlib_metadata() -> None:
    code = (
        "import sys\n"
        "from tierctl.cli.main import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('metadata' if 'importlib.metadata' in sys.modules else 'none')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(Path(tierctl.__file__).parents[1]), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert f"tierctl, version {VERSION}" in done.stdout
    assert done.stdout.strip().endswith("none")
