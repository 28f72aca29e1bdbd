"""scripts/ensure-prometheus stops only the service its install started, never by name.

Run with a PATH of stand-ins (``id`` says root, ``apt-get`` succeeds, ``service`` /
``systemctl`` / ``pkill`` / ``killall`` record their arguments), so the script's decisions are
observed without installing anything or signalling any process.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-prometheus"
RECORDERS = ("apt-get", "service", "systemctl", "pkill", "killall", "kill")


def _bin(tmp: Path, *, root: bool, have_prometheus: bool) -> tuple[Path, Path]:
    fake = tmp / "bin"
    fake.mkdir(parents=True)
    calls = tmp / "calls"

    def tool(name: str, body: str) -> None:
        path = fake / name
        path.write_text(f"#!{shutil.which('bash')}\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    tool("id", f"echo {0 if root else 1000}")
    for name in RECORDERS:
        tool(name, f'echo "{name} $*" >> {calls}')
    if have_prometheus:
        tool("prometheus", "exit 0")
    return fake, calls


def _run(tmp: Path, **kw: bool) -> list[str]:
    fake, calls = _bin(tmp, **kw)
    bash = shutil.which("bash")
    assert bash is not None
    proc = subprocess.run(
        [bash, str(SCRIPT)],
        env={"PATH": str(fake), "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.skipif(Path("/run/systemd/system").is_dir(), reason="checks the init-script host")
def test_a_fresh_install_stops_the_packages_service_and_nothing_by_name(tmp_path: Path) -> None:
    calls = _run(tmp_path, root=True, have_prometheus=False)
    assert [c.split()[0] for c in calls] == ["apt-get", "apt-get", "service"], calls
    assert calls[-1] == "service prometheus stop"
    assert not [c for c in calls if c.split()[0] in ("pkill", "killall", "kill")]


def test_an_installed_prometheus_or_a_user_changes_nothing(tmp_path: Path) -> None:
    assert _run(tmp_path / "a", root=True, have_prometheus=True) == []
    assert _run(tmp_path / "b", root=False, have_prometheus=False) == []
