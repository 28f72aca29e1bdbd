"""A planted secret appears nowhere: tokens and env values never leave in anything tierctl writes.

One sentinel core (random per run) is planted in every secret a run can be given: the
compose-manager token (in the environment and in a token file), an ``HF_TOKEN`` forwarded to the
agent (with a quote, a backslash and a non-ASCII letter, the forms journal masking used to
miss), and API keys in the environment. Then real processes run as an operator would: `render`,
`validate`, `plan`, `runbook`, `rollout` against the stand-in agent (which echoes the request
back raw, JSON-escaped, quoted, URL-encoded, base64, hex and cut short, in its output, in a failure's stderr and in a 400 body),
`rollout --driver local` over simulated engines (whose environments are read from /proc),
`bench run` against a real `tierctl sim serve`, and `readout` against a real Prometheus. Every
byte they printed and every file under the work directory (journals, plans, reports, results,
PNGs, logs, generated compose files, caches) is searched for the core; it must appear nowhere.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.integration.promdata import ArmData, openmetrics
from tests.integration.prometheus import backfill, needs_prometheus, running_prometheus
from tests.secret_search import holds_any
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.entrypoints import load_plan
from tierctl.rollout.executor import load_sides
from tierctl.rollout.standin_agent import StandinAgent
from tierctl.runtime.process import free_port

pytestmark = [pytest.mark.integration, needs_prometheus]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "glm53-long-context"
CORE = secrets.token_hex(8)
TOKEN = f"PLANTED-tok-{CORE}"
HF = f'PLANTED-hf-"q\\é-{CORE}'
API = f"PLANTED-api-{CORE}"
SKIP_GATES = ("health", "server-info", "running-args", "metrics-variant", "prometheus-variants",
              "soak")  # fmt: skip
END_S = 1_767_225_600
START_S = END_S - 3 * 3600


@dataclass
class Runs:
    """What the runs printed, and the directory everything they wrote is under."""

    work: Path
    env: dict[str, str]
    printed: list[tuple[str, str]] = field(default_factory=list)  # (what ran, its output)

    def tierctl(
        self, *args: str, expect: tuple[int, ...] = (0,)
    ) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [sys.executable, "-m", "tierctl", *args],
            cwd=self.work, env=self.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        self.printed.append((" ".join(args[:2]), res.stdout + res.stderr))
        assert res.returncode in expect, f"{args}: exit {res.returncode}\n{res.stdout}{res.stderr}"
        assert "Traceback" not in res.stderr, res.stderr
        return res


def _leaks(text: str | bytes) -> bool:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    # The core survives every escaping (JSON, shell quotes, \u00e9, %XX of its hex digits);
    # base64, hex and a cut-off echo are read back by tests.secret_search.
    if CORE.encode() in data or b"PLANTED" in data:
        return True
    return holds_any(data.decode("utf-8", "replace"), [TOKEN, HF, API, CORE])


def _render_pair(runs: Runs) -> tuple[Path, Path]:
    """OLD (no ingestion overlay) and NEW (the example) rendered by `tierctl render --write`."""
    paths = []
    ports = (free_port(), free_port())
    for name, keep_overlays in (("old", False), ("new", True)):
        folder = runs.work / name
        shutil.copytree(EXAMPLE, folder)
        spec = folder / "tier.yaml"
        doc = yaml.safe_load(spec.read_text())
        if not keep_overlays:
            doc["engine"].pop("overlays")
        # Loopback and free ports: the local driver's rollout below starts these engines.
        doc["engine"]["args"]["host"] = "127.0.0.1"
        doc["replicas"]["r1"]["args"]["port"] = ports[0]
        doc["replicas"]["r2"]["args"]["port"] = ports[1]
        spec.write_text(yaml.safe_dump(doc, sort_keys=False))
        output = folder / doc["output"]
        output.unlink(missing_ok=True)
        runs.tierctl("render", str(spec), "--write", "--force")
        # The secret is a required reference in the file, never its value.
        assert "${HF_TOKEN:?" in output.read_text()
        paths.append(output)
    return paths[0], paths[1]


def _rollouts(runs: Runs, old: Path, new: Path) -> None:
    plan = runs.work / "plan.json"
    spec = str(new.parent / "tier.yaml")
    runs.tierctl("plan", "--from", str(old), "--to", str(new), "--spec", spec, "-o", str(plan))
    runs.tierctl("plan", "--from", str(old), "--to", str(new), "--format", "json")
    runs.tierctl("runbook", "--from", str(old), "--to", str(new))
    doc = json.loads(plan.read_text())
    agent = StandinAgent(
        {("v1", doc["source"]["path"]): old.read_text(), ("v2", doc["target"]["path"]): new.read_text()},
        TOKEN,
    )  # fmt: skip
    agent.start()
    try:
        token_file = runs.work / "agent.token"
        token_file.write_text(TOKEN + "\n")
        common = ["--plan", str(plan), "--driver", "compose-manager", "--agent-url", agent.url,
                  "--tag-old", "v1", "--tag-new", "v2", "--pass-env", "HF_TOKEN",
                  "--agent-attempts", "1", *[a for g in SKIP_GATES for a in ("--skip-gate", g)]]  # fmt: skip

        def rollout(journal: str, faults: list[str], *extra: str, expect: int) -> None:
            agent.state.faults = list(faults)
            runs.tierctl("rollout", *common, "--journal", str(runs.work / journal), *extra,
                         expect=(expect,))  # fmt: skip

        # Every call echoes the request back; the rollout completes (token from the env).
        rollout("ok.journal.jsonl", ["echo"] * 20, expect=0)
        # A dry run that fails with the echo on stderr (token from a file).
        rollout("exit1.journal.jsonl", ["echo-exit1"], "--token-file", str(token_file), expect=1)
        # The apply's up rejected with a 400 that echoes the request (then a clean rollback).
        rollout("400.journal.jsonl", ["", "", "echo-400"], expect=1)
        # The dry-run mode, echoing.
        rollout("dry.journal.jsonl", ["echo"] * 5, "--dry-run", expect=0)
        # The secrets did reach the agent, and it echoed them: the search below can find them.
        assert {r["env"]["HF_TOKEN"] for r in agent.state.requests} == {HF}
        assert set(agent.state.auth_headers) == {f"Bearer {TOKEN}"}
    finally:
        agent.stop()


def _local_rollout(runs: Runs) -> None:
    """The local driver over `tierctl sim serve` engines: OLD started here, then `tierctl
    rollout --driver local` (with the secrets in its environment) recreates both replicas.
    The engines it started must not hold any secret in their environment."""
    plan_path = runs.work / "plan.json"
    state = runs.work / "local-state"
    driver = LocalDriver(state, time_scale=100.0)
    try:
        old_side, _ = load_sides(load_plan(plan_path))
        engines = [s for s in old_side.services if s.startswith("model-sg-")]
        driver.apply(old_side, engines)
        runs.tierctl("rollout", "--plan", str(plan_path), "--driver", "local", "--state-dir",
                     str(state), "--time-scale", "100", "--health-timeout-s", "60", "--journal",
                     str(runs.work / "local.journal.jsonl"))  # fmt: skip
        started = driver.state()
        assert set(engines) <= set(started)
        for svc in engines:
            environ = Path(f"/proc/{started[svc]['pid']}/environ").read_bytes()
            assert not _leaks(environ), f"{svc} was started with a secret in its environment"
    finally:
        driver.down_all()


def _bench(runs: Runs) -> None:
    log = (runs.work / "sim-serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tierctl", "sim", "serve", "--time-scale", "100", "--",
         "--host", "127.0.0.1", "--port", "0", "--api-key", "${VLLM_API_KEY}"],
        cwd=runs.work, env=runs.env, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        assert m, line
        out = runs.work / "bench"
        runs.tierctl("bench", "run", "--url", m.group(1), "--hammer-rate", "20",
                     "--hammer-count", "8", "--output", str(out))  # fmt: skip
        assert (out / "results.json").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
        log.close()
        runs.printed.append(("sim serve", line + rest))


def _readout(runs: Runs) -> None:
    data = runs.work / "prom" / "data"
    data.parent.mkdir()
    backfill(openmetrics([ArmData("svc-r1", "tier-pdi1"), ArmData("svc-r2", "tier-pdi2")],
                         START_S, END_S), data)  # fmt: skip
    spec = runs.work / "readout.tier.yaml"
    spec.write_text(
        "tier: t\nhost: t\noutput: c.yaml\n"
        "engine: {kind: sglang, version: 0.5.23, service: 'svc-{replica}',\n"
        "  image: 'x/y@sha256:" + "a" * 64 + "', args: {prefill-decode-interval: 1},\n"
        "  env: {HF_TOKEN: {secret: HF_TOKEN, message: set HF_TOKEN}}}\n"
        "replicas:\n  r1: {gpus: [0], role: control}\n"
        "  r2: {gpus: [1], role: canary, args: {prefill-decode-interval: 2}}\n"
        "telemetry: {variant: 'tier-pdi{prefill-decode-interval}', places: [service-labels]}\n"
    )
    with running_prometheus(runs.work / "prom", data_dir=data) as url:
        for fmt in ("table", "json", "markdown"):
            runs.tierctl("readout", "--spec", str(spec), "--prometheus", url, "--window", "2h",
                         "--end", str(END_S), "--step", "5m", "--format", fmt,
                         expect=(0, 1, 3))  # pass, fail or inconclusive: all are read outs  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    work = tmp_path_factory.mktemp("planted")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "HOME": str(work / "home"),  # caches and configs land where they are searched
        "MPLCONFIGDIR": str(work / "home" / "mpl"),
        "TIERCTL_AGENT_TOKEN": TOKEN,
        "HF_TOKEN": HF,
        "OPENAI_API_KEY": API,
        "VLLM_API_KEY": API,
    }
    r = Runs(work, env)
    old, new = _render_pair(r)
    for path in (old, new):
        r.tierctl("validate", str(path), expect=(0, 1))
        r.tierctl("validate", "--spec", str(path.parent / "tier.yaml"), str(path), expect=(0, 1))
    _rollouts(r, old, new)
    _local_rollout(r)
    _bench(r)
    _readout(r)
    return r


def test_the_planted_secret_is_in_nothing_printed(runs: Runs) -> None:
    assert len(runs.printed) >= 19  # every run above, each captured
    leaked = [what for what, text in runs.printed if _leaks(text)]
    assert leaked == []


def test_the_planted_secret_is_in_no_file_written(runs: Runs) -> None:
    files = [p for p in runs.work.rglob("*") if p.is_file() and p.name != "agent.token"]
    names = {p.name for p in files}
    # What the runs wrote is there to be searched (a run that wrote nothing proves nothing).
    assert {"ok.journal.jsonl", "exit1.journal.jsonl", "400.journal.jsonl", "plan.json",
            "local.journal.jsonl",
            "results.json", "report.md", "sim-serve.log"} <= names  # fmt: skip
    engine_logs = [p for p in files if "local-state" in p.parts and p.suffix == ".log"]
    assert len(engine_logs) >= 2, "the local driver's engine logs are searched too"
    leaked = [str(p.relative_to(runs.work)) for p in files if _leaks(p.read_bytes())]
    assert leaked == []


def test_the_echoes_were_masked_not_dropped(runs: Runs) -> None:
    # The agent's echo reached the operator, masked: the redaction ran, not a silence.
    journal = (runs.work / "exit1.journal.jsonl").read_text()
    assert "***" in journal
    printed = "\n".join(text for what, text in runs.printed if what.startswith("rollout"))
    assert "using Bearer ***" in printed or "***" in printed
