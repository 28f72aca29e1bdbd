"""Act 1, the scheduler canary: roll out the spec's own canary change, A/B it, live, read out.

OLD is the spec with the canary running the control's flags; NEW is the spec. The local driver
runs both engines as ``tierctl sim serve`` processes; the rollout recreates the canary alone,
gated, then "recreates" the collector, which here means reloading the demo's real Prometheus
with NEW's rendered scrape config -- so the collector gate checks the variants in Prometheus.
A paired A/B (control = A, canary = B) then shows each arm's own values and B/A; the live phase
repeats the A/B's shape (long prompts arriving while others decode) for a minute on both
replicas at once, so the readout from Prometheus judges the same effect the A/B measured.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any

from tierctl.demo.context import DemoContext
from tierctl.demo.tier import old_doc, sized
from tierctl.engines import PROFILES
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.spec import load_spec, load_spec_text, resolve_tier

if TYPE_CHECKING:
    from tierctl.runtime.local_prom import LocalPrometheus

# Modelled GPU seconds per wall second for the simulated engines. Wall-clock noise (a
# burst's requests reaching the scheduler a little apart, a loaded CPU delaying a round) is
# multiplied by the scale into modelled time: measured on this 2-core machine under load, at
# 10 the A/B's TTFT p50 ratio had the interval 0.66-1.18 and block times of 3-7 s; at 4,
# 0.98-1.03, for the same wall time (the engines no longer fall behind their clock).
TIME_SCALE = 4.0
#: The live phase: eight readout steps of 20 s (the readout needs six usable), each with one
#: burst like the A/B's and room for it to finish on both replicas at once: ~8 s of wall
#: time, up to ~16 s where a loaded CPU makes the engines fall behind their clock (measured
#: at a load average of 12 on 2 cores; with 15 s steps such bursts spilled into the next).
LIVE_S = 160.0
LIVE_STEP_S = 20.0

# The field report's scheduler canary in miniature, one "step" of traffic: long prompts at
# once, so the first to finish prefilling decode while the others still prefill chunk by chunk.
# At interval 1 each of those decode rounds waits behind a prefill chunk; at 2 two decode
# rounds run per chunk. The A/B runs one step per block, the live phase one step per readout
# step, so both measure the same effect (deterministic: the scheduler decides the overlap).
#
# The size puts each request's TTFT inside one of SGLang's histogram buckets, not on an edge:
# with four requests per step the readout's quantile is read off the buckets (TTFT: ... 6, 8,
# 10, 20, 40 s), so p50 is the top edge of the second request's bucket. At 40K tokens the
# second request's TTFT sat at ~8-10 s and each step's p50 jumped between 6, 8, 10 and
# 13.3 s on both arms alike (a +-50% per-step ratio: the guards could not be decided). At
# 76K (~119K tokens as the simulated engine counts them) the modelled TTFTs are ~8, 16, 24
# and 32 s: p50 and p95 read the second request in (10, 20] and the last two in (20, 40] on
# both arms, with ~3 s of room for the wall time (body reading, tokenization, arrivals a
# little apart) a loaded machine adds or takes off. (At 72K the third sat at ~20 s and
# flipped buckets: TTFT p50 [0.90, 1.20].)
BURST_COUNT = 4
BURST_TOKENS = 76_000
BURST_OUTPUT = 24


class DemoDriver(LocalDriver):
    """The local driver, plus the collector's stand-in: recreating the collector reloads
    the demo's Prometheus with that side's rendered scrape configuration."""

    def __init__(self, *args: Any, on_collector: Callable[[Deployment], None], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._on_collector = on_collector
        self.collectors: set[str] = set()

    def apply(self, dep: Deployment, services: list[str]) -> None:
        """Apply as the local driver does; a collector reloads Prometheus."""
        super().apply(dep, services)
        if any(s in self.collectors for s in services):
            self._on_collector(dep)


def _step_lanes(at_s: float, k: int) -> list[dict[str, Any]]:
    return [
        {
            "kind": "burst",
            "name": f"burst{k}",
            "count": BURST_COUNT,
            "input_tokens": BURST_TOKENS,
            "output_tokens": BURST_OUTPUT,
            "at_s": at_s,
        }
    ]


def _workload(name: str, lanes: list[dict[str, Any]], max_s: float) -> Any:
    from tierctl.bench import workload_from_dict

    return workload_from_dict(
        {
            "name": name,
            "seed": 1,
            "api": "completions",
            "timeout_s": 90,
            "max_duration_s": max_s,
            "lanes": lanes,
            "probe": {"path": "/health", "interval_s": 0.5, "timeout_s": 3.0},
        },
        source=f"demo:{name}",
    )


def _scrape_config(doc: dict[str, Any]) -> str:
    """A Prometheus config from the tier's rendered scrape jobs, scraping every second."""
    from tierctl.render.compose import scrape_document
    from tierctl.spec.tier_spec import ScrapeConfig

    tier = resolve_tier(load_spec_text(dump_yaml(doc), "demo.yaml"))
    scrape = ScrapeConfig(
        target="/etc/prometheus/prometheus.yml",
        address="127.0.0.1:{port}",
        interval_s=1,
        labels={"host_machine": "{host}"},
    )
    doc = scrape_document(tier, scrape)
    for job in doc.get("scrape_configs", []):
        # As collector pipelines do (design: "pipelines often rewrite sglang: to sglang_"),
        # so the rollout's variant gate queries the names it queries in production.
        job["metric_relabel_configs"] = [
            {
                "source_labels": ["__name__"],
                "regex": f"({'|'.join(p.prefix.rstrip(':') for p in PROFILES.values())}):(.*)",
                "target_label": "__name__",
                "replacement": "${1}_${2}",
            }
        ]
    return dump_yaml({"global": {"scrape_interval": "1s"}, **doc})


@contextmanager
def _maybe_prometheus(ctx: DemoContext, config: str) -> Iterator[Any]:
    from tierctl.runtime.local_prom import LocalPrometheus, prometheus_binaries

    found = prometheus_binaries()
    if found is None:
        ctx.console.print(
            "[yellow]prometheus is not installed (Debian: apt-get install prometheus): the "
            "collector gate and the readout are skipped[/]"
        )
        yield None
        return
    with LocalPrometheus(ctx.workdir / "prometheus", config, binary=found[0]) as prom:
        yield prom


def stage_canary(ctx: DemoContext) -> bool:
    """Roll the canary change out, A/B control vs canary, drive both, read out."""
    from tierctl.progress import RolloutWaits
    from tierctl.rollout import GateSettings, RolloutOptions, load_sides, plan_files, run_rollout
    from tierctl.rollout.spec_roles import options_from_spec
    from tierctl.runtime.process import free_port

    console = ctx.console
    demo = ctx.demo
    control, canary = demo.require_canary()
    change = ", ".join(
        f"--{c.flag} {c.control or '(unset)'} -> {c.canary or '(unset)'}" for c in demo.change
    )
    console.print(f"the spec's canary change on {canary} ({control} is the control): {change}")
    ports = {control: free_port(), canary: free_port()}
    docs = {}
    for side, base in (("old", old_doc(demo)), ("new", demo.doc)):
        docs[side], notes = sized(base, demo, ports)
    console.print("sized for this machine, the same in every act: " + "; ".join(notes))
    files = {}
    for side in ("old", "new"):
        spec_file = ctx.workdir / f"{side}.tier.yaml"
        spec_file.write_text(dump_yaml(docs[side]))
        files[side] = ctx.workdir / f"{side}.compose.yaml"
        files[side].write_text(render_compose(load_spec(spec_file), spec_path=spec_file))
    tier = resolve_tier(load_spec(ctx.workdir / "new.tier.yaml"))
    old_tier = resolve_tier(load_spec(ctx.workdir / "old.tier.yaml"))
    for name in (control, canary):
        console.print(
            f"  {name}: OLD {old_tier.replicas[name].variant}  NEW {tier.replicas[name].variant}"
        )
    plan = plan_files(
        str(files["old"]), str(files["new"]), options_from_spec(ctx.workdir / "new.tier.yaml")
    )
    console.print("plan OLD -> NEW:")
    for step in plan.steps:
        console.print(f"  {step.id}  ({step.why}; gates: {', '.join(step.gates) or '-'})")
    console.print(f"  untouched: {', '.join(plan.untouched)}")
    old_side, new_side = load_sides(plan)
    r_control, r_canary = tier.replicas[control].service, tier.replicas[canary].service
    ok = True
    with ExitStack() as stack:
        prom = stack.enter_context(_maybe_prometheus(ctx, _scrape_config(docs["old"])))

        def reload(dep: Deployment) -> None:
            if prom is not None:
                prom.reload(_scrape_config(docs[dep.side]))
                console.print(
                    f"  [dim]collector: Prometheus reloaded with {dep.side.upper()}'s scrape config[/]"
                )

        driver = DemoDriver(
            ctx.workdir / "engines",
            time_scale=TIME_SCALE,
            sim_options=ctx.sim_serve_options(),
            on_collector=reload,
        )
        driver.collectors = {n for n, svc in tier.services.items() if svc.role == "collector"}
        stack.callback(driver.down_all)
        console.print("starting OLD's engines (tierctl sim serve) ...")
        driver.apply(old_side, [r_control, r_canary])
        result = run_rollout(
            plan,
            driver,
            old_side,
            new_side,
            RolloutOptions(
                journal_path=ctx.workdir / "rollout.journal.jsonl",
                gates=GateSettings(
                    health_timeout_s=60.0,
                    soak_s=0.0,
                    prometheus_url=None if prom is None else prom.url,
                    metrics_timeout_s=30.0,
                ),
            ),
            log=lambda line: console.print(f"  [dim]{line}[/]"),
            # While a gate waits on a restarting engine, the demo shows for how long.
            progress=stack.enter_context(RolloutWaits(console)),
        )
        for outcome in result.outcomes:
            console.print(f"  {outcome.step}: {outcome.status}")
        urls = {
            control: driver.endpoint(new_side, r_control),
            canary: driver.endpoint(new_side, r_canary),
        }
        ab_ok = _ab(ctx, urls, control, canary)
        window = _live_traffic(ctx, urls, prom)
        ok = _readout(ctx, prom.url, tier, window) and ab_ok if prom is not None else ab_ok
    console.print(f"artifacts (plan journal, A/B report and plots, logs): {ctx.workdir}")
    return ok


def _ab(ctx: DemoContext, urls: dict[str, str], control: str, canary: str) -> bool:
    from tierctl.bench import bench_ab
    from tierctl.bench.report import ab_table
    from tierctl.progress import BenchBars

    ctx.console.print(
        f"paired A/B, A = {control} (control), B = {canary} (canary), blocks A-B-B-A twice, "
        f"each one step of traffic: {BURST_COUNT} prompts of {BURST_TOKENS // 1000}K tokens at "
        "once; the first ones decode while the others prefill"
    )
    with BenchBars(ctx.console) as bars:
        outcome = asyncio.run(
            bench_ab(
                urls[control],
                urls[canary],
                _workload("decode-under-prefill", _step_lanes(0.0, 0), 120),
                order="ABBA",
                repetitions=2,  # four pairs: a bootstrap interval that can decide
                out_dir=ctx.workdir / "ab",
                progress=bars,
                names=(control, canary),
            )
        )
        bars.blocks_done(len(outcome.result.blocks))
    ctx.console.print(ab_table(outcome.result, outcome.ratios))
    ratios = {m.metric: m.ratio for m in outcome.ratios if m.lane is None}
    ctx.facts["ab_tpot_ratio"] = ratios["tpot_p50_s"].ratio
    ctx.facts["ab_ttft_ratio"] = ratios["ttft_p50_s"].ratio
    verdict, reasons, rows = ab_judgement(ratios, aborts=_ab_aborts(outcome.result))
    ctx.facts["ab_verdict"] = verdict
    ctx.facts["ab_rows"] = {row.key: row for row in rows}
    ctx.facts["ab_reasons"] = reasons
    ctx.console.print(
        f"the A/B judged by the readout's own rule (tierctl.readout.analysis.judge_canary over the same "
        f"quantities, tolerance {TOLERANCE:.0%}: a guard -- TTFT p50/p95, E2E p50 -- must be "
        f"shown within it or better): {verdict.upper()} ({'; '.join(reasons)})"
    )
    return not outcome.result.interrupted


#: Relative change the demo treats as no change, in the A/B's verdict and in the readout.
TOLERANCE = 0.15

#: Each readout metric (``readout.metrics.DEFAULT_METRICS``) and the A/B metric measuring the
#: same quantity at the client. The readout's TPOT rows are quantiles of the engine's
#: inter-token latency histogram (every gap between two tokens), so they pair with the A/B's
#: ITL columns, not with its per-request TPOT.
AB_FOR_READOUT = {
    "ttft_p50": "ttft_p50_s",
    "ttft_p95": "ttft_p95_s",
    "tpot_p50": "itl_p50_s",
    "tpot_p90": "itl_p90_s",
    "e2e_p50": "e2e_p50_s",
    "gen_tokens_per_s": "output_tok_per_s",
}


def _ab_aborts(result: Any) -> Any:
    """Failed or timed-out vs sent requests of each arm, pooled, as the readout compares
    aborted vs all requests."""
    from tierctl.readout.stats import compare_proportions

    counts = {"A": [0, 0], "B": [0, 0]}
    for block in result.blocks:
        rec = block.record
        counts[block.arm][0] += rec.count("failed") + rec.count("timed_out")
        counts[block.arm][1] += rec.sent
    (ca, ct), (ka, kt) = counts["A"], counts["B"]
    return compare_proportions(ca, ct, ka, kt)


def ab_judgement(
    ratios: dict[str, Any], *, tolerance: float = TOLERANCE, aborts: Any = None
) -> tuple[str, list[str], list[Any]]:
    """The A/B's ratios judged exactly as the readout judges its own: each readout metric's
    A/B counterpart (:data:`AB_FOR_READOUT`) classified by the readout's interval rule, then
    the readout's :func:`~tierctl.readout.analysis.judge_canary`.

    Returns:
        The verdict, its reasons, and one readout row per metric the A/B measured.
    """
    from tierctl.quantity import Direction
    from tierctl.readout.analysis import MetricReadout, judge_canary
    from tierctl.readout.metrics import DEFAULT_METRICS
    from tierctl.readout.stats import PairedResult, ProportionResult, classify_interval

    nan = math.nan
    rows = []
    for metric in DEFAULT_METRICS:
        r = ratios.get(AB_FOR_READOUT.get(metric.key, ""))
        if r is None:
            continue
        values = (r.ratio, r.ci_low, r.ci_high)
        if any(v is None or not v >= 0 for v in values):
            result = PairedResult(r.pairs, 0, nan, nan, nan, nan, nan, "no-data")
        else:
            ratio, low, high = (float(v) for v in values)  # a 0 (no gap at all) is a value
            # B/A is canary/control for every metric, as in the readout; the direction
            # decides only the verdict.
            lower = metric.quantity.direction is Direction.LOWER_IS_BETTER
            row_verdict = classify_interval(low, high, tolerance, lower_is_better=lower)
            result = PairedResult(
                r.pairs, r.pairs, ratio, low, high, ratio, nan, row_verdict, lower
            )
        a = nan if r.a is None else float(r.a)
        b = nan if r.b is None else float(r.b)
        rows.append(
            MetricReadout(
                metric.key, metric.title, metric.guard, a, b, result, metric.quantity.unit
            )
        )
    if aborts is None:
        aborts = ProportionResult(0, 0, 0, 0, nan, nan, nan, nan, "no-data")
    overall, reasons = judge_canary(rows, aborts, tolerance=tolerance)
    return overall, reasons, rows


def ab_verdict(ratios: dict[str, Any], tolerance: float = TOLERANCE) -> str:
    """The verdict of :func:`ab_judgement` alone."""
    return ab_judgement(ratios, tolerance=tolerance)[0]


def _live_traffic(
    ctx: DemoContext, urls: dict[str, str], prom: LocalPrometheus | None
) -> tuple[float, float]:
    """Both replicas get the same traffic at the same time, as behind the proxy: one burst
    like the A/B's at the start of every readout step."""
    from tierctl.bench import bench_run

    steps = int(LIVE_S / LIVE_STEP_S)
    lanes = [lane for k in range(steps) for lane in _step_lanes(k * LIVE_STEP_S + 0.5, k)]
    ctx.console.print(
        f"live traffic on both replicas for {LIVE_S:.0f} s: every {LIVE_STEP_S:.0f} s one step "
        "of the A/B's traffic (Prometheus scrapes every 1 s) ..."
    )
    start = time.time()
    errors: list[BaseException] = []

    def drive(name: str) -> None:
        try:
            asyncio.run(
                bench_run(urls[name], _workload(f"live-{name}", lanes, LIVE_S + 60), plots=False)
            )
        except BaseException as exc:  # reported below, never swallowed
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(n,)) for n in urls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=LIVE_S + 120)
    if prom is not None:
        prom.wait_for_scrape()  # the last of the traffic is in Prometheus
    if errors:
        raise errors[0]
    return start, time.time()


def _readout(ctx: DemoContext, prom_url: str, tier: Any, window: tuple[float, float]) -> bool:
    from tierctl.readout import PrometheusClient, arms_from_tier, run_readout
    from tierctl.readout.report import print_readout

    control, canary = arms_from_tier(tier, None, None)
    with PrometheusClient(prom_url) as client:
        result = run_readout(
            client,
            control,
            canary,
            start_s=window[0],
            end_s=window[1],
            step_s=LIVE_STEP_S,
            min_requests_per_step=1.0,
            tolerance=TOLERANCE,
        )
    print_readout(result, ctx.console)
    ctx.facts["readout_verdict"] = result.verdict
    ctx.facts["readout"] = result
    ctx.console.print(
        "[dim]the readout's TPOT rows are the engines' inter-token latency quantiles (every "
        "gap between two tokens); the A/B's TPOT is each request's mean gap. At interval 2 "
        "the gaps alternate short (decode after decode) and long (behind a prefill chunk): "
        "ITL p50 falls to the short gap, p90 stays at the long one -- the A/B's ITL columns "
        "show the same[/]"
    )
    for line in compare_verdicts(ctx.facts.get("ab_verdict"), ctx.facts.get("ab_rows"), result):
        ctx.console.print(line)
    return True


def _interval(row: Any) -> str:
    r = row.result
    if r.verdict == "no-data":
        return f"no data ({r.n_used} usable)"
    return f"{r.verdict} {r.ratio:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"


def _width(row: Any) -> float | None:
    """The log-width of a row's interval (None without one)."""
    r = row.result
    if r.verdict == "no-data" or not (r.ci_low > 0 and r.ci_high > 0):
        return None
    return math.log(r.ci_high / r.ci_low)


def compare_verdicts(ab: str | None, ab_rows: dict[str, Any] | None, readout: Any) -> list[str]:
    """What the A/B and the readout concluded, and -- where they differ -- which rows
    differ and why, from the intervals each judged (the same rule, so a difference is a
    difference in the data)."""
    if ab is None or ab_rows is None:
        return [f"live readout: {readout.verdict.upper()} (no A/B to compare)"]
    if ab == readout.verdict:
        return [f"A/B: {ab.upper()}; live readout: {readout.verdict.upper()} (the same verdict)"]
    lines = [
        f"A/B: {ab.upper()}; live readout: {readout.verdict.upper()} (a DIFFERENT verdict, "
        "under the same rule; the rows that differ:)"
    ]
    wider = {"A/B": 0, "readout": 0}
    for row in readout.metrics:
        other = ab_rows.get(row.key)
        if other is None or other.result.verdict == row.result.verdict:
            continue
        guard = " (guard)" if row.guard else ""
        lines.append(f"  {row.title}{guard}: A/B {_interval(other)}, readout {_interval(row)}")
        a, r = _width(other), _width(row)
        if a is not None and r is not None:
            wider["A/B" if a > r else "readout"] += 1
    pairs = max(x.result.n_steps for x in ab_rows.values())
    steps = max(x.result.n_used for x in readout.metrics)
    why = []
    if wider["A/B"]:
        why.append(
            f"the A/B's intervals are the wider: it times every request at the client, in wall "
            f"time, over {pairs} paired blocks, and on a busy machine the simulated engines fall "
            "behind their clock by different amounts from block to block"
        )
    if wider["readout"] or not why:
        why.append(
            f"the readout's intervals are the wider: it reads the engines' histograms over "
            f"{steps} paired steps, and a quantile of a few requests is read off the buckets "
            "(SGLang's TTFT buckets: ... 4, 6, 8, 10, 20, 40 s), so a request crossing an edge "
            "moves a step's value by a whole bucket"
        )
    lines.append("  why they can differ: " + "; ".join(why))
    return lines
