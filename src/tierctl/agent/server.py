"""``tierctl agent serve``: the per-host agent, running the real ``docker compose``.

API (every call but ``GET /health`` carries ``Authorization: Bearer TOKEN``):

- ``POST /compose/up`` ``{tag, file, services, env, force_recreate, dry_run}`` and
  ``POST /compose/down`` ``{tag, file, services, env, volumes}``: an NDJSON stream of compose's
  ``stdout``/``stderr`` lines, a ``changes`` event after a dry run (the services it would
  create or recreate, and remove), and an ``exit`` event with compose's exit code;
- ``POST /compose/ps`` ``{tag, file}``: the project's containers, their state and health;
- ``POST /compose/logs`` ``{tag, file, service, tail}``: the last lines of a service's log;
- ``GET /files?tag=T&file=F``: the file at that tag, its commit and sha256;
- ``GET /health``: ``{"status": "ok", "heartbeat_s": N}``, unauthenticated.

While an up or down runs, its stream carries a ``heartbeat`` event every ``heartbeat_s`` (5 s)
whatever compose prints, so a client can tell a silent compose (a pull, a health wait) from a
host that stopped answering: the driver gives up on a stream idle for a few heartbeats
(``--agent-idle-timeout-s``) instead of the whole call deadline.

One up or down runs at a time per compose project (another gets 409 at once); bodies are
bounded (413), read within a deadline (408), and each compose run is killed past its deadline
(an ``exit`` event of 124). A client that hangs up does not stop a compose run already started
(a half-done recreate is worse than a finished one); it still ends in the operation log.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hmac
import json
import os
import signal
import socket
import ssl
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from aiohttp import web

from tierctl.agent.oplog import OperationLog
from tierctl.agent.projects import AgentRefusal, Checkout, ProjectStore
from tierctl.agent.protocol import (
    ComposeCall,
    compose_argv,
    down_call,
    logs_target,
    ps_target,
    up_call,
)
from tierctl.errors import InputError
from tierctl.readers import Limits, json_line, load_json
from tierctl.rollout.dryrun import CONFIG_COPY_NOTE, parse_dry_run, stopped_at_config_copy
from tierctl.rollout.normalise import load_merged_services
from tierctl.runtime.http_guard import (
    BodyTooLarge,
    ClientBounds,
    next_request_headers,
    read_body,
    serve_guarded,
)
from tierctl.runtime.process import die_with_parent as _die_with_parent

#: The environment variable the agent's token is read from (or ``token_file``).
TOKEN_ENV = "TIERCTL_AGENT_TOKEN"


@dataclass(frozen=True)
class AgentConfig:
    """How one agent runs.

    Attributes:
        projects_dir: The deployment repository's checkout.
        state_dir: Extracted commits, the operation log and the instance lock.
        token: The bearer token callers present.
        compose: The compose command's first words (``docker compose`` or the binary).
        token_env: The variable the token came from: never passed on to compose.
        operation_timeout_s: The longest one compose run may take.
        body_timeout_s: How long a client may take to send its body.
        max_body_bytes: The largest request body.
        compose_env: The environment compose runs in (default: the agent's, less the token).
        heartbeat_s: Seconds between an operation stream's ``heartbeat`` events.
        header_timeout_s: How long a client may take to send a request's headers.
        max_calls: Authorised calls served at once (each may run git or compose).
    """

    projects_dir: Path
    state_dir: Path
    token: str
    compose: tuple[str, ...]
    token_env: str = TOKEN_ENV
    operation_timeout_s: float = 900.0
    body_timeout_s: float = 30.0
    max_body_bytes: int = 1024 * 1024
    compose_env: Mapping[str, str] | None = None
    heartbeat_s: float = 5.0
    header_timeout_s: float = 10.0
    max_calls: int = 16


#: The longest line of compose output passed on (a longer one is cut, and says so): asyncio's
#: readline raised past its 64 KiB buffer, which ended the stream without its exit event.
MAX_LINE_CHARS = 16 * 1024
#: Lines of a dry run kept to read its changes from (the rest are streamed, not kept).
MAX_KEPT_LINES = 20_000
#: Bytes of a ps or logs run's output read (the rest is read and dropped, and said).
MAX_CAPTURE_BYTES = 16 * 1024 * 1024


@dataclass
class _Busy:
    op_id: str
    what: str
    since: float


@dataclass
class RunningAgent:
    """The running agent's shared state: the store, the log, the projects in use."""

    config: AgentConfig
    store: ProjectStore
    log: OperationLog
    busy: dict[str, _Busy] = field(default_factory=dict)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    calls: int = 0


_STATE: web.AppKey[RunningAgent] = web.AppKey("agent", RunningAgent)


def make_app(state: RunningAgent) -> web.Application:
    """The aiohttp application of one agent."""
    # aiohttp's size bound stays as a backstop; _body refuses first, with the rule.
    app = web.Application(
        client_max_size=state.config.max_body_bytes,
        middlewares=[next_request_headers, _call_bound],
    )
    app[_STATE] = state
    app.router.add_get("/health", _health)
    app.router.add_post("/compose/up", _up)
    app.router.add_post("/compose/down", _down)
    app.router.add_post("/compose/ps", _ps)
    app.router.add_post("/compose/logs", _logs)
    app.router.add_get("/files", _files)
    return app


@web.middleware
async def _call_bound(request: web.Request, handler: Any) -> web.StreamResponse:
    """At most ``max_calls`` calls at once (``/health`` aside): one more is 429 at once, so a
    flood cannot start compose and git processes without end."""
    state = request.app[_STATE]
    if request.path == "/health":
        response: web.StreamResponse = await handler(request)
        return response
    if state.calls >= state.config.max_calls:
        return web.json_response(
            {
                "error": f"{state.calls} calls are being served",
                "rule": f"the agent serves at most {state.config.max_calls} calls at once",
            },
            status=429,
            headers={"Retry-After": "1"},
        )
    state.calls += 1
    try:
        response = await handler(request)
        return response
    finally:
        state.calls -= 1


def _refusal(exc: AgentRefusal | InputError) -> web.Response:
    status = exc.status if isinstance(exc, AgentRefusal) else 400
    body = {"error": exc.message, **({"rule": exc.rule} if exc.rule else {})}
    resp = web.json_response(body, status=status)
    if status in (408, 413):
        resp.force_close()  # the rest of the body is never read
    return resp


def _authorised(request: web.Request) -> bool:
    token = request.app[_STATE].config.token
    header = request.headers.get("Authorization", "")
    # Constant time: how much of a guess matched must not show in the answer's timing. The
    # header's bytes as they came (a byte that is not UTF-8 arrives as a surrogate, which
    # .encode() refused with a 500): a header that is no token is simply not this token.
    sent = header.encode("utf-8", errors="surrogateescape")
    return hmac.compare_digest(sent, f"Bearer {token}".encode())


#: How deep a request body may nest: every request is a flat object (an ``env`` map at most
#: two levels down), so anything deeper is refused before it is walked.
MAX_BODY_DEPTH = 8


async def _body(request: web.Request) -> Any:
    """The request's JSON body, bounded: at most ``max_body_bytes`` (413), within
    ``body_timeout_s`` (408), UTF-8, nested at most ``MAX_BODY_DEPTH`` levels, no number over
    400 digits (400 with the rule)."""
    config = request.app[_STATE].config
    try:
        raw = await read_body(request, config.max_body_bytes, None, config.body_timeout_s)
    except BodyTooLarge as exc:
        raise AgentRefusal(
            f"the body is larger than {config.max_body_bytes} bytes (refused at {exc.seen})",
            status=413,
            rule=f"a request body is at most {config.max_body_bytes} bytes",
        ) from None
    except TimeoutError:
        raise AgentRefusal(
            f"the body did not arrive within {config.body_timeout_s:g} s",
            status=408,
            rule=f"a request body arrives within {config.body_timeout_s:g} s",
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise AgentRefusal("the body is not JSON", rule="a request body is UTF-8 JSON") from None
    limits = dataclasses.replace(Limits.config(), max_depth=MAX_BODY_DEPTH)
    try:
        return load_json(text, "request body", limits=limits)
    except InputError as exc:
        raise AgentRefusal(
            f"the body is not JSON the agent reads: {exc.message}", rule=exc.rule
        ) from None


async def _health(request: web.Request) -> web.Response:
    # heartbeat_s tells the driver that operation streams beat (docs/agent.md).
    return web.json_response(
        {"status": "ok", "heartbeat_s": request.app[_STATE].config.heartbeat_s}
    )


async def _up(request: web.Request) -> web.StreamResponse:
    return await _compose(request, up_call)


async def _down(request: web.Request) -> web.StreamResponse:
    return await _compose(request, down_call)


async def _compose(request: web.Request, parse: Any) -> web.StreamResponse:
    state = request.app[_STATE]
    if not _authorised(request):
        return web.json_response({"error": "unauthorized"}, status=401)
    try:
        call: ComposeCall = parse(await _body(request), frozenset({state.config.token_env}))
        checkout = await asyncio.to_thread(state.store.resolve, call.tag, call.file)
        layers = [await asyncio.to_thread(state.store.resolve, call.tag, f) for f in call.overrides]
    except (AgentRefusal, InputError) as exc:
        return _refusal(exc)
    held = state.busy.get(checkout.project)
    if held is not None:
        return web.json_response(
            {
                "error": f"project {checkout.project} is busy with operation {held.op_id} "
                f"({held.what}) for {time.monotonic() - held.since:.0f} s",
                "rule": "one up or down at a time per project",
            },
            status=409,
        )
    op_id = uuid.uuid4().hex[:12]
    what = f"{call.operation}{' dry run' if call.dry_run else ''} {' '.join(call.services)}"
    state.busy[checkout.project] = _Busy(op_id, what, time.monotonic())
    try:
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
    except BaseException:
        state.busy.pop(checkout.project, None)
        raise
    sink = _Sink(resp)
    # The run is its own task, shielded: a client that hangs up cancels (at most) this
    # handler, never the compose run, which ends, is logged and frees its project on its own.
    task = asyncio.ensure_future(
        _operation(state, call, checkout, op_id, sink, request.remote, tuple(layers))
    )
    state.tasks.add(task)
    task.add_done_callback(state.tasks.discard)
    beat = asyncio.ensure_future(_heartbeats(sink, state.config.heartbeat_s, time.monotonic()))
    try:
        code = await asyncio.shield(task)
    finally:
        beat.cancel()
    await sink.send({"type": "exit", "code": code})
    with contextlib.suppress(ConnectionError, RuntimeError):
        await resp.write_eof()
    return resp


async def _operation(
    state: RunningAgent,
    call: ComposeCall,
    checkout: Checkout,
    op_id: str,
    sink: _Sink,
    remote: str | None,
    layers: tuple[Checkout, ...] = (),
) -> int:
    """One logged compose run: ``begin``, compose, ``end``; the project is freed after."""
    argv = compose_argv(
        state.config.compose,
        checkout.project,
        str(checkout.path),
        str(checkout.project_dir),
        call,
        tuple(str(layer.path) for layer in layers),
    )
    record = {
        "op_id": op_id,
        "operation": call.operation,
        "dry_run": call.dry_run,
        "force_recreate": call.force_recreate,
        "project": checkout.project,
        "tag": call.tag,
        "commit": checkout.commit,
        "file": checkout.file,
        "overrides": list(call.overrides),
        "services": list(call.services),
        "env_keys": sorted(call.env),  # the names only: values may be secrets
        "remote": remote,
    }
    started = time.monotonic()
    try:
        state.log.append({"event": "begin", **record})
        env = {**_base_env(state.config), **call.env}
        code, timed_out = await _run_compose(
            argv, env, (checkout, *layers), state, sink, dry_run=call.dry_run
        )
        state.log.append(
            {
                "event": "end",
                "op_id": op_id,
                "exit_code": code,
                "timed_out": timed_out,
                "client_gone": sink.gone,
                "duration_s": round(time.monotonic() - started, 3),
            }
        )
        return code
    finally:
        state.busy.pop(checkout.project, None)


async def _heartbeats(sink: _Sink, every_s: float, since: float) -> None:
    """A ``heartbeat`` event every ``every_s`` until cancelled (the operation ended)."""
    while not sink.gone:
        await asyncio.sleep(every_s)
        await sink.send({"type": "heartbeat", "s": round(time.monotonic() - since, 1)})


class _Sink:
    """Writes events to the response until the client is gone, then drops them (one event
    at a time: compose's lines and the heartbeats share the stream)."""

    def __init__(self, resp: web.StreamResponse) -> None:
        self._resp = resp
        self._lock = asyncio.Lock()
        self.gone = False

    async def send(self, event: dict[str, Any]) -> None:
        if self.gone:
            return
        async with self._lock:
            try:
                await self._resp.write((json.dumps(event) + "\n").encode())
            except (ConnectionError, RuntimeError):
                self.gone = True


def _base_env(config: AgentConfig) -> dict[str, str]:
    env = dict(config.compose_env if config.compose_env is not None else os.environ)
    env.pop(config.token_env, None)  # compose and its plugins never see the token
    return env


async def _spawn(
    argv: list[str], env: dict[str, str], checkout: Checkout
) -> asyncio.subprocess.Process:
    """Start one compose command in the checkout's project folder, output piped."""
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=str(checkout.project_dir),
        start_new_session=True,  # its own group: the deadline kills compose and children
        preexec_fn=_die_with_parent,  # an agent killed takes its compose run with it
    )


async def _run_compose(
    argv: list[str],
    env: dict[str, str],
    files: tuple[Checkout, ...],
    state: RunningAgent,
    sink: _Sink,
    *,
    dry_run: bool,
) -> tuple[int, bool]:
    """Run compose, streaming its lines; (exit code, timed out). 124 when killed at the
    deadline, 127 when compose cannot be started. ``files``: the checkout of ``-f`` and its
    override files'."""
    checkout = files[0]
    try:
        proc = await _spawn(argv, env, checkout)
    except OSError as exc:
        await sink.send({"type": "stderr", "line": f"cannot start compose: {exc}"})
        return 127, False
    kept: deque[str] = deque(maxlen=MAX_KEPT_LINES)

    async def pump(stream: asyncio.StreamReader | None, kind: str) -> None:
        assert stream is not None
        async for line in _lines(stream):
            if dry_run:
                kept.append(line)
            await sink.send({"type": kind, "line": line})

    pumps = asyncio.gather(pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"))
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(pumps), state.config.operation_timeout_s)
        code = await proc.wait()
    except TimeoutError:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        pumps.cancel()
        await sink.send(
            {
                "type": "stderr",
                "line": f"compose killed after the agent's "
                f"{state.config.operation_timeout_s:g} s operation deadline",
            }
        )
        return 124, True
    lines = list(kept)
    if dry_run and code != 0 and stopped_at_config_copy(lines):
        await sink.send({"type": "stderr", "line": CONFIG_COPY_NOTE})
        code = 0
    if dry_run and code == 0:
        await sink.send({"type": "changes", **_changes(lines, files)})
    return code, timed_out


async def _lines(stream: asyncio.StreamReader) -> Any:
    """The stream's lines, each cut at ``MAX_LINE_CHARS`` (a cut line says so), decoded."""
    pending = b""
    while True:
        chunk = await stream.read(64 * 1024)
        if not chunk:
            if pending:
                yield pending.decode("utf-8", errors="replace").rstrip("\r")
            return
        pending += chunk
        *whole, pending = pending.split(b"\n")
        if len(pending) > MAX_LINE_CHARS:
            # A line without end so far: passed on now, cut; what follows comes as more lines.
            whole.append(pending)
            pending = b""
        for raw in whole:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + f" ... (cut at {MAX_LINE_CHARS} characters)"
            yield line


def _changes(lines: list[str], files: tuple[Checkout, ...]) -> dict[str, list[str]]:
    """The services a dry run would change, read back from compose's lines with the
    project's container names (every file merged: an override may name a container)."""
    try:
        services = load_merged_services([(f.text, f.file, None) for f in files]).services
    except InputError:
        services = {}
    found = parse_dry_run(lines, services, files[0].project)
    return {"services": sorted(found.changed), "removed": sorted(found.removed)}


async def _ps(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if not _authorised(request):
        return web.json_response({"error": "unauthorized"}, status=401)
    try:
        tag, file = ps_target(await _body(request))
        checkout = await asyncio.to_thread(state.store.resolve, tag, file)
    except (AgentRefusal, InputError) as exc:
        return _refusal(exc)
    argv = [*state.config.compose, "-p", checkout.project, "ps", "-a", "--format", "json"]
    code, out, err = await _capture(argv, _base_env(state.config), checkout, state)
    if code != 0:
        return web.json_response({"error": f"compose ps exited {code}: {err[-300:]}"}, status=502)
    try:
        containers = [_container(rec) for rec in _json_lines(out)]
    except InputError as exc:
        # Not what `compose ps --format json` prints: the compose binary's fault (502).
        return web.json_response(
            {"error": f"compose ps printed what is not JSON: {exc.message}", "rule": exc.rule},
            status=502,
        )
    return web.json_response(
        {"project": checkout.project, "commit": checkout.commit, "containers": containers}
    )


def _json_lines(out: str) -> list[dict[str, Any]]:
    """``compose ps --format json``: one object per line (2.21+) or one array (older).

    Raises:
        InputError: a line (or the array) is not JSON, or nests past the readers' bounds.
    """
    text = out.strip()
    if text.startswith("["):
        recs = load_json(text, "compose ps")
        return [r for r in recs if isinstance(r, dict)] if isinstance(recs, list) else []
    lines = enumerate(text.splitlines(), start=1)
    return [r for n, line in lines if isinstance(r := json_line(line, "compose ps", n), dict)]


def _container(rec: dict[str, Any]) -> dict[str, Any]:
    return {
        "service": rec.get("Service"),
        "name": rec.get("Name"),
        "state": rec.get("State"),
        "health": rec.get("Health") or None,
        "exit_code": rec.get("ExitCode"),
        "image": rec.get("Image"),
        "status": rec.get("Status"),
    }


async def _logs(request: web.Request) -> web.StreamResponse:
    state = request.app[_STATE]
    if not _authorised(request):
        return web.json_response({"error": "unauthorized"}, status=401)
    try:
        tag, file, service, tail = logs_target(await _body(request))
        checkout = await asyncio.to_thread(state.store.resolve, tag, file)
    except (AgentRefusal, InputError) as exc:
        return _refusal(exc)
    argv = [*state.config.compose, "-p", checkout.project, "logs", "--no-color"]
    argv += ["--no-log-prefix", "--tail", str(tail), "--", service]
    code, out, err = await _capture(argv, _base_env(state.config), checkout, state)
    resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await resp.prepare(request)
    sink = _Sink(resp)
    for kind, text in (("stdout", out), ("stderr", err)):
        for line in text.splitlines():
            await sink.send({"type": kind, "line": line})
    await sink.send({"type": "exit", "code": code})
    await resp.write_eof()
    return resp


async def _capture(
    argv: list[str], env: dict[str, str], checkout: Checkout, state: RunningAgent
) -> tuple[int, str, str]:
    """Run a read-only compose command to its end (within the operation deadline)."""
    try:
        proc = await _spawn(argv, env, checkout)
    except OSError as exc:
        return 127, "", f"cannot start compose: {exc}"
    try:
        out, err = await asyncio.wait_for(
            asyncio.gather(_bounded_read(proc.stdout), _bounded_read(proc.stderr)),
            state.config.operation_timeout_s,
        )
        await proc.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        return 124, "", "compose killed at the agent's operation deadline"
    code = proc.returncode if proc.returncode is not None else 1
    return code, out.decode(errors="replace"), err.decode(errors="replace")


async def _bounded_read(stream: asyncio.StreamReader | None) -> bytes:
    """A pipe read to its end, keeping its first ``MAX_CAPTURE_BYTES`` (and saying so)."""
    assert stream is not None
    kept = bytearray()
    cut = False
    while chunk := await stream.read(1024 * 1024):
        room = MAX_CAPTURE_BYTES - len(kept)
        cut = cut or len(chunk) > room
        kept += chunk[: max(0, room)]
    if cut:
        kept += f"\n... (output cut at {MAX_CAPTURE_BYTES} bytes)\n".encode()
    return bytes(kept)


async def _files(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if not _authorised(request):
        return web.json_response({"error": "unauthorized"}, status=401)
    tag, file = request.query.get("tag", ""), request.query.get("file", "")
    try:
        checkout = await asyncio.to_thread(state.store.resolve, tag, file)
    except (AgentRefusal, InputError) as exc:
        return _refusal(exc)
    return web.json_response(
        {
            "tag": checkout.tag,
            "commit": checkout.commit,
            "file": checkout.file,
            "project": checkout.project,
            "sha256": checkout.sha256,
            "text": checkout.text,
        }
    )


def _tls(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise InputError(
            "TLS needs both a certificate and its key",
            rule="`tls_cert` and `tls_key` go together",
            fix="pass both, or neither for plain HTTP on a trusted network",
            params=("tls_cert", "tls_key"),
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise InputError(
            f"cannot load the TLS certificate {cert} and key {key}: {exc}",
            rule="`tls_cert` is a PEM certificate chain and `tls_key` its PEM private key",
            fix="check both paths and that the key matches the certificate",
            params=("tls_cert", "tls_key"),
        ) from None
    return context


def _lock(state_dir: Path) -> TextIO:
    """Hold ``state_dir/agent.lock``: two agents on one state would run compose side by side."""
    state_dir.mkdir(parents=True, exist_ok=True)
    handle = (state_dir / "agent.lock").open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise InputError(
            f"another agent is serving state directory {state_dir}",
            rule="one agent per state directory (its lock is agent.lock)",
            fix="stop the other agent, or give this one another `state_dir`",
            params=("state_dir",),
        ) from None
    return handle


async def serve(
    config: AgentConfig,
    host: str,
    port: int,
    *,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    announce: Any = print,
) -> None:
    """Serve until SIGINT or SIGTERM (running operations are given the operation deadline to
    finish). ``announce`` receives the listening line."""
    store = ProjectStore(config.projects_dir, config.state_dir)
    store.check()
    context = _tls(tls_cert, tls_key)
    lock = _lock(config.state_dir)
    log = OperationLog(config.state_dir / "operations.jsonl")
    interrupted = log.mark_interrupted()
    state = RunningAgent(config=config, store=store, log=log)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise InputError(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            rule="the agent's address is free and this host's",
            fix="pick another `listen` address or port",
            params=("listen",),
        ) from None
    scheme = "https" if context else "http"
    bound = sock.getsockname()[1]
    announce(
        f"tierctl agent on {scheme}://{host}:{bound} serving {store.root}"
        + (f" ({len(interrupted)} interrupted operation(s) logged)" if interrupted else "")
    )
    try:
        # The header deadline and size, the connection bound and the keep-alive timeout of
        # every tierctl server (docs/security.md); running operations get their deadline.
        await serve_guarded(
            make_app(state),
            sock=sock,
            ssl_context=context,
            bounds=ClientBounds(header_timeout_s=config.header_timeout_s),
            shutdown_timeout_s=config.operation_timeout_s,
        )
    finally:
        log.close()
        lock.close()
