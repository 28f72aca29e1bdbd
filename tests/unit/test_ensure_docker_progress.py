"""scripts/ensure-docker says it is still working while apt installs (#37: a silent ~6 minute
install looked like a hang), then how long it took; its ticker stops with it.

Run with a PATH of stand-ins: ``id`` says root, ``apt-get`` takes 2.5 s, nothing is installed."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-docker"


def test_a_long_install_prints_a_line_every_tick_and_its_time(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()

    def tool(name: str, body: str) -> None:
        path = fake / name
        path.write_text(f"#!{shutil.which('bash')}\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    sleep = shutil.which("sleep")
    assert sleep is not None
    tool("id", "echo 0")
    tool("apt-get", f"{sleep} 1.3")  # update, then install: 2.6 s in all
    tool("sleep", f'exec {sleep} "$@"')
    proc = subprocess.run(
        [str(shutil.which("bash")), str(SCRIPT)],
        env={"PATH": str(fake), "TIERCTL_TICK_S": "1"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ticks = [ln for ln in proc.stderr.splitlines() if "still installing" in ln]
    assert len(ticks) >= 2, proc.stderr
    assert "ensure-docker: installed " in proc.stderr
