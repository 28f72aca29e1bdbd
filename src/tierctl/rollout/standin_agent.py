"""A stand-in compose-manager agent on loopback, for tests and the demo.

It speaks the agent's API (``POST /compose/up``, ``POST /compose/down``, bearer token, NDJSON
``stdout``/``stderr``/``exit`` events) over compose files it is given by ``(tag, file)``, keeps
which services "run" with which definition, and answers dry runs with docker compose's own
line format. Faults can be queued per request: ``"500"``, ``"timeout"`` (answers after
``slow_s``), ``"stall"`` (accepts the request and never answers, not even a status line,
until the client hangs up), ``"trickle"`` (output lines but no exit event for ``slow_s``),
``"cut"`` (stream ends without an exit event), ``"html"`` (200 with an HTML page),
``"exit1"``, ``"echo"`` / ``"echo-exit1"`` /
``"echo-400"`` (an agent that echoes the request back: the bearer token and every env value,
raw, JSON-escaped, quoted, URL-encoded, base64, hex and cut short, in its output lines, its
failure's stderr, or a 400 body), and
``"extra:SERVICE"`` (a dry run that also plans SERVICE). Like the real agent it rejects env keys
that are not shell names; unlike it, it refuses an empty ``services`` list with 400 instead of
applying every service, so a client bug shows. Requires the ``sim`` extra (aiohttp).
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

from aiohttp import web

from tierctl.rollout.drivers.compose_manager import ENV_KEY
from tierctl.rollout.normalise import load_merged_services
from tierctl.runtime.polling import wait_until_async


@dataclass
class AgentState:
    """What the stand-in agent knows and has seen."""

    files: dict[tuple[str, str], str]
    token: str
    running: dict[str, str] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    auth_headers: list[str] = field(default_factory=list)
    slow_s: float = 2.0
    #: Said at ``GET /health`` (as ``tierctl agent`` says it); None: an agent that does not
    #: beat (its ``/health`` names no heartbeat).
    heartbeat_s: float | None = None


class StandinAgent:
    """Run the stand-in agent in a background thread on 127.0.0.1 and a free port."""

    def __init__(self, files: Mapping[tuple[str, str], str], token: str) -> None:
        """Create it.

        Args:
            files: ``(tag, file)`` -> compose text the agent can apply.
            token: The bearer token it accepts.
        """
        self.state = AgentState(files=dict(files), token=token)
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Start serving; return the base URL."""
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def serve() -> None:
            asyncio.set_event_loop(loop)
            app = web.Application()
            app.router.add_get("/health", self._health)
            app.router.add_post("/compose/up", self._up)
            app.router.add_post("/compose/down", self._down)
            runner = web.AppRunner(app)
            loop.run_until_complete(runner.setup())
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            site = web.SockSite(runner, sock)
            loop.run_until_complete(site.start())
            self.url = f"http://127.0.0.1:{port}"
            self._runner = runner
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self.url

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> StandinAgent:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _health(self, _request: web.Request) -> web.Response:
        said: dict[str, Any] = {"status": "ok"}
        if self.state.heartbeat_s is not None:
            said["heartbeat_s"] = self.state.heartbeat_s
        return web.json_response(said)

    async def _auth(self, request: web.Request) -> web.Response | None:
        header = request.headers.get("Authorization", "")
        self.state.auth_headers.append(header)
        if header != f"Bearer {self.state.token}":
            return web.json_response({"error": "unauthorized"}, status=401)
        return None

    async def _body(self, request: web.Request, keys: set[str]) -> dict[str, Any] | web.Response:
        body = await request.json()
        self.state.requests.append({"path": request.path, **body})
        if set(body) - {"overrides"} != keys:
            return web.json_response({"error": f"keys must be {sorted(keys)}"}, status=400)
        for extra in body.get("overrides", []):
            if (body["tag"], extra) not in self.state.files:
                return web.json_response({"error": "unknown tag or override file"}, status=404)
        if not body["services"]:
            return web.json_response(
                {"error": "empty services would mean every service"}, status=400
            )
        bad = [k for k in body["env"] if not ENV_KEY.match(k)]
        if bad:
            return web.json_response({"error": f"invalid env keys {bad}"}, status=400)
        if (body["tag"], body["file"]) not in self.state.files:
            return web.json_response({"error": "unknown tag or file"}, status=404)
        return dict(body)

    async def _fault(self) -> str | None:
        return self.state.faults.pop(0) if self.state.faults else None

    async def _accept(
        self, request: web.Request, keys: set[str]
    ) -> web.Response | tuple[dict[str, Any], str | None, dict[str, dict[str, Any]]]:
        """What /compose/up and /compose/down share: auth, body checks, injected faults, and
        the services of the named file. Returns an error response, or (body, fault, services)."""
        denied = await self._auth(request)
        if denied is not None:
            return denied
        body = await self._body(request, keys)
        if isinstance(body, web.Response):
            return body
        fault = await self._fault()
        early = await self._early_fault(fault, request)
        if early is not None:
            return early
        named = [body["file"], *body.get("overrides", [])]
        services = load_merged_services(
            [(self.state.files[(body["tag"], f)], f, None) for f in named]
        ).services
        return body, fault, services

    async def _up(self, request: web.Request) -> web.StreamResponse:
        accepted = await self._accept(
            request, {"tag", "file", "services", "env", "force_recreate", "dry_run"}
        )
        if isinstance(accepted, web.Response):
            return accepted
        body, fault, services = accepted
        lines: list[str] = []
        prefix = " ✔ DRY-RUN MODE - " if body["dry_run"] else " ✔ "
        targets = list(body["services"])
        if fault and fault.startswith("extra:"):
            targets.append(fault.split(":", 1)[1])
        for name in targets:
            svc = services.get(name, {})
            container = svc.get("container_name") or name
            fingerprint = json.dumps(svc, sort_keys=True)
            if name not in self.state.running:
                verb = "Created"
            elif body["force_recreate"] or self.state.running[name] != fingerprint:
                verb = "Recreated"
            else:
                verb = "Running"
            lines.append(f"{prefix} Container {container}  {verb}")
            if not body["dry_run"]:
                self.state.running[name] = fingerprint
        return await self._stream(request, lines, fault)

    async def _down(self, request: web.Request) -> web.StreamResponse:
        accepted = await self._accept(request, {"tag", "file", "services", "env", "volumes"})
        if isinstance(accepted, web.Response):
            return accepted
        body, fault, services = accepted
        lines = []
        for name in body["services"]:
            container = services.get(name, {}).get("container_name") or name
            if self.state.running.pop(name, None) is not None:
                lines.append(f" ✔ Container {container}  Removed")
        return await self._stream(request, lines, fault)

    def _auth_seen(self) -> str:
        return self.state.auth_headers[-1] if self.state.auth_headers else ""

    def _echo_lines(self) -> list[str]:
        """The last request echoed back the ways a careless agent (or compose) does."""
        body = self.state.requests[-1] if self.state.requests else {}
        env = body.get("env") or {}
        lines = [f"using {self._auth_seen()}", f"request: {json.dumps(body)}"]
        for key, value in env.items():
            lines += [
                f"{key}={value}",
                f"{key}={json.dumps(value)}",
                f"{key}='{value}'",
                f"environment: {json.dumps({key: value}, ensure_ascii=False)}",
            ]
        # The same request in the encodings a log or a proxy carries it in: URL-encoded (a
        # query string), base64 (a header blob, both alphabets), hex, and cut short.
        raw = f"{self._auth_seen()} {json.dumps(body, ensure_ascii=False)}".encode()
        lines += [
            f"query: ?req={quote(raw, safe='')}",
            f"form: req={quote_plus(raw)}",
            f"blob: {base64.b64encode(b'v1:' + raw).decode()}",
            f"blob-url: {base64.urlsafe_b64encode(b'v1/x:' + raw).decode()}",
            f"hex: {raw.hex()}",
            f"cut: {raw.decode()[: len(raw) // 3]}",
        ]
        for key, value in env.items():
            lines.append(f"{key}-b64={base64.b64encode(value.encode()).decode()}")
        return lines

    async def _early_fault(self, fault: str | None, request: web.Request) -> web.Response | None:
        if fault == "stall":
            # Accepted and read, then silence: only the client's deadline ends the call. The
            # handler returns once the client hangs up (or after 10 minutes), so stopping the
            # agent never waits on it.
            await wait_until_async(lambda: _hung_up(request), 600, poll_s=0.05)
            return web.json_response({"error": "stalled"}, status=500)
        if fault == "echo-400":
            return web.json_response(
                {
                    # First, so that it is within the part of the body a client shows.
                    "trace": base64.b64encode(
                        json.dumps([self._auth_seen(), self.state.requests[-1]]).encode()
                    ).decode(),
                    "error": "bad request",
                    "echo": self.state.requests[-1],
                    "auth": self._auth_seen(),
                },
                status=400,
            )
        if fault == "html":
            # Something else on the agent's address (a proxy's login or error page): 200, HTML.
            return web.Response(
                text="<html><body><h1>Sign in</h1></body></html>", content_type="text/html"
            )
        if fault == "500":
            return web.json_response({"error": "injected"}, status=500)
        if fault == "timeout":
            await asyncio.sleep(self.state.slow_s)
            return web.json_response({"error": "too late"}, status=500)
        return None

    async def _stream(
        self, request: web.Request, lines: list[str], fault: str | None
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        echoed = fault in ("echo", "echo-exit1")
        if echoed:
            lines = [*self._echo_lines(), *lines]
            fault = "exit1" if fault == "echo-exit1" else None
        for line in lines:
            await resp.write((json.dumps({"type": "stdout", "line": line}) + "\n").encode())
        if fault == "trickle":
            # An agent that keeps the stream alive with output but never finishes: only a
            # deadline on the whole call gives up on it (each read is quick).
            for _ in range(max(1, int(self.state.slow_s / 0.05))):
                await resp.write(b'{"type": "stdout", "line": "still pulling"}\n')
                await asyncio.sleep(0.05)
            await resp.write_eof()
            return resp
        if fault != "cut":
            code = 1 if fault == "exit1" else 0
            if code:
                for line in (
                    [*self._echo_lines(), "injected failure"] if echoed else ["injected failure"]
                ):
                    await resp.write((json.dumps({"type": "stderr", "line": line}) + "\n").encode())
            await resp.write((json.dumps({"type": "exit", "code": code}) + "\n").encode())
        await resp.write_eof()
        return resp


def _hung_up(request: web.Request) -> bool:
    """Whether the client of ``request`` closed its connection."""
    transport = request.transport
    return transport is None or transport.is_closing()
