"""The compose-manager driver: the HTTP agent on each host that runs docker compose for us.

API (design.md): ``POST /compose/up`` with ``{tag, file, services, env, force_recreate,
dry_run}``, ``POST /compose/down`` with ``{tag, file, services, env, volumes}``, a bearer
token, and an NDJSON event stream of ``stdout``/``stderr`` lines ending in an ``exit`` event.

A step recreates a service as a scoped down then an up without ``force_recreate``: after the
down the up only creates what is missing, so both calls are idempotent and are retried with
backoff on 5xx, 409 (the agent is busy with the project), time-outs and connection errors. An up with ``force_recreate`` would recreate
again on a retry, so that one (unused by the steps, kept for operators) is never retried once
sent. The services list is never empty: the agent reads empty as "every service".
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from tierctl.credentials import mask
from tierctl.errors import InputError, RuntimeFailure
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.base import HostUnreachable, require_services
from tierctl.rollout.dryrun import DryRunResult, parse_dry_run

#: The agent's rule for environment keys (shell-safe names).
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_env(env: Mapping[str, str]) -> dict[str, str]:
    """Check env keys and values the way the agent does; return a copy.

    Raises:
        InputError: A key that is not a shell-safe name, or a value with a NUL byte. The value
            itself is never shown: it may be a secret.
    """
    for key, value in env.items():
        if not ENV_KEY.match(key):
            raise InputError(
                f"environment key {key!r} is not accepted by compose-manager",
                rule="env keys match [A-Za-z_][A-Za-z0-9_]*",
                value=key,
                fix="rename the variable",
            )
        if not isinstance(value, str) or "\x00" in value:
            raise InputError(
                f"environment value of {key} is not a plain string",
                rule="env values are strings without NUL bytes",
                fix=f"check the value of {key}",
            )
    return dict(env)


@dataclass(frozen=True)
class Target:
    """What the agent needs to find a side's files: the deployment repository's tag, the path
    of the first file and those of the override files merged over it (``-f`` order)."""

    tag: str
    file: str
    overrides: tuple[str, ...] = ()

    def body(self) -> dict[str, Any]:
        """The request keys naming the files (``overrides`` only where there are some: an
        agent that knows one file per side never sees the key)."""
        named: dict[str, Any] = {"tag": self.tag, "file": self.file}
        if self.overrides:
            named["overrides"] = list(self.overrides)
        return named


def up_request(
    target: Target,
    services: list[str],
    env: Mapping[str, str],
    *,
    force_recreate: bool,
    dry_run: bool,
) -> tuple[str, dict[str, Any]]:
    """The agent call (path, body) of a scoped ``up``; the runbook prints the same bodies."""
    require_services(services)
    return "/compose/up", {
        **target.body(),
        "services": list(services),
        "env": dict(env),
        "force_recreate": force_recreate,
        "dry_run": dry_run,
    }


def down_request(
    target: Target, services: list[str], env: Mapping[str, str]
) -> tuple[str, dict[str, Any]]:
    """The agent call (path, body) of a scoped ``down``; volumes are kept."""
    require_services(services)
    return "/compose/down", {
        **target.body(),
        "services": list(services),
        "env": dict(env),
        "volumes": False,
    }


def dry_run_requests(
    target: Target, services: list[str], env: Mapping[str, str]
) -> list[tuple[str, dict[str, Any]]]:
    """The calls of :meth:`ComposeManagerDriver.dry_run`: an ``up`` that applies nothing."""
    return [up_request(target, services, env, force_recreate=True, dry_run=True)]


def apply_requests(
    target: Target, services: list[str], env: Mapping[str, str]
) -> list[tuple[str, dict[str, Any]]]:
    """The calls of :meth:`ComposeManagerDriver.apply`: a scoped down, then an up."""
    return [
        down_request(target, services, env),
        up_request(target, services, env, force_recreate=False, dry_run=False),
    ]


@dataclass(frozen=True)
class CallResult:
    """One agent call's outcome."""

    exit_code: int
    lines: tuple[str, ...]
    #: The agent's own reading of a dry run (``tierctl agent`` sends a ``changes`` event:
    #: it knows the project's container names), or None when it sent none.
    changes: DryRunResult | None = None


class _Retryable(Exception):
    def __init__(self, message: str, *, answered: bool = True) -> None:
        super().__init__(message)
        # False: no HTTP answer at all (a connection error, a time-out, a cut stream).
        self.answered = answered


class ComposeManagerDriver:
    """Drive one host's compose-manager agent."""

    name = "compose-manager"

    def __init__(
        self,
        base_url: str,
        token: str,
        targets: Mapping[str, Target],
        *,
        env: Mapping[str, str] | None = None,
        gate_host: str = "127.0.0.1",
        project: str | None = None,
        timeout_s: float = 600.0,
        idle_timeout_s: float = 15.0,
        attempts: int = 4,
        backoff_s: float = 1.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        log: Callable[[str], None] | None = None,
    ) -> None:
        """Create the driver.

        Args:
            base_url: The agent's URL.
            token: The bearer token (from the environment or a file, never argv).
            targets: ``old``/``new`` -> the tag and file the agent applies.
            env: Interpolation variables sent with each call (validated).
            gate_host: The host the gates reach engines on.
            project: The compose project name, for mapping dry-run container names.
            timeout_s: Deadline of one call: connecting, every read, and the whole answer
                stream (an agent that trickles lines, or accepts and never answers, is given
                up on after this long; compose pulls can be slow).
            idle_timeout_s: With an agent whose streams beat (its ``GET /health`` says
                ``heartbeat_s``: ``tierctl agent``), a stream silent this long is a host that
                stopped answering, given up on at once (at least three heartbeats; 0: off).
                An agent that does not beat gets the whole ``timeout_s`` of silence.
            attempts: Tries for an idempotent call.
            backoff_s: First back-off; doubled per retry.
            transport: Injected HTTP transport (tests).
            sleep: Injected sleep (tests).
            log: Receives a line per retry as it happens (the operator sees why it waits).
        """
        self._token = token
        self._targets = dict(targets)
        self._env = validate_env(env or {})
        self._gate_host = gate_host
        self._project = project
        self._attempts = max(1, attempts)
        self._timeout_s = timeout_s
        self._idle_timeout_s = idle_timeout_s
        self._idle_s: float | None = None  # known once the agent said it beats
        self._silent = False  # the last call got no answer to any try
        self._backoff_s = backoff_s
        self._sleep = sleep
        self._log = log
        self._client = httpx.Client(
            base_url=base_url,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=min(_CONNECT_S, timeout_s)),
            headers={"Authorization": f"Bearer {token}"},
        )
        self.calls: list[dict[str, Any]] = []

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def secrets(self) -> tuple[str, ...]:
        """The token and the env values sent to the agent."""
        return (self._token, *self._env.values())

    def endpoint(self, dep: Deployment, service: str) -> str:
        """``http://GATE_HOST:PORT`` from the service's ``--port``."""
        return f"http://{self._gate_host}:{dep.engine_port(service)}"

    def container_state(self, dep: Deployment, service: str) -> tuple[str, int | None] | None:
        """The service's container state and exit code, from the agent's ``POST
        /compose/ps``; None when it cannot say (no answer, an agent without ``ps``)."""
        target = self._targets.get(dep.side)
        if target is None:
            return None
        try:
            resp = self._client.post(
                "/compose/ps", json={"tag": target.tag, "file": target.file},
                timeout=httpx.Timeout(5.0),
            )  # fmt: skip
            rows = resp.json().get("containers") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("service") == service:
                code = row.get("exit_code")
                return str(row.get("state", "")), code if isinstance(code, int) else None
        return None

    def dry_run(self, dep: Deployment, services: list[str]) -> DryRunResult:
        """Ask the agent for a dry-run ``up`` of exactly ``services``."""
        ((path, body),) = dry_run_requests(self._target(dep), services, self._env)
        res = self._call(path, body, idempotent=True)
        if res.changes is not None:
            return res.changes
        return parse_dry_run(res.lines, dep.services, self._project)

    def apply(self, dep: Deployment, services: list[str]) -> None:
        """Scoped down, then up of exactly ``services`` (both idempotent)."""
        for path, body in apply_requests(self._target(dep), services, self._env):
            self._call(path, body, idempotent=True)

    def recreate_in_place(self, dep: Deployment, services: list[str]) -> None:
        """An up with ``force_recreate`` (not idempotent, so never retried once sent)."""
        self._up(dep, services, force_recreate=True, dry_run=False)

    def down(self, dep: Deployment, services: list[str]) -> None:
        """Scoped down of exactly ``services``; volumes are kept."""
        path, body = down_request(self._target(dep), services, self._env)
        self._call(path, body, idempotent=True)

    def _up(
        self, dep: Deployment, services: list[str], *, force_recreate: bool, dry_run: bool
    ) -> CallResult:
        path, body = up_request(
            self._target(dep), services, self._env, force_recreate=force_recreate, dry_run=dry_run
        )
        return self._call(path, body, idempotent=dry_run or not force_recreate)

    def _target(self, dep: Deployment) -> Target:
        target = self._targets.get(dep.side)
        if target is None:
            raise InputError(
                f"no compose-manager tag for the {dep.side} file",
                rule="compose-manager applies a file at a tag of the deployment repository",
                fix=f"use a git:REF:PATH source or pass `tag_{dep.side}`",
                params=(f"tag_{dep.side}",),
            )
        return target

    def _call(self, path: str, body: dict[str, Any], *, idempotent: bool) -> CallResult:
        self.calls.append({"path": path, **{k: v for k, v in body.items() if k != "env"}})
        delay = self._backoff_s
        last = ""
        answered = False  # did any try get an HTTP answer?
        # A host that gave no answer to every try of the last call (cut off, its agent dead) is
        # tried once per call until it answers again: the rollback that follows a step it
        # never answered says so in seconds, not in another round of tries.
        attempts = 1 if self._silent else self._attempts
        for attempt in range(1, attempts + 1):
            try:
                result = self._once(path, body)
                self._silent = False
                return result
            except _Retryable as exc:
                last = str(exc)
                answered = answered or exc.answered
                if not idempotent or attempt == attempts:
                    break
                if self._log is not None:
                    self._log(
                        f"compose-manager {path} for {', '.join(body['services'])}: {last}; "
                        f"try {attempt + 1} of {self._attempts} in {delay:g} s"
                    )
                # A retry with doubling backoff, not a wait on a condition (what
                # runtime.polling.wait_until is, at a fixed interval).
                self._sleep(delay)
                delay *= 2
        self._silent = not answered
        tries = "once (not idempotent)" if not idempotent else f"{attempts} times"
        if attempts == 1 and idempotent:
            tries = "once (it answered no try of the call before)"
        slow = "call deadline" in last
        # No answer at all to any try: the host or the network to it is down, and what it did
        # with the call is unknown (the executor treats that apart from a failure).
        error = RuntimeFailure if answered else HostUnreachable
        raise error(
            f"compose-manager {path} for {', '.join(body['services'])} failed {tries}: {last}"
            + ("" if answered else f"; the agent at {self._client.base_url} never answered"),
            rule="the agent must answer with an exit event of code 0"
            + (f", within the {self._timeout_s:g} s `agent_timeout_s` of a call" if slow else ""),
            fix="check the agent's log on the host"
            + ("" if answered else " (is the agent up? does its address answer from here?)")
            + (
                " (a stalled agent needs a restart; a slow pull, a longer `agent_timeout_s`)"
                if slow
                else ""
            )
            + ", then run the step again",
            params=("agent_timeout_s",),
        )

    def _silence_s(self) -> float:
        """How long a stream may stay silent: a few heartbeats where the agent beats (asked
        once, at its unauthenticated ``GET /health``), else the whole call deadline."""
        if self._idle_s is None:
            self._idle_s = (
                _heartbeat_idle_s(self._client, self._idle_timeout_s)
                if self._idle_timeout_s > 0
                else self._timeout_s
            )
        return min(self._idle_s, self._timeout_s)

    def _once(self, path: str, body: dict[str, Any]) -> CallResult:
        silence = self._silence_s()
        timeout = httpx.Timeout(
            self._timeout_s, connect=min(_CONNECT_S, self._timeout_s), read=silence
        )
        try:
            with self._client.stream("POST", path, json=body, timeout=timeout) as resp:
                if resp.status_code in (401, 403):
                    raise RuntimeFailure(
                        f"compose-manager refused the token ({resp.status_code})",
                        rule="calls carry a valid bearer token",
                        fix="set TIERCTL_AGENT_TOKEN (or `token_file`) to the agent's token",
                        params=("token_file",),
                    )
                if resp.status_code >= 500:
                    raise _Retryable(f"HTTP {resp.status_code}")
                if resp.status_code == 409:
                    # The agent runs one operation per project at a time: another is running
                    # (often this call's own earlier try, which the agent finishes even after
                    # the client gave up on it). Worth waiting for, like a 5xx.
                    resp.read()
                    raise _Retryable(
                        f"HTTP 409, the agent is busy: {_said(mask(resp.text, self.secrets()))}"
                    )
                if resp.status_code >= 400:
                    resp.read()
                    # Masked before it is cut: a cut through a secret would leave a prefix
                    # that no later masking recognises.
                    said = mask(resp.text, self.secrets())[:300]
                    raise RuntimeFailure(
                        f"compose-manager rejected {path} ({resp.status_code}): {said}",
                        rule="the request follows the agent's API",
                        fix="check the tag (old enough?), the file path and the service names",
                    )
                lines: list[str] = []
                exit_code: int | None = None
                changes: DryRunResult | None = None
                deadline = time.monotonic() + self._timeout_s
                for raw in resp.iter_lines():
                    if time.monotonic() > deadline:
                        raise _Retryable(
                            f"no exit event within the {self._timeout_s:g} s call deadline",
                            answered=False,
                        )
                    if len(raw) > _MAX_EVENT_CHARS:
                        raise _Retryable(f"an event line over {_MAX_EVENT_CHARS:,} characters")
                    if not raw.strip():
                        continue
                    event = _event(raw)
                    if event[0] == "heartbeat":
                        continue
                    if event[0] == "exit":
                        exit_code = int(event[1])
                    elif event[0] == "changes":
                        changes = _changes(raw)
                    else:
                        # An agent may echo the request (env values, the token): masked here,
                        # at the source, before any line reaches a message, a log or a journal.
                        lines.append(mask(event[1], self.secrets()))
        except httpx.TimeoutException as exc:
            # Connected and then silence (or no connection at all): say which deadline passed.
            if isinstance(exc, httpx.ReadTimeout) and silence < self._timeout_s:
                raise _Retryable(
                    f"the agent's stream went silent: no event, not even its heartbeat, for "
                    f"{silence:g} s (`agent_idle_timeout_s`)",
                    answered=False,
                ) from None
            raise _Retryable(
                f"no answer within the {self._timeout_s:g} s call deadline ({type(exc).__name__})",
                answered=False,
            ) from None
        except httpx.TransportError as exc:
            raise _Retryable(f"{type(exc).__name__}: {exc}", answered=False) from None
        if exit_code is None:
            # An answer (a 200 whose body was no event stream: a proxy's page, a wrong server).
            raise _Retryable("event stream ended without an exit event")
        if exit_code != 0:
            tail = "; ".join(lines[-5:])
            raise RuntimeFailure(
                f"compose-manager {path} exited {exit_code}: {tail}",
                rule="docker compose must succeed on the host",
                fix="read the agent output above, fix, then run the step again",
            )
        if changes is not None:
            changes = DryRunResult(changes.changed, changes.removed, tuple(lines))
        return CallResult(exit_code, tuple(lines), changes)


def _heartbeat_idle_s(client: httpx.Client, idle_timeout_s: float) -> float:
    """How long a stream of this agent may stay silent, asked once at its ``GET /health``:
    ``idle_timeout_s`` (at least three beats) where it says ``heartbeat_s``; the whole call
    deadline (infinity here) where it answers without one (an agent whose streams do not beat).

    An agent that cannot be reached now gets ``idle_timeout_s``: its calls fail at connecting
    anyway, and a host cut off later is then found within the idle time-out, not the deadline.
    """
    try:
        resp = client.get("/health", timeout=httpx.Timeout(5.0))
    except httpx.HTTPError:
        return idle_timeout_s
    try:
        beat = resp.json().get("heartbeat_s") if resp.status_code == 200 else None
    except (ValueError, AttributeError):
        beat = None
    if isinstance(beat, bool) or not isinstance(beat, int | float) or not 0 < beat <= 60:
        return math.inf
    return max(float(idle_timeout_s), 3.0 * float(beat))


# Connecting to a host's agent: milliseconds on a working network; past this it is not there.
_CONNECT_S = 5.0

# One NDJSON event is a line of compose output; a longer one is a broken or hostile stream.
_MAX_EVENT_CHARS = 1_000_000


def _changes(raw: str) -> DryRunResult | None:
    """A ``changes`` event's services (changed, removed); None when it is malformed (the
    driver then reads compose's lines itself)."""
    rec = json.loads(raw)
    changed, removed = rec.get("services"), rec.get("removed", [])
    if not isinstance(changed, list) or not isinstance(removed, list):
        return None
    if not all(isinstance(x, str) for x in [*changed, *removed]):
        return None
    return DryRunResult(frozenset(changed), frozenset(removed) - frozenset(changed))


def _said(text: str) -> str:
    """The ``error`` of an agent's JSON answer (else the text), short."""
    try:
        rec = json.loads(text)
    except json.JSONDecodeError:
        return text[:200]
    return str(rec.get("error", text) if isinstance(rec, dict) else text)[:200]


def _event(raw: str) -> tuple[str, str]:
    """One NDJSON event as (kind, text or exit code)."""
    try:
        rec = json.loads(raw)
    except json.JSONDecodeError:
        return ("stdout", raw)
    if not isinstance(rec, dict):
        return ("stdout", raw)
    kind = str(rec.get("type") or rec.get("event") or rec.get("stream") or "stdout")
    if kind == "exit":
        code = rec.get("code", rec.get("exit_code", 1))
        return ("exit", str(code if isinstance(code, int) else 1))
    text = rec.get("line", rec.get("data", rec.get("text", "")))
    return (kind, str(text))
