"""The gates a rollout step must pass after its action, and the settings that tune them.

Every gate is defined here once (:data:`GATES`: what it runs and how the runbook describes
it); the planner lists them per step with :func:`engine_gates`, the CLI offers their names to
``--skip-gate``, and the runbook writes their text. What a gate asks of an engine (its health
path, how its running argv is verified, its metric names) comes from the engine's profile
(:mod:`tierctl.engines`), found from the step's rendered command.

- ``health``: the engine's health path (``GET /health``) answers 200 within the start-up budget;
- ``server-info`` (SGLang) / ``running-args`` (vLLM): the running engine confirms every
  rendered flag, the strongest way it allows. SGLang: ``/server_info`` (or
  ``/get_server_info``) reports every rendered flag with the rendered value, compared as parsed
  tokens (``--x=1`` and ``--x 1`` are equal, ``16384`` matches ``16384`` whether reported as a
  number or a string, a bare flag matches ``true``). vLLM: the startup log's
  ``non-default args`` (where the driver can read the log), cross-checked with ``/v1/models``
  and the labels of its cache-config info metric; flags no source shows are named in the notes;
- ``metrics-variant``: the engine exports its engine's metrics, and the variant the collector will
  attach to this container (its rendered scrape config in NEW) is the step's variant; with a
  Prometheus URL and no collector step left, the query also has to show that variant. The
  variant is read under the plan's ``variant_label`` (the spec's ``telemetry.label``);
- ``prometheus-variants`` (collector steps): with a Prometheus URL, every engine recreated so far
  shows its new variant, and no other, under its ``container_name``;
- ``soak``: for ``soak_s`` seconds health keeps answering and the aborted/finished request ratio
  stays within ``max_error_rate``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from tierctl.engines import PROFILES, EngineProfile, default_profile, profile_for_argv
from tierctl.engines.liveness import liveness_mark, liveness_problems
from tierctl.errors import GateFailed, InputError, TierctlError
from tierctl.readers import load_yaml
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.normalise import CONFIGS_KEY
from tierctl.rollout.plan_schema import Step
from tierctl.rollout.progress import NoProgress, RolloutProgress
from tierctl.rollout.roles import VARIANT_LABEL, infer_role
from tierctl.runtime.polling import wait_until
from tierctl.runtime.promapi import PrometheusClient
from tierctl.runtime.promtext import parse_metrics


def _profiles() -> tuple[EngineProfile, ...]:
    return tuple(PROFILES.values())


def step_profile(argv: list[str] | None) -> EngineProfile:
    """The profile of the engine a step's command starts (the default engine when unknown)."""
    return profile_for_argv(argv) or default_profile()


def variants_query(
    profile: EngineProfile,
    label: str,
    container: str | None = None,
    host: str | None = None,
    prefix: str | None = None,
) -> str:
    """The PromQL counting an engine's series by container and variant, under ``prefix`` (the
    one a live Prometheus stores them under, :func:`live_prefix`; default the exported one)."""
    return profile.variants_query(label, _matchers(container, host), prefix)


def _matchers(container: str | None, host: str | None) -> str:
    matchers = []
    if container is not None:
        matchers.append(f'container_name="{container}"')
    if host:
        matchers.append(f'host_machine="{host}"')
    return ",".join(matchers)


@dataclass(frozen=True)
class GateSettings:
    """How the gates run.

    Attributes:
        health_timeout_s: How long an engine has to answer ``/health`` after its action.
        poll_interval_s: Pause between polls.
        request_timeout_s: Per-request time-out (the proxy's probe uses 3 s).
        prometheus_url: Base URL of a Prometheus to query, if any.
        host_label: ``host_machine`` matcher added to the query (e.g. ``gpu02``).
        metrics_timeout_s: How long the variant may take to show in Prometheus.
        soak_s: Soak window after the other gates; 0 skips the soak.
        max_error_rate: Highest aborted/finished request ratio the soak accepts.
        skip: Gate names not run.
    """

    health_timeout_s: float = 120.0
    poll_interval_s: float = 0.5
    request_timeout_s: float = 3.0
    prometheus_url: str | None = None
    host_label: str | None = None
    metrics_timeout_s: float = 120.0
    soak_s: float = 0.0
    max_error_rate: float = 0.01
    skip: frozenset[str] = field(default_factory=frozenset)


@dataclass
class GateContext:
    """What the gates of one step can see."""

    step: Step
    base_url: str | None
    new: Deployment
    settings: GateSettings
    client: httpx.Client
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    collector_pending: bool = False
    recreated_engines: Mapping[str, str | None] = field(default_factory=dict)
    variant_label: str = VARIANT_LABEL
    notes: list[str] = field(default_factory=list)
    #: The engine's log since it started, where the driver can read it (vLLM's argv check).
    logs: Callable[[], str | None] | None = None
    #: The argv the driver launched in place of the rendered one and why (the local driver
    #: binds a real engine to loopback), where the driver says (``gate_argv``).
    launched: Callable[[], tuple[list[str], tuple[str, ...]]] | None = None
    #: The profile of each recreated engine container (for the collector's queries).
    engine_profiles: Mapping[str, EngineProfile] = field(default_factory=dict)
    #: Receives every poll of a wait (health, variants, soak) with its elapsed time.
    progress: RolloutProgress = field(default_factory=NoProgress)
    #: The engine container's state and exit code where the driver can say
    #: (``container_state``): the health gate fails at once on one that exited.
    state: Callable[[], tuple[str, int | None] | None] | None = None

    @property
    def profile(self) -> EngineProfile:
        """The profile of the engine this step starts."""
        return step_profile(self.step.expected_argv)


#: Gates judged with the replica serving: they run after it is back in the proxy (a soak
#: while the proxy routes nothing to it would have no traffic to judge errors by).
SERVING_GATES: frozenset[str] = frozenset({"soak"})


def run_gates(ctx: GateContext, *, serving: bool | None = None) -> list[str]:
    """Run the step's gates in order; return the notes they add; raise GateFailed at the first
    failure. ``serving`` False runs the gates before the replica is back in the proxy, True
    the :data:`SERVING_GATES` after; None runs every gate."""
    first = len(ctx.notes)
    for gate in ctx.step.gates:
        if serving is not None and (gate in SERVING_GATES) != serving:
            continue
        if gate in ctx.settings.skip:
            ctx.notes.append(f"{gate}: skipped, as asked")
            continue
        GATES[gate](ctx)
    return ctx.notes[first:]


def _url(ctx: GateContext, path: str) -> str:
    if ctx.base_url is None:
        raise GateFailed(f"{ctx.step.service} has no endpoint for the {path} gate")
    return ctx.base_url.rstrip("/") + path


#: Seconds between two questions to the driver whether the engine's container still runs.
STATE_EVERY_S = 2.0


def gate_health(ctx: GateContext) -> None:
    """Poll the health path until it answers 200 or the start-up budget is spent; an engine
    whose container exited (a crash on start, a flag its parser refuses) fails at once, with
    its exit code and the end of its log, instead of at the end of the budget."""
    last = "no answer"
    path = ctx.profile.health_path
    asked = [-STATE_EVERY_S]
    exited: list[tuple[str, int | None]] = []

    def healthy() -> bool:
        nonlocal last
        try:
            resp = ctx.client.get(_url(ctx, path), timeout=ctx.settings.request_timeout_s)
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        else:
            last = f"HTTP {resp.status_code}"
            if resp.status_code == 200:
                return True
        if ctx.state is not None and ctx.clock() - asked[0] >= STATE_EVERY_S:
            asked[0] = ctx.clock()
            found = ctx.state()
            if found is not None and found[0] in EXITED_STATES:
                exited.append(found)
                return True  # ends the wait: judged below
        return False

    if not _poll(ctx, healthy, ctx.settings.health_timeout_s, lambda: f"{path}: {last}"):
        raise GateFailed(
            f"{ctx.step.service} did not answer {path} in {ctx.settings.health_timeout_s:g} s",
            rule=f"a recreated engine answers {path}",
            value=last,
            fix="read the container's log; raise `health_timeout_s` for slow model loads",
            params=("health_timeout_s",),
        )
    if exited:
        state, code = exited[0]
        raise GateFailed(
            f"{ctx.step.service} exited before it answered {path} (container {state}, exit "
            f"code {code if code is not None else 'unknown'}){_log_end(ctx)}",
            rule=f"a recreated engine keeps running and answers {path}",
            value=code,
            fix="read the container's log (a flag its release refuses, a model path it cannot "
            "load); `tierctl validate` checks flags against the release's catalog",
        )
    ctx.notes.append("health: 200")


#: Container states of an engine that stopped (Docker's words; the local driver's too).
EXITED_STATES = frozenset({"exited", "dead"})


def _log_end(ctx: GateContext) -> str:
    """The last lines of the engine's log, for a message (where the driver can read it)."""
    text = ctx.logs() if ctx.logs is not None else None
    lines = [ln for ln in (text or "").splitlines() if ln.strip()][-3:]
    return ("; its log ends: " + " | ".join(ln.strip()[:200] for ln in lines)) if lines else ""


def _poll(
    ctx: GateContext, condition: Callable[[], bool], timeout_s: float, what: Callable[[], str]
) -> bool:
    """``wait_until`` on the gate context's clock and sleep, every poll interval, reporting
    each unmet poll and the end of the wait to ``ctx.progress`` (``what``: what it waits
    for, as of the last poll)."""
    started = ctx.clock()

    def reported() -> bool:
        if condition():
            return True
        ctx.progress.waiting(ctx.step.service, what(), ctx.clock() - started, timeout_s)
        return False

    ok = wait_until(
        reported,
        timeout_s,
        poll_s=ctx.settings.poll_interval_s,
        sleep=ctx.sleep,
        clock=ctx.clock,
    )
    ctx.progress.waited(ctx.step.service, what(), ctx.clock() - started, ok)
    return ok


def _fetch(ctx: GateContext) -> Callable[[str], tuple[int, str]]:
    def fetch(path: str) -> tuple[int, str]:
        try:
            resp = ctx.client.get(_url(ctx, path), timeout=ctx.settings.request_timeout_s)
        except httpx.HTTPError:
            return (0, "")
        return (resp.status_code, resp.text)

    return fetch


def gate_running_args(ctx: GateContext) -> None:
    """The running engine confirms the rendered flags, the way its profile verifies them."""
    profile = ctx.profile
    logs = ctx.logs() if ctx.logs is not None else None
    expected, changed = ctx.launched() if ctx.launched is not None else (ctx.step.expected_argv, ())
    check = profile.verify_running_args(expected, _fetch(ctx), logs)
    gate = profile.argv_gate
    if check.error is not None:
        raise GateFailed(
            f"{ctx.step.service}: {check.error}",
            rule="a recreated engine reports its server args",
            fix=f"check the engine is up and its version exposes {check.method}",
        )
    if check.mismatches:
        raise GateFailed(
            f"{ctx.step.service} does not run the rendered argv: " + "; ".join(check.mismatches),
            rule=f"{check.method} shows exactly the rendered flags",
            value=list(check.mismatches),
            fix="the engine parsed the command differently; check the flags against the catalog",
        )
    note = f"{gate}: {len(check.verified)} flags match ({check.method})"
    if changed:
        note += "; " + "; ".join(changed)
    if check.unverifiable:
        note += "; not visible to it: " + ", ".join(f"--{f}" for f in check.unverifiable)
    ctx.notes.append(note)


def scrape_variants(dep: Deployment, label: str = VARIANT_LABEL) -> dict[str, str]:
    """container_name -> variant (the ``label`` value) from every collector's scrape config."""
    found: dict[str, str] = {}
    for name, svc in dep.services.items():
        if infer_role(name, svc).role != "collector":
            continue
        for cfg in (svc.get(CONFIGS_KEY) or {}).values():
            content = cfg.get("content") if isinstance(cfg, dict) else None
            if isinstance(content, str):
                try:
                    doc = load_yaml(content, f"configs of {name}", duplicates=False).data
                except InputError:
                    continue
                _walk_labels(doc, label, found)
            elif content is not None:
                _walk_labels(content, label, found)
    return found


def _walk_labels(node: Any, label: str, found: dict[str, str]) -> None:
    if isinstance(node, dict):
        if "container_name" in node and label in node:
            found[str(node["container_name"])] = str(node[label])
        for v in node.values():
            _walk_labels(v, label, found)
    elif isinstance(node, list):
        for v in node:
            _walk_labels(v, label, found)


def gate_metrics_variant(ctx: GateContext) -> None:
    """The engine exports its metrics and will be labelled with the step's variant."""
    profile = ctx.profile
    try:
        resp = ctx.client.get(
            _url(ctx, profile.metrics_path), timeout=ctx.settings.request_timeout_s
        )
    except httpx.HTTPError as exc:
        raise GateFailed(
            f"{ctx.step.service}: {profile.metrics_path} did not answer ({type(exc).__name__})"
        ) from None
    samples = parse_metrics(resp.text) if resp.status_code == 200 else []
    if not any(profile.owns_metric(s.name) for s in samples):
        others = sorted({s.name.split(":")[0] for s in samples if ":" in s.name})
        seen = f"; it exports {', '.join(o + ':' for o in others)} series" if others else ""
        raise GateFailed(
            f"{ctx.step.service}: {profile.metrics_path} has no {profile.kind} metrics "
            f"({', '.join(profile.metric_prefixes)}; HTTP {resp.status_code}){seen}",
            rule="a recreated engine exports its metrics",
            fix=profile.metrics_fix,
        )
    container = ctx.step.container_name or ctx.step.service
    scraped = scrape_variants(ctx.new, ctx.variant_label).get(container)
    if ctx.step.variant is not None and scraped is not None and scraped != ctx.step.variant:
        raise GateFailed(
            f"{container} would be reported as {scraped!r}, its labels say {ctx.step.variant!r}",
            rule="a replica's variant is the same in its labels and the collector's scrape config",
            value=scraped,
            fix="re-render NEW so every place carries the same variant",
        )
    ctx.notes.append(
        f"metrics-variant: {profile.kind} metrics exported, {_variant_said(ctx, scraped)}"
    )
    if ctx.settings.prometheus_url and not ctx.collector_pending and ctx.step.variant:
        _await_variants(ctx, {container: ctx.step.variant})


def _variant_said(ctx: GateContext, scraped: str | None) -> str:
    """What the variant half of the gate compared, in words: never a variant it did not see
    (a fleet's gate once printed "variant None" and had compared nothing)."""
    label, labelled = ctx.variant_label, ctx.step.variant
    if labelled is not None and scraped is not None:
        return f"variant {labelled} (its labels and the collector's scrape config agree)"
    if labelled is not None:
        return (
            f"variant {labelled} in its labels; not compared: the collector's scrape config "
            "in this file names no such container"
        )
    if scraped is not None:
        return (
            f"variant not compared: the service has no {label} label; the collector's scrape "
            f"config says {scraped}"
        )
    return f"variant not checked: neither its labels nor a scrape config carry {label}"


def gate_prometheus_variants(ctx: GateContext) -> None:
    """After the collector is recreated, Prometheus shows every recreated engine's new variant."""
    if not ctx.settings.prometheus_url:
        ctx.notes.append("prometheus-variants: no Prometheus URL given, not checked")
        return
    wanted = {c: v for c, v in ctx.recreated_engines.items() if v}
    if wanted:
        _await_variants(ctx, wanted)


def _await_variants(ctx: GateContext, wanted: Mapping[str, str]) -> None:
    assert ctx.settings.prometheus_url is not None
    base = ctx.settings.prometheus_url.rstrip("/")
    deadline = ctx.clock() + ctx.settings.metrics_timeout_s
    for container, variant in wanted.items():
        # One budget for all containers: each waits only for what the earlier ones left.
        _await_variant(ctx, base, container, variant, deadline - ctx.clock())


def _await_variant(
    ctx: GateContext, base: str, container: str, variant: str, timeout_s: float
) -> None:
    profile = ctx.engine_profiles.get(container, ctx.profile)
    seen: list[str] = []
    names: set[str] | None = None
    prefix = profile.prefix

    def shows_variant() -> bool:
        nonlocal seen, names, prefix
        # The prefix as this Prometheus stores the container's series (`vllm:` as exported,
        # `vllm_` behind a pipeline that rewrites it), asked again on each poll: before the
        # first scrape there is nothing to detect it from.
        names = _series_names(ctx, base, container)
        prefix = profile.series_prefix(names or ())
        query = variants_query(
            profile, ctx.variant_label, container, ctx.settings.host_label, prefix
        )
        series = _series_labels(ctx, base, query) or []
        seen = sorted({str(labels.get(ctx.variant_label)) for labels in series})
        return seen == [variant]

    if not _poll(
        ctx, shows_variant, timeout_s, lambda: f"Prometheus to show {container} as {variant}"
    ):
        drift = "" if seen else _other_names(names, profile, prefix, container)
        raise GateFailed(
            f"Prometheus shows {container} as {seen or 'no series'}, expected {variant!r}" + drift,
            rule="the metrics show the new variant for the recreated container",
            value=seen,
            fix="check the collector was recreated and scrapes this container",
        )
    ctx.notes.append(
        f"prometheus: {container} reports {variant} ({prefix}{profile.metrics.running})"
    )


def _series_labels(ctx: GateContext, base: str, query: str) -> list[dict[str, str]] | None:
    """The label sets an instant query returns; None while Prometheus cannot answer it (the
    gate asks again until its deadline)."""
    try:
        with PrometheusClient(
            base, http=ctx.client, timeout_s=ctx.settings.request_timeout_s
        ) as prometheus:
            return [labels for labels, _value in prometheus.query(query)]
    except (TierctlError, LookupError, TypeError, ValueError, AttributeError):
        return None


def _series_names(ctx: GateContext, base: str, container: str) -> set[str] | None:
    """Every engine series name (any engine, any prefix spelling) Prometheus has for the
    container now; None when it cannot say."""
    prefixes = sorted({p for e in PROFILES.values() for p in e.metric_prefixes})
    pattern = "|".join(re.escape(p) for p in prefixes)
    matchers = _matchers(container, ctx.settings.host_label)
    query = f'count by (__name__) ({{__name__=~"({pattern}).+",{matchers}}})'
    series = _series_labels(ctx, base, query)
    if series is None:
        return None
    return {str(labels["__name__"]) for labels in series if labels.get("__name__")}


def _other_names(
    names: set[str] | None, profile: EngineProfile, prefix: str, container: str
) -> str:
    """Where the expected family is missing: the engine series Prometheus has for the container
    instead (another engine's names, a renamed family), as a clause of the message."""
    if names is None:
        return ""
    wanted = prefix + profile.metrics.running
    if not names:
        return f" (no engine series at all for {container}: {wanted} is what the gate reads)"
    shown = sorted(names)
    listed = ", ".join(shown[:5]) + (f" (+{len(shown) - 5} more)" if len(shown) > 5 else "")
    return f"; Prometheus has no {wanted} for {container} but has {listed}"


def gate_soak(ctx: GateContext) -> None:
    """Hold for ``soak_s``: health keeps answering and the error rate stays low."""
    if ctx.settings.soak_s <= 0:
        return
    start = _counts(ctx)
    started = ctx.clock()
    what = "the soak window (health and error rate)"
    path = ctx.profile.health_path

    def unhealthy() -> bool:
        # A hold, not a wait for success: the wait ends early only when health fails, and
        # reaching the deadline (with its last look) is the pass.
        ctx.progress.waiting(ctx.step.service, what, ctx.clock() - started, ctx.settings.soak_s)
        try:
            answer = ctx.client.get(_url(ctx, path), timeout=ctx.settings.request_timeout_s)
        except httpx.HTTPError:
            return True
        return answer.status_code != 200

    failed = wait_until(
        unhealthy,
        ctx.settings.soak_s,
        poll_s=ctx.settings.poll_interval_s,
        sleep=ctx.sleep,
        clock=ctx.clock,
    )
    ctx.progress.waited(ctx.step.service, what, ctx.clock() - started, not failed)
    if failed:
        raise GateFailed(
            f"{ctx.step.service} stopped answering {path} during the soak",
            rule="a recreated engine stays healthy through the soak window",
            fix="read the engine's log",
        )
    end = _counts(ctx)
    finished = end[0] - start[0]
    aborted = end[1] - start[1]
    if end[2]:
        ctx.notes.append(f"soak: {ctx.settings.soak_s:g} s healthy; {end[2]}")
        return
    if finished + aborted <= 0:
        ctx.notes.append(f"soak: {ctx.settings.soak_s:g} s healthy, no traffic to judge errors")
        return
    rate = aborted / (finished + aborted)
    if rate > ctx.settings.max_error_rate:
        raise GateFailed(
            f"{ctx.step.service}: {rate:.1%} of requests aborted during the soak",
            rule=f"the soak's error rate stays at or below {ctx.settings.max_error_rate:.1%}",
            value=rate,
            fix="read the engine's log and metrics before retrying",
        )
    ctx.notes.append(f"soak: {ctx.settings.soak_s:g} s, error rate {rate:.2%}")


def _counts(ctx: GateContext) -> tuple[float, float, str]:
    """(finished, aborted, why the error rate cannot be judged or "") from one scrape."""
    profile = ctx.profile
    try:
        text = ctx.client.get(
            _url(ctx, profile.metrics_path), timeout=ctx.settings.request_timeout_s
        ).text
    except httpx.HTTPError:
        return (0.0, 0.0, "")
    samples = [(s.name, s.labels, s.value) for s in parse_metrics(text)]
    finished = profile.sample_total(samples, profile.metrics.finished)
    aborted = profile.sample_total(samples, profile.metrics.aborted)
    why = ""
    names = {s[0] for s in samples}
    family = profile.metrics.finished.name
    histogram = profile.metrics.e2e + "_count"
    if (
        finished is None
        and family != histogram
        and any(p + histogram in names for p in profile.metric_prefixes)
    ):
        # Requests finished (the latency histogram counts them) but the counter the error rate
        # is read from is missing: a renamed or dropped family, not an idle engine.
        why = (
            f"{profile.prefix}{family} is not in {profile.metrics_path} although "
            f"{profile.prefix}{histogram} is: error rate not judged"
        )
    return (finished or 0.0, aborted or 0.0, why)


def gate_soak_identity(ctx: GateContext) -> None:
    """The soak, and over its window: the replica did not restart (its
    ``process_start_time_seconds`` is unchanged) and logged no fatal line (the engine
    profile's patterns; where the driver exposes the log as ``ctx.logs``)."""
    if ctx.settings.soak_s <= 0:
        return
    before = liveness_mark(ctx.client, ctx.base_url, ctx.logs)
    gate_soak(ctx)
    after = liveness_mark(ctx.client, ctx.base_url, ctx.logs)
    problems = liveness_problems(before, after, ctx.profile)
    if problems:
        raise GateFailed(
            f"{ctx.step.service} during the soak: " + "; ".join(problems),
            rule="a recreated engine neither restarts nor logs a fatal line during the soak",
            value=problems,
            fix="read the engine's log (OOM, engine death, watchdog) before retrying",
        )
    ctx.notes.append("soak: no restart, no fatal log line")


@dataclass(frozen=True)
class RunbookContext:
    """What a gate's runbook text may mention."""

    host: str | None
    variant_label: str


@dataclass(frozen=True)
class Gate:
    """One gate: its name, what it runs, and how a runbook describes it for one step."""

    name: str
    run: Callable[[GateContext], None]
    describe: Callable[[Step, RunbookContext], str]
    help: str  # one line for the operator: what passing it means (``--skip-gate``'s help)


def _describe_health(step: Step, rb: RunbookContext) -> str:
    path = step_profile(step.expected_argv).health_path
    return f"`GET {path}` answers 200 (`curl -fsS -m 3 http://HOST:PORT{path}`)"


def _describe_running_args(step: Step, rb: RunbookContext) -> str:
    profile = step_profile(step.expected_argv)
    flags = " ".join(t for t in step.expected_argv if t.startswith("--"))
    return f"{profile.argv_gate_text} ({flags})"


def _describe_metrics_variant(step: Step, rb: RunbookContext) -> str:
    profile = step_profile(step.expected_argv)
    container = step.container_name or step.service
    q = variants_query(profile, rb.variant_label, container, rb.host)
    return f"`{profile.metrics_path}` exports {profile.kind} metrics; `{q}` shows `{step.variant}`"


def _describe_prometheus_variants(step: Step, rb: RunbookContext) -> str:
    return (
        "after the collector restarts, every recreated replica shows its new variant "
        "in the query under Verify"
    )


def _describe_soak(step: Step, rb: RunbookContext) -> str:
    return (
        "optional soak (`--soak-s`): health keeps answering, aborted/finished ≤ "
        "`--max-error-rate`, the replica does not restart or log a fatal line"
    )


_ALL: tuple[Gate, ...] = (
    Gate("health", gate_health, _describe_health, "the engine's health path answers 200"),
    *(
        Gate(name, gate_running_args, _describe_running_args, "the engine runs the rendered flags")
        for name in dict.fromkeys(p.argv_gate for p in _profiles())
    ),
    Gate(
        "metrics-variant",
        gate_metrics_variant,
        _describe_metrics_variant,
        "the engine exports its metrics under the step's variant",
    ),
    Gate(
        "prometheus-variants",
        gate_prometheus_variants,
        _describe_prometheus_variants,
        "Prometheus shows every recreated replica's new variant",
    ),
    Gate(
        "soak",
        gate_soak_identity,
        _describe_soak,
        "health, error rate, no restart and no fatal log line over the soak window",
    ),
)

#: Every gate by name: the only definition of the gates.
GATE_DEFS: dict[str, Gate] = {g.name: g for g in _ALL}
#: What runs for each gate name.
GATES: dict[str, Callable[[GateContext], None]] = {g.name: g.run for g in _ALL}
#: Gates of a collector step.
COLLECTOR_GATES: tuple[str, ...] = ("prometheus-variants",)


def engine_gates(argv: list[str] | None) -> list[str]:
    """The gates of an engine step, in order, for the engine its command starts."""
    return ["health", step_profile(argv).argv_gate, "metrics-variant", "soak"]


def gate_names() -> tuple[str, ...]:
    """Every gate name (what ``--skip-gate`` accepts)."""
    return tuple(GATE_DEFS)


def describe_gate(gate: str, step: Step, host: str | None, variant_label: str) -> str:
    """The runbook's sentence for one gate of one step."""
    found = GATE_DEFS.get(gate)
    return found.describe(step, RunbookContext(host, variant_label)) if found else gate
