"""Every HTTP route of every tierctl server, read from the applications themselves, and the
worst request this project knows for each (the request that asks for the most work or
memory the route's bound allows, or more), with the answer its bound gives.

``routes(kind)`` builds each application in-process (nothing listens) and lists its routes,
so a route added to a server without a worst request here fails
``test_every_route_has_a_worst_request``; docs/security.md's bounds table is checked against
the same list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.integration.servers import AGENT_TOKEN

#: A route: (server kind, method, path as the router spells it).
Route = tuple[str, str, str]
AUTH = f"Authorization: Bearer {AGENT_TOKEN}\r\n"
PS = {"tag": "v1", "file": "h/compose.yaml"}


@dataclass(frozen=True)
class Worst:
    """The worst request of a route and what its bound answers.

    Attributes:
        target: The request target (path and query).
        body: The body (None: no body).
        headers: Extra header lines (each ending in CRLF).
        status: The answer's status.
        says: Text the answer holds: the rule (or the bound) it names.
        announced: A ``Content-Length`` larger than the body sent (None: the body's): a
            server that refuses from the length answers before a byte of it; one that sent
            its answer and closed on megabytes unread would reset the connection, and the
            answer could be lost with it (the kernel's rule, not the server's).
    """

    target: str
    body: bytes | None
    status: int
    says: str
    headers: str = ""
    announced: int | None = None


def _json(doc: object) -> bytes:
    return json.dumps(doc).encode()


def routes(kind: str) -> set[Route]:
    """The (kind, method, path) of every route ``kind``'s application serves (HEAD, added by
    aiohttp beside each GET, left out)."""
    app = _app(kind)
    out: set[Route] = set()
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        out.add((kind, route.method, route.resource.canonical if route.resource else ""))
    return out


def _app(kind: str) -> object:
    if kind == "agent":
        from tierctl.agent.server import AgentConfig, RunningAgent, make_app

        config = AgentConfig(Path("/nonexistent"), Path("/nonexistent"), "t", ("compose",))
        return make_app(RunningAgent(config, None, None))  # type: ignore[arg-type]
    if kind == "judge":
        from tests.integration.servers import SPEC
        from tierctl.readout.judge_server import JudgeSettings, judge_app
        from tierctl.spec import load_spec, resolve_tier

        return judge_app(resolve_tier(load_spec(SPEC)), JudgeSettings(prometheus="http://x:9"))
    import os

    from tierctl.sim.config import EngineConfig
    from tierctl.sim.cost import preset
    from tierctl.sim.server import ServeOptions, SimServer

    argv = ["vllm", "serve", "m", "--port", "0"] if kind == "sim-vllm" else ["--port", "0"]
    before = os.environ.get("VLLM_SERVER_DEV_MODE")
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # every route vLLM can have
    try:
        server = SimServer(EngineConfig.from_argv(argv), preset("dense-8b-h100"), ServeOptions())
        return server.app()
    finally:
        if before is None:
            del os.environ["VLLM_SERVER_DEV_MODE"]
        else:
            os.environ["VLLM_SERVER_DEV_MODE"] = before


_JUNK_QUERY = "?" + "q=1&" * 1_000
_TEXT = {"prompt": "hi", "max_tokens": 1}
_BIG = b""  # with BIG: one byte past sim serve's --max-body-mib 4 here, announced
BIG = 4 * 1024 * 1024 + 1
_AGENT_BIG = b" " * (64 * 1024 + 1)  # one byte past the agent's --max-body-kib 64 here
_UP = {**PS, "services": ["a"], "env": {}, "force_recreate": False, "dry_run": True}
_DOWN = {**PS, "services": ["a"], "env": {}, "volumes": False}
_SIM_COMMON: dict[tuple[str, str], Worst] = {
    ("GET", "/health"): Worst("/health" + _JUNK_QUERY, None, 200, ""),
    ("GET", "/v1/models"): Worst("/v1/models" + _JUNK_QUERY, None, 200, '"data"'),
    ("GET", "/v1/models/{model_id}"): Worst("/v1/models/" + "x" * 8_000, None, 404, "does not"),
    ("GET", "/metrics"): Worst("/metrics" + _JUNK_QUERY, None, 200, "# HELP"),
    ("POST", "/v1/chat/completions"): Worst(
        "/v1/chat/completions", _BIG, 413, "limit of 4 MiB", announced=BIG
    ),
    ("POST", "/v1/completions"): Worst(
        "/v1/completions", _json({"prompt": "hi", "max_tokens": 10**30}), 400, "max_tokens"
    ),
    ("GET", "/server_info"): Worst("/server_info" + _JUNK_QUERY, None, 200, '"port"'),
}

#: The worst request of every route, by (kind, method, path).
WORST: dict[Route, Worst] = {
    ("agent", "GET", "/health"): Worst(
        "/health" + _JUNK_QUERY, None, 200, '"ok"', "Authorization: \xff\r\n"
    ),
    ("agent", "POST", "/compose/up"): Worst(
        "/compose/up", _json({**_UP, "services": ["a"] * 300}), 400, "at most 256 services", AUTH
    ),
    ("agent", "POST", "/compose/down"): Worst(
        "/compose/down",
        _json({**_DOWN, "env": {f"V{i}": "x" for i in range(300)}}),
        400,
        "at most 256 variables",
        AUTH,
    ),
    ("agent", "POST", "/compose/ps"): Worst(
        "/compose/ps", _AGENT_BIG, 413, "at most 65536 bytes", AUTH
    ),
    ("agent", "POST", "/compose/logs"): Worst(
        "/compose/logs",
        _json({**PS, "service": "a", "tail": 10**12}),
        400,
        "at most 10,000 lines",
        AUTH,
    ),
    ("agent", "GET", "/files"): Worst(
        "/files?tag=" + "v" * 4_000 + "&file=h/compose.yaml", None, 400, "tags match", AUTH
    ),
    ("judge", "GET", "/argo"): Worst("/argo?window=10000000h", None, 400, "at most 11,000 steps"),
    ("judge", "POST", "/argo"): Worst(
        "/argo", _json({"window": "9" * 400 + "d"}), 400, "a number and a unit"
    ),
    ("judge", "POST", "/flagger"): Worst(
        "/flagger", b" " * (64 * 1024 + 1), 413, "at most 65536 bytes"
    ),
    ("judge", "GET", "/healthz"): Worst("/healthz" + _JUNK_QUERY, None, 200, '"ok"'),
    **{("sim", m, p): w for (m, p), w in _SIM_COMMON.items()},
    ("sim", "POST", "/generate"): Worst(
        "/generate",
        _json({"text": ["a"] * 100_000, "sampling_params": {"max_new_tokens": 1}}),
        400,
        "",
    ),
    ("sim", "GET", "/health_generate"): Worst("/health_generate" + _JUNK_QUERY, None, 200, ""),
    ("sim", "GET", "/get_server_info"): Worst("/get_server_info", None, 200, '"port"'),
    ("sim", "GET", "/model_info"): Worst("/model_info" + _JUNK_QUERY, None, 200, "model_path"),
    ("sim", "GET", "/get_model_info"): Worst("/get_model_info", None, 200, "model_path"),
    ("sim", "POST", "/flush_cache"): Worst("/flush_cache", _BIG, 200, "flushed", announced=BIG),
    ("sim", "GET", "/flush_cache"): Worst("/flush_cache" + _JUNK_QUERY, None, 200, "flushed"),
    **{("sim-vllm", m, p): w for (m, p), w in _SIM_COMMON.items()},
    ("sim-vllm", "GET", "/version"): Worst("/version" + _JUNK_QUERY, None, 200, "version"),
    ("sim-vllm", "GET", "/ping"): Worst("/ping" + _JUNK_QUERY, None, 200, ""),
    ("sim-vllm", "POST", "/ping"): Worst("/ping", _BIG, 200, "", announced=BIG),
    ("sim-vllm", "POST", "/reset_prefix_cache"): Worst(
        "/reset_prefix_cache", _BIG, 200, "", announced=BIG
    ),
}


def request_bytes(worst: Worst, method: str) -> bytes:
    """The whole request as it goes on the wire (the connection closes after it)."""
    head = f"{method} {worst.target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{worst.headers}"
    if worst.body is not None:
        length = worst.announced if worst.announced is not None else len(worst.body)
        head += f"Content-Type: application/json\r\nContent-Length: {length}\r\n"
    return (
        head.encode("utf-8", errors="surrogateescape").replace("\xff".encode(), b"\xff")
        + b"\r\n"
        + (worst.body or b"")
    )
