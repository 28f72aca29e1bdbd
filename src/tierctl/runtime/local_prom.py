"""A real Prometheus server run as a child process on a free loopback port.

For the demo and the integration tests: Debian's ``prometheus`` binary, a scrape config
rendered by tierctl, a data directory (optionally backfilled with ``promtool``), and
``/-/reload`` to apply a new scrape config — the local stand-in for recreating the collector.
The server is a :class:`~tierctl.runtime.process.ServerProcess`: its own process group, its log
in the work folder, stopped on every exit path.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from types import TracebackType

import httpx

from tierctl.errors import RuntimeFailure
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import ServerProcess, free_port, http_ready
from tierctl.runtime.promapi import PrometheusClient


def prometheus_binaries() -> tuple[str, str] | None:
    """Paths of ``prometheus`` and ``promtool``, or None when not installed."""
    server, tool = shutil.which("prometheus"), shutil.which("promtool")
    return (server, tool) if server and tool else None


def backfill(openmetrics: str, data_dir: Path, promtool: str = "promtool") -> None:
    """Write OpenMetrics text (ending in ``# EOF``) into TSDB blocks with promtool."""
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir.parent / f"{data_dir.name}.om"
    source.write_text(openmetrics)
    proc = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeFailure(f"promtool backfill failed: {proc.stderr.strip()[-500:]}")


def wait_for_scrape(url: str, timeout_s: float = 30.0) -> bool:
    """Wait until the Prometheus at ``url`` has scraped every target once since this call, so
    that what they exported up to now is stored (a readout right after traffic sees its end);
    returns whether that happened within ``timeout_s``. Polls ``min(timestamp(up))``."""
    since = time.time()
    with PrometheusClient(url, timeout_s=5.0) as client:

        def scraped() -> bool:
            try:
                rows = client.query("min(timestamp(up))")
            except RuntimeFailure:
                return False
            return bool(rows) and rows[0][1] >= since

        return wait_until(scraped, timeout_s, poll_s=0.25)


class LocalPrometheus:
    """``with LocalPrometheus(workdir, config) as prom: prom.url`` — started and always stopped."""

    def __init__(
        self,
        workdir: Path,
        config: str,
        *,
        data_dir: Path | None = None,
        binary: str = "prometheus",
        ready_timeout_s: float = 30.0,
    ) -> None:
        self.workdir = workdir
        self.config_path = workdir / "prometheus.yml"
        self.data_dir = data_dir or workdir / "data"
        self.binary = binary
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._config = config
        self._ready_timeout_s = ready_timeout_s
        self._proc: ServerProcess | None = None

    def __enter__(self) -> LocalPrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self._config)
        self._proc = ServerProcess(
            [
                self.binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=3650d",
                "--web.enable-lifecycle",
            ],
            self.workdir / "prometheus.log",
            name="prometheus",
        )
        self._proc.start()
        # wait_ready stops the process group and names the log's tail when it fails.
        self._proc.wait_ready(
            http_ready(f"{self.url}/-/ready", timeout_s=1.0), self._ready_timeout_s, poll_s=0.2
        )
        return self

    def wait_for_scrape(self, timeout_s: float = 30.0) -> bool:
        """:func:`wait_for_scrape` on this server."""
        return wait_for_scrape(self.url, timeout_s)

    def reload(self, config: str) -> None:
        """Write a new config and apply it (as recreating the collector would)."""
        self.config_path.write_text(config)
        response = httpx.post(f"{self.url}/-/reload", timeout=10)
        if response.status_code != 200:
            raise RuntimeFailure(f"prometheus reload failed: HTTP {response.status_code}")

    def stop(self) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        if self._proc is None:
            return
        self._proc.stop(timeout_s=10.0)
        self._proc = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
