"""The agent's requests: which keys each call takes, and what each value may be.

The bodies are the ones :mod:`tierctl.rollout.drivers.compose_manager` sends (``up_request``,
``down_request``); ``ps`` and ``logs`` take the same ``tag``/``file``; any call may add
``overrides``, the files merged over ``file``. A body with a key too
many or too few, a service name that could reach compose's command line as an option, an empty
service list (compose reads it as every service) or an environment key the agent keeps for
itself is refused with 400 before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tierctl.agent.projects import AgentRefusal
from tierctl.errors import InputError
from tierctl.rollout.drivers.base import require_services
from tierctl.rollout.drivers.compose_manager import ENV_KEY

#: Environment names a request may not set: they would change which engine compose talks
#: to, which files it reads, or which code the compose process loads, not interpolate a file.
_RESERVED_ENV = re.compile(
    r"^(PATH|HOME|SHELL|IFS|TMPDIR|LD_.*|DOCKER_.*|COMPOSE_.*|BUILDX_.*|GO.*)$"
)

UP_KEYS = frozenset({"tag", "file", "services", "env", "force_recreate", "dry_run"})
DOWN_KEYS = frozenset({"tag", "file", "services", "env", "volumes"})
PS_KEYS = frozenset({"tag", "file"})
LOGS_KEYS = frozenset({"tag", "file", "service", "tail"})
#: A key every call may add: the override files merged over ``file`` (``-f`` order), paths
#: in the repository at the same tag.
OVERRIDES_KEY = "overrides"
#: The most override files one call names.
MAX_OVERRIDES = 16

#: The most log lines one ``logs`` call returns.
MAX_TAIL = 10_000
#: The most services one call names, and the most env variables it sets (a compose file of a
#: tier has a few; each is an argument or a variable of the compose process, whose argv and
#: environment the kernel bounds together at 2 MiB).
MAX_SERVICES = 256
MAX_ENV = 256


@dataclass(frozen=True)
class ComposeCall:
    """One up or down as the agent runs it."""

    operation: str  # "up" or "down"
    tag: str
    file: str
    services: tuple[str, ...]
    env: dict[str, str]
    force_recreate: bool = False
    dry_run: bool = False
    volumes: bool = False
    overrides: tuple[str, ...] = ()


def overrides_of(body: dict[str, Any]) -> tuple[str, ...]:
    """A checked body's override files (none where it names none)."""
    value = body.get(OVERRIDES_KEY, [])
    if (
        not isinstance(value, list)
        or not all(isinstance(f, str) and f for f in value)
        or len(value) > MAX_OVERRIDES
    ):
        raise AgentRefusal(
            f"`{OVERRIDES_KEY}` must be a list of at most {MAX_OVERRIDES} file paths",
            rule="override files are paths in the repository, merged over `file` in order",
        )
    return tuple(value)


def _keys(body: Any, keys: frozenset[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise AgentRefusal("the body must be a JSON object", rule="each call's body is one object")
    if set(body) - {OVERRIDES_KEY} != keys:
        missing = sorted(keys - set(body))
        extra = sorted(set(body) - keys - {OVERRIDES_KEY})
        raise AgentRefusal(
            f"keys must be {sorted(keys)} (missing {missing}, unknown {extra})",
            rule="each call takes exactly its keys",
        )
    for key in ("tag", "file"):
        if not isinstance(body[key], str):
            raise AgentRefusal(f"`{key}` must be a string", rule="`tag` and `file` are strings")
    return body


def _flag(body: dict[str, Any], key: str) -> bool:
    value = body[key]
    if not isinstance(value, bool):
        raise AgentRefusal(f"`{key}` must be true or false", rule="a switch is a JSON boolean")
    return value


def _services(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise AgentRefusal(
            "`services` must be a list of service names", rule="`services` is a list of strings"
        )
    if len(value) > MAX_SERVICES:
        raise AgentRefusal(
            f"`services` names {len(value)} services",
            rule=f"a call names at most {MAX_SERVICES} services",
        )
    if not value:
        raise AgentRefusal(
            "an empty `services` would mean every service to compose",
            rule="every call is scoped to the services it names",
        )
    try:
        require_services(list(value))
    except InputError as exc:
        raise AgentRefusal(f"{exc.message}: {exc.value!r}", rule=exc.rule) from None
    return tuple(value)


def check_env(value: Any, reserved: frozenset[str] = frozenset()) -> dict[str, str]:
    """A request's interpolation variables, checked; ``reserved`` are names also refused."""
    if not isinstance(value, dict):
        raise AgentRefusal(
            "`env` must be an object of names to strings", rule="`env` maps names to strings"
        )
    if len(value) > MAX_ENV:
        raise AgentRefusal(
            f"`env` sets {len(value)} variables", rule=f"a call sets at most {MAX_ENV} variables"
        )
    bad = [k for k in value if not isinstance(k, str) or not ENV_KEY.match(k)][:10]
    if bad:
        raise AgentRefusal(f"invalid env keys {bad}", rule="env keys match [A-Za-z_][A-Za-z0-9_]*")
    kept = sorted(k for k in value if _RESERVED_ENV.match(k) or k in reserved)
    if kept:
        raise AgentRefusal(
            f"env keys {kept} are the agent's own",
            rule="a request's env interpolates the file; it never sets PATH, LD_*, DOCKER_*, "
            "COMPOSE_* or the agent's token",
        )
    for key, val in value.items():
        # The value is never shown: it may be a secret.
        if not isinstance(val, str) or "\x00" in val:
            raise AgentRefusal(
                f"env value of {key} is not a string without NUL bytes",
                rule="an env value is a string without NUL bytes",
            )
    return dict(value)


def up_call(body: Any, reserved: frozenset[str] = frozenset()) -> ComposeCall:
    """``POST /compose/up``'s body, checked."""
    body = _keys(body, UP_KEYS)
    return ComposeCall(
        "up",
        body["tag"],
        body["file"],
        _services(body["services"]),
        check_env(body["env"], reserved),
        force_recreate=_flag(body, "force_recreate"),
        dry_run=_flag(body, "dry_run"),
        overrides=overrides_of(body),
    )


def down_call(body: Any, reserved: frozenset[str] = frozenset()) -> ComposeCall:
    """``POST /compose/down``'s body, checked."""
    body = _keys(body, DOWN_KEYS)
    return ComposeCall(
        "down",
        body["tag"],
        body["file"],
        _services(body["services"]),
        check_env(body["env"], reserved),
        volumes=_flag(body, "volumes"),
        overrides=overrides_of(body),
    )


def ps_target(body: Any) -> tuple[str, str]:
    """``POST /compose/ps``'s body, checked: (tag, file)."""
    body = _keys(body, PS_KEYS)
    return body["tag"], body["file"]


def logs_target(body: Any) -> tuple[str, str, str, int]:
    """``POST /compose/logs``'s body, checked: (tag, file, service, tail)."""
    body = _keys(body, LOGS_KEYS)
    (service,) = _services([body["service"]] if isinstance(body["service"], str) else None)
    tail = body["tail"]
    if not isinstance(tail, int) or isinstance(tail, bool) or not 1 <= tail <= MAX_TAIL:
        raise AgentRefusal(
            f"`tail` must be a whole number from 1 to {MAX_TAIL:,}",
            rule=f"a logs call returns at most {MAX_TAIL:,} lines",
        )
    return body["tag"], body["file"], service, tail


def compose_argv(
    compose: tuple[str, ...],
    project: str,
    path: str,
    project_dir: str,
    call: ComposeCall,
    overrides: tuple[str, ...] = (),
) -> list[str]:
    """The compose command line of one call (services come last, after ``--``); the
    ``overrides`` (checked-out paths) follow ``path`` as further ``-f`` files, in order."""
    argv = [*compose, "--progress", "plain", "-p", project, "-f", path]
    for extra in overrides:
        argv += ["-f", extra]
    argv += ["--project-directory", project_dir]
    if call.operation == "up":
        if call.dry_run:
            argv.append("--dry-run")
        argv += ["up", "-d", "--no-deps"]
        if call.force_recreate:
            argv.append("--force-recreate")
    else:
        # `rm -s -f` stops and removes exactly these services (a scoped `down` is missing from
        # older compose releases); volumes only when asked.
        argv += ["rm", "-s", "-f", *(["-v"] if call.volumes else [])]
    return [*argv, "--", *call.services]
