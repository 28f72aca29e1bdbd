"""The readout table: canary/control for every metric, a separate direction and verdict,
medians in their own unit, and a table that fits the terminal."""

from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console

from tierctl.readout.analysis import Arm, MetricReadout, Readout
from tierctl.readout.metrics import DEFAULT_METRICS
from tierctl.readout.report import HEADERS, print_readout, readout_markdown
from tierctl.readout.stats import ProportionResult, compare_paired


def _readout() -> Readout:
    rng = np.random.default_rng(1)
    rows = []
    for m in DEFAULT_METRICS:
        control = rng.normal(1.0, 0.01, 40) * (0.05 if m.kind == "latency" else 900.0)
        # The canary is 9% faster: 9% lower latencies and 9% more tokens per second.
        canary = control * (1 / 1.09 if m.kind == "latency" else 1.09)
        lower = m.kind == "latency"
        result = compare_paired(control, canary, lower_is_better=lower)
        median_c, median_k = float(np.median(control)), float(np.median(canary))
        rows.append(
            MetricReadout(m.key, m.title, m.guard, median_c, median_k, result, m.quantity.unit)
        )
    aborts = ProportionResult(0, 100, 0, 100, 1.0, 0.5, 2.0, 1.0, "same")
    return Readout(
        Arm("r1", 'container_name="a"'),
        Arm("r2", 'container_name="b"'),
        0.0,
        3600.0,
        60.0,
        "vllm:",
        tuple(rows),
        aborts,
        {"r1": ["v1"], "r2": ["v2"]},
        "pass",
        ("better",),
    )


def test_a_faster_canarys_throughput_ratio_is_above_one_and_called_better():
    readout = _readout()
    tput = next(r for r in readout.metrics if r.key == "gen_tokens_per_s")
    assert tput.result.ratio == pytest.approx(1.09, rel=1e-3)
    md = readout_markdown(readout)
    line = next(x for x in md.splitlines() if x.startswith("| generation tok/s"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    row = dict(zip(HEADERS, cells, strict=True))
    assert row["canary/control [95% CI]"].startswith("1.09")
    assert (row["better"], row["canary is"]) == ("higher", "better")
    assert row["control"].endswith("tok/s")
    ttft = next(x for x in md.splitlines() if x.startswith("| TTFT p50"))
    cells = dict(zip(HEADERS, [c.strip() for c in ttft.strip("|").split("|")], strict=True))
    assert cells["canary/control [95% CI]"].startswith("0.92")
    assert (cells["better"], cells["canary is"]) == ("lower", "better")
    assert cells["control"].endswith(" ms")


@pytest.mark.parametrize("width", [80, 120])
def test_the_readout_table_fits_the_terminal(width):
    console = Console(width=width, record=True)
    print_readout(_readout(), console)
    text = console.export_text()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    assert "1.09 [" in text
