"""Act 2, the ingestion incident: a real proxy in front of the two engines, 1.4 MB prompts.

The field report: SGLang's tokenizer manager tokenized on the asyncio loop that also answers
``/health``, so a burst of >= 1.4 MB prompts made both replicas miss the proxy's probes; the
proxy marked them unhealthy and failed requests while the GPUs were busy. The fix,
``--enable-dynamic-batch-tokenizer``, encodes on a background thread.

Here the proxy is the real ``sglang-router`` (its own health checker: interval, time-out and
failure threshold) in front of two ``tierctl sim serve`` engines that tokenize with a real
``tokenizers`` tokenizer -- on the loop, or on one thread with the flag. The same burst and the
same short-request traffic go through the router twice, without and with the flag, and the
router's own counters and its view of the workers are shown side by side.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from tierctl.demo.context import DemoContext
from tierctl.demo.tier import sized
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec import load_spec, resolve_tier

FLAG = "enable-dynamic-batch-tokenizer"
#: The field report's prompt size.
PROMPT_BYTES = 1_400_000
#: The bundled word prompts run about this many characters per token.
CHARS_PER_TOKEN = 4
#: The field report's burst, and the least the demo sends.
BURST = 6
#: The most it sends (a slow machine needs no more than the field's count; a fast one more).
MAX_BURST = 24
# Scaled for a demo: the design's proxy probes every few seconds with a 3 s time-out and
# marks a backend unhealthy after 3 misses; here 1 s, 1 s and 2, so the incident shows in
# seconds rather than minutes (the mechanism is the same: the probe waits on the loop).
# Back to healthy after 2 answers in a row, the router's own default: with 1, a probe answered
# in the instant between two prompts' tokenization marked a still-blocked replica healthy, so
# on a loaded machine the two replicas were rarely unhealthy at once and the router failed no
# request (a full-suite run: 7 failed probes, 0 of 153 requests failed).
HEALTH: dict[str, int] = {
    "interval_s": 1,
    "timeout_s": 1,
    "failure_threshold": 2,
    "success_threshold": 2,
}
#: The simulated engines' speed for this act: prefill is not the story, tokenization is.
TIME_SCALE = 50.0
#: How long each replica's loop should stay blocked by the burst: four probe windows
#: (interval x misses), so the incident shows on a fast machine as on a slow one.
BLOCKED_S = 4 * HEALTH["interval_s"] * HEALTH["failure_threshold"]


def tokenize_seconds() -> float:
    """This machine's time to tokenize one field-sized prompt with the engines' tokenizer."""
    from tierctl.bench.prompts import WordPrompts
    from tierctl.sim.tokenizer import encode_prompt

    text = WordPrompts(seed=3).prompt(PROMPT_BYTES // CHARS_PER_TOKEN, salt=0)
    t0 = time.perf_counter()
    encode_prompt(text)
    return time.perf_counter() - t0


def burst_size(seconds_per_prompt: float) -> int:
    """Prompts in the burst: enough that each of the two replicas tokenizes for
    :data:`BLOCKED_S` (the field's 6 at least, :data:`MAX_BURST` at most). On a loaded machine
    6 block the loops for long; on a quiet fast one 6 went by between two probes."""
    need = math.ceil(2 * BLOCKED_S / max(seconds_per_prompt, 1e-3))
    return max(BURST, min(need, MAX_BURST))


@dataclass
class ArmResult:
    """One pass of the incident: what the router and the client saw."""

    label: str
    flips: int = 0  # healthy -> unhealthy transitions seen by polling the router
    unhealthy_s: float = 0.0  # time with no healthy worker
    router: dict[str, float] = field(default_factory=dict)
    client_sent: int = 0
    client_failed: int = 0
    client_statuses: dict[str, int] = field(default_factory=dict)
    burst_completed: int = 0
    log_lines: list[str] = field(default_factory=list)


def _doc(ctx: DemoContext, ports: dict[str, int], *, with_flag: bool) -> dict[str, Any]:
    doc, _ = sized(ctx.demo.doc, ctx.demo, ports)
    args = doc["engine"].setdefault("args", {})
    # The incident is about tokenization alone: every replica gets the same scheduler flags.
    for name in doc["replicas"]:
        for c in ctx.demo.change:
            (doc["replicas"][name].get("args") or {}).pop(c.flag, None)
    overlays = doc["engine"].get("overlays") or {}
    for overlay in overlays.values():
        overlay.pop(FLAG, None)
    args.pop(FLAG, None)
    if with_flag:
        args[FLAG] = True
    return doc


def _poll(router: Any, stop: threading.Event, result: ArmResult) -> None:
    """Watch the router's view of its workers every 0.25 s."""
    last: dict[str, bool] = {}
    none_since: float | None = None
    while not stop.is_set():
        try:
            health = router.client.health_of()
        except Exception:  # the router is busy or restarting: try again
            health = {}
        now = time.monotonic()
        for url, ok in health.items():
            if last.get(url, True) and not ok:
                result.flips += 1
            last[url] = ok
        if health and not any(health.values()):
            none_since = none_since or now
        elif none_since is not None:
            result.unhealthy_s += now - none_since
            none_since = None
        stop.wait(0.25)
    if none_since is not None:
        result.unhealthy_s += time.monotonic() - none_since


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "2026-12-01 08:32:07  WARN smg::core::worker: /path/worker.rs:948: HTTP health check ..."
_LOG_LINE = re.compile(r"^(\S+ \S+)\s+(\w+) \S+: \S+:\d+: (.*)$")


def _health_lines(log: str, keep: int = 3) -> list[str]:
    """The router's own log lines about worker health: the first few, then a count."""
    found = []
    for raw in log.splitlines():
        line = _ANSI.sub("", raw)
        low = line.lower()
        if "health check failed" in low or "unhealthy" in low:
            m = _LOG_LINE.match(line)
            found.append(f"{m.group(1)} {m.group(2)} {m.group(3)}" if m else line)
    shown = [line[:150] for line in found[:keep]]
    if len(found) > keep:
        shown.append(f"... {len(found) - keep} more such lines")
    return shown


def _workload(burst: int) -> Any:
    from tierctl.bench import workload_from_dict

    return workload_from_dict(
        {
            "name": "ingestion-burst",
            "seed": 3,
            "api": "completions",
            "timeout_s": 90,
            "max_duration_s": 120,
            "lanes": [
                {
                    "kind": "burst",
                    "name": "large",
                    "count": burst,
                    "input_tokens": PROMPT_BYTES // CHARS_PER_TOKEN,
                    "output_tokens": 2,
                    "at_s": 1.0,
                },
                {
                    "kind": "hammer",
                    "name": "chat",
                    "rate_rps": 4,
                    "arrival": "constant",
                    "count": 80,
                    "duration_s": 20,
                    "input_tokens": 64,
                    "output_tokens": 8,
                },
            ],
            "probe": {"enabled": False},
        },
        source="demo:ingestion",
    )


def _one_arm(ctx: DemoContext, *, with_flag: bool, burst: int) -> ArmResult:
    from tierctl.bench import bench_run
    from tierctl.proxies.sglang_router import HealthChecks, RouterSettings, SglangRouter
    from tierctl.rollout import LocalDriver, load_sides, plan_files
    from tierctl.runtime.process import free_port

    label = "dyntok" if with_flag else "on-loop"
    result = ArmResult(label)
    tier_names = list(resolve_tier(load_spec(ctx.spec_path)).replicas)[:2]
    ports = {name: free_port() for name in tier_names}
    doc = _doc(ctx, ports, with_flag=with_flag)
    spec_file = ctx.workdir / f"ingestion-{label}.tier.yaml"
    spec_file.write_text(dump_yaml(doc))
    compose = ctx.workdir / f"ingestion-{label}.compose.yaml"
    compose.write_text(render_compose(load_spec(spec_file), spec_path=spec_file))
    _, side = load_sides(plan_files(str(compose), str(compose)))
    tier = resolve_tier(load_spec(spec_file))
    services = [tier.replicas[n].service for n in tier_names]
    launcher = [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", str(TIME_SCALE),
                *ctx.sim_serve_options()]  # fmt: skip
    driver = LocalDriver(ctx.workdir / f"ingestion-{label}", launcher=[*launcher, "--"])
    try:
        driver.apply(side, services)
        urls = tuple(driver.endpoint(side, s) for s in services)
        settings = RouterSettings(
            worker_urls=urls,
            health=HealthChecks(
                interval_s=HEALTH["interval_s"],
                timeout_s=HEALTH["timeout_s"],
                failure_threshold=HEALTH["failure_threshold"],
                success_threshold=HEALTH["success_threshold"],
            ),
            log_level="info",
        )
        with SglangRouter(settings, ctx.workdir / f"router-{label}.log") as router:
            router.start(ready_timeout_s=60)
            before = router.client.counters()
            stop = threading.Event()
            watcher = threading.Thread(target=_poll, args=(router, stop, result), daemon=True)
            watcher.start()
            try:
                outcome = asyncio.run(bench_run(router.url, _workload(burst), plots=False))
            finally:
                stop.set()
                watcher.join(timeout=10)
            counters = router.client.counters().minus(before)
            result.router = {
                "responses 2xx": sum(v for k, v in counters.responses.items() if k.startswith("2")),
                "responses 5xx": counters.errors(),
                "health checks failed": counters.health_checks.get("failure", 0.0),
                "health checks ok": counters.health_checks.get("success", 0.0),
            }
            result.log_lines = _health_lines(router.process.log.read_text(errors="replace"))
        rec = outcome.record
        result.client_sent = rec.sent
        result.client_failed = rec.count("failed") + rec.count("timed_out")
        for r in rec.requests:
            if r.outcome != "completed":
                key = str(r.http_status or r.error_class)
                result.client_statuses[key] = result.client_statuses.get(key, 0) + 1
        result.burst_completed = sum(
            1 for r in rec.requests if r.lane == "large" and r.outcome == "completed"
        )
    finally:
        driver.down_all()
    return result


def stage_ingestion(ctx: DemoContext) -> bool:
    """Both passes of the incident, then the router's figures side by side."""
    from tierctl.realengine.env import router_binary

    console = ctx.console
    if ctx.demo.engine != "sglang":
        console.print(
            f"skipped: the ingestion incident is SGLang's tokenizer manager; {ctx.spec_path.name} "
            f"runs {ctx.demo.engine}"
        )
        return True
    if router_binary() is None:
        console.print(
            "[yellow]skipped: sglang-router is not installed (pip install sglang-router, or "
            "scripts/ensure-vllm); this act needs the real proxy[/]"
        )
        return True
    per_prompt = tokenize_seconds()
    burst = burst_size(per_prompt)
    ctx.facts["ingestion_burst"] = burst
    console.print(
        f"sglang-router in front of two sim serve engines; probes every {HEALTH['interval_s']} s, "
        f"{HEALTH['timeout_s']} s time-out, unhealthy after {HEALTH['failure_threshold']} misses "
        f"(scaled from the field's few seconds / 3 s / 3), healthy again after "
        f"{HEALTH['success_threshold']} answers. Load: {burst} prompts of "
        f"{PROMPT_BYTES / 1e6:.1f} MB at once, and short requests at 4/s beside them "
        f"(one such prompt tokenizes in {per_prompt:.2f} s here: {burst} block each replica's "
        f"loop for about {burst / 2 * per_prompt:.0f} s, four probe windows or more)."
    )
    arms: list[ArmResult] = []
    for with_flag in (False, True):
        label = f"--{FLAG}" if with_flag else "tokenizer on the event loop"
        console.print(f"  pass {len(arms) + 1}: {label} ...")
        arms.append(_one_arm(ctx, with_flag=with_flag, burst=burst))
    table = Table(title="the router's own view, same load both passes")
    table.add_column("")
    for a in arms:
        table.add_column("on the loop" if a.label == "on-loop" else f"--{FLAG}", justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("workers marked unhealthy (flips)", [str(a.flips) for a in arms]),
        ("seconds with no healthy worker", [f"{a.unhealthy_s:.1f}" for a in arms]),
    ]
    for key in arms[0].router:
        rows.append((f"router: {key}", [f"{a.router.get(key, 0):.0f}" for a in arms]))
    rows.append(
        ("client: requests failed", [f"{a.client_failed} of {a.client_sent}" for a in arms])
    )
    rows.append(
        (
            "client: failures by status",
            [
                ", ".join(f"{k}: {v}" for k, v in sorted(a.client_statuses.items())) or "-"
                for a in arms
            ],
        )
    )
    rows.append(("1.4 MB prompts answered", [f"{a.burst_completed} of {burst}" for a in arms]))
    for name, cells in rows:
        table.add_row(name, *cells)
    console.print(table)
    for a in arms:
        if a.log_lines:
            console.print(f"  router log ({a.label}):")
            for line in a.log_lines:
                console.print(f"    [dim]{line[:160]}[/]")
    ctx.facts["ingestion"] = {a.label: a for a in arms}
    on_loop, dyntok = arms
    console.print(
        f"verdict: on the loop {on_loop.flips} unhealthy flip(s) and {on_loop.client_failed} "
        f"failed request(s); with the flag {dyntok.flips} and {dyntok.client_failed}"
    )
    return True
