"""The ingestion story on the real SGLang 0.5.23 (CPU) through the real sglang-router.

Run: PYTHONPATH=src .venv/bin/python benchmarks/sglang_ingestion.py [--clients N]
     [--requests-per-client K] [--prompt-bytes B] [--out results.json]

For each arm -- ``off`` (SGLang's default: the tokenizer manager tokenizes each prompt on its
event loop) and ``on`` (``--enable-dynamic-batch-tokenizer``: a one-thread executor does it) --
one engine is started on a free loopback port (``--enable-metrics --allow-auto-truncate``: a
1.4 MB prompt is ~434,000 tokens of the tiny model's tokenizer, truncated to its 4,096-token
context after tokenization, so every request can succeed), with ``sglang-router`` in front of it
probing ``/health`` every 2 s with a 3 s time-out and 3 misses to mark it unhealthy (the
tiny-vllm tier's settings). Then, at the same time:

- N clients each send K ``/generate`` requests through the router, one after another, each a
  distinct ``--prompt-bytes`` prompt (default 1,400,000 bytes), ``max_new_tokens`` 1;
- a prober GETs the engine's ``/health`` directly every second with a 3 s time-out (the
  router's probe, watched from outside): its latency, and the probes it missed;
- a watcher reads the router's ``/workers`` every 0.5 s: each healthy -> unhealthy change is a
  health flip.

Everything is bounded: K requests per client, each with a 120 s time-out, and the arm's wall
time is capped (``--arm-timeout-s``). One engine at a time; each is stopped (its process group)
before the next starts. Prints one line per arm and writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from tierctl.proxies.sglang_router import HealthChecks, RouterSettings, SglangRouter
from tierctl.realengine import env as realenv
from tierctl.realengine import sglang as realsglang

WORDS = ("replica", "token", "prefill", "decode", "router", "health", "canary", "batch", "queue")


@dataclass
class Arm:
    """One arm's figures."""

    name: str
    flags: list[str]
    requests: int = 0
    ok: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    request_s_p50: float = 0.0
    probes: int = 0
    probe_misses: int = 0
    health_p50_s: float = 0.0
    health_p99_s: float = 0.0
    health_max_s: float = 0.0
    router_flips: int = 0
    router_unhealthy_s: float = 0.0
    wall_s: float = 0.0


def prompt(i: int, size: int) -> str:
    """A distinct prompt of ``size`` bytes (ASCII words from a fixed seed, numbered first)."""
    rnd = random.Random(1000 + i)
    parts = [f"request {i}:"]
    n = len(parts[0])
    while n < size:
        word = f"{rnd.choice(WORDS)}{rnd.randint(0, 999)}"
        parts.append(word)
        n += len(word) + 1
    return " ".join(parts)[:size]


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_arm(
    name: str,
    flags: list[str],
    *,
    python: Path,
    model: Path,
    workdir: Path,
    clients: int,
    per_client: int,
    prompt_bytes: int,
    arm_timeout_s: float,
) -> Arm:
    """Start one engine and its router, drive the load, probe, stop both; the figures."""
    arm = Arm(name, flags)
    base = ["--enable-metrics", "--allow-auto-truncate", *flags]
    engine = realsglang.SglangEngine(
        workdir / f"sglang-{name}.log", flags=base, python=python, model=model, name=name
    )
    router_bin = realenv.router_binary(python)
    settings = RouterSettings(
        worker_urls=(engine.url,),
        health=HealthChecks(interval_s=2, timeout_s=3, failure_threshold=3),
    )
    bodies = [prompt(i, prompt_bytes) for i in range(clients * per_client)]
    with engine, SglangRouter(settings, workdir / f"router-{name}.log", binary=router_bin) as rt:
        engine.start()
        engine.wait_ready(600)
        rt.start(ready_timeout_s=120)
        stop = threading.Event()
        lock = threading.Lock()
        latencies: list[float] = []
        health: list[float] = []
        states: list[tuple[float, bool]] = []

        def client(c: int) -> None:
            with httpx.Client(base_url=rt.url, timeout=120) as http:
                for k in range(per_client):
                    if stop.is_set():
                        return
                    body = {
                        "text": bodies[c * per_client + k],
                        "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
                    }
                    t0 = time.monotonic()
                    try:
                        resp = http.post("/generate", json=body)
                        why = None if resp.status_code == 200 else f"HTTP {resp.status_code}"
                    except httpx.HTTPError as exc:
                        why = type(exc).__name__
                    with lock:
                        arm.requests += 1
                        if why is None:
                            arm.ok += 1
                            latencies.append(time.monotonic() - t0)
                        else:
                            arm.failed += 1
                            arm.failures[why] = arm.failures.get(why, 0) + 1

        def prober() -> None:
            with httpx.Client(timeout=3) as http:
                while not stop.is_set():
                    t0 = time.monotonic()
                    try:
                        ok = http.get(engine.url + "/health").status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    took = time.monotonic() - t0
                    with lock:
                        arm.probes += 1
                        health.append(took)
                        if not ok:
                            arm.probe_misses += 1
                    stop.wait(max(0.0, 1.0 - took))

        def watcher() -> None:
            while not stop.is_set():
                try:
                    healthy = all(w.healthy for w in rt.client.workers())
                except (httpx.HTTPError, ValueError):
                    healthy = False
                states.append((time.monotonic(), healthy))
                stop.wait(0.5)

        started = time.monotonic()
        side = [threading.Thread(target=f, daemon=True) for f in (prober, watcher)]
        load = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
        for t in (*side, *load):
            t.start()
        deadline = started + arm_timeout_s
        for t in load:
            t.join(max(0.0, deadline - time.monotonic()))
        stop.set()
        for t in side:
            t.join(10)
        arm.wall_s = round(time.monotonic() - started, 1)
    arm.request_s_p50 = round(statistics.median(latencies), 3) if latencies else 0.0
    arm.health_p50_s = round(_pct(health, 0.5), 3)
    arm.health_p99_s = round(_pct(health, 0.99), 3)
    arm.health_max_s = round(max(health, default=0.0), 3)
    previous = True
    for i, (at, healthy) in enumerate(states):
        if previous and not healthy:
            arm.router_flips += 1
        if not healthy and i + 1 < len(states):
            arm.router_unhealthy_s += states[i + 1][0] - at
        previous = healthy
    arm.router_unhealthy_s = round(arm.router_unhealthy_s, 1)
    return arm


def main() -> None:
    """Both arms, one after the other; one line each, and the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests-per-client", type=int, default=3)
    parser.add_argument("--prompt-bytes", type=int, default=1_400_000)
    parser.add_argument("--arm-timeout-s", type=float, default=300.0)
    parser.add_argument("--arms", default="off,on", help="off, on, or both (off,on)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    python = realsglang.sglang_python()
    if python is None:
        sys.exit(f"SGLang is not installed at {realsglang.venv_dir()}: run scripts/ensure-sglang")
    model = realenv.tiny_model(python)
    arms = {"off": [], "on": ["--enable-dynamic-batch-tokenizer"]}
    results = []
    with tempfile.TemporaryDirectory(prefix="sglang-ingestion-") as tmp:
        for name in args.arms.split(","):
            arm = run_arm(
                name,
                arms[name],
                python=python,
                model=model,
                workdir=Path(tmp),
                clients=args.clients,
                per_client=args.requests_per_client,
                prompt_bytes=args.prompt_bytes,
                arm_timeout_s=args.arm_timeout_s,
            )
            results.append(asdict(arm))
            print(
                f"{name:>3}: {arm.ok}/{arm.requests} ok ({arm.failed} failed {arm.failures}), "
                f"request p50 {arm.request_s_p50} s; /health p50 {arm.health_p50_s} s, "
                f"p99 {arm.health_p99_s} s, max {arm.health_max_s} s, "
                f"{arm.probe_misses}/{arm.probes} probes missed (3 s); router: "
                f"{arm.router_flips} flips, {arm.router_unhealthy_s} s unhealthy; "
                f"{arm.wall_s} s",
                flush=True,
            )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
