"""PNG plots of a run or an A/B (matplotlib, Agg backend: no display needed).

* latency CDFs — TTFT, TPOT and E2E of completed requests: for an A/B one row of panels per
  workload lane (lanes are never pooled: a burst's and a hammer's latencies differ by orders
  of magnitude), one curve per arm, the legend naming which endpoint is A and which is B;
  for a single run one curve per lane;
* probe latency over time — each probe at its send time, misses drawn at the probe timeout
  as crosses, one series per block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tierctl.bench.ab import ABResult
from tierctl.bench.samples import ProbeSample, RequestSample, RunRecord

_ARM_COLOURS = {"A": "tab:blue", "B": "tab:orange"}
_PANELS = (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s"))


def _values(requests: Sequence[RequestSample], attr: str) -> np.ndarray:
    vals = [getattr(r, attr) for r in requests if r.outcome == "completed"]
    return np.sort(np.array([v for v in vals if v is not None], dtype=float)) * 1e3


def _cdf_row(
    axes: Sequence[Axes],
    series: Mapping[str, Sequence[RequestSample]],
    colours: dict[str, str],
    prefix: str = "",
) -> None:
    for ax, (label, attr) in zip(axes, _PANELS, strict=True):
        for name, reqs in series.items():
            v = _values(reqs, attr)
            if v.size:
                y = np.arange(1, v.size + 1) / v.size
                ax.step(v, y, where="post", label=f"{name} (n={v.size})", color=colours.get(name))
        ax.set_title(f"{prefix}{label} CDF")
        ax.set_xlabel(f"{label} (ms)")
        ax.set_ylabel("fraction of completed requests")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="lower right", fontsize=8)


def _cdf_figure(
    series: Mapping[str, Sequence[RequestSample]], colours: dict[str, str], title: str
) -> Figure:
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), constrained_layout=True)
    _cdf_row(axes, series, colours)
    fig.suptitle(title)
    return fig


def arm_legends(result: ABResult, names: tuple[str, str] | None = None) -> dict[str, str]:
    """Legend text per arm: ``A = r1 (http://...)``, or the URL alone without names."""
    urls = {"A": result.a_url, "B": result.b_url}
    out = {}
    for k, arm in enumerate(("A", "B")):
        out[arm] = f"{arm} = {names[k]} ({urls[arm]})" if names else f"{arm} = {urls[arm]}"
    return out


def _probe_axes(
    ax: Axes, label: str, probes: Sequence[ProbeSample], timeout_s: float, colour: str | None
) -> None:
    ok = [(p.sent_s, p.latency_s * 1e3) for p in probes if p.latency_s is not None]
    miss = [p.sent_s for p in probes if p.missed]
    if ok:
        xs, ys = zip(*ok, strict=True)
        ax.plot(xs, ys, marker=".", linewidth=0.8, label=label, color=colour)
    if miss:
        ax.scatter(
            miss,
            [timeout_s * 1e3] * len(miss),
            marker="x",
            color=colour or "red",
            label=f"{label} misses ({len(miss)})",
        )


def plot_run(record: RunRecord, out_dir: Path, *, probe_timeout_s: float) -> list[Path]:
    """Write ``latency_cdf.png`` and ``probe_latency.png`` for one run; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lanes = sorted({r.lane for r in record.requests})
    series = {lane: [r for r in record.requests if r.lane == lane] for lane in lanes}
    fig = _cdf_figure(series, {}, f"Latency CDFs — {record.url}")
    cdf = out_dir / "latency_cdf.png"
    fig.savefig(cdf, dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(10, 4), constrained_layout=True)
    _probe_axes(ax, record.label, record.probes, probe_timeout_s, None)
    _probe_decor(ax, probe_timeout_s, "Probe latency over time")
    ax.set_xlabel("time since run start (s)")
    probe = out_dir / "probe_latency.png"
    fig.savefig(probe, dpi=110)
    plt.close(fig)
    return [cdf, probe]


def plot_ab(
    result: ABResult,
    out_dir: Path,
    *,
    probe_timeout_s: float,
    names: tuple[str, str] | None = None,
) -> list[Path]:
    """Write ``latency_cdf.png`` (a row per lane, a curve per arm) and ``probe_latency.png``.

    ``names`` (A's, B's) label the arms in the legends, e.g. the replicas ``("r1", "r2")``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    legends = arm_legends(result, names)
    lanes = sorted({r.lane for b in result.blocks for r in b.record.requests}) or ["(none)"]
    fig, grid = plt.subplots(
        len(lanes), 3, figsize=(14, 4.2 * len(lanes)), constrained_layout=True, squeeze=False
    )
    colours = {legends[arm]: colour for arm, colour in _ARM_COLOURS.items()}
    for row, lane in zip(grid, lanes, strict=True):
        series: dict[str, list[RequestSample]] = {legends["A"]: [], legends["B"]: []}
        for b in result.blocks:
            series[legends[b.arm]].extend(r for r in b.record.requests if r.lane == lane)
        _cdf_row(row, series, colours, prefix=f"{lane}: ")
    fig.suptitle("Latency CDFs per lane and arm (each arm's blocks pooled)")
    cdf = out_dir / "latency_cdf.png"
    fig.savefig(cdf, dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(2, 1, figsize=(10, 6), sharex=True, constrained_layout=True)
    for ax, arm in zip(axes, ("A", "B"), strict=True):
        for k, b in enumerate(result.blocks):
            if b.arm == arm:
                _probe_axes(ax, f"block {k}", b.record.probes, probe_timeout_s, None)
        _probe_decor(ax, probe_timeout_s, f"Probe latency over time — {legends[arm]}")
    axes[-1].set_xlabel("time since block start (s)")
    probe = out_dir / "probe_latency.png"
    fig.savefig(probe, dpi=110)
    plt.close(fig)
    return [cdf, probe]


def _probe_decor(ax: Axes, timeout_s: float, title: str) -> None:
    ax.axhline(timeout_s * 1e3, color="red", linestyle="--", linewidth=0.8, label="timeout")
    ax.set_title(title)
    ax.set_ylabel("probe latency (ms, log)")
    # Log scale: healthy probes (~1 ms) and misses at the timeout (seconds) both stay visible.
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right", fontsize=8)
