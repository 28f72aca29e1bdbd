"""Rollouts that lose nothing, under faults, on real parts (#37).

    python benchmarks/rollout_faults.py [--rollouts 20] [--hosts 1] [--engine vllm|sglang|sim]

Root on Linux (network namespaces, one dockerd per host). Every rollout is a real fleet
rollout (``execute_fleet``: each step's dry run, the scoped down and up through the host's
``tierctl agent`` running the real Docker Compose v2.40.3 on the host's own dockerd in its own
network namespace, every gate, the rollback, the journals) of ``model-r2`` (the canary) while
``model-r1`` (the control) is untouched, with bounded client traffic through the host's real
``sglang-router`` and a burst of long prompts every few seconds. With ``--engine vllm`` (the
default) each replica is the real vLLM 0.32 CPU engine serving the tiny local model in a
container (the engine's virtualenv and the model bind-mounted read-only into a 2 MB busybox
image: nothing from a registry or a hub); ``--engine sglang`` runs the real SGLang 0.5.23 the
same way (scripts/ensure-sglang's virtualenv, tierctl's ``sgl_kernel`` stand-in mounted first on
its ``PYTHONPATH``), its canary the design's ``--prefill-decode-interval 2``; ``--engine sim``
runs ``tierctl sim serve`` instead.

The scenarios, in turn: a clean change (``--max-num-seqs 8`` to ``2``); a crash on start (vLLM:
a model path that does not exist); a flag the engine's parser refuses; a probe time-out (the
container runs and never answers); the host cut off from the network once its agent began the
step; the agent killed (SIGKILL) mid-step and started again. A failing one is expected to be
rolled back by its step; a halted one is resumed once the host answers. After each rollout the
host is brought back to OLD for the next (not measured).

Printed per rollout: the scenario, the outcome, seconds, client requests and failures (those
sent while the host's link was down are counted apart: the clients could not reach it either),
how long the failure took to detect and the rollback to finish, and whether a resume repeated a
finished step; then the totals against the claims: 0 failed client requests, every failing
replica rolled back within 2 probe windows of the router (its health interval x its failure
threshold), resume never repeats a step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tierctl.realtier.traffic import Traffic  # noqa: E402
from tierctl.rollout.entrypoints import DriverConfig, execute_fleet  # noqa: E402
from tierctl.rollout.executor import RolloutOptions  # noqa: E402
from tierctl.rollout.gates import GateSettings  # noqa: E402
from tierctl.runtime.polling import wait_until  # noqa: E402
from tierctl.testhosts.dockerd import (  # noqa: E402
    SIM_ENGINE_IMAGE,
    SLEEPER,
    TINY_IMAGE,
    python_mounts,
)
from tierctl.testhosts.hostset import HostSet, hosts_missing  # noqa: E402
from tierctl.testhosts.repo import commit_tag  # noqa: E402

ROUTER = Path(sys.executable).parent / "sglang-router"
ROUTER_PORT = 30000
PORTS = {"model-r1": 30001, "model-r2": 30002}
MODEL = "m"
#: The router's probe: every 2 s, a 3 s time-out, unhealthy after 3 misses (the field's proxy).
PROBE_INTERVAL_S, PROBE_THRESHOLD = 2, 3
PROBE_WINDOW_S = PROBE_INTERVAL_S * PROBE_THRESHOLD
SCENARIOS = ("clean", "crash", "bad-flag", "probe-timeout", "host-cut", "agent-killed")
#: The tag each scenario rolls out; the faults of the last two are injected while it runs.
NEW_TAG = {"clean": "new", "crash": "crash", "bad-flag": "badflag", "probe-timeout": "timeout",
           "host-cut": "new", "agent-killed": "new"}  # fmt: skip


@dataclass
class Engines:
    """How a replica runs: the real vLLM engine in a container, or ``tierctl sim serve``."""

    kind: str
    vllm_python: Path | None = None
    model: Path | None = None
    sglang_python: Path | None = None

    def service(self, port: int, seqs: int, role: str, fault: str | None) -> dict[str, Any]:
        """One replica's compose service; ``fault``: crash, badflag or timeout."""
        extra = ["--no-such-flag", "1"] if fault == "badflag" else []
        if self.kind == "sim":
            svc: dict[str, Any] = {
                "image": SIM_ENGINE_IMAGE,
                "volumes": python_mounts(ROOT / "src"),
                "command": ["python3", "-m", "sglang.launch_server", "--model-path", MODEL,
                            "--host", "0.0.0.0", "--port", str(port), "--enable-metrics",
                            "--max-running-requests", str(seqs), *extra],
            }  # fmt: skip
            if fault == "crash":
                svc["entrypoint"] = ["/bin/sh", "-c", "sleep 2; echo 'fatal: cannot load'; exit 3"]
        elif self.kind == "sglang":
            svc = self._sglang(port, seqs, fault, extra)
        else:
            assert self.vllm_python is not None
            assert self.model is not None
            venv = self.vllm_python.parents[1]
            base = Path(sys.base_prefix).resolve()
            model = "/models/missing" if fault == "crash" else "/models/tiny"
            svc = {
                "image": TINY_IMAGE,
                "volumes": ["/usr:/usr:ro", f"{base}:{base}:ro", f"{venv}:{venv}:ro",
                            f"{self.model}:/models/tiny:ro"],
                # One compute thread, not pinned (examples/tiny-vllm says why: a pinned
                # restarting engine sat on the serving replica's core and never started).
                "environment": {"HOME": "/tmp", "HF_HUB_OFFLINE": "1",
                                "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                                "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"},
                "shm_size": "1g",
                # An init as pid 1 reaps vLLM's engine processes: without it a recreated
                # replica's exited workers stayed zombies, its API server never answered and
                # the daemon could not stop the container ("PID ... is zombie") (seen here).
                "init": True,
                "entrypoint": [str(self.vllm_python), "-m", "vllm.entrypoints.openai.api_server"],
                "command": ["--model", model, "--served-model-name", MODEL, "--host", "0.0.0.0",
                            "--port", str(port), "--max-model-len", "4096", "--dtype", "float32",
                            "--enforce-eager", "--max-num-seqs", str(seqs),
                            "--shutdown-timeout", "20", *extra],
            }  # fmt: skip
        if fault == "timeout":
            svc["entrypoint"] = SLEEPER  # runs, never serves: only the probe's budget ends it
        return {**svc, "pull_policy": "never", "network_mode": "host",
                "labels": {"tierctl.role": role}, "stop_grace_period": "30s"}  # fmt: skip

    def _sglang(self, port: int, seqs: int, fault: str | None, extra: list[str]) -> dict[str, Any]:
        """The real SGLang in a container: its virtualenv, the stand-in and the model mounted."""
        from tierctl.realengine import sglang as realsglang

        assert self.sglang_python is not None
        assert self.model is not None
        venv = self.sglang_python.parents[1]
        base = Path(sys.base_prefix).resolve()
        shim = realsglang.SHIM_DIR
        model = "/models/missing" if fault == "crash" else "/models/tiny"
        argv = realsglang.engine_argv(self.sglang_python, Path(model), port, host="0.0.0.0")
        argv[argv.index("--served-model-name") + 1] = MODEL
        # The canary (2 running requests) is the design's change 1 as well: the interval 2.
        interval = ["--prefill-decode-interval", "2"] if seqs == 2 else []
        return {
            "image": TINY_IMAGE,
            "volumes": ["/usr:/usr:ro", f"{base}:{base}:ro", f"{venv}:{venv}:ro",
                        f"{shim}:{shim}:ro", f"{self.model}:/models/tiny:ro"],
            "environment": {"HOME": "/tmp", **realsglang.engine_env({}), "OMP_NUM_THREADS": "1"},
            "shm_size": "1g",
            # An init as pid 1 reaps the scheduler and detokenizer processes (as for vLLM).
            "init": True,
            "entrypoint": argv[:3],
            "command": [*argv[3:], "--enable-metrics", "--max-running-requests", str(seqs),
                        *interval, *extra],
        }  # fmt: skip


def router() -> dict[str, Any]:
    """The host's real sglang-router, probing both replicas as the field's proxy does."""
    return {
        "image": TINY_IMAGE, "pull_policy": "never", "network_mode": "host",
        "volumes": python_mounts(ROOT / "src"), "environment": {"HOME": "/tmp"},
        "entrypoint": [str(ROUTER)],
        "command": [
            "launch", "--host", "0.0.0.0", "--port", str(ROUTER_PORT),
            "--worker-urls", *(f"http://127.0.0.1:{p}" for p in PORTS.values()),
            "--policy", "round_robin", "--health-check-interval-secs", str(PROBE_INTERVAL_S),
            "--health-check-timeout-secs", "3", "--health-failure-threshold", str(PROBE_THRESHOLD),
            "--health-success-threshold", "1", "--prometheus-host", "127.0.0.1",
            "--prometheus-port", "29000", "--log-level", "warn",
        ],
        "labels": {"tierctl.role": "proxy"}, "stop_grace_period": "2s",
    }  # fmt: skip


def compose_file(engines: Engines, host: str, tag: str) -> str:
    """The host's file at ``tag``: r1 always at 8 sequences; r2 per tag."""
    fault = {"crash": "crash", "badflag": "badflag", "timeout": "timeout"}.get(tag)
    services = {
        "proxy": router(),
        "model-r1": engines.service(PORTS["model-r1"], 8, "control", None),
        "model-r2": engines.service(PORTS["model-r2"], 8 if tag == "old" else 2, "canary", fault),
    }
    return yaml.safe_dump({"name": host, "services": services}, sort_keys=False)


class Bursts:
    """A burst of long prompts through the router every ``every_s`` (bounded in count and
    time; stops by itself)."""

    def __init__(self, url: str, every_s: float = 8.0, size: int = 3, words: int = 1200) -> None:
        self.url, self.every_s, self.size = url, every_s, size
        self.prompt = " ".join(f"w{i % 97}" for i in range(words))
        self.sent = 0
        self.failures: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _one(self, client: httpx.Client) -> None:
        body = {"model": MODEL, "prompt": self.prompt, "max_tokens": 4, "temperature": 0}
        try:
            got = client.post(f"{self.url}/v1/completions", json=body, timeout=120)
            outcome = str(got.status_code)
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        self.sent += 1
        if outcome != "200":
            self.failures.append((time.time(), outcome))

    def _run(self) -> None:
        deadline = time.monotonic() + 1800
        with httpx.Client() as client:
            while not self._stop.is_set() and time.monotonic() < deadline and self.sent < 5000:
                threads = [
                    threading.Thread(target=self._one, args=(client,)) for _ in range(self.size)
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                self._stop.wait(self.every_s)

    def __enter__(self) -> Bursts:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(180)


@dataclass
class Outcome:
    """One rollout's figures."""

    number: int
    scenario: str
    status: str
    seconds: float
    sent: int = 0
    failed: int = 0
    failed_while_cut: int = 0
    detect_s: float | None = None
    rollback_s: float | None = None
    repeated_steps: list[str] = field(default_factory=list)
    halt_s: float | None = None
    error: str = ""
    kinds: dict[str, int] = field(default_factory=dict)


class Bench:
    """The hosts, the repository, and the rollouts."""

    def __init__(self, hosts: HostSet, tmp: Path, health_timeout_s: float) -> None:
        self.hosts, self.tmp, self.health_timeout_s = hosts, tmp, health_timeout_s
        self.runs = 0

    def fleet_file(self, new: str) -> Path:
        self.runs += 1
        doc = {
            "fleet": "faults", "repo": str(self.hosts.repo), "old": "old", "new": new,
            "hosts": [
                {"name": h.name, "file": f"{h.name}/compose.yaml", "agent_url": h.agent_url,
                 "token_env": f"TOK_{h.name.upper()}",
                 "labels": {"role": "canary" if i == 0 else "control"}}
                for i, h in enumerate(self.hosts)
            ],
            "waves": {"size": 1, "max_parallel": 1, "on_failure": "halt"},
        }  # fmt: skip
        path = self.tmp / f"fleet-{self.runs:02d}-{new}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def up(self, host: str, tag: str, services: list[str]) -> str:
        h = self.hosts[host]
        body = {"tag": tag, "file": f"{host}/compose.yaml", "services": services, "env": {},
                "force_recreate": False, "dry_run": False}  # fmt: skip
        got = httpx.post(f"{h.agent_url}/compose/up", json=body, timeout=600,
                         headers={"Authorization": f"Bearer {h.token}"})  # fmt: skip
        return got.text.strip().splitlines()[-1] if got.text.strip() else got.text

    def workers(self, host: str) -> list[dict[str, Any]]:
        url = f"http://{self.hosts[host].address}:{ROUTER_PORT}"
        try:
            got = httpx.get(f"{url}/workers", timeout=3).json()
        except (httpx.HTTPError, ValueError):
            return []
        listed = got.get("workers") if isinstance(got, dict) else None
        return listed if isinstance(listed, list) else []

    def converge(self, tag: str) -> None:
        """Every host runs ``tag``, each engine answers its own /health, and its router has
        both replicas, healthy, a whole probe window later (not measured: the reset between
        two rollouts recreates replicas without draining them, and a router that had not yet
        noticed one go down still listed it healthy: seen here, the next rollout's first
        requests then got a 500)."""
        for h in self.hosts:
            last = self.up(h.name, tag, ["model-r1", "model-r2", "proxy"])
            if last != '{"type": "exit", "code": 0}':
                raise RuntimeError(f"{h.name}: up {tag} failed: {last}")
        for h in self.hosts:
            url = f"http://{h.address}:{ROUTER_PORT}"
            wait_until(lambda h=h: bool(self.workers(h.name)) or False, 300, poll_s=0.5)
            listed = {w.get("url") for w in self.workers(h.name)}
            for port in PORTS.values():
                if f"http://127.0.0.1:{port}" not in listed:
                    httpx.post(f"{url}/workers", json={"url": f"http://127.0.0.1:{port}"},
                               timeout=10)  # fmt: skip

            def ready(name: str = h.name) -> bool:
                listed = self.workers(name)
                return len(listed) == 2 and all(w.get("is_healthy") for w in listed)

            def engines_up(address: str = h.address) -> bool:
                try:
                    return all(
                        httpx.get(f"http://{address}:{p}/health", timeout=5).status_code == 200
                        for p in PORTS.values()
                    )
                except httpx.HTTPError:
                    return False

            if not wait_until(engines_up, 600, poll_s=1.0):
                raise RuntimeError(f"{h.name}: the engines did not answer /health")
            time.sleep(PROBE_WINDOW_S + PROBE_INTERVAL_S)  # the router's probes caught up
            if not wait_until(ready, 600, poll_s=1.0):
                raise RuntimeError(f"{h.name}: the router never had both replicas healthy")

    def options(self, journal: Path, resume: bool = False) -> RolloutOptions:
        gates = GateSettings(poll_interval_s=0.5, health_timeout_s=self.health_timeout_s,
                             request_timeout_s=10, metrics_timeout_s=60, soak_s=5)  # fmt: skip
        return RolloutOptions(journal, resume=resume, gates=gates)

    def began(self, host: str, tag: str, since: int) -> bool:
        """The host's agent began a real (not dry-run) operation at ``tag``."""
        return any(
            r["event"] == "begin" and r.get("tag") == tag and not r.get("dry_run")
            for r in self.hosts[host].oplog()[since:]
        )


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _at(rec: dict[str, Any]) -> float:
    return datetime.fromisoformat(rec["at"]).timestamp()


def _timings(host_journal: Path) -> tuple[float | None, float | None]:
    """(applied -> the failure, the failure -> rolled back) from a host's own journal."""
    recs = _records(host_journal)
    applied = next((r for r in recs if r["event"] == "applied"), None)
    failed = next((r for r in recs if r["event"] in ("gate-failed", "failed")), None)
    back = next((r for r in recs if r["event"] == "rolled-back"), None)
    detect = _at(failed) - _at(applied) if applied and failed else None
    rollback = _at(back) - _at(failed) if failed and back else None
    return detect, rollback


def _repeated(host_journal: Path) -> list[str]:
    """Steps a later run applied again after a run recorded them done."""
    done: set[str] = set()
    again: list[str] = []
    for r in _records(host_journal):
        step = r.get("step")
        if r["event"] == "done" and step:
            done.add(step)
        elif r["event"] == "applied" and step in done:
            again.append(step)
    return again


def one_rollout(bench: Bench, number: int, scenario: str) -> Outcome:
    """Run one scenario's rollout under traffic; the host is back on OLD after it."""
    canary = next(iter(bench.hosts)).name
    tag = NEW_TAG[scenario]
    path = bench.fleet_file(tag)
    journal = bench.tmp / f"{path.stem}.journal.jsonl"
    host_journal = journal.with_name(f"{journal.stem}.{canary}.jsonl")
    url = f"http://{bench.hosts[canary].address}:{ROUTER_PORT}"
    config = DriverConfig(name="compose-manager")
    cut: list[float] = []
    started = time.monotonic()
    out = Outcome(number, scenario, "?", 0.0)
    traffic = Traffic(url, model=MODEL, concurrency=2, pause_s=0.2, request_timeout_s=120,
                      max_requests=20_000, max_seconds=1500)  # fmt: skip
    traffic_t0 = time.time()
    with traffic, Bursts(url) as bursts:
        traffic.wait_for(4, timeout_s=120)
        since = len(bench.hosts[canary].oplog())
        result_box: list[Any] = []

        def run(resume: bool = False) -> None:
            try:
                result_box.append(execute_fleet(path, journal, bench.options(journal, resume),
                                                config=config))  # fmt: skip
            except Exception as exc:
                result_box.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        if scenario in ("host-cut", "agent-killed"):
            wait_until(lambda: bench.began(canary, tag, since), 600, poll_s=0.05)
            if scenario == "host-cut":
                bench.hosts.network.cut(canary)
                cut.append(time.time())
                wait_until(lambda: not thread.is_alive(), 300, poll_s=0.2)
                out.halt_s = time.time() - cut[0]
                bench.hosts.network.mend(canary)
                cut.append(time.time())
            else:
                bench.hosts[canary].kill_agent()
                time.sleep(2)
                bench.hosts[canary].start_agent()
        thread.join(1800)
        result = result_box[0] if result_box else None
        if (
            scenario in ("host-cut", "agent-killed")
            and not isinstance(result, Exception)
            and (result is not None and result.halted)
        ):
            result_box.clear()
            run(resume=True)  # once the host answers again
            result = result_box[0]
        out.seconds = time.monotonic() - started
        traffic.wait_for(traffic.result.sent + 4, timeout_s=300)
    if isinstance(result, Exception):
        out.status, out.error = "error", f"{type(result).__name__}: {result}"
    elif result is not None:
        out.status = result.status.get(canary, "?")
        out.error = "; ".join(result.errors.values())[:300]
    # Each failure at the wall time its answer (or its time-out) came.
    failures = [traffic_t0 + t for t, _o in traffic.result.failures]
    failures += [t for t, _o in bursts.failures]
    for _t, kind in [*traffic.result.failures, *bursts.failures]:
        out.kinds[kind] = out.kinds.get(kind, 0) + 1
    # Sent while the link was down: answered (timed out) up to a request time-out after it.
    window = (cut[0] - 1, cut[1] + 125) if len(cut) == 2 else None
    out.failed_while_cut = sum(1 for t in failures if window and window[0] <= t <= window[1])
    out.failed = len(failures) - out.failed_while_cut
    out.sent = traffic.result.sent + bursts.sent
    if scenario in ("crash", "bad-flag", "probe-timeout"):
        out.detect_s, out.rollback_s = _timings(host_journal)
    out.repeated_steps = _repeated(host_journal)
    bench.converge("old")
    return out


def report(outcomes: list[Outcome]) -> None:
    """The totals against the claims."""
    print()
    print(f"{'#':>3} {'scenario':<14} {'outcome':<12} {'s':>6} {'sent':>6} {'failed':>6} "
          f"{'(cut)':>6} {'detect':>7} {'rollback':>8} {'halt':>6} repeated")  # fmt: skip
    for o in outcomes:
        f = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        print(f"{o.number:>3} {o.scenario:<14} {o.status:<12} {o.seconds:>6.0f} {o.sent:>6} "
              f"{o.failed:>6} {o.failed_while_cut:>6} {f(o.detect_s):>7} {f(o.rollback_s):>8} "
              f"{f(o.halt_s):>6} {','.join(o.repeated_steps) or '-'}")  # fmt: skip
        if o.error:
            print(f"      {o.error}")
        if o.kinds:
            print(f"      failed requests by outcome: {o.kinds}")
    failing = [o for o in outcomes if o.scenario in ("crash", "bad-flag", "probe-timeout")]
    backs = [o.rollback_s for o in failing if o.rollback_s is not None]
    print()
    print(f"rollouts: {len(outcomes)}; client requests {sum(o.sent for o in outcomes)}, "
          f"failed {sum(o.failed for o in outcomes)} (and {sum(o.failed_while_cut for o in outcomes)} "
          "sent while the host's own link was down)")  # fmt: skip
    print(f"failing replicas rolled back: {len(backs)} of {len(failing)}; within 2 probe windows "
          f"({2 * PROBE_WINDOW_S} s): {sum(1 for b in backs if b <= 2 * PROBE_WINDOW_S)}; "
          f"rollback s median {statistics.median(backs) if backs else float('nan'):.1f}, "
          f"max {max(backs) if backs else float('nan'):.1f}")  # fmt: skip
    detects = {s: [o.detect_s for o in failing if o.scenario == s and o.detect_s is not None]
               for s in ("crash", "bad-flag", "probe-timeout")}  # fmt: skip
    print(
        "detection (applied -> failed) s: "
        + "; ".join(f"{s} {max(v):.1f} max" for s, v in detects.items() if v)
    )
    halts = [o.halt_s for o in outcomes if o.halt_s is not None]
    if halts:
        print(f"host cut off -> fleet halted: max {max(halts):.1f} s (claim: under 60 s)")
    print(f"resumes that repeated a finished step: "
          f"{sum(1 for o in outcomes if o.repeated_steps)}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=20)
    parser.add_argument("--hosts", type=int, default=1, choices=(1, 2))
    parser.add_argument("--engine", choices=("vllm", "sglang", "sim"), default="vllm")
    parser.add_argument("--health-timeout-s", type=float, default=150.0)
    parser.add_argument("--keep", action="store_true", help="Keep the work folder.")
    args = parser.parse_args()
    why = hosts_missing()
    if why is not None:
        print(f"cannot run here: {why}")
        return 2
    if not ROUTER.exists():
        print(f"no sglang-router beside {sys.executable} (pip install -e '.[router]')")
        return 2
    engines = Engines(args.engine)
    if args.engine == "vllm":
        from tierctl.realengine import env as realenv

        engines = replace(engines, vllm_python=realenv.ensure_vllm())
        engines = replace(engines, model=realenv.tiny_model(engines.vllm_python))
    elif args.engine == "sglang":
        from tierctl.realengine import env as realenv
        from tierctl.realengine.sglang import ensure_sglang

        engines = replace(engines, sglang_python=ensure_sglang())
        engines = replace(engines, model=realenv.tiny_model(engines.sglang_python))
    tmp = Path(tempfile.mkdtemp(prefix="tierctl-faults-"))
    names = [f"f{i + 1}" for i in range(args.hosts)]
    repo = tmp / "deploy"
    for tag in ("old", "new", "crash", "badflag", "timeout"):
        commit_tag(repo, tag, {f"{h}/compose.yaml": compose_file(engines, h, tag) for h in names})
    outcomes: list[Outcome] = []
    hosts = HostSet(names, repo, agent_args=("--operation-timeout-s", "300"))
    with hosts:
        for h in hosts:
            os.environ[f"TOK_{h.name.upper()}"] = h.token
        bench = Bench(hosts, tmp, args.health_timeout_s)
        t = time.monotonic()
        bench.converge("old")
        print(f"{args.hosts} host(s) on OLD in {time.monotonic() - t:.0f} s ({args.engine})",
              flush=True)  # fmt: skip
        for n in range(args.rollouts):
            scenario = SCENARIOS[n % len(SCENARIOS)]
            o = one_rollout(bench, n + 1, scenario)
            outcomes.append(o)
            print(f"rollout {o.number} {o.scenario}: {o.status} in {o.seconds:.0f} s, "
                  f"{o.failed} of {o.sent} failed {o.kinds or ''}", flush=True)  # fmt: skip
            if o.error:
                print(f"  {o.error}", flush=True)
    report(outcomes)
    if not args.keep:
        with contextlib.suppress(OSError):
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
