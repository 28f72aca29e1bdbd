"""runtime.local_prom against the real Prometheus binary: a ServerProcess that starts ready,
scrapes, reloads, reports its scrapes and stops its whole process group."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.integration.prometheus import BINARIES, needs_prometheus
from tierctl.runtime.local_prom import LocalPrometheus
from tierctl.runtime.process import free_port
from tierctl.runtime.promapi import PrometheusClient

pytestmark = [pytest.mark.integration, needs_prometheus]


def _config(port: int, interval: str = "1s") -> str:
    # Prometheus scraping itself: one target that is always up.
    return (
        f"global: {{scrape_interval: {interval}}}\n"
        f"scrape_configs:\n- job_name: self\n  static_configs:\n"
        f"  - targets: ['127.0.0.1:{port}']\n"
    )


def test_it_scrapes_waits_for_a_scrape_and_stops(tmp_path: Path) -> None:
    assert BINARIES is not None
    with LocalPrometheus(tmp_path, "global: {}\n", binary=BINARIES[0]) as prom:
        assert prom._proc is not None
        pid = prom._proc.pid
        prom.reload(_config(prom.port))  # its own port is known once it is chosen
        before = time.time()
        assert prom.wait_for_scrape(timeout_s=60)
        with PrometheusClient(prom.url) as client:
            ((labels, stamp),) = client.query("timestamp(up)")
        assert labels["job"] == "self"
        assert stamp >= before  # a scrape after the wait began is stored
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole group is gone


def test_wait_for_scrape_says_no_when_nothing_is_scraped(tmp_path: Path) -> None:
    assert BINARIES is not None
    with LocalPrometheus(tmp_path, _config(free_port()), binary=BINARIES[0]) as prom:
        # The one target is a closed port: it is scraped (up == 0) and still counts.
        assert prom.wait_for_scrape(timeout_s=60)
    with LocalPrometheus(tmp_path / "empty", "global: {}\n", binary=BINARIES[0]) as prom:
        assert not prom.wait_for_scrape(timeout_s=1.5)
