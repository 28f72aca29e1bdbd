"""Render a generated fleet of 100 hosts x 8 replicas; print seconds and peak memory.

Goal (issue #2): under 1 s for the whole fleet. Two phases are timed separately: loading
(YAML parse + pydantic + cross-field checks) and rendering (resolve + compose text). As a
reference, the same compose documents are also dumped with PyYAML's C dumper (when available),
which gives no determinism guarantees across versions; the ratio shows what the deterministic
emitter costs.

Run: PYTHONPATH=src python benchmarks/render_scale.py [--hosts 100] [--replicas 8]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from fleet import fleet_spec_texts

from tierctl.render import compose_document, render_compose
from tierctl.spec import load_spec_text, resolve_tier


def main() -> None:
    """Time loading and rendering of the fleet; print figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=8)
    args = parser.parse_args()
    texts = fleet_spec_texts(args.hosts, args.replicas)

    # Best of three timed passes (the machine may be shared), then one pass under tracemalloc
    # for peak memory (tracemalloc slows Python several-fold, so it is not timed).
    best_load = best_render = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        specs = [load_spec_text(text, name) for name, text in texts]
        t1 = time.perf_counter()
        outputs = [render_compose(spec) for spec in specs]
        t2 = time.perf_counter()
        best_load, best_render = min(best_load, t1 - t0), min(best_render, t2 - t1)
    tracemalloc.start()
    kept = [render_compose(load_spec_text(text, name)) for name, text in texts]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    docs = [compose_document(resolve_tier(spec)) for spec in specs]
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    t3 = time.perf_counter()
    for doc in docs:
        yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False)
    t4 = time.perf_counter()
    t5 = time.perf_counter()
    for doc in docs:
        from tierctl.render.yaml_emit import dump_yaml

        dump_yaml(doc)
    t6 = time.perf_counter()

    services = sum(text.count("\n  ") for text in outputs)  # rough size indicator
    print(
        f"fleet: {args.hosts} hosts x {args.replicas} replicas = {args.hosts * args.replicas} engines"
    )
    print(f"load specs:   {best_load:.3f} s")
    print(f"render:       {best_render:.3f} s")
    print(f"total:        {best_load + best_render:.3f} s  (goal < 1 s)")
    print(f"peak traced memory (all {len(kept)} outputs kept): {peak / 2**20:.1f} MiB")
    print(f"process max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(
        f"output: {sum(len(o) for o in outputs) / 2**20:.1f} MiB of compose YAML ({services} indented lines)"
    )
    print(
        f"emitter only: tierctl {t6 - t5:.3f} s vs PyYAML {dumper.__name__} {t4 - t3:.3f} s "
        f"(ratio {(t6 - t5) / (t4 - t3):.2f}x)"
    )


if __name__ == "__main__":
    main()
