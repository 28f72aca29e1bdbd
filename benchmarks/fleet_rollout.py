"""Fleet rollout overhead: planning N hosts, and running their waves against agents that answer
at a set latency (no engines: each host's step is its three agent calls, slept).

    python benchmarks/fleet_rollout.py [--latency-ms 20] [--hosts 100 1000]

Prints, per fleet size: the time to plan every host (each host's own plan of the example
tier's ingestion change, as `tierctl plan` makes it), the time to run the waves, the floor a
perfect runner would take (each wave as long as its slowest host, ``max_parallel`` at a time),
and the overhead per host above that floor.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tierctl.render import render_compose  # noqa: E402
from tierctl.rollout.executor import RolloutResult  # noqa: E402
from tierctl.rollout.fleet import (  # noqa: E402
    Fleet,
    FleetFile,
    FleetHost,
    FleetPlan,
    FleetWaves,
    plan_waves,
    run_fleet,
)
from tierctl.rollout.plan_schema import Plan  # noqa: E402
from tierctl.rollout.planner import plan_files  # noqa: E402
from tierctl.spec import load_spec  # noqa: E402

SPEC = ROOT / "examples" / "glm53-long-context" / "tier.yaml"
CALLS_PER_STEP = 3  # dry run, scoped down, up


def _files(tmp: Path) -> tuple[Path, Path]:
    doc = yaml.safe_load(SPEC.read_text())
    out = []
    for name, ingestion in (("old", False), ("new", True)):
        d = dict(doc)
        if not ingestion:
            d["engine"] = {k: v for k, v in doc["engine"].items() if k != "overlays"}
        spec = tmp / f"{name}.tier.yaml"
        spec.write_text(yaml.safe_dump(d, sort_keys=False))
        path = tmp / f"{name}.yaml"
        path.write_text(render_compose(load_spec(spec), spec_path=spec))
        out.append(path)
    return out[0], out[1]


def measure(hosts: int, latency_s: float, tmp: Path) -> dict[str, float]:
    """One fleet size: planning and orchestration times."""
    old, new = _files(tmp)
    names = [f"gpu{i:04d}" for i in range(hosts)]
    spec = FleetFile(
        fleet="bench", old="v1", new="v2",
        hosts=[FleetHost(name=n, file=f"{n}/tier.yaml", agent_url=f"http://{n}:8765",
                         labels={"role": "canary"} if i == 0 else {})
               for i, n in enumerate(names)],
        waves=FleetWaves(size="10%", max_parallel=max(1, hosts // 20)),
    )  # fmt: skip
    started = time.perf_counter()
    plans = {n: plan_files(str(old), str(new)) for n in names}
    planning = time.perf_counter() - started
    fleet = Fleet(spec=spec, path=tmp / "fleet.yaml", repo=tmp)
    plan = FleetPlan(fleet, plan_waves(spec.hosts, spec.waves), plans)

    def run_host(host: FleetHost, host_plan: Plan, resume: bool) -> RolloutResult:
        time.sleep(latency_s * CALLS_PER_STEP * len(host_plan.steps))
        return RolloutResult(outcomes=(), journal=None)

    started = time.perf_counter()
    run_fleet(plan, tmp / f"journal-{hosts}.jsonl", run_host)
    running = time.perf_counter() - started
    steps = len(next(iter(plans.values())).steps)
    per_host = latency_s * CALLS_PER_STEP * steps
    cap = spec.waves.max_parallel
    floor = sum(math.ceil(len(w) / cap) * per_host for w in plan.waves)
    return {
        "hosts": hosts,
        "waves": len(plan.waves),
        "max_parallel": cap,
        "plan_s": planning,
        "run_s": running,
        "floor_s": floor,
        "overhead_ms_per_host": (running - floor) / hosts * 1000,
    }


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--hosts", type=int, nargs="+", default=[100, 1000])
    args = parser.parse_args()
    print(f"agent latency {args.latency_ms:g} ms per call, {CALLS_PER_STEP} calls per step")
    print(f"{'hosts':>6} {'waves':>6} {'cap':>4} {'plan s':>8} {'run s':>8} {'floor s':>8} "
          f"{'overhead ms/host':>17}")  # fmt: skip
    for hosts in args.hosts:
        with tempfile.TemporaryDirectory() as tmp:
            r = measure(hosts, args.latency_ms / 1000, Path(tmp))
        print(
            f"{r['hosts']:>6} {r['waves']:>6} {r['max_parallel']:>4} {r['plan_s']:>8.2f} "
            f"{r['run_s']:>8.2f} {r['floor_s']:>8.2f} {r['overhead_ms_per_host']:>17.2f}"
        )


if __name__ == "__main__":
    main()
