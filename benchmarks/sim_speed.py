"""Benchmark the scheduler model: a 24-hour long-context trace, and peers side by side.

Run: PYTHONPATH=src /work/venv/bin/python benchmarks/sim_speed.py [--hours 24] [--peer-timeout-s 600]

Figures: wall time, simulated scheduler rounds per second and peak RSS of each run (each run is
a child process; its peak RSS comes from wait4). Peers, if their throwaway venvs exist:

* AISimulate ``0.13.0.dev202610270000000085`` in /tmp/peer-aisim (``python3 -m venv`` +
  ``pip install aisimulate==0.13.0.dev202610270000000085``): the same trace as Mooncake JSONL,
  GLM-5.3-Flash on h200_sxm, SGLang backend, TP4, ``prefill_decode_interval`` set.
* Vidur ``0.0.26`` in /tmp/peer-vidur: needs profiling datasets that it downloads from the
  Hugging Face hub at run time; the attempt is made and its failure reported.

The field report's burst also goes through AISimulate and tierctl at interval 1 and 2, and
both ratio tables are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
AISIM = Path("/tmp/peer-aisim/bin/aisimulate")
VIDUR_PY = Path("/tmp/peer-vidur/bin/python")


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, resident KiB) for every process (Linux /proc)."""
    table: dict[int, tuple[int, int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            rss = 0
            for line in (d / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
            table[int(d.name)] = (ppid, rss)
        except (OSError, IndexError, ValueError):
            continue
    return table


def descendants(root: int, table: dict[int, tuple[int, int]]) -> set[int]:
    """``root`` and every process below it (AISimulate's worker starts a session of its own,
    so neither the process group nor wait4 covers it)."""
    found = {root}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in table.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def run_child(
    cmd: list[str], timeout_s: float, env: dict[str, str] | None = None, cwd: str | None = None
) -> dict[str, Any]:
    """Run ``cmd``; wall time, its own peak RSS (MiB, from wait4), exit code, output tail."""
    with tempfile.TemporaryFile("w+") as log:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
                                cwd=cwd)  # fmt: skip
        timed_out = False
        sampled_kib = 0
        last_sample = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - last_sample > 0.5:
                # wait4 misses workers a killed child never reaped: sample the whole tree.
                table = _proc_table()
                tree = descendants(proc.pid, table)
                sampled_kib = max(sampled_kib, sum(table[p][1] for p in tree if p in table))
                last_sample = time.perf_counter()
            if time.perf_counter() - t > timeout_s:
                for p in descendants(proc.pid, _proc_table()):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p, signal.SIGKILL)
                timed_out = True
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.1)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        out = log.read()
    peak_kib = max(usage.ru_maxrss, sampled_kib)
    return {"wall_s": wall, "peak_mib": peak_kib / 1024, "rc": proc.returncode,
            "timed_out": timed_out, "tail": out[-1500:]}  # fmt: skip


def worker(args: argparse.Namespace) -> None:
    """Child: simulate the day trace with tierctl and print JSON figures."""
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.simulate import simulate
    from tierctl.sim.workload_traces import read_workload

    wl = read_workload(args.trace, "jsonl")
    cfg = EngineConfig.from_argv(["--chunked-prefill-size", "16384", "--max-running-requests",
                                  "16", "--prefill-decode-interval", str(args.pdi),
                                  "--enable-hierarchical-cache", "--hicache-ratio", "2"])  # fmt: skip
    t, cpu = time.perf_counter(), time.process_time()
    res = simulate(cfg, wl)
    wall = time.perf_counter() - t
    # CPU time too: on a shared machine the wall time says more about the neighbours.
    cpu = time.process_time() - cpu
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rounds": res.rounds, "requests": len(res.requests),
                      "completion": res.summary.completion,
                      "cached_fraction": res.summary.cached_fraction,
                      "ttft_p50_s": res.summary.ttft_p50_s, "tpot_p50_s": res.summary.tpot_p50_s}))  # fmt: skip


def write_mooncake(wl: Any, path: Path) -> None:
    """The workload as Mooncake JSONL (hash_ids must cover every 512-token block)."""
    nxt = 10**12
    with path.open("w") as fh:
        for r in wl.requests:
            need = -(-r.input_tokens // 512)
            hashes = list(r.block_hashes)
            while len(hashes) < need:
                hashes.append(nxt)
                nxt += 1
            fh.write(json.dumps({"timestamp": int(r.arrival_s * 1000), "input_length": r.input_tokens,
                                 "output_length": r.output_tokens, "hash_ids": hashes}) + "\n")  # fmt: skip


AISIM_YAML = """traffic:
  source: {{type: trace, paths: [{trace}], format: mooncake}}
  load: {{type: trace_timestamps}}
engine:
  mode: aggregated
  model: zai-org/GLM-5.3-Flash
  hardware: h200_sxm
  backend: sglang
  backend_version: "0.5.20"
  workers:
    aggregated:
      parallelism: {{tensor: 4, moe_tensor: 4}}
      context_length: 786432
      timing: {{kvcache_quant_mode: bfloat16, database_mode: HYBRID}}
      scheduler: {{max_batched_tokens: 16384, max_sequences: 16, prefill_decode_interval: {pdi}}}
"""
# Why these settings: AISimulate has no SGLang 0.5.23 timing data (0.5.14 and 0.5.20 only), its
# FP8 sparse-MLA KV for GLM-5.3-Flash needs >= 0.5.22, and the exact-runtime SILICON database
# has no 0.5.20 all-reduce table; bf16 KV with the HYBRID database is what runs.


def run_aisim(trace: Path, pdi: int, workdir: Path, timeout_s: float) -> dict[str, Any]:
    """AISimulate predict on a Mooncake trace; figures plus its summary JSON when it ran."""
    cfg = workdir / f"aisim-pdi{pdi}.yaml"
    cfg.write_text(AISIM_YAML.format(trace=trace, pdi=pdi))
    out = workdir / f"aisim-out-{trace.stem}-pdi{pdi}"
    fig = run_child([str(AISIM), "predict", "--config", str(cfg), "--output-dir", str(out),
                     "--overwrite"], timeout_s)  # fmt: skip
    pred = out / "prediction.json"
    fig["prediction"] = json.loads(pred.read_text()) if fig["rc"] == 0 and pred.exists() else None
    return fig


def aisim_summary(p: dict[str, Any]) -> dict[str, float | None]:
    """AISimulate's report in the ratio table's terms (seconds)."""
    ms = lambda k: p[k] / 1000 if p.get(k) is not None else None  # noqa: E731
    return {"TTFT p50": ms("median_ttft_ms"), "TTFT p95": ms("p95_ttft_ms"),
            "TPOT p50": ms("median_tpot_ms"), "TPOT p90": ms("p90_tpot_ms"),
            "completion": p["completed_requests"] / p["num_requests"]}  # fmt: skip


def print_table(title: str, a: dict[str, float | None], b: dict[str, float | None]) -> None:
    print(title)
    print(f"  {'metric':<12}{'pdi 1':>12}{'pdi 2':>12}{'ratio':>8}")
    for k in a:
        x, y = a[k], b[k]
        r = f"{y / x:.2f}" if x and y is not None else "-"
        fx = "-" if x is None else f"{x:.3g}"
        fy = "-" if y is None else f"{y:.3g}"
        print(f"  {k:<12}{fx:>12}{fy:>12}{r:>8}")


def main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from tierctl.sim.config import EngineConfig
    from tierctl.sim.simulate import compare
    from tierctl.sim.workload import field_burst, multi_turn_day
    from tierctl.sim.workload_traces import write_jsonl

    work = Path(tempfile.mkdtemp(prefix="sim-speed-"))
    wl = multi_turn_day(random.Random(0), hours=args.hours)
    trace = work / "day.jsonl"
    write_jsonl(wl, trace)
    mc = work / "day-mooncake.jsonl"
    write_mooncake(wl, mc)
    prompt = sum(r.input_tokens for r in wl.requests)
    print(f"trace: {args.hours:g} h, {len(wl.requests)} requests ({len(wl.requests) / args.hours:.0f}/h), "
          f"prompts {min(r.input_tokens for r in wl.requests)}-{max(r.input_tokens for r in wl.requests)} "
          f"tokens, {prompt / 1e9:.2f} G prompt tokens; machine: {os.cpu_count()} CPUs, shared")  # fmt: skip

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    fig = run_child([sys.executable, __file__, "--worker", "--trace", str(trace), "--pdi", "2"],
                    args.peer_timeout_s, env=env)  # fmt: skip
    if fig["rc"] != 0:
        print("tierctl run failed:\n" + fig["tail"])
        return
    res = json.loads(fig["tail"].strip().splitlines()[-1])
    print(f"tierctl: simulate {res['wall_s']:.2f} s wall, {res['cpu_s']:.2f} s CPU "
          f"({fig['wall_s']:.2f} s with start-up and trace "
          f"read), {res['rounds'] / res['wall_s']:,.0f} rounds/s ({res['rounds']:,} rounds), peak RSS "
          f"{fig['peak_mib']:.0f} MiB; completion {res['completion']:.1%}, cached prompt tokens "
          f"{res['cached_fraction']:.1%}, TTFT p50 {res['ttft_p50_s']:.2f} s, TPOT p50 "
          f"{res['tpot_p50_s'] * 1000:.1f} ms")  # fmt: skip

    if AISIM.exists() and args.hours > 1:
        # One hour of the same trace first, so there is a like-for-like figure even when the
        # peer cannot finish the whole day within the time box.
        hour = type(wl)(wl.name + "-1h", tuple(r for r in wl.requests if r.arrival_s < 3600))
        h_trace, h_mc = work / "hour.jsonl", work / "hour-mooncake.jsonl"
        write_jsonl(hour, h_trace)
        write_mooncake(hour, h_mc)
        ours_h = run_child([sys.executable, __file__, "--worker", "--trace", str(h_trace)],
                           args.peer_timeout_s, env=env)  # fmt: skip
        ah = run_aisim(h_mc, 2, work, args.peer_timeout_s)
        if ah["prediction"] is not None and ours_h["rc"] == 0:
            print(f"first hour ({len(hour.requests)} requests): tierctl {ours_h['wall_s']:.2f} s, "
                  f"{ours_h['peak_mib']:.0f} MiB; AISimulate {ah['wall_s']:.1f} s, "
                  f"{ah['peak_mib']:.0f} MiB ({ah['wall_s'] / ours_h['wall_s']:.0f}x the wall time)")  # fmt: skip
        else:
            print(f"first hour: AISimulate did not finish ({ah['wall_s']:.0f} s, "
                  f"{'timed out' if ah['timed_out'] else 'exit ' + str(ah['rc'])})")  # fmt: skip
    if AISIM.exists():
        a = run_aisim(mc, 2, work, args.peer_timeout_s)
        if a["prediction"] is not None:
            print(f"AISimulate 0.13.0.dev202610270000000085: wall {a['wall_s']:.1f} s, peak RSS "
                  f"{a['peak_mib']:.0f} MiB (GLM-5.3-Flash, h200_sxm, sglang 0.5.20 timing, TP4, pdi 2)")  # fmt: skip
            print(f"  ratio AISimulate / tierctl wall: {a['wall_s'] / fig['wall_s']:.1f}x")
        else:
            why = "timed out" if a["timed_out"] else f"exit {a['rc']}"
            print(f"AISimulate: did not finish the day trace ({why} after {a['wall_s']:.0f} s, peak "
                  f"RSS {a['peak_mib']:.0f} MiB): {a['tail'][-400:]!r}")  # fmt: skip
    else:
        print(f"AISimulate: not run ({AISIM} missing; see the module docstring to install it)")

    if VIDUR_PY.exists():
        v = run_child([str(VIDUR_PY), "-m", "vidur.main", "--time_limit", "60"], 120,
                      cwd=str(work))  # fmt: skip
        status = "ran" if v["rc"] == 0 else "could not run"
        reason = ("it downloads its profiling datasets from the Hugging Face hub at run time "
                  "(snapshot_download), which this machine cannot reach, and it has no profile "
                  "for GLM-5.3-Flash") if "snapshot" in v["tail"] or "Hub" in v["tail"] else v["tail"][-300:]  # fmt: skip
        print(f"Vidur 0.0.26: {status}: {reason}")
    else:
        print(f"Vidur: not run ({VIDUR_PY} missing)")

    # The field report's burst, interval 1 vs 2, through both simulators.
    fb = field_burst(random.Random(0))

    def mk(n):
        return EngineConfig.from_argv(["--chunked-prefill-size", "16384", "--max-running-requests",
                                                "16", "--prefill-decode-interval", str(n)])  # fmt: skip

    cmp = compare(mk(1), mk(2), fb)
    ours = {r.metric: (r.control, r.candidate) for r in cmp.table}
    print_table("field burst (8 x ~720K + 3 decoding), tierctl:",
                {k: v[0] for k, v in ours.items()}, {k: v[1] for k, v in ours.items()})  # fmt: skip
    if AISIM.exists():
        fmc = work / "field-mooncake.jsonl"
        write_mooncake(fb, fmc)
        r1 = run_aisim(fmc, 1, work, args.peer_timeout_s)
        r2 = run_aisim(fmc, 2, work, args.peer_timeout_s)
        if r1["prediction"] and r2["prediction"]:
            print_table(f"field burst, AISimulate (wall {r1['wall_s']:.1f} s + {r2['wall_s']:.1f} s):",
                        aisim_summary(r1["prediction"]), aisim_summary(r2["prediction"]))  # fmt: skip
        else:
            print("AISimulate failed on the field burst:", r1["tail"][-300:], r2["tail"][-300:])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--peer-timeout-s", type=float, default=600.0)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--trace", help=argparse.SUPPRESS)
    ap.add_argument("--pdi", type=int, default=2, help=argparse.SUPPRESS)
    ns = ap.parse_args()
    worker(ns) if ns.worker else main(ns)
