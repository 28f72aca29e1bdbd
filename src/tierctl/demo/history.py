"""Synthetic engine metrics (SGLang's or vLLM's names, from the engine profile) as OpenMetrics
text, for backfilling a real Prometheus: the fleet demo's day of history (this machine cannot
serve hours of traffic to three hosts), and the readout tests' data.

Each arm serves Poisson request counts with a daily load curve; TTFT, inter-token latency and
E2E are lognormal, scaled by the arm's multipliers and by load (both arms see the same curve,
as replicas behind one proxy do). Deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tierctl.engines import SGLANG, EngineProfile, MetricRef

BUCKETS = tuple(round(0.01 * 1.25**i, 6) for i in range(45))  # 10 ms .. ~200 s


@dataclass(frozen=True)
class ArmData:
    """How one synthetic replica behaves."""

    container: str
    variant: str
    ttft_x: float = 1.0
    tpot_x: float = 1.0
    abort_p: float = 0.002
    present: bool = True
    #: Family role -> the name this arm exports it under instead (a renamed metric).
    renamed: dict[str, str] = field(default_factory=dict)
    #: Its ``host_machine`` label (one synthetic host per value).
    host: str = "t"
    #: From this time on (Unix seconds) the ``after_*`` multipliers replace the ones above
    #: (a change rolled out at that moment); None: no change.
    change_s: float | None = None
    after_ttft_x: float | None = None
    after_tpot_x: float | None = None
    after_abort_p: float | None = None

    def at(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(TTFT multiplier, TPOT multiplier, abort probability) at each scrape time."""
        after = np.zeros(len(ts), dtype=bool) if self.change_s is None else ts >= self.change_s

        def pick(before: float, later: float | None) -> np.ndarray:
            return np.where(after, before if later is None else later, before)

        return (
            pick(self.ttft_x, self.after_ttft_x),
            pick(self.tpot_x, self.after_tpot_x),
            pick(self.abort_p, self.after_abort_p),
        )


def _histogram_lines(
    name: str, labels: str, ts: np.ndarray, samples: list[np.ndarray]
) -> list[str]:
    lines = []
    cum = np.zeros(len(BUCKETS) + 1)
    total_sum = 0.0
    for t, values in zip(ts, samples, strict=True):
        counts = np.searchsorted(BUCKETS, values, side="left")
        cum += np.bincount(counts, minlength=len(BUCKETS) + 1)
        total_sum += float(values.sum())
        running = np.cumsum(cum)
        for le, c in zip(BUCKETS, running[:-1], strict=True):
            lines.append(f'{name}_bucket{{{labels},le="{le}"}} {c:.0f} {t:.0f}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {running[-1]:.0f} {t:.0f}')
        lines.append(f"{name}_count{{{labels}}} {running[-1]:.0f} {t:.0f}")
        lines.append(f"{name}_sum{{{labels}}} {total_sum:.6f} {t:.0f}")
    return lines


def openmetrics(
    arms: list[ArmData],
    start_s: int,
    end_s: int,
    scrape_s: int = 30,
    seed: int = 7,
    engine: EngineProfile = SGLANG,
) -> str:
    """The whole backfill file for these arms over [start, end], in ``engine``'s names."""
    p = engine.prefix
    m = engine.metrics
    rng = np.random.default_rng(seed)
    ts = np.arange(start_s, end_s + 1, scrape_s)
    hour = (ts / 3600.0) % 24
    load = 1.0 + 0.8 * np.sin(2 * np.pi * (hour - 8) / 24)  # shared daily curve
    # family name -> (OpenMetrics type, sample lines); each family is written contiguously.
    families: dict[str, tuple[str, list[str]]] = {}

    def family(name: str, kind: str) -> list[str]:
        return families.setdefault(name, (kind, []))[1]

    for arm in arms:
        if not arm.present:
            continue
        labels = (
            f'container_name="{arm.container}",config_variant="{arm.variant}",'
            f'host_machine="{arm.host}"'
        )
        ttft_x, tpot_x, abort_p = arm.at(ts)
        n = rng.poisson(15 * load)
        ttft = [ttft_x[i] * load[i] * rng.lognormal(np.log(0.8), 0.4, n[i]) for i in range(len(ts))]
        itl = [
            tpot_x[i] * (0.7 + 0.3 * load[i]) * rng.lognormal(np.log(0.03), 0.25, 4 * n[i])
            for i in range(len(ts))
        ]
        e2e = [t + 200 * np.median(i_) if len(i_) else t for t, i_ in zip(ttft, itl, strict=True)]
        for role, base, values in (
            ("ttft", m.ttft, ttft),
            ("itl", m.itl, itl),
            ("e2e", m.e2e, e2e),
        ):
            name = p + arm.renamed.get(role, base)
            family(name, "histogram").extend(_histogram_lines(name, labels, ts, values))
        aborts = np.cumsum(rng.binomial(n, abort_p))
        finished = np.cumsum(n) - aborts
        gen = np.cumsum(n * 200)
        counters = [(m.aborted, aborts)]
        if m.finished.name != m.e2e + "_count":  # SGLang counts finished in the E2E histogram
            counters.append((m.finished, finished))
        for ref, counts in counters:
            lines = family(p + ref.name.removesuffix("_total"), "counter")
            lines += [
                _counter(p, ref, labels, int(v), float(t)) for t, v in zip(ts, counts, strict=True)
            ]
        gen_name = p + m.generation_tokens
        lines = family(gen_name.removesuffix("_total"), "counter")
        lines += [f"{gen_name}{{{labels}}} {g} {t:.0f}" for t, g in zip(ts, gen, strict=True)]
        running = p + arm.renamed.get("running", m.running)
        family(running, "gauge").extend(f"{running}{{{labels}}} 3 {t:.0f}" for t in ts)
    out = []
    for name, (kind, lines) in families.items():
        out += [f"# TYPE {name} {kind}", *lines]
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _counter(prefix: str, ref: MetricRef, labels: str, value: float, t: float) -> str:
    """One counter sample, carrying the family's own matchers as labels (``finished_reason``)."""
    extra = ref.matchers
    if "!=" in extra:
        # finished_reason!="abort": the finished requests are the "stop" ones here.
        extra = extra.split("!=")[0] + '="stop"'
    full = f"{labels},{extra}" if extra else labels
    return f"{prefix}{ref.name}{{{full}}} {value} {t:.0f}"
