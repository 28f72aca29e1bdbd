"""The readout across a fleet: canary vs control with the host as a blocking factor.

Hosts differ (a slower GPU, a hotter rack, another traffic mix), so pooling every canary
host's samples against every control host's would call a slow host a regression. Two designs
keep each comparison inside a host:

- ``between-hosts`` (canary hosts vs control hosts, the fleet rollout's own shape: wave 1
  changed the canary hosts, the others still run OLD): each host is measured against its own
  baseline window before the change, then the canary hosts' change is compared with the control
  hosts' change over the same steps (a difference in differences). A host that is slow before
  and after cancels out; so does a load curve shared by the fleet. Per step ``t`` the pooled
  ratio is ``exp(mean_k(log m_k(t) - b_k) - mean_c(log m_c(t) - b_c))`` over canary hosts
  ``k`` and control hosts ``c``, ``b_h`` being host ``h``'s mean log over its baseline.
- ``within-host`` (every host carries a canary and a control replica, as one host's readout
  has them): per step the mean over hosts of each host's own log ratio canary/control.

Either way the pooled per-step series go through the single-host readout's own statistics
(:func:`~tierctl.readout.stats.compare_paired`: geometric mean ratio, circular block bootstrap
over steps, Wilcoxon) and verdict (:func:`~tierctl.readout.analysis.judge_canary`); the queries
are the single-host readout's (:mod:`tierctl.readout.metrics`) with each host's matchers, on
each host's own Prometheus. The baseline levels are taken as known (each is a mean over the
whole baseline window), so the interval does not carry their uncertainty: said in the output.

Aborts, sparse, are pooled counts: ``between-hosts`` compares the canary hosts' after/before
abort-rate ratio with the control hosts' (a ratio of rate ratios, log-normal interval);
``within-host`` is a Mantel-Haenszel rate ratio stratified by host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from tierctl.engines import EngineProfile
from tierctl.errors import InputError
from tierctl.quantity import Direction
from tierctl.readout.analysis import (
    MetricReadout,
    Overall,
    _Query,
    judge_canary,
    plain_data,
    resolve_engine,
    step_grid,
)
from tierctl.readout.metrics import DEFAULT_METRICS, MetricDef
from tierctl.readout.stats import ProportionResult, compare_paired
from tierctl.runtime.promapi import PrometheusClient

Design = Literal["between-hosts", "within-host"]
Role = Literal["canary", "control"]

DESIGNS: dict[str, str] = {
    "between-hosts": "canary hosts vs control hosts, each host against its own baseline window "
    "before the change (difference in differences; host as a blocking factor), steps paired "
    "in time; interval: circular block bootstrap over steps, baseline levels taken as known",
    "within-host": "canary vs control replica inside each host, the per-step log ratios "
    "averaged over hosts (host as a blocking factor), steps paired in time; interval: circular "
    "block bootstrap over steps; aborts: Mantel-Haenszel stratified by host",
}


@dataclass(frozen=True)
class FleetReadoutHost:
    """One host of the readout: its role, its Prometheus, the matchers of its series."""

    name: str
    role: Role
    client: PrometheusClient
    matchers: str  # e.g. host_machine="gpu02"


@dataclass(frozen=True)
class HostRow:
    """One host's figures: per metric, its ratio (after/before, or canary/control)."""

    host: str
    role: str
    ratios: dict[str, float]
    verdicts: dict[str, str] = field(default_factory=dict)
    steps: int = 0


@dataclass(frozen=True)
class FleetReadout:
    """The fleet readout: the design, the windows, per-host rows, pooled rows, the verdict."""

    design: Design
    start_s: float
    end_s: float
    step_s: float
    baseline: tuple[float, float] | None
    prefix: str
    hosts: tuple[HostRow, ...]
    metrics: tuple[MetricReadout, ...]
    aborts: ProportionResult
    verdict: Overall
    reasons: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    engine: str = ""

    @property
    def design_text(self) -> str:
        """The design, in words."""
        return DESIGNS[self.design]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (NaN becomes null)."""
        out: dict[str, Any] = plain_data(self)
        out["design_text"] = self.design_text
        return out


@dataclass(frozen=True)
class _Window:
    """A step grid on one host's Prometheus."""

    grid: np.ndarray
    step_s: float

    def query(self, client: PrometheusClient, engine: EngineProfile, prefix: str) -> _Query:
        return _Query(client, engine, prefix, self.grid, self.step_s)


def _grid(start_s: float, end_s: float, step_s: float) -> np.ndarray:
    return step_grid(start_s, end_s, step_s)


def run_fleet_readout(
    hosts: list[FleetReadoutHost],
    *,
    start_s: float,
    end_s: float,
    step_s: float,
    baseline: tuple[float, float] | None = None,
    replicas: tuple[str, str] | None = None,
    metrics: tuple[MetricDef, ...] = DEFAULT_METRICS,
    prefix: str | None = None,
    engine: EngineProfile | None = None,
    min_requests_per_step: float = 3.0,
    tolerance: float = 0.05,
    seed: int = 0,
) -> FleetReadout:
    """Judge the canary across the fleet over [start, end].

    Args:
        hosts: The hosts, each canary or control (``within-host``: every host carries both).
        baseline: [start, end] before the change: the ``between-hosts`` design.
        replicas: (control, canary) matchers inside each host: the ``within-host`` design.
        The rest: as :func:`~tierctl.readout.analysis.run_readout`.

    Raises:
        InputError: neither or both of ``baseline`` and ``replicas``; no canary or no control
            host; an empty window.
    """
    design = _design(hosts, baseline, replicas, start_s, end_s, step_s)
    profile, prefix = resolve_engine(hosts[0].client, engine, prefix)
    after = _Window(_grid(start_s, end_s, step_s), step_s)
    if design == "within-host":
        assert replicas is not None
        return _within_host(
            hosts, replicas, after, profile, prefix, metrics, min_requests_per_step,
            tolerance, seed, (start_s, end_s),
        )  # fmt: skip
    assert baseline is not None
    before = _Window(_grid(baseline[0], baseline[1], step_s), step_s)
    return _between_hosts(
        hosts, before, after, profile, prefix, metrics, min_requests_per_step, tolerance,
        seed, (start_s, end_s), baseline,
    )  # fmt: skip


def _design(
    hosts: list[FleetReadoutHost],
    baseline: tuple[float, float] | None,
    replicas: tuple[str, str] | None,
    start_s: float,
    end_s: float,
    step_s: float,
) -> Design:
    if end_s <= start_s or step_s <= 0:
        raise InputError(
            "the window is empty",
            rule="readout-window",
            value=f"{start_s}..{end_s} step {step_s}",
            fix="give an `end_s` after `start_s` and a positive `step_s`",
            params=("start_s", "end_s", "step_s"),
        )
    if (baseline is None) == (replicas is None):
        raise InputError(
            "a fleet readout needs one design: a baseline window (canary hosts vs control "
            "hosts) or a canary and a control replica inside each host",
            rule="readout-fleet-design",
            fix="give `baseline` (the change's time) or `replicas`, not both",
            params=("baseline", "replicas"),
        )
    if replicas is not None:
        if not hosts:
            raise InputError("no hosts to read out", rule="readout-fleet-hosts", fix="name hosts")
        return "within-host"
    assert baseline is not None
    roles = {h.role for h in hosts}
    if roles != {"canary", "control"}:
        missing = ({"canary", "control"} - roles).pop()
        raise InputError(
            f"no {missing} host: canary hosts are compared with control hosts",
            rule="readout-fleet-hosts",
            value=", ".join(f"{h.name} ({h.role})" for h in hosts),
            fix="name the canary hosts (the fleet's first wave) and leave at least one control",
        )
    if baseline[1] <= baseline[0] or baseline[1] > start_s:
        raise InputError(
            "the baseline window must end before the readout window starts",
            rule="readout-fleet-baseline",
            value=f"baseline {baseline[0]}..{baseline[1]}, window from {start_s}",
            fix="put the baseline before the change and the window after it",
            params=("baseline", "start_s"),
        )
    return "between-hosts"


def _usable(q: _Query, matchers: str, min_requests: float) -> np.ndarray:
    finished = q.engine.metrics.finished
    sel = q.engine.selector(finished, q.prefix, matchers)
    counts = q.series(f"sum(increase({sel}[{q.win}]))")
    ok: np.ndarray = np.nan_to_num(counts) >= min_requests
    return ok


def _log_series(q: _Query, metric: MetricDef, matchers: str, usable: np.ndarray) -> np.ndarray:
    """log of the metric per step; NaN where absent, not positive or (latency) not usable."""
    values = q.series(metric.expr(q.engine, q.prefix, matchers, q.win))
    ok = np.isfinite(values) & (values > 0)
    if metric.kind == "latency":
        ok &= usable
    out = np.full(len(values), np.nan)
    out[ok] = np.log(values[ok])
    return out


def _between_hosts(
    hosts: list[FleetReadoutHost],
    before: _Window,
    after: _Window,
    profile: EngineProfile,
    prefix: str,
    metrics: tuple[MetricDef, ...],
    min_requests: float,
    tolerance: float,
    seed: int,
    window: tuple[float, float],
    baseline: tuple[float, float],
) -> FleetReadout:
    """Each host's change from its own baseline; canary hosts' change vs control hosts'."""
    warnings: list[str] = []
    changes: dict[str, dict[str, np.ndarray]] = {}  # metric -> host -> log change per step
    raw: dict[str, dict[str, np.ndarray]] = {}  # metric -> host -> log value per step
    rows: dict[str, dict[str, float]] = {h.name: {} for h in hosts}
    for h in hosts:
        qa, qb = after.query(h.client, profile, prefix), before.query(h.client, profile, prefix)
        ua, ub = _usable(qa, h.matchers, min_requests), _usable(qb, h.matchers, min_requests)
        for m in metrics:
            logs_b = _log_series(qb, m, h.matchers, ub)
            logs_a = _log_series(qa, m, h.matchers, ua)
            if np.isfinite(logs_b).sum() < 6:
                warnings.append(f"{h.name}: no baseline for {m.title} (fewer than 6 steps)")
                level = math.nan
            else:
                level = float(np.nanmean(logs_b))
            changes.setdefault(m.key, {})[h.name] = logs_a - level
            raw.setdefault(m.key, {})[h.name] = logs_a
    for m in metrics:
        for h in hosts:
            rows[h.name][m.key] = _relative_change(h, hosts, changes[m.key])
    pooled = []
    for m in metrics:
        group = {role: _role_per_step(hosts, role, changes[m.key]) for role in _ROLES}
        row = _row(m, group["control"], group["canary"], tolerance, seed)
        # The medians shown are the groups' own levels after the change (geometric mean over
        # their hosts, median over steps), in the metric's unit; the ratio is the blocked one.
        levels = {role: _median(_role_per_step(hosts, role, raw[m.key])) for role in _ROLES}
        pooled.append(
            replace(row, control_median=levels["control"], canary_median=levels["canary"])
        )
    aborts = _aborts_between(hosts, profile, prefix, baseline, window)
    verdict, reasons = judge_canary(pooled, aborts, None, tolerance)
    host_rows = tuple(HostRow(h.name, h.role, rows[h.name], steps=len(after.grid)) for h in hosts)
    return FleetReadout(
        "between-hosts", window[0], window[1], after.step_s, baseline, prefix, host_rows,
        tuple(pooled), aborts, verdict, tuple(reasons), tuple(warnings), profile.kind,
    )  # fmt: skip


def _relative_change(
    host: FleetReadoutHost, hosts: list[FleetReadoutHost], changes: dict[str, np.ndarray]
) -> float:
    """A host's change from its baseline relative to the other control hosts' over the same
    steps (the shared load curve cancels): the per-host figure of the pooled comparison."""
    others = [changes[h.name] for h in hosts if h.role == "control" and h.name != host.name]
    if not others:
        return math.nan
    diff = changes[host.name] - np.mean(others, axis=0)
    finite = diff[np.isfinite(diff)]
    return float(np.exp(finite.mean())) if finite.size else math.nan


_ROLES = ("canary", "control")


def _geomean(logs: list[np.ndarray]) -> np.ndarray:
    """Per step, the geometric mean over hosts of a series given as its logs."""
    out: np.ndarray = np.exp(np.mean(logs, axis=0))
    return out


def _role_per_step(
    hosts: list[FleetReadoutHost], role: str, logs: dict[str, np.ndarray]
) -> np.ndarray:
    """Per step, the geometric mean over the ``role`` hosts of ``logs`` (host -> log series)."""
    return _geomean([logs[h.name] for h in hosts if h.role == role])


def _median(values: np.ndarray) -> float:
    return float(np.nanmedian(values)) if np.isfinite(values).any() else math.nan


def _row(
    m: MetricDef, control: np.ndarray, canary: np.ndarray, tolerance: float, seed: int
) -> MetricReadout:
    """A pooled row through the single-host readout's paired comparison (the series are
    already host-normalised: their medians are ratios to the baseline, or geometric means)."""
    result = compare_paired(
        control,
        canary,
        lower_is_better=m.quantity.direction is Direction.LOWER_IS_BETTER,
        tolerance=tolerance,
        seed=seed,
    )
    return MetricReadout(
        m.key, m.title, m.guard, _median(control), _median(canary), result, m.quantity.unit
    )


def _within_host(
    hosts: list[FleetReadoutHost],
    replicas: tuple[str, str],
    after: _Window,
    profile: EngineProfile,
    prefix: str,
    metrics: tuple[MetricDef, ...],
    min_requests: float,
    tolerance: float,
    seed: int,
    window: tuple[float, float],
) -> FleetReadout:
    """Each host's own canary/control per step, averaged over hosts."""
    control_m, canary_m = replicas
    logs: dict[str, dict[str, list[np.ndarray]]] = {}  # metric -> arm -> per host
    host_rows = []
    for h in hosts:
        q = after.query(h.client, profile, prefix)
        c_sel, k_sel = f"{h.matchers},{control_m}", f"{h.matchers},{canary_m}"
        usable = _usable(q, c_sel, min_requests) & _usable(q, k_sel, min_requests)
        ratios: dict[str, float] = {}
        verdicts: dict[str, str] = {}
        for m in metrics:
            c, k = _log_series(q, m, c_sel, usable), _log_series(q, m, k_sel, usable)
            logs.setdefault(m.key, {"control": [], "canary": []})
            logs[m.key]["control"].append(c)
            logs[m.key]["canary"].append(k)
            one = _row(m, np.exp(c), np.exp(k), tolerance, seed).result
            ratios[m.key], verdicts[m.key] = one.ratio, one.verdict
        host_rows.append(HostRow(h.name, "both", ratios, verdicts, int(usable.sum())))
    pooled = [
        _row(m, _geomean(logs[m.key]["control"]), _geomean(logs[m.key]["canary"]), tolerance, seed)
        for m in metrics
    ]
    aborts = _aborts_within(hosts, replicas, profile, prefix, window)
    verdict, reasons = judge_canary(pooled, aborts, None, tolerance)
    return FleetReadout(
        "within-host", window[0], window[1], after.step_s, None, prefix, tuple(host_rows),
        tuple(pooled), aborts, verdict, tuple(reasons), (), profile.kind,
    )  # fmt: skip


def _counts(
    client: PrometheusClient,
    profile: EngineProfile,
    prefix: str,
    matchers: str,
    span: tuple[float, float],
) -> tuple[float, float]:
    """(aborted, all) requests of ``matchers`` over ``span``."""
    length = f"{max(1, round(span[1] - span[0]))}s"

    def pooled(ref: Any) -> float:
        expr = f"sum(increase({profile.selector(ref, prefix, matchers)}[{length}]))"
        found = client.query(expr, span[1])
        return found[0][1] if found and math.isfinite(found[0][1]) else 0.0

    aborted, finished = pooled(profile.metrics.aborted), pooled(profile.metrics.finished)
    return aborted, aborted + finished


def _aborts_between(
    hosts: list[FleetReadoutHost],
    profile: EngineProfile,
    prefix: str,
    baseline: tuple[float, float],
    window: tuple[float, float],
) -> ProportionResult:
    """The canary hosts' abort-rate change (after/before) against the control hosts'."""
    cells: dict[tuple[str, str], list[float]] = {}
    for h in hosts:
        for period, span in (("before", baseline), ("after", window)):
            a, n = _counts(h.client, profile, prefix, h.matchers, span)
            cell = cells.setdefault((h.role, period), [0.0, 0.0])
            cell[0] += a
            cell[1] += n
    return ratio_of_rate_ratios(
        cells[("canary", "before")], cells[("canary", "after")],
        cells[("control", "before")], cells[("control", "after")],
    )  # fmt: skip


def ratio_of_rate_ratios(
    canary_before: list[float],
    canary_after: list[float],
    control_before: list[float],
    control_after: list[float],
    *,
    alpha: float = 0.05,
    min_total: float = 20.0,
) -> ProportionResult:
    """(canary after/before) / (control after/before) of event rates, each cell [events,
    total]; Katz-style log interval with a 0.5 correction per cell, a z test for the p-value.
    "worse" only when the canary's rate rose more than the control's, significantly."""
    from scipy import stats as sps

    cells = [canary_after, canary_before, control_after, control_before]
    if any(n < min_total for _, n in cells):
        nan = math.nan
        return ProportionResult(
            control_after[0], control_after[1], canary_after[0], canary_after[1],
            nan, nan, nan, nan, "no-data",
        )  # fmt: skip
    rates = [(a + 0.5) / (n + 0.5) for a, n in cells]
    log_ratio = math.log(rates[0] / rates[1]) - math.log(rates[2] / rates[3])
    se = math.sqrt(sum(max(1 / (a + 0.5) - 1 / (n + 0.5), 0.0) for a, n in cells))
    z = float(sps.norm.ppf(1 - alpha / 2))
    p_value = float(2 * sps.norm.sf(abs(log_ratio) / se)) if se > 0 else 1.0
    verdict: Any = "same"
    if p_value < alpha:
        verdict = "worse" if log_ratio > 0 else "better"
    return ProportionResult(
        control_after[0], control_after[1], canary_after[0], canary_after[1],
        math.exp(log_ratio), math.exp(log_ratio - z * se), math.exp(log_ratio + z * se),
        p_value, verdict,
    )  # fmt: skip


def _aborts_within(
    hosts: list[FleetReadoutHost],
    replicas: tuple[str, str],
    profile: EngineProfile,
    prefix: str,
    window: tuple[float, float],
) -> ProportionResult:
    """Canary vs control replica abort rates, Mantel-Haenszel stratified by host."""
    strata = []
    for h in hosts:
        c = _counts(h.client, profile, prefix, f"{h.matchers},{replicas[0]}", window)
        k = _counts(h.client, profile, prefix, f"{h.matchers},{replicas[1]}", window)
        strata.append((k, c))
    return mantel_haenszel(strata)


def mantel_haenszel(
    strata: list[tuple[tuple[float, float], tuple[float, float]]],
    *,
    alpha: float = 0.05,
    min_total: float = 20.0,
) -> ProportionResult:
    """The Mantel-Haenszel rate ratio canary/control over strata ((canary events, total),
    (control events, total)), with the Greenland-Robins variance of its log and a z test."""
    from scipy import stats as sps

    ka = sum(k[0] for k, _ in strata)
    kn = sum(k[1] for k, _ in strata)
    ca = sum(c[0] for _, c in strata)
    cn = sum(c[1] for _, c in strata)
    used = [(k, c) for k, c in strata if k[1] > 0 and c[1] > 0]
    num = sum(k[0] * c[1] / (k[1] + c[1]) for k, c in used)
    den = sum(c[0] * k[1] / (k[1] + c[1]) for k, c in used)
    if kn < min_total or cn < min_total:
        nan = math.nan
        return ProportionResult(ca, cn, ka, kn, nan, nan, nan, nan, "no-data")
    if num == 0 or den == 0:
        num, den = num + 0.5, den + 0.5  # no events on one side: a continuity correction
    var_num = sum(
        (k[1] * c[1] * (k[0] + c[0]) - k[0] * c[0] * (k[1] + c[1])) / (k[1] + c[1]) ** 2
        for k, c in used
    )
    log_rr = math.log(num / den)
    se = math.sqrt(max(var_num, 0.0) / (num * den)) if var_num > 0 else 0.0
    z = float(sps.norm.ppf(1 - alpha / 2))
    p_value = float(2 * sps.norm.sf(abs(log_rr) / se)) if se > 0 else 1.0
    verdict: Any = "same"
    if p_value < alpha:
        verdict = "worse" if log_rr > 0 else "better"
    return ProportionResult(
        ca, cn, ka, kn, math.exp(log_rr), math.exp(log_rr - z * se), math.exp(log_rr + z * se),
        p_value, verdict,
    )  # fmt: skip
