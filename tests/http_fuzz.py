"""The HTTP half of fuzzing: every route of ``agent serve``, ``judge serve`` and ``sim serve``
(both engine surfaces), hostile requests over raw sockets, against the servers as operators
run them (their own processes, ``tests.integration.servers``).

A case is rebuilt from ``(seed, surface, n)`` alone (its own ``random.Random``), like the file
fuzzers' inputs (:func:`tests.schema_fuzz.input_at`). Each case picks a route of the surface
(read from the application: :func:`tests.integration.routes.routes`) and builds:

* a **body** from the route's request schema (:data:`BODY_SCHEMAS`, JSON schemas written from
  each server's protocol: the agent's keys, Flagger's and Argo's payloads, the OpenAI and
  SGLang request fields), drawn by :func:`tests.schema_fuzz.generate` and then, mostly, one
  path set to a :func:`tests.schema_fuzz.hostile_value` (a wrong type, 2**63, NaN, a NUL,
  a 100 KB string, 300 levels, a path escape, URL userinfo); or raw bytes that are no JSON;
* a **query** from the route's parameters, hostile the same way (URL-encoded, ``%00``,
  ``%ff``, a key repeated 500 times);
* **headers**: the bearer token right, wrong, missing, not UTF-8, 9,000 bytes, duplicated;
  ``Content-Length`` negative, not a number, duplicated and conflicting, larger or smaller than
  the body; ``Transfer-Encoding: chunked`` with garbage chunk sizes, or beside a length; a field
  without a colon, an obs-fold line, 200 fields; a request line with a bad version or method;
* one case in :data:`SLOW_EVERY` is a **slow client** (headers or body trickled past the
  server's deadlines).

The properties checked on every answer (:func:`check`): no 500 (and no other 5xx but the
documented ones: 502 from the agent when compose misbehaves, 503 for an inconclusive
Flagger verdict, a draining engine or the connection bound), no traceback or aiohttp
"Error handling request" in the server's output, no secret in the answer in any encoding
(:func:`tests.secret_search.holds_any`: the agent's token, the judge's Prometheus password, and
the env values and tokens the case planted), the server still answering its health route;
after a surface's run, no file written outside its allowed folders.
"""

from __future__ import annotations

import contextlib
import json
import random
import select
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.routes import Route, routes
from tests.integration.servers import AGENT_TOKEN, Served
from tests.schema_fuzz import generate, hostile_value
from tests.secret_search import holds_any

#: A secret a case plants in what it sends (an env value, a token it tries): echoed back, it
#: is a finding wherever it lands (the agent never shows an env value).
PLANTED = "PLANTED-fuzz-secret-9c2e41d7b3a8"
#: One case in this many is a slow client.
SLOW_EVERY = 25
#: The 5xx each surface may answer, and why (docs/security.md).
ALLOWED_5XX = {
    "agent": {502, 503},  # compose misbehaved; the connection bound
    "judge": {503},  # Flagger's inconclusive; the connection bound
    "sim": {503},  # draining, /health_generate without output, the connection bound
    "sim-vllm": {503},
}
HEALTH = {"agent": "/health", "judge": "/healthz", "sim": "/health", "sim-vllm": "/health"}

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 64}
_BOOL: dict[str, Any] = {"type": "boolean"}
_NAMES: dict[str, Any] = {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,4}$"}}
_ENV: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_TAG: dict[str, Any] = {"type": "string", "enum": ["v1", "v2", "main", "HEAD"]}
_FILE: dict[str, Any] = {"type": "string", "enum": ["h/compose.yaml", "h", "compose.yaml"]}
_MESSAGES: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"role": {"enum": ["user", "system", "assistant"]}, "content": _STR},
    },
}
_OPENAI: dict[str, Any] = {
    "model": _STR,
    "max_tokens": {"type": "integer", "minimum": 0, "maximum": 32},
    "stream": _BOOL,
    "stream_options": {"type": "object", "properties": {"include_usage": _BOOL}},
    "n": {"type": "integer", "minimum": 1, "maximum": 2},
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "logprobs": {"type": "integer", "minimum": 0, "maximum": 5},
    "seed": _INT,
    "stop": {"type": "array", "items": _STR},
    "echo": _BOOL,
    "prompt_logprobs": {"type": "integer", "minimum": 0, "maximum": 5},
}
#: The request body of each POST route, as a JSON schema (None: the route reads no body).
BODY_SCHEMAS: dict[tuple[str, str], dict[str, Any] | None] = {
    ("agent", "/compose/up"): {
        "type": "object",
        "required": ["tag", "file", "services", "env", "force_recreate", "dry_run"],
        "properties": {
            "tag": _TAG,
            "file": _FILE,
            "services": _NAMES,
            "env": _ENV,
            "force_recreate": _BOOL,
            "dry_run": {"enum": [True]},
            "overrides": {"type": "array", "items": _FILE},
        },
    },
    ("agent", "/compose/down"): {
        "type": "object",
        "required": ["tag", "file", "services", "env", "volumes"],
        "properties": {
            "tag": _TAG,
            "file": _FILE,
            "services": _NAMES,
            "env": _ENV,
            "volumes": _BOOL,
        },
    },
    ("agent", "/compose/ps"): {
        "type": "object",
        "required": ["tag", "file"],
        "properties": {"tag": _TAG, "file": _FILE},
    },
    ("agent", "/compose/logs"): {
        "type": "object",
        "required": ["tag", "file", "service", "tail"],
        "properties": {"tag": _TAG, "file": _FILE, "service": _STR, "tail": _INT},
    },
    ("judge", "/argo"): {
        "type": "object",
        "properties": {"window": {"type": "string", "pattern": "^[1-9][0-9]?m$"}},
    },
    ("judge", "/flagger"): {
        "type": "object",
        "required": ["name", "namespace", "phase"],
        "properties": {
            "name": _STR,
            "namespace": _STR,
            "phase": _STR,
            "checksum": _STR,
            "metadata": {
                "type": "object",
                "properties": {"window": {"type": "string", "pattern": "^[1-9][0-9]?m$"}},
            },
        },
    },
    ("sim", "/v1/completions"): {
        "type": "object",
        "required": ["prompt"],
        "properties": {"prompt": _STR, **_OPENAI},
    },
    ("sim", "/v1/chat/completions"): {
        "type": "object",
        "required": ["messages"],
        "properties": {"messages": _MESSAGES, **_OPENAI},
    },
    ("sim", "/generate"): {
        "type": "object",
        "required": ["text"],
        "properties": {
            "text": _STR,
            "stream": _BOOL,
            "return_logprob": _BOOL,
            "logprob_start_len": _INT,
            "sampling_params": {
                "type": "object",
                "properties": {"max_new_tokens": {"type": "integer", "minimum": 0, "maximum": 16}},
            },
        },
    },
}
#: Each GET route's query parameters (value schemas).
QUERY_SCHEMAS: dict[tuple[str, str], dict[str, dict[str, Any]]] = {
    ("agent", "/files"): {"tag": _TAG, "file": _FILE},
    ("judge", "/argo"): {"window": {"type": "string", "pattern": "^[1-9][0-9]?m$"}},
}


def body_schema(route: Route) -> dict[str, Any] | None:
    """The JSON schema of ``route``'s body (the vLLM surface shares the OpenAI routes')."""
    kind = "sim" if route[0] == "sim-vllm" else route[0]
    return BODY_SCHEMAS.get((kind, route[2]))


@dataclass(frozen=True)
class Case:
    """One request: the bytes to send, how (at once or trickled), and what it planted."""

    surface: str
    n: int
    route: Route
    data: bytes
    what: str
    slow: bool = False
    planted: tuple[str, ...] = ()


# --------------------------------------------------------------------------- generation


def _hostile_doc(doc: Any, rng: random.Random) -> Any:
    """``doc`` with one path (a key of an object, an item of a list) set hostile."""
    if not isinstance(doc, dict) or not doc or rng.random() < 0.15:
        return hostile_value(rng) if rng.random() < 0.5 else doc
    key = rng.choice([*doc, "unknown-key"])
    value = doc.get(key)
    if isinstance(value, dict) and value and rng.random() < 0.5:
        doc[key] = _hostile_doc(value, rng)
    else:
        doc[key] = hostile_value(rng)
    return doc


def _body(route: Route, rng: random.Random, planted: list[str]) -> tuple[bytes | None, str]:
    schema = body_schema(route)
    roll = rng.random()
    if schema is None and roll < 0.7:
        return None, "no body"
    if roll < 0.08:
        return rng.choice([b"\xff\xfe\x00", b"{" * 50_000, b'{"a": 1' + b"9" * 5_000 + b"}",
                           b"null", b"[]", b'"x"', b"{,}", b"\x00" * 100]), "raw bytes"  # fmt: skip
    doc: Any = generate(schema, schema, rng) if schema is not None else {}
    if isinstance(doc, dict) and "env" in doc and rng.random() < 0.5:
        doc["env"] = {"TOKEN_X": PLANTED, "A": PLANTED + "-2"}  # values are never shown
        planted.append(PLANTED)
    hostile = rng.random() < 0.8
    if hostile:
        doc = _hostile_doc(doc, rng)
    text = json.dumps(doc, allow_nan=True, ensure_ascii=rng.random() < 0.5)
    return text.encode("utf-8", errors="surrogatepass"), "schema body" + (
        " (hostile)" if hostile else ""
    )


def _query(route: Route, rng: random.Random) -> str:
    from urllib.parse import quote

    params = QUERY_SCHEMAS.get(("sim" if route[0] == "sim-vllm" else route[0], route[2]), {})
    pairs: list[tuple[str, str]] = []
    for name, schema in params.items():
        if rng.random() < 0.85:
            value = generate(schema, schema, rng)
            if rng.random() < 0.5:
                value = hostile_value(rng)
            pairs.append((name, value if isinstance(value, str) else json.dumps(value)))
    roll = rng.random()
    if roll < 0.1:
        pairs += [("k", "v")] * 500
    elif roll < 0.2 and pairs:
        pairs.append((pairs[0][0], "second"))  # one key twice
    if not pairs:
        return ""
    encoded = "&".join(f"{quote(k, safe='')}={quote(v, safe='', errors='surrogatepass')}"
                       for k, v in pairs)  # fmt: skip
    if rng.random() < 0.1:
        encoded += rng.choice(["&%00=%ff", "&x=%zz", "&=", "&%C0%AE%C0%AE=1", "&window=%E2%80%AE"])
    return "?" + encoded


def _auth(surface: str, rng: random.Random, planted: list[str]) -> list[bytes]:
    if surface != "agent":
        return [b"Authorization: Bearer " + PLANTED.encode()] if rng.random() < 0.1 else []
    roll = rng.random()
    good = b"Authorization: Bearer " + AGENT_TOKEN.encode()
    if roll < 0.5:
        return [good]
    planted.append(PLANTED)
    return rng.choice(
        [
            [],
            [b"Authorization: Bearer " + PLANTED.encode()],
            [b"Authorization: Bearer \xff\xfe" + PLANTED.encode()],
            [b"Authorization: Basic " + PLANTED.encode() * 300],
            [good, b"Authorization: Bearer " + PLANTED.encode()],  # duplicated
            [b"Authorization: bearer " + AGENT_TOKEN.encode()],  # the scheme's case
            [b"Authorization: Bearer " + AGENT_TOKEN.encode() + b" "],
            [b"Authorization: Bearer " + AGENT_TOKEN[:-1].encode()],
        ]
    )


def _framing(body: bytes | None, rng: random.Random) -> tuple[list[bytes], bytes, str]:
    """The body's framing headers and the bytes that follow the headers."""
    data = body or b""
    roll = rng.random()
    if body is None and roll < 0.8:
        return [], b"", "no length"
    if roll < 0.6:
        return [b"Content-Length: %d" % len(data)], data, "length"
    if roll < 0.7:
        size = rng.choice([b"-1", b"abc", b"1e3", b"99999999999999999999", b" 5", b"0x10"])
        return [b"Content-Length: " + size], data, "bad length"
    if roll < 0.75:
        return (
            [b"Content-Length: %d" % len(data), b"Content-Length: %d" % (len(data) + 7)],
            (data),
            "two lengths",
        )
    if roll < 0.8:
        return [b"Content-Length: %d" % (len(data) + 50)], data, "length past the body"
    if roll < 0.92:
        chunks = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data) if data else b"0\r\n\r\n"
        garbage = rng.choice([chunks, b"zz\r\n" + data, b"ffffffffffffffff\r\n" + data,
                              b"%x;ext=1\r\n%s\r\n0\r\nTrailer: x\r\n\r\n" % (len(data), data),
                              b"1\r\n" + data[:1] + b"\r\n"])  # fmt: skip
        return [b"Transfer-Encoding: chunked"], garbage, "chunked"
    return (
        [b"Transfer-Encoding: chunked", b"Content-Length: %d" % len(data)],
        (b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)),
        "chunked and length",
    )


def _extra_headers(rng: random.Random) -> tuple[list[bytes], str]:
    roll = rng.random()
    if roll < 0.6:
        return [], ""
    return rng.choice(
        [
            ([b"X-Big: " + b"a" * 9_000], "a 9,000-byte field"),
            ([b"X-Latin: \xe9\xff\xfe"], "a field not UTF-8"),
            ([b"NoColonHere"], "a line without a colon"),
            ([b"X-Fold: a", b" folded"], "an obs-fold line"),
            ([b"X-N%d: v" % i for i in range(200)], "200 fields"),
            ([b"Host: second"], "two Host fields"),
            ([b"Content-Type: text/plain; charset=\xff"], "a content type not UTF-8"),
            ([b"Expect: 100-continue"], "expect continue"),
            ([b"Connection: keep-alive, Upgrade", b"Upgrade: websocket"], "an upgrade"),
        ]
    )


def case_at(surface: str, seed: int, n: int, surface_routes: list[Route]) -> Case:
    """Case ``n`` of ``surface``'s stream ``seed`` (rebuilt from these alone)."""
    rng = random.Random(f"tierctl-http-fuzz:{seed}:{surface}:{n}")
    route = surface_routes[n % len(surface_routes)]
    planted: list[str] = []
    method = route[1].encode()
    if rng.random() < 0.05:
        method = rng.choice([b"PUT", b"DELETE", b"PATCH", b"GE T", b"G\xffT", b"OPTIONS"])
    target = route[2].replace("{model_id}", rng.choice(["m", "x" * 3000, "%2e%2e/%2e%2e", "m%00"]))
    target += _query(route, rng)
    body, what = _body(route, rng, planted)
    framing, tail, how = _framing(body, rng)
    extra, more = _extra_headers(rng)
    version = b"HTTP/1.1" if rng.random() > 0.03 else rng.choice([b"HTTP/1.0", b"HTTP/9.9", b"HTP"])
    lines = [method + b" " + target.encode() + b" " + version, b"Host: 127.0.0.1"]
    lines += [b"Connection: close", *_auth(surface, rng, planted), *framing, *extra]
    if body is not None and rng.random() < 0.9:
        lines.append(b"Content-Type: application/json")
    data = b"\r\n".join(lines) + b"\r\n\r\n" + tail
    slow = n % SLOW_EVERY == SLOW_EVERY - 1
    label = ", ".join(x for x in (what, how, more, "slow" if slow else "") if x)
    return Case(surface, n, route, data, label, slow, tuple(sorted(set(planted))))


# --------------------------------------------------------------------------- running


@dataclass
class Answer:
    """What a server did with one case."""

    status: int | None  # None: closed without an answer
    raw: bytes = b""
    seconds: float = 0.0
    reset: bool = False
    closed: bool = False  # the server closed the connection before the patience ran out


def send(served: Served, case: Case, *, patience_s: float = 60.0) -> Answer:
    """Send ``case`` (trickled when slow) and read the answer until the server closes."""
    started = time.monotonic()
    raw = bytearray()
    reset = closed = False
    with socket.create_connection(served.addr, timeout=patience_s) as sock:
        try:
            if case.slow:
                _trickle(sock, case.data)
            else:
                sock.sendall(case.data)
        except (BrokenPipeError, ConnectionResetError):
            reset = True
        try:
            deadline = started + patience_s
            while time.monotonic() < deadline and len(raw) < 16 * 1024 * 1024:
                if not select.select([sock], [], [], 0.5)[0]:
                    continue
                chunk = sock.recv(65536)
                if not chunk:
                    closed = True
                    break
                raw.extend(chunk)
        except ConnectionResetError:
            closed = reset = True
        except TimeoutError:
            pass
    took = time.monotonic() - started
    return Answer(_final_status(bytes(raw)), bytes(raw), took, reset, closed)


def _final_status(raw: bytes) -> int | None:
    """The status of the answer (past any ``100 Continue``); None when there is none."""
    while raw.startswith(b"HTTP/1."):
        try:
            status = int(raw.split(b" ", 2)[1])
        except (ValueError, IndexError):
            return None
        if status >= 200:
            return status
        _, _, raw = raw.partition(b"\r\n\r\n")
    return None


def _trickle(sock: socket.socket, data: bytes) -> None:
    """A byte every 0.2 s of the headers' last line, or of the body: past 1-2 s deadlines,
    stopping when the server answers."""
    cut = data.find(b"\r\n\r\n")
    head, rest = (data[: max(0, cut - 5)], data[max(0, cut - 5) :]) if cut >= 0 else (b"", data)
    sock.sendall(head)
    for i in range(min(len(rest), 40)):
        if select.select([sock], [], [], 0.2)[0]:
            return
        sock.sendall(rest[i : i + 1])


@dataclass
class Finding:
    """One broken property."""

    case: Case
    what: str
    answer: bytes = b""

    def line(self) -> str:
        """A one-line summary with the case's key (rebuilt by ``--only``)."""
        route = f"{self.case.route[1]} {self.case.route[2]}"
        return f"{self.case.surface} #{self.case.n} {route} ({self.case.what}): {self.what}"


def check(served: Served, case: Case, answer: Answer, log_before: int) -> list[str]:
    """The properties of one answer (see the module docstring); what broke."""
    broken: list[str] = []
    if answer.status == 500:
        broken.append("answered 500")
    elif (
        answer.status is not None
        and answer.status >= 500
        and answer.status not in ALLOWED_5XX[served.kind]
    ):
        broken.append(f"answered {answer.status}")
    if case.slow and not answer.closed and answer.status is None:
        broken.append(f"a slow client was held {answer.seconds:.0f} s without an answer")
    text = answer.raw.decode("utf-8", errors="surrogateescape")
    secrets = [*served.secrets, *case.planted]
    if secrets and holds_any(text, secrets):
        broken.append("a secret in the answer")
    log = served.output()[log_before:]
    if "Traceback" in log or "Error handling request" in log:
        broken.append("a traceback in the server's output: " + log[-600:])
    return broken


def healthy(served: Served) -> bool:
    """Whether the server answers its health route with 200."""
    path = HEALTH[served.kind].encode()
    data = b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    probe = Case(served.kind, -1, (served.kind, "GET", HEALTH[served.kind]), data, "health")
    return send(served, probe, patience_s=60).status == 200


@dataclass
class SurfaceRun:
    """A surface's run: cases, statuses seen, findings."""

    surface: str
    cases: int = 0
    slow: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0


def run_surface(
    served: Served,
    seed: int,
    count: int,
    max_seconds: float,
    *,
    only: int | None = None,
    on_case: Callable[[Case, Answer], None] | None = None,
) -> SurfaceRun:
    """Run up to ``count`` cases (or just case ``only``) of ``served``'s surface, for at most
    ``max_seconds``; the server's health is asked every 20 cases and at the end."""
    surface_routes = sorted(routes(served.kind))
    run = SurfaceRun(served.kind)
    started = time.monotonic()
    numbers: Iterator[int] = iter([only]) if only is not None else iter(range(count))
    for n in numbers:
        if time.monotonic() - started > max_seconds:
            break
        case = case_at(served.kind, seed, n, surface_routes)
        log_before = len(served.output())
        answer = send(served, case)
        run.cases += 1
        run.slow += case.slow
        key = str(answer.status) if answer.status is not None else "closed"
        run.statuses[key] = run.statuses.get(key, 0) + 1
        run.findings += [Finding(case, b, answer.raw[:2000]) for b in check(served, case, answer,
                                                                            log_before)]  # fmt: skip
        if on_case is not None:
            on_case(case, answer)
        if n % 20 == 19 and not healthy(served):
            run.findings.append(Finding(case, "the server stopped answering its health route"))
            break
    if served.proc.poll() is not None:
        run.findings.append(Finding(case, f"the server died ({served.proc.returncode})"))
    elif not healthy(served):
        run.findings.append(Finding(case, "the server stopped answering its health route"))
    run.seconds = time.monotonic() - started
    return run


def written_outside(root: Path, allowed: tuple[Path, ...], since: float) -> list[str]:
    """Files under ``root`` changed after ``since`` that are not under an ``allowed`` folder
    (nor the server's own log)."""
    out = []
    for path in root.rglob("*"):
        if not path.is_file() or path.name == "server.log":
            continue
        if any(path.is_relative_to(a) for a in allowed):
            continue
        with contextlib.suppress(OSError):
            if path.stat().st_mtime > since:
                out.append(str(path))
    return out


def main() -> int:  # pragma: no cover - the long run, by hand
    """``python -m tests.http_fuzz --count N --seed S [--surfaces agent,judge,...]``."""
    import argparse
    import tempfile

    from tests.integration.servers import ALL_KINDS, serve

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=600.0, help="per surface")
    parser.add_argument("--surfaces", default=",".join(ALL_KINDS))
    parser.add_argument("--only", type=int, help="re-run one case")
    args = parser.parse_args()
    bad = 0
    for surface in args.surfaces.split(","):
        with tempfile.TemporaryDirectory(prefix=f"http-fuzz-{surface}-") as work:
            with serve(surface, Path(work) / surface, stub_compose=True) as served:
                since = time.time()  # after its set-up (the repository, the stub)
                run = run_surface(served, args.seed, args.count, args.max_seconds, only=args.only)
            outside = written_outside(Path(work), served.writable, since)
        print(f"{surface}: {run.cases} cases ({run.slow} slow) in {run.seconds:.0f} s, "
              f"statuses {dict(sorted(run.statuses.items()))}, {len(run.findings)} findings, "
              f"{len(outside)} files written outside")  # fmt: skip
        for finding in run.findings:
            print("  " + finding.line())
        for path in outside:
            print("  written: " + path)
        bad += len(run.findings) + len(outside)
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
