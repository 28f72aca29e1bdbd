"""The demo story: every lifecycle step on the bundled example, with simulated engines.

declare + render -> validate (and one drift caught) -> simulate the change offline -> roll the
canary out with the local driver over ``tierctl sim serve`` engines, gated -> paired A/B
between control and canary -> live traffic on both while a real Prometheus scrapes them with
the rendered scrape config -> read out canary vs control. Each stage uses the same library
functions as the commands. Servers listen on free loopback ports and are always stopped;
every load is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from tierctl.render import output_path, render_compose
from tierctl.render.files import check_rendered
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec, load_spec_text, resolve_tier
from tierctl.spec.loader import parse_yaml
from tierctl.spec.summary import summarise


def _examples_dir() -> Path:
    """The checkout's examples/ (editable installs), else the copy inside the wheel."""
    here = Path(__file__).resolve().parent
    checkout = here.parents[1] / "examples"
    return checkout if checkout.is_dir() else here / "_examples"


EXAMPLES = _examples_dir()
DEFAULT_SPEC = EXAMPLES / "glm53-long-context" / "tier.yaml"
# Modelled GPU seconds per wall second for the simulated engines: long-context prefill
# chunks of the GLM preset take ~0.5-1 s modelled, so the story fits in about a minute.
TIME_SCALE = 5.0
# The live phase: long enough for six 10-second readout steps with ~50 requests each.
LIVE_S = 60.0
LIVE_STEP_S = 10.0


@dataclass
class DemoContext:
    """What the stages share: the spec, a work directory, and what the live stage started."""

    spec_path: Path
    console: Console
    workdir: Path
    facts: dict[str, Any] = field(default_factory=dict)


Stage = Callable[[DemoContext], bool]


def stage_render(ctx: DemoContext) -> bool:
    """Declare and render: load the spec, render it, compare with the committed file."""
    spec = load_spec(ctx.spec_path)
    text = render_compose(spec, spec_path=ctx.spec_path)
    target = output_path(spec, ctx.spec_path)
    check = check_rendered(text, target)
    ctx.console.print(
        f"rendered {len(text.splitlines())} lines of compose for {len(spec.replicas)} replicas; "
        f"{target.name} is {'up to date' if check.fresh else 'STALE'}"
    )
    summary = summarise(resolve_tier(spec))
    for r in summary.replicas:
        ctx.console.print(f"  {r.name:3} {r.role:8} GPUs {r.gpus:5} port {r.port}  {r.variant}")
    for d in summary.differences:
        ctx.console.print(f"  differs: {d.setting:28} " + "  ".join(d.values))
    for note in summary.notes:
        ctx.console.print(f"  note: {note}")
    return check.fresh


def stage_validate(ctx: DemoContext) -> bool:
    """Validate the rendered file, then show the drift a hand edit would introduce."""
    from tierctl.contracts import load_compose, validate

    spec = load_spec(ctx.spec_path)
    target = output_path(spec, ctx.spec_path)
    report = validate(spec, [load_compose(target)])
    ctx.console.print(f"{target.name}: {len(report.violations)} violations")
    # A hand edit: r1 takes the canary's interval (the first interval in the file is r1's).
    text = target.read_text()
    marker = '- --prefill-decode-interval\n      - "1"'
    drifted = text.replace(marker, marker[:-2] + '2"', 1)
    bad = validate(spec, [load_compose(drifted, source="hand-edited.yaml")])
    ctx.console.print("after giving r1 the canary's interval by hand:")
    for v in bad.violations[:4]:
        ctx.console.print(f"  {v.rule} {v.service}: {v.message}", overflow="ellipsis", no_wrap=True)
    return not report.violations and bool(bad.violations)


def stage_simulate(ctx: DemoContext) -> bool:
    """What-if offline: the field report's burst on r1's and r2's argv."""
    import random

    from tierctl.sim.config import EngineConfig
    from tierctl.sim.simulate import compare
    from tierctl.sim.workload import field_burst

    tier = resolve_tier(load_spec(ctx.spec_path))
    control = EngineConfig.from_argv(tier.replicas["r1"].argv)
    candidate = EngineConfig.from_argv(tier.replicas["r2"].argv)
    from tierctl.sim.result import ratio_table

    result = compare(control, candidate, field_burst(random.Random(0)))
    table = Table(
        title="8 x ~720K-token burst while 3 sequences decode (modelled GLM-5.3 TP4 H200)"
    )
    for col in ("requests", "metric", "r1 (pdi1)", "r2 (pdi2)", "r2/r1"):
        table.add_column(col)
    for group, prefix, wanted in (
        ("burst", "burst", ("TTFT p50", "TTFT p95", "completion")),
        ("decoders", "dec", ("TPOT p50", "TPOT p90")),
    ):
        rows = ratio_table(result.control.subset(prefix), result.candidate.subset(prefix))
        for row in rows:
            if row.metric in wanted:
                table.add_row(
                    group,
                    row.metric,
                    _fmt(row.control),
                    _fmt(row.candidate),
                    "-" if row.ratio is None else f"{row.ratio:.2f}",
                )
    ctx.console.print(table)
    ctx.console.print("(seconds; TPOT excludes the first token)")
    return True


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _tier_copy(spec_path: Path, ports: tuple[int, int], *, old: bool) -> dict[str, Any]:
    """The example on loopback ports; ``old`` is the tier before the canary change."""
    data, _ = parse_yaml(spec_path.read_text(), str(spec_path))
    doc: dict[str, Any] = copy.deepcopy(data)
    doc["engine"]["args"]["host"] = "127.0.0.1"
    for name, port in zip(("r1", "r2"), ports, strict=True):
        doc["replicas"][name]["args"]["port"] = port
    if old:
        doc["replicas"]["r2"]["args"].pop("prefill-decode-interval", None)
    # Sized for a 2-core machine: 4K chunks so a 60K-token prompt is 15 chunks (the real
    # tier's 16K chunks over 720K prompts give ~44), and no prefix cache, so that repeated A/B
    # blocks and the live phase's repeated prompts all prefill in full.
    doc["engine"]["args"]["chunked-prefill-size"] = 4096
    doc["engine"]["args"]["disable-radix-cache"] = True
    doc["rules"] = []  # the qsplit rule is about 16K chunks on real GPUs
    return doc


def _scrape_config(doc: dict[str, Any]) -> str:
    """A Prometheus config from the tier's rendered scrape jobs, scraping every second."""
    from tierctl.render.compose import scrape_document
    from tierctl.spec.model import ScrapeConfig

    tier = resolve_tier(load_spec_text(dump_yaml(doc), "demo.yaml"))
    scrape = ScrapeConfig(
        target="/etc/prometheus/prometheus.yml",
        address="127.0.0.1:{port}",
        interval_s=1,
        labels={"host_machine": "{host}"},
    )
    return dump_yaml({"global": {"scrape_interval": "1s"}, **scrape_document(tier, scrape)})


@contextmanager
def _maybe_prometheus(ctx: DemoContext, config: str) -> Iterator[Any]:
    from tierctl.readout.local_prom import LocalPrometheus, prometheus_binaries

    found = prometheus_binaries()
    if found is None:
        ctx.console.print("[yellow]prometheus is not installed: the readout stage is skipped[/]")
        yield None
        return
    with LocalPrometheus(ctx.workdir / "prometheus", config, binary=found[0]) as prom:
        yield prom


def stage_live(ctx: DemoContext) -> bool:
    """Roll r2 out to the canary argv, A/B r1 vs r2, drive both, read out from Prometheus."""
    from tierctl.readout.local_prom import free_port
    from tierctl.rollout import (
        GateSettings,
        LocalDriver,
        RolloutOptions,
        load_sides,
        plan_files,
        run_rollout,
    )
    from tierctl.rollout.spec_roles import options_from_spec

    console = ctx.console
    ports = (free_port(), free_port())
    files = {}
    for side in ("old", "new"):
        doc = _tier_copy(ctx.spec_path, ports, old=side == "old")
        spec_file = ctx.workdir / f"{side}.tier.yaml"
        spec_file.write_text(dump_yaml(doc))
        files[side] = ctx.workdir / f"{side}.compose.yaml"
        files[side].write_text(render_compose(load_spec(spec_file), spec_path=spec_file))
        ctx.facts[f"{side}_doc"] = doc
    plan = plan_files(
        str(files["old"]), str(files["new"]), options_from_spec(ctx.workdir / "new.tier.yaml")
    )
    console.print("plan OLD (r2 at pdi1) -> NEW (r2 at pdi2):")
    for step in plan.steps:
        console.print(f"  {step.id}  ({step.why}; gates: {', '.join(step.gates) or '-'})")
    console.print(f"  untouched: {', '.join(plan.untouched)}")
    old_side, new_side = load_sides(plan)
    driver = LocalDriver(ctx.workdir / "engines", time_scale=TIME_SCALE)
    tier = resolve_tier(load_spec(ctx.workdir / "new.tier.yaml"))
    r1, r2 = tier.replicas["r1"].service, tier.replicas["r2"].service
    with ExitStack() as stack:
        stack.callback(driver.down_all)
        console.print("starting OLD's two engines (tierctl sim serve) ...")
        driver.apply(old_side, [r1, r2])
        prom = stack.enter_context(_maybe_prometheus(ctx, _scrape_config(ctx.facts["old_doc"])))
        result = run_rollout(
            plan,
            driver,
            old_side,
            new_side,
            RolloutOptions(
                journal_path=ctx.workdir / "rollout.journal.jsonl",
                gates=GateSettings(health_timeout_s=60.0, soak_s=0.0),
            ),
            log=lambda line: console.print(f"  [dim]{line}[/]"),
        )
        for outcome in result.outcomes:
            console.print(f"  {outcome.step}: {outcome.status}")
        if prom is not None:
            # The local stand-in for recreating the collector: NEW's scrape labels take effect.
            prom.reload(_scrape_config(ctx.facts["new_doc"]))
            console.print("  collector: Prometheus reloaded with NEW's rendered scrape config")
        urls = {name: driver.endpoint(new_side, svc) for name, svc in (("r1", r1), ("r2", r2))}
        ok = _ab(ctx, urls)
        window = _live_traffic(ctx, urls)
        if prom is not None:
            ok = _readout(ctx, prom.url, tier, window) and ok
    console.print(f"artifacts (plan journal, A/B report and plots, logs): {ctx.workdir}")
    return ok


def _workload(name: str, lanes: list[dict[str, Any]], max_s: float) -> Any:
    from tierctl.bench import workload_from_dict

    return workload_from_dict(
        {
            "name": name,
            "seed": 1,
            "api": "completions",
            "timeout_s": 60,
            "max_duration_s": max_s,
            "lanes": lanes,
            "probe": {"path": "/health", "interval_s": 0.5, "timeout_s": 3.0},
        },
        source=f"demo:{name}",
    )


# The field report's scheduler canary in miniature: a burst of long prompts, so the first
# prompts to finish prefilling decode while the others are still prefilling chunk by chunk
# (deterministic: the scheduler, not tokenization timing, decides the overlap).
_DECODE_UNDER_PREFILL: list[dict[str, Any]] = [
    {
        "kind": "burst",
        "name": "burst",
        "count": 4,
        "input_tokens": 60000,
        "output_tokens": 24,
        "at_s": 0.0,
    },
]


def _ab(ctx: DemoContext, urls: dict[str, str]) -> bool:
    from tierctl.bench import bench_ab
    from tierctl.bench.report import ab_table

    ctx.console.print(
        "paired A/B, A = r1 (control), B = r2 (canary), blocks A-B-B-A: 4 prompts of 60K tokens "
        "at once; TPOT is that of the prompts decoding while the others prefill"
    )
    from tierctl.cli.progress import BenchBars

    with BenchBars(ctx.console) as bars:
        outcome = asyncio.run(
            bench_ab(
                urls["r1"],
                urls["r2"],
                _workload("decode-under-prefill", _DECODE_UNDER_PREFILL, 90),
                order="ABBA",
                out_dir=ctx.workdir / "ab",
                progress=bars,
            )
        )
        bars.blocks_done(len(outcome.result.blocks))
    ctx.console.print(ab_table(outcome.result, outcome.ratios))
    return not outcome.result.interrupted


def _live_traffic(ctx: DemoContext, urls: dict[str, str]) -> tuple[float, float]:
    """Both replicas serve the same mix at the same time, as behind the proxy."""
    from tierctl.bench import bench_run

    lanes: list[dict[str, Any]] = [
        {
            "kind": "hammer",
            "name": "chat",
            "rate_rps": 5,
            "arrival": "poisson",
            "count": int(5 * LIVE_S),
            "duration_s": LIVE_S,
            "input_tokens": 300,
            "output_tokens": 150,
        },
    ]
    lanes += [
        {
            "kind": "burst",
            "name": f"long{i}",
            "count": 2,
            "input_tokens": 100000,
            "output_tokens": 8,
            "at_s": at,
        }
        for i, at in enumerate((8.0, 28.0, 48.0))
    ]
    ctx.console.print(
        f"live traffic on both replicas for {LIVE_S:.0f} s: chat at 5/s and three bursts of "
        "long prompts (Prometheus scrapes every 1 s) ..."
    )
    start = time.time()
    errors: list[BaseException] = []

    def drive(name: str) -> None:
        try:
            asyncio.run(
                bench_run(urls[name], _workload(f"live-{name}", lanes, LIVE_S + 30), plots=False)
            )
        except BaseException as exc:  # reported below, never swallowed
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(n,)) for n in ("r1", "r2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=LIVE_S + 60)
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
            tolerance=0.1,
        )
    print_readout(result, ctx.console)
    return result.verdict != "fail"


STAGES: list[tuple[str, Stage, bool]] = [
    # (title, stage, needs servers)
    ("declare + render", stage_render, False),
    ("validate", stage_validate, False),
    ("simulate (offline what-if)", stage_simulate, False),
    ("roll out, A/B and read out (simulated engines, real Prometheus)", stage_live, True),
]


def run_demo(spec_path: Path, *, console: Console, quick: bool = False) -> bool:
    """Run every stage in order; returns False at the first failing stage."""
    missing = [m for m in ("aiohttp", "numpy", "tokenizers") if importlib.util.find_spec(m) is None]
    # Kept after the run: it holds the journal, the A/B report and plots, and the logs.
    ctx = DemoContext(spec_path, console, Path(tempfile.mkdtemp(prefix="tierctl-demo-")))
    for title, stage, needs_servers in STAGES:
        if quick and needs_servers:
            continue
        if needs_servers and missing:
            console.print(f"[yellow]{title}: skipped, install tierctl[all] ({missing})[/]")
            continue
        console.print(Rule(title))
        if not stage(ctx):
            console.print(f"[red]stage {title!r} failed[/red]")
            return False
    console.print(Rule("done"))
    return True
