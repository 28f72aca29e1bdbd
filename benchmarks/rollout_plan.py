"""How long `tierctl plan` takes: the bundled example's ingestion change, and a wide tier.

Prints the median wall time per plan over repeated runs (in-process, no subprocess start-up),
for the example (7 services) and a synthetic tier of 64 engine replicas with a collector.
No peer tool computes such a plan, and `docker compose config` (the closest, for the
normalisation half) is not installed here, so there is no ratio to a peer.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tierctl.render import render_compose  # noqa: E402
from tierctl.rollout.planner import plan_files  # noqa: E402
from tierctl.spec import load_spec  # noqa: E402

EXAMPLE = ROOT / "examples" / "glm53-long-context" / "tier.yaml"


def render(tmp: Path, name: str, replicas: int, ingestion: bool) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    if not ingestion:
        doc["engine"].pop("overlays")
    if replicas > 2:
        # A wide tier: one replica per GPU slot, ports and dist addresses kept distinct.
        doc["replicas"] = {
            f"r{i}": {
                "gpus": [i],
                "role": "canary" if i == 1 else "control",
                "args": {"port": 30000 + i, "dist-init-addr": f"127.0.0.1:{29500 + i}"},
            }
            for i in range(1, replicas + 1)
        }
    spec = tmp / f"{name}.tier.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp / f"{name}.yaml"
    out.write_text(render_compose(load_spec(spec), spec_path=spec))
    return out


def measure(old: Path, new: Path, runs: int) -> tuple[float, int]:
    times = []
    steps = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        plan = plan_files(str(old), str(new))
        times.append(time.perf_counter() - t0)
        steps = len(plan.steps)
    return statistics.median(times), steps


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for label, replicas, runs in (
            ("example (2 replicas)", 2, 50),
            ("wide (64 replicas)", 64, 10),
        ):
            old = render(tmp, f"old{replicas}", replicas, False)
            new = render(tmp, f"new{replicas}", replicas, True)
            median_s, steps = measure(old, new, runs)
            size_kb = (old.stat().st_size + new.stat().st_size) / 1024
            print(
                f"{label:<22} {steps:>3} steps  {size_kb:7.1f} KiB read  median {median_s * 1e3:7.2f} ms/plan  ({runs} runs)"
            )


if __name__ == "__main__":
    main()
