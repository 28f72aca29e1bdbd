"""A password in a URL's userinfo (``http://op:PW@host``) is printed and written nowhere.

`bench run` against a real `tierctl sim serve` (its results.json and report.md searched too),
and `readout` against a Prometheus address where nothing listens (the unreachable message
names the URL), each run as an operator runs it, as a process.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_bench_sim import sim_serve
from tierctl.runtime.process import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = f"pw-{secrets.token_hex(6)}"
SPEC = ROOT / "examples" / "glm53-long-context" / "tier.yaml"


def _tierctl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "tierctl", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


async def test_bench_run_never_prints_or_writes_the_url_password(tmp_path: Path) -> None:
    async with sim_serve(time_scale=50.0) as url:
        with_password = url.replace("http://", f"http://operator:{PASSWORD}@")
        out = tmp_path / "out"
        res = _tierctl(
            "bench", "run", "--url", with_password, "--burst", "2x40", "--output-tokens", "4",
            "--no-probe", "--no-plots", "--output", str(out), cwd=tmp_path,
        )  # fmt: skip
    assert res.returncode == 0, res.stderr
    written = {p.name: p.read_text() for p in out.iterdir()}
    assert {"results.json", "report.md"} <= set(written)
    for text in (res.stdout, res.stderr, *written.values()):
        assert PASSWORD not in text
    # The URL is still there to read, its password masked.
    assert "operator:***@127.0.0.1" in written["report.md"]
    assert "operator:***@127.0.0.1" in written["results.json"]


def test_readout_never_prints_the_prometheus_password(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    res = _tierctl(
        "readout", "--spec", str(SPEC),
        "--prometheus", f"http://reader:{PASSWORD}@127.0.0.1:{port}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode != 0
    assert "cannot reach Prometheus" in res.stderr
    assert PASSWORD not in res.stdout + res.stderr
    assert f"reader:***@127.0.0.1:{port}" in res.stderr
