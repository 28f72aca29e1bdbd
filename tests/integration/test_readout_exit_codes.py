"""``tierctl readout``'s exit codes tell "the canary failed" (1) from "could not judge" (3) and
from "that URL is not a Prometheus" (2): against a real Prometheus (a failing canary, a
query it rejects, a path below it), a port nobody listens on, and a plain HTTP server."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tests.integration.promdata import ArmData, openmetrics
from tests.integration.prometheus import READOUT_SPEC, backfilled_prometheus, needs_prometheus
from tierctl.runtime.process import free_port

pytestmark = [needs_prometheus, pytest.mark.integration]

END_S = 1_767_225_600
START_S = END_S - 3 * 3600
ARMS = [ArmData("svc-r1", "tier-pdi1"), ArmData("svc-r2", "tier-pdi2", ttft_x=1.4)]


@pytest.fixture(scope="module")
def prom_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with backfilled_prometheus(
        tmp_path_factory.mktemp("prom"), openmetrics(ARMS, START_S, END_S)
    ) as url:
        yield url


class _NotPrometheus(http.server.BaseHTTPRequestHandler):
    """Any other web service: an HTML 404 everywhere, another service's JSON at /json."""

    def do_GET(self) -> None:
        if self.path.startswith("/json/"):
            body, kind, status = json.dumps({"hello": "world"}).encode(), "application/json", 200
        else:
            body, kind, status = b"<html>not found</html>", "text/html", 404
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def plain_http() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotPrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _nobody_listens() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def readout(tmp_path: Path, run_cli: Callable[..., CliResult]) -> Callable[..., CliResult]:
    spec = tmp_path / "tier.yaml"
    spec.write_text(READOUT_SPEC)

    def run(url: str, *extra: str) -> CliResult:
        window = ["--window", "150m", "--end", str(END_S), "--step", "5m"]
        return run_cli("readout", "--spec", str(spec), "--prometheus", url, *window, *extra)

    return run


def test_a_failing_canary_exits_1(prom_url: str, readout: Callable[..., CliResult]) -> None:
    result = readout(prom_url)
    assert result.code == 1, result.out + result.err
    assert "FAIL" in result.out


def test_an_unreachable_prometheus_is_could_not_judge_not_a_failed_canary(
    readout: Callable[..., CliResult],
) -> None:
    result = readout(_nobody_listens())
    assert result.code == 3, result.out + result.err
    assert "cannot reach Prometheus" in result.err
    assert "nothing was judged" in result.err
    assert "Traceback" not in result.err


def test_a_url_that_is_not_prometheus_is_a_usage_error(
    plain_http: str, prom_url: str, readout: Callable[..., CliResult]
) -> None:
    for url in (plain_http, f"{plain_http}/json", f"{prom_url}/graph"):
        result = readout(url)
        assert result.code == 2, (url, result.out + result.err)
        assert "is not a Prometheus HTTP API" in result.err, url
        assert "Traceback" not in result.err


def test_a_query_prometheus_rejects_as_malformed_is_a_usage_error(
    prom_url: str, readout: Callable[..., CliResult]
) -> None:
    result = readout(prom_url, "--match", 'host_machine="gpu02')
    assert result.code == 2, result.out + result.err
    assert "Prometheus rejected the query" in result.err
