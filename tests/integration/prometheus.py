"""A real Prometheus server for tests: backfilled with promtool, started on a free port.

Uses Debian's ``prometheus`` package (``make test`` installs it); tests that need it are
skipped with a reason when the binaries are missing.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="Debian's prometheus package is not installed (make test installs it as root)",
)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def backfill(openmetrics: str, data_dir: Path) -> None:
    """Write OpenMetrics text into TSDB blocks with promtool."""
    source = data_dir.parent / "backfill.om"
    source.write_text(openmetrics)
    data_dir.mkdir(parents=True, exist_ok=True)
    assert PROMTOOL is not None
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        check=True,
        capture_output=True,
        timeout=120,
    )


@contextlib.contextmanager
def running_prometheus(
    workdir: Path, config: str = "global: {}\n", data_dir: Path | None = None
) -> Iterator[str]:
    """Start Prometheus on a free loopback port; yields its URL; always stops it."""
    assert PROMETHEUS is not None
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config_path.write_text(config)
    data = data_dir or workdir / "data"
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config_path}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=30d",
            "--web.enable-lifecycle",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError((workdir / "prometheus.log").read_text()[-2000:])
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("prometheus did not become ready in 30 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
