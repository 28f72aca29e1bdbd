"""Synthetic SGLang metrics as OpenMetrics text, for backfilling a real Prometheus.

Each arm serves Poisson request counts with a daily load curve; TTFT, inter-token latency and
E2E are lognormal, scaled by the arm's multipliers and by load (both arms see the same curve,
as replicas behind one proxy do). Deterministic for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    arms: list[ArmData], start_s: int, end_s: int, scrape_s: int = 30, seed: int = 7
) -> str:
    """The whole backfill file for these arms over [start, end]."""
    rng = np.random.default_rng(seed)
    ts = np.arange(start_s, end_s + 1, scrape_s)
    hour = (ts / 3600.0) % 24
    load = 1.0 + 0.8 * np.sin(2 * np.pi * (hour - 8) / 24)  # shared daily curve
    families: dict[str, list[str]] = {
        "ttft": [],
        "itl": [],
        "e2e": [],
        "req": [],
        "abort": [],
        "running": [],
    }
    for arm in arms:
        if not arm.present:
            continue
        labels = f'container_name="{arm.container}",config_variant="{arm.variant}",host_machine="t"'
        n = rng.poisson(15 * load)
        ttft = [
            arm.ttft_x * load[i] * rng.lognormal(np.log(0.8), 0.4, n[i]) for i in range(len(ts))
        ]
        itl = [
            arm.tpot_x * (0.7 + 0.3 * load[i]) * rng.lognormal(np.log(0.03), 0.25, 4 * n[i])
            for i in range(len(ts))
        ]
        e2e = [t + 200 * np.median(i_) if len(i_) else t for t, i_ in zip(ttft, itl, strict=True)]
        families["ttft"] += _histogram_lines("sglang:time_to_first_token_seconds", labels, ts, ttft)
        families["itl"] += _histogram_lines("sglang:inter_token_latency_seconds", labels, ts, itl)
        families["e2e"] += _histogram_lines("sglang:e2e_request_latency_seconds", labels, ts, e2e)
        aborts = np.cumsum(rng.binomial(n, arm.abort_p))
        gen = np.cumsum(n * 200)
        for t, a, g in zip(ts, aborts, gen, strict=True):
            families["abort"].append(f"sglang:num_aborted_requests_total{{{labels}}} {a} {t:.0f}")
            families["req"].append(f"sglang:generation_tokens_total{{{labels}}} {g} {t:.0f}")
            families["running"].append(f"sglang:num_running_reqs{{{labels}}} 3 {t:.0f}")
    out = [
        "# TYPE sglang:time_to_first_token_seconds histogram",
        *families["ttft"],
        "# TYPE sglang:inter_token_latency_seconds histogram",
        *families["itl"],
        "# TYPE sglang:e2e_request_latency_seconds histogram",
        *families["e2e"],
        "# TYPE sglang:num_aborted_requests counter",
        *families["abort"],
        "# TYPE sglang:generation_tokens counter",
        *families["req"],
        "# TYPE sglang:num_running_reqs gauge",
        *families["running"],
        "# EOF",
    ]
    return "\n".join(out) + "\n"
