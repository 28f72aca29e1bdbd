"""Fleets: one change rolled out over many hosts, in waves (docs/fleet.md).

A fleet file names the deployment repository, the OLD and NEW refs, and each host: its compose
file in the repository, its agent's URL, where its token is (an environment variable or a
file, never the file itself), and labels (region, zone, role). The waves: the canary hosts
first (named, or those with ``role: canary``), then the rest in file order, ``size`` hosts at a
time (a count or a percentage of the fleet), at most ``max_parallel`` hosts changing at once.

:func:`plan_fleet` plans every host (each host's own plan, as ``tierctl plan`` makes it) and
lays out the waves; :func:`run_fleet` runs them: a host is one ``run_rollout`` (its own
journal, dry runs, gates and rollback of its step), a wave starts once the one before it is
done, and the first host that fails halts the fleet: no further host starts (those already
running finish their step). The fleet journal records each host's outcome; a resumed run skips
the hosts that finished and resumes the others from their own journals.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from tierctl.errors import InputError, Location, TierctlError
from tierctl.netnames import dns_name_problem
from tierctl.readers import load_yaml, read_text
from tierctl.rollout.drivers.base import HostUnreachable
from tierctl.rollout.executor import RolloutResult
from tierctl.rollout.plan_schema import Plan


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _no_nul(value: str | None) -> str | None:
    """A path field holds no NUL byte (no file system path can: ``Path.resolve`` raised
    ``ValueError: embedded null byte`` on ``repo: "\\0"``, sweep seed 90210817 input 6794)."""
    if value is not None and "\0" in value:
        raise ValueError("a path holds no NUL byte")
    return value


def _no_credential(value: str) -> str:
    """A name holds no credential: it is printed, journalled and written into runbooks as
    it is (``fleet: "http://admin:PW@host/v1"`` was echoed whole by ``fleet plan``, fresh
    sweep seed 2026120209 input 43589)."""
    from tierctl.credentials import mask_credentials

    if mask_credentials(value) != value:
        raise ValueError(
            "a fleet's name is a name, and this one holds a credential (a URL's password, a "
            "token or an authorization header): name the fleet, keep secrets in the environment"
        )
    return value


def _no_credential_in(value: Any, field: str) -> None:
    """``value`` (a string, or a mapping's keys and values) holds no credential: a host's
    labels, file paths, ``gate_host`` and ``host_label`` are printed in plans, runbooks and
    journals as written (a label ``url: http://u:PW@h`` was in ``runbook --fleet``'s host
    table, file fuzzer #38).

    Raises:
        ValueError: naming the field, never the value.
    """
    from tierctl.credentials import mask_credentials

    texts = [value] if isinstance(value, str) else []
    if isinstance(value, dict):
        texts = [str(t) for kv in value.items() for t in kv]
    elif isinstance(value, list):
        texts = [str(t) for t in value]
    if any(mask_credentials(t) != t for t in texts):
        raise ValueError(
            f"a host's {field} holds a credential (a URL's password, a token or an "
            "authorization header), and it is printed in plans, runbooks and journals: keep "
            "secrets in the environment or a token_file"
        )


_URL_HOST = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?|[0-9A-Fa-f:.]+(?:%[A-Za-z0-9]+)?"
)
_URL_PATH = re.compile(r"[A-Za-z0-9._~/%+-]*")


def server_url(value: str, key: str, *, credentials: bool) -> str:
    """``value`` if it is an http(s) URL a client can reach: a host, a port in 1-65535 (as
    written: no sign, no space), brackets closed; with ``credentials`` False also no
    password, user or query (an agent's token comes from ``token_env``/``token_file``, and a
    URL is printed in plans, runbooks and journals).

    Raises:
        ValueError: what is wrong, without the value's credential.
    """
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{key} starts with http:// or https://")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{key} is not a URL ({exc}): write http://HOST:PORT") from None
    if not parts.hostname or any(c.isspace() for c in value):
        raise ValueError(f"{key} names no host, or holds white space: write http://HOST:PORT")
    # A host name, an IPv4 or a bracketed IPv6 address, and a path of URL characters only:
    # runbooks print the URL into shell lines (`curl ... http://h$(id):1/...` ran `id`).
    if not _URL_HOST.fullmatch(parts.hostname) or not _URL_PATH.fullmatch(parts.path):
        raise ValueError(
            f"{key} holds a character no host name or URL path has (a shell would read it "
            "in a runbook's curl line): write http://HOST:PORT[/PATH] with letters, digits "
            "and . - _ ~ / %"
        )
    # DNS's limits: the HTTP client's IDNA encoding raised UnicodeError ("label too long")
    # on a 300-character host at the first request of `rollout --fleet --dry-run` (file
    # fuzzer #38, seed 2 case 212).
    problem = dns_name_problem(parts.hostname)
    if problem:
        raise ValueError(f"{key}: {problem}: write http://HOST:PORT with a name that resolves")
    # The port as written (urlsplit takes "+1", "1_0" and "٣" for numbers): ASCII digits.
    written = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    if written and not (written.isascii() and written.isdigit() and port and port <= 65535):
        raise ValueError(f"{key}'s port is a number from 1 to 65535")
    if not credentials and (parts.username is not None or "@" in parts.netloc):
        raise ValueError(
            f"{key} holds a user or password: the agent's token comes from token_env or "
            "token_file, never from the URL (which plans, runbooks and journals print)"
        )
    if not credentials and (parts.query or parts.fragment):
        raise ValueError(
            f"{key} has a query or fragment (a token there would be printed in plans, runbooks "
            "and journals): write http://HOST:PORT[/PATH] and keep the token in token_env"
        )
    return value


class FleetHost(_Model):
    """One host of the fleet."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="The host's name.")
    file: str = Field(description="Its compose file, a path in the deployment repository.")
    overrides: list[str] = Field(
        default_factory=list,
        description="Override files merged over `file` (`docker compose -f file -f ...`), in "
        "order, paths in the deployment repository.",
    )
    agent_url: str = Field(description="Its agent's URL (http or https).")
    token_env: str = Field(
        default="TIERCTL_AGENT_TOKEN",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Variable with its token (a variable name: runbooks write $NAME).",
    )
    token_file: str | None = Field(default=None, description="File with its token (wins).")
    gate_host: str | None = Field(default=None, description="Where gates reach its engines.")
    prometheus: str | None = Field(
        default=None, description="The Prometheus that scrapes it (gates, readout --fleet)."
    )
    host_label: str | None = Field(
        default=None, description="Its host_machine label value there (default: its name)."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="region, zone, role, ...")

    _paths = field_validator("file", "token_file")(_no_nul)

    @field_validator("file", "overrides", "gate_host", "host_label", "labels")
    @classmethod
    def _printed(cls, value: Any, info: ValidationInfo) -> Any:
        _no_credential_in(value, str(info.field_name))
        return value

    @field_validator("overrides")
    @classmethod
    def _override_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            _no_nul(path)
        return value

    def sources(self, ref: str) -> list[str]:
        """Its files at ``ref`` as plan sources, in ``-f`` order."""
        return [f"git:{ref}:{path}" for path in (self.file, *self.overrides)]

    @field_validator("agent_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return server_url(value, "agent_url", credentials=False)

    @field_validator("prometheus")
    @classmethod
    def _prometheus(cls, value: str | None) -> str | None:
        return None if value is None else server_url(value, "prometheus", credentials=True)


class FleetWaves(_Model):
    """How the hosts are grouped into waves."""

    canary: list[str] | None = Field(
        default=None, description="Canary hosts by name (default: those labelled role=canary)."
    )
    size: int | str = Field(default=1, description="Hosts per later wave: a count or 'N%'.")
    max_parallel: int = Field(default=1, ge=1, description="Hosts changing at once at most.")
    pause_s: float = Field(default=0.0, ge=0, description="Pause after a wave before the next.")
    approval: bool = Field(
        default=False, description="Each wave after the first waits for a manual approval."
    )
    on_failure: Literal["rollback-wave", "halt"] = Field(
        default="rollback-wave",
        description="A failed host halts the fleet; rollback-wave also returns the wave's "
        "finished hosts to OLD.",
    )

    @field_validator("size")
    @classmethod
    def _size(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value >= 1:
            return value
        if isinstance(value, str) and value.endswith("%"):
            number = value[:-1]
            if number.replace(".", "", 1).isdigit() and 0 < float(number) <= 100:
                return value
        raise ValueError("size is a count of at least 1 or a percentage like '25%'")


class FleetFile(_Model):
    """A fleet file."""

    fleet: str = Field(description="The fleet's name.")
    repo: str = Field(default=".", description="The deployment repository (from this file).")
    old: str = Field(description="The OLD ref (tag or commit) of every host's file.")
    new: str = Field(description="The NEW ref.")
    hosts: list[FleetHost] = Field(min_length=1)
    waves: FleetWaves = Field(default_factory=FleetWaves)

    _repo = field_validator("repo")(_no_nul)
    _name = field_validator("fleet")(_no_credential)


@dataclass(frozen=True)
class Fleet:
    """A fleet file as read: the model, where it lives, its repository."""

    spec: FleetFile
    path: Path
    repo: Path

    def host(self, name: str) -> FleetHost:
        """The host called ``name``."""
        return next(h for h in self.spec.hosts if h.name == name)


def load_fleet(path: Path) -> Fleet:
    """Read and check a fleet file (located errors, exit 2)."""
    text = read_text(path, what="fleet file")
    doc = load_yaml(text, str(path))
    try:
        spec = FleetFile.model_validate(doc.data)
    except ValidationError as exc:
        from tierctl.credentials import mask_credentials

        first = exc.errors()[0]
        key: tuple[str | int, ...] = tuple(first["loc"])
        given = first.get("input")
        extra = first["type"] == "extra_forbidden"
        raise InputError(
            # The location (file, line, key path) is printed with it.
            f"unknown key {key[-1]!r}"
            if extra
            else str(first["msg"]).removeprefix("Value error, "),
            location=Location(
                file=str(path), line=doc.lines.line(key), path=".".join(map(str, key))
            ),
            rule="a fleet file names fleet, old, new, hosts (name, file, agent_url) and waves",
            # An unknown key's value is never echoed (`password: ...`), any other one masked
            # whole before it is cut short (a cut could leave a password without its `@`).
            value=None
            if extra or given is None or isinstance(given, dict | list)
            else mask_credentials(_shown_url(str(given)) if key[-1] in _URLS else str(given))[:80],
            fix="see docs/fleet.md for the fields",
        ) from None
    names = [h.name for h in spec.hosts]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            f"{path}: hosts {twice} are listed twice",
            location=Location(file=str(path), path="hosts"),
            rule="each host is in the fleet once (two entries would change it twice at once)",
            fix="remove the duplicate entries",
        )
    _same_machine(path, doc, spec)
    unknown = sorted(set(spec.waves.canary or ()) - set(names))
    if unknown:
        raise InputError(
            f"{path}: canary hosts {unknown} are not in hosts",
            location=Location(file=str(path), path="waves.canary"),
            rule="canary hosts are hosts of the fleet",
            fix="name hosts from the hosts list",
        )
    return Fleet(spec=spec, path=path, repo=(path.parent / spec.repo).resolve())


#: The fields that hold a URL: shown in an error without their userinfo, query or fragment
#: (a user alone is often a token: ``http://TOKEN@host``).
_URLS = ("agent_url", "prometheus")


def _shown_url(url: str) -> str:
    url = re.sub(r"^((?:[^:/?#@]*:)?/*)[^/?#]*@", r"\1***@", url)
    return re.sub(r"([?#]).*$", r"\1***", url, flags=re.DOTALL)


def _agent_key(url: str) -> tuple[str, int | None]:
    """An agent URL as the machine it reaches: its host name (lower case) and port."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return ((parts.hostname or "").lower(), port)


def _same_machine(path: Path, doc: Any, spec: FleetFile) -> None:
    """Refuse two host entries reaching one agent: one machine listed twice would have two of
    its replicas changing at once (each entry's rollout is one service at a time only on its
    own)."""
    seen: dict[tuple[str, int | None], str] = {}
    for index, host in enumerate(spec.hosts):
        key = _agent_key(host.agent_url)
        if key in seen:
            raise InputError(
                f"hosts {seen[key]} and {host.name} reach the same agent {host.agent_url}",
                location=Location(
                    file=str(path),
                    line=doc.lines.line(("hosts", index, "agent_url")),
                    path=f"hosts.{index}.agent_url",
                ),
                rule="each machine is in the fleet once: two entries for one agent would change "
                "two of its replicas at once",
                value=host.agent_url,
                fix="list the machine once (one agent per host), or give each entry its own agent",
            )
        seen[key] = host.name


def plan_waves(hosts: list[FleetHost], waves: FleetWaves) -> list[list[str]]:
    """The waves, in order: the canary hosts, then the rest in file order, ``size`` at a time.

    Every host is in exactly one wave; a percentage is of the whole fleet, rounded up, at
    least one host.
    """
    names = [h.name for h in hosts]
    if waves.canary is not None:
        canary = [n for n in names if n in set(waves.canary)]
    else:
        canary = [h.name for h in hosts if h.labels.get("role") == "canary"]
    rest = [n for n in names if n not in set(canary)]
    if isinstance(waves.size, int):
        size = waves.size
    else:
        size = max(1, math.ceil(len(names) * float(waves.size[:-1]) / 100))
    out = [canary] if canary else []
    out += [rest[i : i + size] for i in range(0, len(rest), size)]
    return out


@dataclass(frozen=True)
class FleetPlan:
    """Every host's plan and the waves."""

    fleet: Fleet
    waves: list[list[str]]
    plans: dict[str, Plan]

    def summary(self) -> dict[str, Any]:
        """The plan as data (``--format json``)."""
        return {
            "fleet": self.fleet.spec.fleet,
            "old": self.fleet.spec.old,
            "new": self.fleet.spec.new,
            "max_parallel": self.fleet.spec.waves.max_parallel,
            "pause_s": self.fleet.spec.waves.pause_s,
            "approval": self.fleet.spec.waves.approval,
            "on_failure": self.fleet.spec.waves.on_failure,
            "waves": [
                [
                    {
                        "host": h,
                        "file": self.fleet.host(h).file,
                        "overrides": list(self.fleet.host(h).overrides),
                        "steps": [s.id for s in self.plans[h].steps],
                    }
                    for h in wave
                ]
                for wave in self.waves
            ],
        }


def plan_fleet(fleet: Fleet, plan_host: Callable[[list[str], list[str], Path], Plan]) -> FleetPlan:
    """Plan each host (``plan_host(old_sources, new_sources, repo)``, as ``tierctl plan``
    does for one host: its file and override files at each ref) and lay out the waves."""
    spec = fleet.spec
    plans = {
        h.name: plan_host(h.sources(spec.old), h.sources(spec.new), fleet.repo) for h in spec.hosts
    }
    return FleetPlan(fleet=fleet, waves=plan_waves(spec.hosts, spec.waves), plans=plans)


@dataclass
class FleetResult:
    """What a fleet run did.

    Attributes:
        status: Each host's status: ``done``, ``failed``, ``skipped`` (done before),
            ``rolled-back`` (its wave failed; returned to OLD), ``rollback-failed``.
        errors: Each failed host's error.
        unreachable: The failed hosts that stopped answering (their agent never answered):
            nothing says NEW is bad there, so their wave is not rolled back for them.
        halted: A host failed: no further host was started.
        awaiting: The wave waiting for a manual approval (the run stopped before it).
    """

    status: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)
    halted: bool = False
    awaiting: int | None = None


#: Runs one host's rollout: (host, its plan, resume its journal?) -> its result.
HostRunner = Callable[[FleetHost, Plan, bool], RolloutResult]
#: Returns one host to OLD (its NEW -> OLD rollout, journaled on its own).
HostRollback = Callable[[FleetHost], RolloutResult]


@dataclass(frozen=True)
class Approval:
    """An operator's approval of one wave: who (from the environment, never argv) and why."""

    wave: int
    by: str
    note: str = ""


def approver() -> str:
    """Who approves: ``TIERCTL_APPROVER``, else the login name (``USER``, ``LOGNAME``).

    Raises:
        InputError: neither names anyone.
    """
    import getpass

    name = os.environ.get("TIERCTL_APPROVER", "").strip()
    if not name:
        try:
            name = getpass.getuser().strip()
        except (KeyError, OSError):
            name = ""
    if not name:
        raise InputError(
            "cannot tell who approves: TIERCTL_APPROVER, USER and LOGNAME are all empty",
            rule="an approval is recorded with who gave it",
            fix="export TIERCTL_APPROVER=your-name",
        )
    return name


class FleetJournal:
    """The fleet's journal: one JSON line per event, appended and fsynced.

    With ``in_memory`` (a dry run) the events are kept in :attr:`events` and nothing is read
    from or written to ``path``: a dry run must never leave what a real run reads (a dry run's
    ``host-done`` once made the real run skip the canary host).
    """

    def __init__(self, path: Path, *, in_memory: bool = False) -> None:
        """Open (create) it."""
        self.path = path
        self.in_memory = in_memory
        self.events: list[dict[str, Any]] = []

    def write(self, event: str, **fields: Any) -> None:
        """Append one event, stamped with the time (UTC)."""
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        if self.in_memory:
            self.events.append({"event": event, "at": stamp, **fields})
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"event": event, "at": stamp, **fields}, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def records(self) -> list[dict[str, Any]]:
        """Its events so far (a torn last line skipped)."""
        if self.in_memory:
            return list(self.events)
        if not self.path.exists():
            return []
        out = []
        for line in read_text(self.path, what="fleet journal").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out


@dataclass(frozen=True)
class FleetPolicy:
    """How a run moves between waves (the fleet file's ``waves``, overridable per run)."""

    max_parallel: int = 1
    pause_s: float = 0.0
    approval: bool = False
    on_failure: Literal["rollback-wave", "halt"] = "rollback-wave"

    @classmethod
    def of(cls, waves: FleetWaves, **override: Any) -> FleetPolicy:
        """The fleet file's policy, with the given fields (not None) replaced."""
        base: dict[str, Any] = {
            "max_parallel": waves.max_parallel,
            "pause_s": waves.pause_s,
            "approval": waves.approval,
            "on_failure": waves.on_failure,
        }
        base.update({k: v for k, v in override.items() if v is not None})
        return cls(**base)


@dataclass(frozen=True)
class FleetJournalState:
    """What a fleet journal says so far."""

    records: list[dict[str, Any]]

    @property
    def done(self) -> set[str]:
        """Hosts that finished NEW and were not rolled back since."""
        out: set[str] = set()
        for r in self.records:
            if r.get("event") == "host-done":
                out.add(r["host"])
            elif r.get("event") == "host-rolled-back":
                out.discard(r["host"])
        return out

    @property
    def begun(self) -> set[str]:
        """Hosts whose rollout began (their own journal may hold finished steps)."""
        return {r["host"] for r in self.records if r.get("event") == "host-begin"}

    @property
    def approved(self) -> set[int]:
        """Waves approved so far."""
        return {int(r["wave"]) for r in self.records if r.get("event") == "approved"}

    @property
    def awaiting(self) -> int | None:
        """The wave the journal stopped before, waiting for its approval (None: none)."""
        waiting = [int(r["wave"]) for r in self.records if r.get("event") == "awaiting-approval"]
        if waiting and waiting[-1] not in self.approved:
            return waiting[-1]
        return None

    @property
    def waves(self) -> list[list[str]] | None:
        """The waves the journal was begun with."""
        starts = [r for r in self.records if r.get("event") == "start"]
        return starts[0].get("waves") if starts else None

    @property
    def last(self) -> str | None:
        """The last event."""
        return self.records[-1].get("event") if self.records else None


def run_fleet(
    plan: FleetPlan,
    journal_path: Path,
    run_host: HostRunner,
    *,
    resume: bool = False,
    log: Callable[[str], None] = lambda _m: None,
    policy: FleetPolicy | None = None,
    approve: Approval | None = None,
    rollback_host: HostRollback | None = None,
    sleep: Callable[[float], None] = time.sleep,
    dry_run: bool = False,
) -> FleetResult:
    """Run the waves; halt at the first host that fails (:class:`FleetResult.halted`), and
    with ``policy.approval`` stop before each later wave until it is approved
    (:class:`FleetResult.awaiting`).

    A failed wave's hosts that finished are returned to OLD with ``rollback_host`` when the
    policy says ``rollback-wave``. ``approve`` records an approval of the wave the journal
    awaits (with ``resume``); ``sleep`` waits out ``policy.pause_s`` between waves.

    ``dry_run`` (``run_host`` then only dry-runs each step) checks every host of every wave in
    order and reads and writes no journal: approvals and pauses are said, not waited for, and
    a host that fails its dry run halts the check. Each host checked is ``checked``.

    Raises:
        InputError: a fleet journal exists and ``resume`` is not set; the journal was begun
            with other waves; an approval of a wave the journal does not await.
    """
    policy = policy or FleetPolicy.of(plan.fleet.spec.waves)
    if dry_run:
        return _dry_run_fleet(plan, journal_path, run_host, policy, approve, log)
    journal = FleetJournal(journal_path)
    state = FleetJournalState(journal.records())
    _check_resume(state, plan, journal_path, resume, approve)
    result = FleetResult()
    if approve is None and state.awaiting is not None:
        if not policy.approval:
            raise InputError(
                f"wave {state.awaiting} awaits approval in {journal_path}; turning approvals "
                "off does not skip it",
                location=Location(file=str(journal_path)),
                rule="an awaited wave runs only once approved (the approval is on record)",
                fix=f"approve it (`approve_wave` {state.awaiting}); with approvals off the "
                "later waves then run without stopping",
                params=("approve_wave",),
            )
        result.awaiting = state.awaiting  # still waiting: nothing is written, nothing runs
        result.status.update({h: "skipped" for h in state.done})
        log(f"still awaiting approval for wave {state.awaiting}")
        return result
    if approve is not None:
        journal.write("approved", wave=approve.wave, by=approve.by, note=approve.note)
        log(f"wave {approve.wave} approved by {approve.by}")
    journal.write(
        "start", fleet=plan.fleet.spec.fleet, old=plan.fleet.spec.old, new=plan.fleet.spec.new,
        waves=plan.waves, resume=resume, max_parallel=policy.max_parallel,
        pause_s=policy.pause_s, approval=policy.approval, on_failure=policy.on_failure,
    )  # fmt: skip
    approved = state.approved | ({approve.wave} if approve else set())
    done, begun = state.done, state.begun
    started_any = False
    for number, wave in enumerate(plan.waves, 1):
        todo = [h for h in wave if h not in done]
        result.status.update({h: "skipped" for h in wave if h in done})
        if not todo:
            continue
        if started_any and policy.pause_s > 0:
            journal.write("pause", before_wave=number, seconds=policy.pause_s)
            log(f"pause of {policy.pause_s:g} s before wave {number}")
            sleep(policy.pause_s)
        if number > 1 and policy.approval and number not in approved:
            journal.write("awaiting-approval", wave=number, hosts=todo)
            log(f"awaiting approval for wave {number}: {', '.join(todo)}")
            result.awaiting = number
            return result
        started_any = True
        log(f"wave {number} of {len(plan.waves)}: {', '.join(todo)}")
        journal.write("wave-begin", wave=number, hosts=todo)
        _run_wave(plan, todo, policy.max_parallel, run_host, begun, journal, result, log)
        if result.halted:
            journal.write("wave-failed", wave=number, failed=sorted(result.errors))
            # A wave goes back to OLD when NEW failed somewhere in it. Hosts that only stopped
            # answering say nothing about NEW: the others keep it, and a resume converges the
            # silent ones once they answer (their own journals say `unreachable`).
            judged = set(result.errors) - result.unreachable
            if policy.on_failure == "rollback-wave" and rollback_host is not None and judged:
                finished = [h for h in wave if result.status.get(h) in ("done", "skipped")]
                _roll_back(plan, finished, policy.max_parallel, rollback_host, journal, result, log)
            elif result.unreachable and not judged:
                log(
                    f"{', '.join(sorted(result.unreachable))}: stopped answering; the wave is "
                    "not rolled back (nothing says NEW is bad): --resume once they answer"
                )
            journal.write("halted", wave=number, failed=sorted(result.errors))
            return result
        journal.write("wave-done", wave=number)
    journal.write("completed")
    return result


def _dry_run_fleet(
    plan: FleetPlan,
    journal_path: Path,
    run_host: HostRunner,
    policy: FleetPolicy,
    approve: Approval | None,
    log: Callable[[str], None],
) -> FleetResult:
    """Every wave's hosts dry-run in order, as the real run would take them; nothing read from
    or written to the journal (its events stay in memory), nothing waited for."""
    if approve is not None:
        raise InputError(
            f"wave {approve.wave} cannot be approved by a dry run",
            location=Location(file=str(journal_path)),
            rule="an approval is recorded in the journal a real run continues; a dry run "
            "writes no journal",
            fix="leave `approve_wave` out of the dry run, or approve in the real run",
            params=("approve_wave", "dry_run"),
        )
    journal = FleetJournal(journal_path, in_memory=True)
    result = FleetResult()
    for number, wave in enumerate(plan.waves, 1):
        if number > 1 and policy.approval:
            log(f"dry run: the real run stops before wave {number} for its approval")
        if number > 1 and policy.pause_s > 0:
            log(f"dry run: the real run pauses {policy.pause_s:g} s before wave {number}")
        log(f"dry run, wave {number} of {len(plan.waves)}: {', '.join(wave)}")
        _run_wave(plan, wave, policy.max_parallel, run_host, set(), journal, result, log)
        if result.halted:
            log(f"dry run halted in wave {number}: nothing was applied anywhere")
            break
    result.status = {h: "checked" if s == "done" else s for h, s in result.status.items()}
    return result


def _check_resume(
    state: FleetJournalState,
    plan: FleetPlan,
    journal_path: Path,
    resume: bool,
    approve: Approval | None,
) -> None:
    """Refuse a run the journal does not allow: an existing journal without ``resume``, other
    waves than the journal's, an approval of a wave it does not await."""
    where = Location(file=str(journal_path))
    if state.records and not resume:
        raise InputError(
            f"fleet journal {journal_path} already exists",
            location=where,
            rule="a fleet run continues its journal only when asked",
            fix="pass `resume` to continue, or choose another `journal_path`",
            params=("resume", "journal_path"),
        )
    if state.waves is not None and state.waves != plan.waves:
        raise InputError(
            f"the fleet's waves are not the ones its journal began with ({state.waves})",
            location=where,
            rule="a journal resumes the same waves (approvals and finished hosts are theirs)",
            value=plan.waves,
            fix="restore the fleet file, or start a new `journal_path` for the new waves",
            params=("journal_path",),
        )
    rolled = sorted({r["host"] for r in state.records if r.get("event") == "host-rolled-back"})
    if resume and rolled:
        raise InputError(
            f"the fleet halted and its failed wave was rolled back to OLD ({', '.join(rolled)}): "
            "its journal cannot be resumed",
            location=where,
            rule="a rolled-back wave is rolled out again only by a new run, after the cause is "
            "fixed (each host's own journal refuses to repeat a rolled-back step)",
            fix="fix the cause (a new NEW ref), then run with a new `journal_path`",
            params=("journal_path",),
        )
    if approve is None:
        return
    if not resume:
        raise InputError(
            f"wave {approve.wave} can be approved only in a run that continues its journal",
            rule="an approval continues the journal that awaits it",
            fix="pass `resume` with `approve_wave`",
            params=("resume", "approve_wave"),
        )
    awaiting = state.awaiting
    if awaiting is None:
        said = f"its last event is {state.last}" if state.last else "it is empty"
        raise InputError(
            f"nothing awaits approval in {journal_path}: {said}",
            location=where,
            rule="an approval answers a wave the journal stopped before",
            value=approve.wave,
            fix="leave `approve_wave` out to resume; approve a wave when the run stops for it",
            params=("approve_wave",),
        )
    if approve.wave != awaiting:
        raise InputError(
            f"wave {approve.wave} cannot be approved: the fleet awaits approval for wave "
            f"{awaiting}",
            location=where,
            rule="waves are approved one at a time, in order, each when the run stops before it",
            value=approve.wave,
            fix=f"approve wave {awaiting} (`approve_wave` {awaiting})",
            params=("approve_wave",),
        )


def _run_wave(
    plan: FleetPlan,
    hosts: list[str],
    cap: int,
    run_host: HostRunner,
    begun: set[str],
    journal: FleetJournal,
    result: FleetResult,
    log: Callable[[str], None],
) -> None:
    """Run one wave's hosts, ``cap`` at a time; no new host starts once one has failed."""

    def start(name: str) -> Callable[[], RolloutResult]:
        journal.write("host-begin", host=name)
        host = plan.fleet.host(name)
        return lambda: run_host(host, plan.plans[name], name in begun)

    def finish(name: str, error: TierctlError | None) -> None:
        if error is not None:
            result.status[name] = "failed"
            result.errors[name] = error.message
            result.halted = True
            silent = isinstance(error, HostUnreachable)
            if silent:
                result.unreachable.add(name)
            journal.write("host-failed", host=name, error=error.message, unreachable=silent)
            log(f"{name}: failed: {error.message}")
        else:
            result.status[name] = "done"
            journal.write("host-done", host=name)
            log(f"{name}: done")

    _capped(hosts, cap, start, finish, stop=lambda: result.halted)


def _roll_back(
    plan: FleetPlan,
    hosts: list[str],
    cap: int,
    rollback_host: HostRollback,
    journal: FleetJournal,
    result: FleetResult,
    log: Callable[[str], None],
) -> None:
    """Return the failed wave's finished hosts to OLD, ``cap`` at a time (every one is
    tried, whatever another's rollback does)."""
    if hosts:
        log(f"rolling back the wave's finished hosts to OLD: {', '.join(hosts)}")

    def start(name: str) -> Callable[[], RolloutResult]:
        journal.write("host-rollback-begin", host=name)
        host = plan.fleet.host(name)
        return lambda: rollback_host(host)

    def finish(name: str, error: TierctlError | None) -> None:
        if error is not None:
            result.status[name] = "rollback-failed"
            result.errors[name] = error.message
            journal.write("host-rollback-failed", host=name, error=error.message)
            log(f"{name}: rollback failed: {error.message}")
        else:
            result.status[name] = "rolled-back"
            journal.write("host-rolled-back", host=name)
            log(f"{name}: rolled back to OLD")

    _capped(hosts, cap, start, finish, stop=lambda: False)


def _capped(
    hosts: list[str],
    cap: int,
    start: Callable[[str], Callable[[], RolloutResult]],
    finish: Callable[[str, TierctlError | None], None],
    stop: Callable[[], bool],
) -> None:
    """Run ``start(host)()`` for each host, at most ``cap`` at once, in order; ``finish``
    gets each outcome as it comes; no further host starts once ``stop()`` holds."""
    queue = list(hosts)
    with ThreadPoolExecutor(max_workers=cap) as pool:
        running: dict[Future[RolloutResult], str] = {}
        while queue or running:
            while queue and len(running) < cap and not stop():
                name = queue.pop(0)
                running[pool.submit(start(name))] = name
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                try:
                    future.result()
                except TierctlError as exc:
                    finish(name, exc)
                else:
                    finish(name, None)
