"""``tierctl readout --fleet``: the fleet file's hosts as the arms of a fleet readout
(:mod:`tierctl.readout.fleet`), dated by the fleet journal, each host on its Prometheus."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from tierctl.errors import ExitCode, InputError, Location


@dataclass(frozen=True)
class FleetAsk:
    """``readout --fleet``'s options (the command's parameter names)."""

    fleet_path: Path
    spec_path: Path | None
    prometheus: str | None
    design: str
    journal_path: Path | None
    since_s: float | None
    baseline: str | None
    canary_hosts: str | None
    control: str | None
    canary: str | None
    window: str
    end_s: float | None
    step: str
    label: str
    extra: str | None
    prefix: str | None
    tolerance: float
    min_requests: float
    fmt: str


def change_times(journal_path: Path) -> tuple[float, float]:
    """When the canary wave (wave 1) began and finished, from the fleet journal.

    Raises:
        InputError: no journal, or one where wave 1 has not finished.
    """
    from tierctl.rollout.fleet import FleetJournal

    if not journal_path.exists():
        raise InputError(
            f"no fleet journal {journal_path} to date the canary wave",
            location=Location(file=str(journal_path)),
            rule="the baseline ends where the canary hosts changed",
            fix="pass --journal JOURNAL (the rollout's), or --since UNIX_SECONDS",
        )
    begun = done = None
    for r in FleetJournal(journal_path).records():
        if r.get("wave") == 1 and r.get("event") == "wave-begin" and begun is None:
            begun = datetime.fromisoformat(r["at"]).timestamp()
        if r.get("wave") == 1 and r.get("event") == "wave-done":
            done = datetime.fromisoformat(r["at"]).timestamp()
    if begun is None or done is None:
        raise InputError(
            f"the fleet journal {journal_path} has no finished wave 1",
            location=Location(file=str(journal_path)),
            rule="a fleet readout compares hosts after the canary wave finished",
            fix="read out once `tierctl rollout --fleet` has finished wave 1, or pass --since",
        )
    return begun, done


def _hosts(ask: FleetAsk, fleet: Any) -> tuple[list[str], dict[str, str]]:
    """The canary hosts, and each host's Prometheus."""
    from tierctl.rollout.fleet import plan_waves

    names = [h.name for h in fleet.spec.hosts]
    if ask.canary_hosts:
        canary = [n.strip() for n in ask.canary_hosts.split(",") if n.strip()]
        unknown = sorted(set(canary) - set(names))
        if unknown:
            raise InputError(
                f"--canary-hosts: {', '.join(unknown)} not in the fleet",
                rule="canary hosts are hosts of the fleet",
                value=ask.canary_hosts,
                fix=f"name hosts from {', '.join(names)}",
            )
    else:
        has_canary = fleet.spec.waves.canary or any(
            h.labels.get("role") == "canary" for h in fleet.spec.hosts
        )
        canary = plan_waves(fleet.spec.hosts, fleet.spec.waves)[0] if has_canary else []
        if ask.design == "between-hosts" and len(set(canary)) in (0, len(names)):
            # The fleet file decides the roles here: the error names it (the readout's own
            # "no canary host" named no file, file fuzzer #38).
            missing = "canary" if not canary else "control"
            raise InputError(
                f"no {missing} host: the fleet's first wave is its canary hosts, compared "
                "with the hosts of the later waves",
                location=Location(file=str(ask.fleet_path), path="waves.canary"),
                rule="readout-fleet-hosts",
                value=", ".join(names)[:120],
                fix="name canary hosts in waves.canary (or label them role: canary), leaving "
                "at least one control host, or pass --canary-hosts",
            )
    urls = {}
    for h in fleet.spec.hosts:
        url = h.prometheus or ask.prometheus
        if url is None:
            raise InputError(
                f"host {h.name} names no Prometheus and --prometheus is not given",
                location=Location(file=str(ask.fleet_path), path=f"hosts.{names.index(h.name)}"),
                rule="each host is read from its own `prometheus`, else from --prometheus",
                fix="give --prometheus URL, or `prometheus:` on the host",
            )
        urls[h.name] = url
    return canary, urls


def fleet_readout(ask: FleetAsk) -> ExitCode:
    """Read the fleet out and print it; the verdict is the exit status."""
    from tierctl.cli.readout import VERDICT_EXIT, parse_duration
    from tierctl.engines import profile_for
    from tierctl.readout import PrometheusClient, arms_from_tier
    from tierctl.readout.fleet import FleetReadoutHost, Role, run_fleet_readout
    from tierctl.readout.report import fleet_readout_markdown, print_fleet_readout
    from tierctl.rollout.fleet import load_fleet
    from tierctl.spec import load_spec, resolve_tier

    fleet = load_fleet(ask.fleet_path)
    canary, urls = _hosts(ask, fleet)
    end = ask.end_s if ask.end_s is not None else time.time()
    window_s = parse_duration(ask.window, "--window")
    step_s = parse_duration(ask.step, "--step")
    engine = replicas = None
    if ask.spec_path is not None:
        tier = resolve_tier(load_spec(ask.spec_path))
        engine = profile_for(tier.spec.engine.kind)
        if ask.design == "within-host":
            arm_c, arm_k = arms_from_tier(tier, ask.control, ask.canary, ask.label)
            replicas = (arm_c.matchers, arm_k.matchers)
    elif ask.design == "within-host":
        raise InputError(
            "--design within-host needs --spec: its canary and control replicas are the arms",
            rule="readout-fleet-design",
            fix="pass --spec TIER (with a canary and a control replica)",
        )
    start, baseline = max(end - window_s, 0.0), None
    if ask.design == "between-hosts":
        if ask.since_s is not None:
            begun = done = ask.since_s
        else:
            begun, done = change_times(
                ask.journal_path or ask.fleet_path.with_suffix(".journal.jsonl")
            )
        start = max(end - window_s, done)
        length = parse_duration(ask.baseline, "--baseline") if ask.baseline else window_s
        baseline = (begun - length, begun)
    with contextlib.ExitStack() as stack:
        clients = {u: stack.enter_context(PrometheusClient(u)) for u in sorted(set(urls.values()))}
        hosts = []
        for h in fleet.spec.hosts:
            matchers = f'host_machine="{h.host_label or h.name}"'
            matchers += f",{ask.extra}" if ask.extra else ""
            role: Role = "canary" if h.name in canary else "control"
            hosts.append(FleetReadoutHost(h.name, role, clients[urls[h.name]], matchers))
        result = run_fleet_readout(
            hosts, start_s=start, end_s=end, step_s=step_s, baseline=baseline,
            replicas=replicas, prefix=ask.prefix, engine=engine,
            min_requests_per_step=ask.min_requests, tolerance=ask.tolerance,
        )  # fmt: skip
    if ask.fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=2))
    elif ask.fmt == "markdown":
        click.echo(fleet_readout_markdown(result), nl=False)
    else:
        console = Console()
        print_fleet_readout(result, Console(width=None if console.is_terminal else 150))
    return VERDICT_EXIT[result.verdict]
