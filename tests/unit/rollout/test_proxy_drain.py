"""proxy_drain against servers that are not the proxy: the step goes on, and says why."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tierctl.proxies import proxy_admin
from tierctl.proxies.sglang_router import RouterClient
from tierctl.rollout.plan_schema import Step
from tierctl.rollout.proxy_drain import drain


class _Html(BaseHTTPRequestHandler):
    def log_message(self, *a: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b"<html>not a router</html>" if self.path == "/workers" else b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def html_server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Html)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


STEP = Step(
    id="01-recreate-r2", action="recreate", service="r2", role="engine", side="new", why="-",
    rollback="-",
)  # fmt: skip


def test_another_server_on_the_proxy_port_is_noted_not_a_crash(html_server: str) -> None:
    drained, note = drain(STEP, RouterClient(html_server), 8000, 5.0, None)
    assert drained is None
    assert "not reachable as the proxy (JSONDecodeError)" in note
    assert "r2 not drained" in note


def test_a_closed_port_is_noted() -> None:
    drained, note = drain(STEP, RouterClient("http://127.0.0.1:9"), 8000, 5.0, None)
    assert drained is None
    assert "ConnectError" in note


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        (["sglang-router", "launch", "--worker-urls", "http://a:1"], "http://H:30000"),
        (["sglang-router", "launch", "--host", "0.0.0.0", "--port", "9", "--worker-urls", "u"],
         "http://H:9"),
        (["/usr/bin/sglang-router", "launch", "--host", "10.0.0.5", "--port", "7",
          "--worker-urls", "u"], "http://10.0.0.5:7"),
    ],
)  # fmt: skip
def test_the_router_is_reached_where_its_command_binds(argv: list[str], url: str) -> None:
    admin = proxy_admin(argv, "H")
    assert admin is not None
    assert admin.url == url


@pytest.mark.parametrize(
    "argv",
    [["nginx", "-g", "daemon off;"], ["sglang-router", "--help"], []],
)
def test_a_proxy_tierctl_cannot_steer_gives_no_admin(argv: list[str]) -> None:
    assert proxy_admin(argv, "H") is None
