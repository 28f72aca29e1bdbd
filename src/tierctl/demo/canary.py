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
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from tierctl.demo.context import DemoContext
from tierctl.demo.tier import old_doc, sized
from tierctl.engines import PROFILES
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.rollout.deployment import Deployment
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.spec import load_spec, load_spec_text, resolve_tier

# Modelled GPU seconds per wall second for the simulated engines: long-context prefill
# chunks of the GLM preset take ~0.5-1 s modelled, so the act fits in about four minutes.
TIME_SCALE = 10.0
#: The live phase: nine readout steps of 15 s (the readout needs six usable), each with one
#: burst like the A/B's and room for it to finish on both replicas at once.
LIVE_S = 135.0
LIVE_STEP_S = 15.0

# The field report's scheduler canary in miniature, one "step" of traffic: long prompts at
# once, so the first to finish prefilling decode while the others still prefill chunk by chunk.
# At interval 1 each of those decode rounds waits behind a prefill chunk; at 2 two decode
# rounds run per chunk. The A/B runs one step per block, the live phase one step per readout
# step, so both measure the same effect (deterministic: the scheduler decides the overlap).
BURST_COUNT = 4
BURST_TOKENS = 40_000
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
    from tierctl.readout.local_prom import LocalPrometheus, prometheus_binaries

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
    from tierctl.readout.local_prom import free_port
    from tierctl.rollout import GateSettings, RolloutOptions, load_sides, plan_files, run_rollout
    from tierctl.rollout.spec_roles import options_from_spec

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
        )
        for outcome in result.outcomes:
            console.print(f"  {outcome.step}: {outcome.status}")
        urls = {
            control: driver.endpoint(new_side, r_control),
            canary: driver.endpoint(new_side, r_canary),
        }
        ab_ok = _ab(ctx, urls, control, canary)
        window = _live_traffic(ctx, urls)
        ok = _readout(ctx, prom.url, tier, window) and ab_ok if prom is not None else ab_ok
    console.print(f"artifacts (plan journal, A/B report and plots, logs): {ctx.workdir}")
    return ok


def _ab(ctx: DemoContext, urls: dict[str, str], control: str, canary: str) -> bool:
    from tierctl.bench import bench_ab
    from tierctl.bench.report import ab_table
    from tierctl.cli.progress import BenchBars

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
    ctx.facts["ab_verdict"] = ab_verdict(ratios)
    ctx.console.print(
        f"the A/B's verdict under the readout's rule (guards TTFT p50/p95 and E2E p50 may not "
        f"be worse by more than {TOLERANCE:.0%}): {ctx.facts['ab_verdict'].upper()}"
    )
    return not outcome.result.interrupted


#: Relative change the demo treats as no change, in the A/B's verdict and in the readout.
TOLERANCE = 0.15
_GUARDS = ("ttft_p50_s", "ttft_p95_s", "e2e_p50_s")


def ab_verdict(ratios: dict[str, Any]) -> str:
    """The readout's rule applied to A/B ratios: a guard worse (its whole interval above
    1 + tolerance) fails; otherwise a better TPOT (interval below 1 - tolerance) passes."""
    for key in _GUARDS:
        r = ratios.get(key)
        if r is not None and r.ci_low is not None and r.ci_low > 1 + TOLERANCE:
            return "fail"
    tpot = ratios.get("tpot_p50_s")
    if tpot is not None and tpot.ci_high is not None and tpot.ci_high < 1 - TOLERANCE:
        return "pass"
    return "inconclusive"


def _live_traffic(ctx: DemoContext, urls: dict[str, str]) -> tuple[float, float]:
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
    time.sleep(2.5)  # let the last scrape land
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
    ab = ctx.facts.get("ab_verdict", "-")
    same = "the same verdict" if ab == result.verdict else "a DIFFERENT verdict"
    ctx.console.print(f"A/B: {ab.upper()}; live readout: {result.verdict.upper()} ({same})")
    return True
