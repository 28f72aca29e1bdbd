"""Start-up cost of ``tierctl validate`` on one small compose file, beside the real Compose.

Goal (issue #39): ``tierctl validate --no-compose-binary FILE`` of a small compose file costs at
most what the real binary's ``docker compose config`` of the same file costs. Both are run as
fresh processes, ``--runs`` times each, interleaved (so a change in the machine's load hits
both alike), and the medians and the ratio printed, with the 1-minute load average beside
them (the machine is shared: prefer figures taken at a low load). ``tierctl --version`` is
timed too (it must not import the package's dependencies, nor ``importlib.metadata``).

``--importtime`` also prints the slowest imports of one ``validate`` run (``python -X
importtime``, by cumulative time), which is where the time goes.

The file is the bundled small example's rendered compose file (two SGLang replicas, a proxy,
Prometheus), copied to a scratch folder.

Both trees are timed with a bytecode cache (a private ``PYTHONPYCACHEPREFIX``, filled by one
run first), as an installed tierctl runs; ``--cold`` adds a row with tierctl's modules
compiled on every run (a copy of the tree without ``__pycache__``, under
``PYTHONDONTWRITEBYTECODE=1``). Figures taken before 2026-12-08 inherited the shell's
``PYTHONDONTWRITEBYTECODE=1`` over a partly cached tree, so they are not comparable with these.

Measured 2026-12-08 on the shared 2-core machine, medians, the two trees minutes apart:

- at load 0.7, 11 runs each: main at 0dbe1f2 ``validate`` 0.189 s wall (0.188 s CPU),
  ``--version`` 0.040 s, ``docker compose config`` 0.057 s: ratio 3.32 (CPU 3.15). Issue
  #39's start-up work (no pydantic on the path: the catalog types are dataclasses; no spec
  model, no spec contract; lazy package exports), before its last two deferrals (the
  Compose binary's module, importlib.resources): 0.117 s wall (0.116 s CPU), 0.042 s,
  0.059 s: ratio 1.99 (CPU 1.96).
- with all of it, at load 5-6, 15 runs each, main and this tree twice each, alternating, CPU
  medians (wall is mostly waiting for a core there): main 0.212 and 0.224 s against
  compose's 0.065 and 0.064 s (ratio 3.27 and 3.48); after, 0.121 and 0.117 s against
  0.063 and 0.065 s (ratio 1.90 and 1.81); ``--version`` 0.045 s in all four. With no
  bytecode cache: main 0.288 s both times, after 0.183 and 0.178 s.

The goal (at most the binary's time) is not met: ``--version`` alone (the interpreter, click,
``tierctl.errors``) is 0.04 s of the binary's 0.06 s, and the rest is PyYAML, jsonschema-rs,
tierctl's compose reader, profiles and checks (some 45 dataclasses built at import) and the
run itself (about 20 ms, a fifth of it reading the 531-flag catalog).

Run: python benchmarks/startup.py [--runs 15] [--cold] [--importtime] [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "small-model" / "compose.yaml"


def compose_binary() -> list[str] | None:
    """The real Compose v2: ``docker-compose`` beside this interpreter or on PATH, else the
    ``docker compose`` plugin."""
    beside = Path(sys.executable).with_name("docker-compose")
    for candidate in (str(beside), shutil.which("docker-compose")):
        if candidate and Path(candidate).is_file():
            return [candidate]
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    return None


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run, which must succeed. The CPU
    figure is the one to compare on a loaded machine: waiting for a core is not counted."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def slowest_imports(cwd: Path, env: dict[str, str], n: int = 25) -> list[tuple[int, int, str]]:
    """(cumulative us, self us, module) of one validate run's imports, slowest first."""
    argv = [sys.executable, "-X", "importtime", "-m", "tierctl", "validate",
            "--no-compose-binary", "compose.yaml"]  # fmt: skip
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self" in line:
            continue
        own, cumulative, name = (part.strip() for part in line[12:].split("|"))
        rows.append((int(cumulative), int(own), name))
    return sorted(rows, reverse=True)[:n]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="Also time validate with no bytecode cache (every module compiled each run, as "
        "under PYTHONDONTWRITEBYTECODE=1 in a fresh checkout).",
    )
    parser.add_argument(
        "--src",
        type=Path,
        default=ROOT / "src",
        help="The tierctl source tree to time (another checkout's src/: a before/after pair "
        "timed on the same machine minutes apart).",
    )
    args = parser.parse_args(argv)
    binary = compose_binary()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copy(EXAMPLE, work / "compose.yaml")
        # As an installed tierctl runs: its modules' bytecode compiled once and cached (a
        # private cache folder, so the source tree is not written and a before/after pair
        # each gets its own); "cold" is tierctl's modules compiled from source on every run
        # (PYTHONDONTWRITEBYTECODE=1 over a checkout with no __pycache__), the libraries'
        # bytecode as installed.
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        src = str(args.src.resolve())
        env = {**base, "PYTHONPATH": src, "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        if args.cold:  # a copy of the tree without its __pycache__ folders
            shutil.copytree(src, work / "src", ignore=shutil.ignore_patterns("__pycache__"))
        cold = {**base, "PYTHONPATH": str(work / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        runs: dict[str, list[tuple[float, float]]] = {
            "validate": [], "version": [], "compose": [], "cold": []
        }  # fmt: skip
        validate = [sys.executable, "-m", "tierctl", "validate", "--no-compose-binary",
                    "compose.yaml"]  # fmt: skip
        version = [sys.executable, "-m", "tierctl", "--version"]
        timed(validate, work, env)  # fills the bytecode cache
        timed(version, work, env)
        for _ in range(args.runs):
            runs["validate"].append(timed(validate, work, env))
            runs["version"].append(timed(version, work, env))
            if binary is not None:
                config = [*binary, "-f", "compose.yaml", "config", "-q"]
                runs["compose"].append(timed(config, work, env))
            if args.cold:
                runs["cold"].append(timed(validate, work, cold))
        print(f"tierctl from {args.src}")
        print(f"runs {args.runs} each, 1-min load average {os.getloadavg()[0]:.2f}")
        print(f"{'':40}{'wall median':>12}{'wall min':>10}{'CPU median':>12}{'CPU min':>10}")
        labels = {
            "validate": "tierctl validate (small compose file)",
            "version": "tierctl --version",
            "compose": "docker compose config",
            "cold": "validate, no bytecode cache",
        }
        med: dict[str, tuple[float, float]] = {}
        for key, label in labels.items():
            if not runs[key]:
                if key == "compose":
                    print(f"{label}: no Compose v2 binary here")
                continue
            walls, cpus = zip(*runs[key], strict=True)
            med[key] = (statistics.median(walls), statistics.median(cpus))
            print(f"{label:40}{med[key][0]:11.3f}s{min(walls):9.3f}s"
                  f"{med[key][1]:11.3f}s{min(cpus):9.3f}s")  # fmt: skip
        if "compose" in med:
            print(f"ratio validate / compose config: wall {med['validate'][0] / med['compose'][0]:.2f}, "
                  f"CPU {med['validate'][1] / med['compose'][1]:.2f} (medians)")  # fmt: skip
        if args.importtime:
            print("\nslowest imports of one validate (cumulative ms, self ms, module):")
            for cumulative, own, name in slowest_imports(work, env):
                print(f"  {cumulative / 1000:8.1f} {own / 1000:8.1f}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
