"""The gates a rollout step must pass after its action, and the settings that tune them.

- ``health``: ``GET /health`` answers 200 within the start-up budget;
- ``server-info``: ``/server_info`` (or ``/get_server_info``) reports every rendered flag with
  the rendered value, compared as parsed tokens (``--x=1`` and ``--x 1`` are equal, ``16384``
  matches ``16384`` whether reported as a number or a string, a bare flag matches ``true``);
- ``metrics-variant``: the engine exports ``sglang`` metrics, and the variant the collector will
  attach to this container (its rendered scrape config in NEW) is the step's variant; with a
  Prometheus URL and no collector step left, the query also has to show that variant. The
  variant is read under the plan's ``variant_label`` (the spec's ``telemetry.label``);
- ``prometheus-variants`` (collector steps): with a Prometheus URL, every engine recreated so far
  shows its new variant, and no other, under its ``container_name``;
- ``soak``: for ``soak_s`` seconds health keeps answering and the aborted/finished request ratio
  stays within ``max_error_rate``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from tierctl.errors import GateFailed, InputError
from tierctl.readers import load_yaml
from tierctl.rollout.argv import FlagValue, format_value, parse_argv
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.model import Step
from tierctl.rollout.normalise import CONFIGS_KEY
from tierctl.rollout.roles import VARIANT_LABEL, infer_role
from tierctl.rollout.scrape import metric_total, parse_metrics

DEFAULT_QUERY = (
    "count by (container_name, {label}) "
    '(sglang_num_running_reqs{{container_name="{container}"{host_matcher}}})'
)


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


def run_gates(ctx: GateContext) -> list[str]:
    """Run the step's gates in order; return notes; raise GateFailed at the first failure."""
    for gate in ctx.step.gates:
        if gate in ctx.settings.skip:
            ctx.notes.append(f"{gate}: skipped by --skip-gate")
            continue
        GATES[gate](ctx)
    return ctx.notes


def _url(ctx: GateContext, path: str) -> str:
    if ctx.base_url is None:
        raise GateFailed(f"{ctx.step.service} has no endpoint for the {path} gate")
    return ctx.base_url.rstrip("/") + path


def gate_health(ctx: GateContext) -> None:
    """Poll ``/health`` until it answers 200 or the start-up budget is spent."""
    deadline = ctx.clock() + ctx.settings.health_timeout_s
    last = "no answer"
    while True:
        try:
            resp = ctx.client.get(_url(ctx, "/health"), timeout=ctx.settings.request_timeout_s)
            if resp.status_code == 200:
                ctx.notes.append("health: 200")
                return
            last = f"HTTP {resp.status_code}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        if ctx.clock() >= deadline:
            raise GateFailed(
                f"{ctx.step.service} did not answer /health in {ctx.settings.health_timeout_s:g} s",
                rule="a recreated engine answers /health",
                value=last,
                fix="read the container's log; raise --health-timeout-s for slow model loads",
            )
        ctx.sleep(ctx.settings.poll_interval_s)


def server_info_mismatches(expected_argv: list[str], info: Mapping[str, Any]) -> list[str]:
    """Rendered flags the engine reports differently (or not at all).

    Args:
        expected_argv: The rendered command.
        info: The engine's ``/server_info`` body: one top-level key per server arg.

    Returns:
        One line per mismatching flag; empty when the engine runs exactly the rendered flags.
    """
    out: list[str] = []
    for flag, want in parse_argv(expected_argv).flags.items():
        key = flag.replace("-", "_")
        if key not in info:
            out.append(f"--{flag}: rendered {format_value(want)}, not reported")
        elif not _same(want, info[key]):
            out.append(f"--{flag}: rendered {format_value(want)}, engine reports {info[key]!r}")
    return out


def _same(want: FlagValue, got: Any) -> bool:
    if isinstance(want, bool):
        return str(got).lower() == str(want).lower()
    if isinstance(want, tuple):
        return isinstance(got, list) and [str(g) for g in got] == list(want)
    if isinstance(got, bool):
        return want.lower() == str(got).lower()
    if isinstance(got, int | float) and not isinstance(got, bool):
        try:
            return math.isclose(float(want), float(got), rel_tol=1e-9, abs_tol=0.0)
        except ValueError:
            return False
    if isinstance(got, list):
        return [str(g) for g in got] == [want]
    return want == str(got)


def gate_server_info(ctx: GateContext) -> None:
    """``/server_info`` must report exactly the rendered flags."""
    resp = None
    for path in ("/server_info", "/get_server_info"):
        try:
            resp = ctx.client.get(_url(ctx, path), timeout=ctx.settings.request_timeout_s)
        except httpx.HTTPError as exc:
            raise GateFailed(
                f"{ctx.step.service}: {path} did not answer ({type(exc).__name__})",
                rule="a recreated engine reports its server args",
                fix="check the engine is up",
            ) from None
        if resp.status_code != 404:
            break
    if resp is None or resp.status_code != 200:
        raise GateFailed(
            f"{ctx.step.service}: /server_info answered HTTP {resp.status_code if resp else '?'}",
            rule="a recreated engine reports its server args",
            fix="check the engine version exposes /server_info",
        )
    bad = server_info_mismatches(ctx.step.expected_argv, resp.json())
    if bad:
        raise GateFailed(
            f"{ctx.step.service} does not run the rendered argv: " + "; ".join(bad),
            rule="/server_info shows exactly the rendered flags",
            value=bad,
            fix="the engine parsed the command differently; check the flags against the catalog",
        )
    ctx.notes.append(f"server-info: {len(parse_argv(ctx.step.expected_argv).flags)} flags match")


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
    """The engine exports sglang metrics and will be labelled with the step's variant."""
    try:
        resp = ctx.client.get(_url(ctx, "/metrics"), timeout=ctx.settings.request_timeout_s)
    except httpx.HTTPError as exc:
        raise GateFailed(
            f"{ctx.step.service}: /metrics did not answer ({type(exc).__name__})"
        ) from None
    samples = parse_metrics(resp.text) if resp.status_code == 200 else []
    if not any(s.name.startswith(("sglang:", "sglang_")) for s in samples):
        raise GateFailed(
            f"{ctx.step.service}: /metrics has no sglang metrics (HTTP {resp.status_code})",
            rule="a recreated engine exports its metrics",
            fix="render the engine with --enable-metrics",
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
        f"metrics-variant: sglang metrics exported, variant {scraped or ctx.step.variant}"
    )
    if ctx.settings.prometheus_url and not ctx.collector_pending and ctx.step.variant:
        _await_variants(ctx, {container: ctx.step.variant})


def gate_prometheus_variants(ctx: GateContext) -> None:
    """After the collector is recreated, Prometheus shows every recreated engine's new variant."""
    if not ctx.settings.prometheus_url:
        ctx.notes.append("prometheus-variants: no --prometheus-url, not checked")
        return
    wanted = {c: v for c, v in ctx.recreated_engines.items() if v}
    if wanted:
        _await_variants(ctx, wanted)


def _await_variants(ctx: GateContext, wanted: Mapping[str, str]) -> None:
    assert ctx.settings.prometheus_url is not None
    base = ctx.settings.prometheus_url.rstrip("/")
    host = ctx.settings.host_label
    matcher = f',host_machine="{host}"' if host else ""
    deadline = ctx.clock() + ctx.settings.metrics_timeout_s
    for container, variant in wanted.items():
        query = DEFAULT_QUERY.format(
            label=ctx.variant_label, container=container, host_matcher=matcher
        )
        seen: list[str] = []
        while True:
            try:
                resp = ctx.client.get(
                    f"{base}/api/v1/query",
                    params={"query": query},
                    timeout=ctx.settings.request_timeout_s,
                )
                result = resp.json().get("data", {}).get("result", [])
                seen = sorted({str(r.get("metric", {}).get(ctx.variant_label)) for r in result})
            except (httpx.HTTPError, ValueError, AttributeError):
                seen = []
            if seen == [variant]:
                ctx.notes.append(f"prometheus: {container} reports {variant}")
                break
            if ctx.clock() >= deadline:
                raise GateFailed(
                    f"Prometheus shows {container} as {seen or 'no series'}, expected {variant!r}",
                    rule="the metrics show the new variant for the recreated container",
                    value=seen,
                    fix="check the collector was recreated and scrapes this container",
                )
            ctx.sleep(ctx.settings.poll_interval_s)


def gate_soak(ctx: GateContext) -> None:
    """Hold for ``soak_s``: health keeps answering and the error rate stays low."""
    if ctx.settings.soak_s <= 0:
        return
    start = _counts(ctx)
    end_at = ctx.clock() + ctx.settings.soak_s
    while ctx.clock() < end_at:
        ctx.sleep(min(ctx.settings.poll_interval_s, max(0.0, end_at - ctx.clock())))
        try:
            ok = ctx.client.get(_url(ctx, "/health"), timeout=ctx.settings.request_timeout_s)
            healthy = ok.status_code == 200
        except httpx.HTTPError:
            healthy = False
        if not healthy:
            raise GateFailed(
                f"{ctx.step.service} stopped answering /health during the soak",
                rule="a recreated engine stays healthy through the soak window",
                fix="read the engine's log",
            )
    end = _counts(ctx)
    finished = end[0] - start[0]
    aborted = end[1] - start[1]
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


def _counts(ctx: GateContext) -> tuple[float, float]:
    try:
        text = ctx.client.get(_url(ctx, "/metrics"), timeout=ctx.settings.request_timeout_s).text
    except httpx.HTTPError:
        return (0.0, 0.0)
    samples = parse_metrics(text)
    finished = metric_total(samples, "sglang:e2e_request_latency_seconds_count") or 0.0
    aborted = metric_total(samples, "sglang:num_aborted_requests_total") or 0.0
    return (finished, aborted)


def gate_soak_identity(ctx: GateContext) -> None:
    """The soak, and over its window: the replica did not restart (its
    ``process_start_time_seconds`` is unchanged) and logged no fatal line (the engine
    profile's patterns; where the driver exposes the log as ``ctx.logs``)."""
    from tierctl.bench.health import soak_mark, soak_problems

    if ctx.settings.soak_s <= 0:
        return
    before = soak_mark(ctx.client, ctx.base_url, getattr(ctx, "logs", None))
    gate_soak(ctx)
    after = soak_mark(ctx.client, ctx.base_url, getattr(ctx, "logs", None))
    problems = soak_problems(before, after, getattr(ctx, "profile", None))
    if problems:
        raise GateFailed(
            f"{ctx.step.service} during the soak: " + "; ".join(problems),
            rule="a recreated engine neither restarts nor logs a fatal line during the soak",
            value=problems,
            fix="read the engine's log (OOM, engine death, watchdog) before retrying",
        )
    ctx.notes.append("soak: no restart, no fatal log line")


GATES: dict[str, Callable[[GateContext], None]] = {
    "health": gate_health,
    "server-info": gate_server_info,
    "metrics-variant": gate_metrics_variant,
    "prometheus-variants": gate_prometheus_variants,
    "soak": gate_soak_identity,
}
