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
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tierctl.errors import InputError, Location, TierctlError
from tierctl.readers import load_yaml, read_text
from tierctl.rollout.executor import RolloutResult
from tierctl.rollout.plan_schema import Plan


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FleetHost(_Model):
    """One host of the fleet."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="The host's name.")
    file: str = Field(description="Its compose file, a path in the deployment repository.")
    agent_url: str = Field(description="Its agent's URL (http or https).")
    token_env: str = Field(default="TIERCTL_AGENT_TOKEN", description="Variable with its token.")
    token_file: str | None = Field(default=None, description="File with its token (wins).")
    gate_host: str | None = Field(default=None, description="Where gates reach its engines.")
    labels: dict[str, str] = Field(default_factory=dict, description="region, zone, role, ...")

    @field_validator("agent_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("agent_url starts with http:// or https://")
        return value


class FleetWaves(_Model):
    """How the hosts are grouped into waves."""

    canary: list[str] | None = Field(
        default=None, description="Canary hosts by name (default: those labelled role=canary)."
    )
    size: int | str = Field(default=1, description="Hosts per later wave: a count or 'N%'.")
    max_parallel: int = Field(default=1, ge=1, description="Hosts changing at once at most.")

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
        first = exc.errors()[0]
        key: tuple[str | int, ...] = tuple(first["loc"])
        raise InputError(
            # The location (file, line, key path) is printed with it.
            str(first["msg"]).removeprefix("Value error, "),
            location=Location(
                file=str(path), line=doc.lines.line(key), path=".".join(map(str, key))
            ),
            rule="a fleet file names fleet, old, new, hosts (name, file, agent_url) and waves",
            value=str(first.get("input"))[:80] if first.get("input") is not None else None,
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
    unknown = sorted(set(spec.waves.canary or ()) - set(names))
    if unknown:
        raise InputError(
            f"{path}: canary hosts {unknown} are not in hosts",
            location=Location(file=str(path), path="waves.canary"),
            rule="canary hosts are hosts of the fleet",
            fix="name hosts from the hosts list",
        )
    return Fleet(spec=spec, path=path, repo=(path.parent / spec.repo).resolve())


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
        """The plan as data (``--json``)."""
        return {
            "fleet": self.fleet.spec.fleet,
            "old": self.fleet.spec.old,
            "new": self.fleet.spec.new,
            "max_parallel": self.fleet.spec.waves.max_parallel,
            "waves": [
                [
                    {
                        "host": h,
                        "file": self.fleet.host(h).file,
                        "steps": [s.id for s in self.plans[h].steps],
                    }
                    for h in wave
                ]
                for wave in self.waves
            ],
        }


def plan_fleet(fleet: Fleet, plan_host: Callable[[str, str, Path], Plan]) -> FleetPlan:
    """Plan each host (``plan_host(old_source, new_source, repo)``, as ``tierctl plan``
    does for one host) and lay out the waves."""
    spec = fleet.spec
    plans = {
        h.name: plan_host(f"git:{spec.old}:{h.file}", f"git:{spec.new}:{h.file}", fleet.repo)
        for h in spec.hosts
    }
    return FleetPlan(fleet=fleet, waves=plan_waves(spec.hosts, spec.waves), plans=plans)


@dataclass
class FleetResult:
    """What a fleet run did: each host's status (done, failed, skipped: done before)."""

    status: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    halted: bool = False


#: Runs one host's rollout: (host, its plan, resume its journal?) -> its result.
HostRunner = Callable[[FleetHost, Plan, bool], RolloutResult]


class FleetJournal:
    """The fleet's journal: one JSON line per event, appended."""

    def __init__(self, path: Path) -> None:
        """Open (create) it."""
        self.path = path

    def write(self, event: str, **fields: Any) -> None:
        """Append one event."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"event": event, **fields}, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def records(self) -> list[dict[str, Any]]:
        """Its events so far (a torn last line skipped)."""
        if not self.path.exists():
            return []
        out = []
        for line in read_text(self.path, what="fleet journal").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out


def run_fleet(
    plan: FleetPlan,
    journal_path: Path,
    run_host: HostRunner,
    *,
    resume: bool = False,
    log: Callable[[str], None] = lambda _m: None,
) -> FleetResult:
    """Run the waves; halt at the first host that fails (:class:`FleetResult.halted`).

    Raises:
        InputError: a fleet journal exists and ``resume`` is not set.
    """
    journal = FleetJournal(journal_path)
    records = journal.records()
    if records and not resume:
        raise InputError(
            f"fleet journal {journal_path} already exists",
            rule="a fleet run continues its journal only when asked",
            fix="pass `resume` to continue, or choose another `journal_path`",
            params=("resume", "journal_path"),
        )
    done = {r["host"] for r in records if r.get("event") == "host-done"}
    begun = {r["host"] for r in records if r.get("event") == "host-begin"}
    journal.write("start", fleet=plan.fleet.spec.fleet, waves=plan.waves, resume=resume)
    result = FleetResult()
    cap = plan.fleet.spec.waves.max_parallel
    for number, wave in enumerate(plan.waves, 1):
        todo = [h for h in wave if h not in done]
        result.status.update({h: "skipped" for h in wave if h in done})
        if not todo:
            continue
        log(f"wave {number} of {len(plan.waves)}: {', '.join(todo)}")
        journal.write("wave-begin", wave=number, hosts=todo)
        _run_wave(plan, todo, cap, run_host, begun, journal, result, log)
        if result.halted:
            journal.write("halted", wave=number, failed=sorted(result.errors))
            return result
        journal.write("wave-done", wave=number)
    journal.write("completed")
    return result


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
    queue = list(hosts)
    with ThreadPoolExecutor(max_workers=cap) as pool:
        running: dict[Future[RolloutResult], str] = {}
        while queue or running:
            while queue and len(running) < cap and not result.halted:
                name = queue.pop(0)
                journal.write("host-begin", host=name)
                host = plan.fleet.host(name)
                running[pool.submit(run_host, host, plan.plans[name], name in begun)] = name
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                try:
                    future.result()
                except TierctlError as exc:
                    result.status[name] = "failed"
                    result.errors[name] = exc.message
                    result.halted = True
                    journal.write("host-failed", host=name, error=exc.message)
                    log(f"{name}: failed: {exc.message}")
                else:
                    result.status[name] = "done"
                    journal.write("host-done", host=name)
                    log(f"{name}: done")
