"""The lifecycle against the real engine: vLLM on CPU behind the real sglang-router.

One tier per session (``real_tier``): every test here runs against the same two engines, in
file order, and leaves the tier serving. Budgets are generous (a loaded 2-core machine); no
test asserts a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.realengine.fixtures import START_TIMEOUT_S
from tierctl.engines import profile_for
from tierctl.errors import TierctlError
from tierctl.realtier.tier import CANARY_FLAG, RealTier
from tierctl.realtier.traffic import Traffic
from tierctl.rollout.entrypoints import make_plan
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _gates() -> GateSettings:
    return GateSettings(health_timeout_s=START_TIMEOUT_S, poll_interval_s=0.5, request_timeout_s=10)


def _rollout(tier: RealTier, old: Path, new: Path, spec: Path, journal: Path) -> object:
    plan = make_plan(str(old), str(new), spec=spec)
    o, n = load_sides(plan)
    return plan, run_rollout(plan, tier.driver, o, n, RolloutOptions(journal, gates=_gates()))


def _running_args(tier: RealTier, replica: str) -> dict[str, object]:
    from tierctl.engines.vllm import parse_non_default_args

    log = tier.driver.logs(None, tier.service(replica))  # type: ignore[arg-type]
    assert log is not None
    args = parse_non_default_args(log)
    assert args is not None, "vLLM logs its non-default args at start-up"
    return args


def test_the_argv_check_catches_a_replica_started_with_another_value(real_tier: RealTier) -> None:
    import httpx

    profile = profile_for("vllm")
    service = real_tier.service("r1")
    running = real_tier.driver.state()[service]["argv"]
    url = real_tier.url("r1")

    def fetch(path: str) -> tuple[int, str]:
        try:
            resp = httpx.get(url + path, timeout=10)
        except httpx.HTTPError:
            return (0, "")
        return (resp.status_code, resp.text)

    log = real_tier.driver.logs(None, service)  # type: ignore[arg-type]
    # What r1 was started with is confirmed, flag by flag...
    same = profile.verify_running_args(list(running), fetch, log)
    assert same.ok, same.mismatches
    assert "max-num-seqs" in same.verified
    # ...and a rendered file that says another --max-num-seqs is caught, by name and value.
    other = list(running)
    other[other.index("--max-num-seqs") + 1] = "5"
    check = profile.verify_running_args(other, fetch, log)
    assert not check.ok
    assert len(check.mismatches) == 1
    assert "--max-num-seqs" in check.mismatches[0]
    assert "5" in check.mismatches[0]


def test_bench_ab_between_the_replicas_accounts_for_every_request(
    real_tier: RealTier, tmp_path: Path
) -> None:
    out = tmp_path / "ab"
    cmd = [
        sys.executable,
        "-m",
        "tierctl",
        "bench",
        "ab",
        "--a",
        real_tier.url("r1"),
        "--b",
        real_tier.url("r2"),
        "--a-name",
        "r1",
        "--b-name",
        "r2",
        "--order",
        "ABBA",
        "--burst",
        "4x64",
        "--output-tokens",
        "16",
        "--api",
        "completions",
        "--tokenizer",
        str(real_tier.model / "tokenizer.json"),
        "--timeout",
        "300",
        "--seed",
        "7",
        "--no-plots",
        "--output",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text())
    assert len(doc["blocks"]) == 4
    for block in doc["blocks"]:
        assert block["sent"] == block["completed"] + block["failed"] + block["timed_out"]
        assert block["sent"] == 4
        # A real engine answers a tiny burst; a failure here is a defect, not noise.
        assert block["completed"] == 4, block["warnings"]
    assert {r["metric"] for r in doc["ratios"]} >= {"ttft_p50_s", "tpot_p50_s"}


def test_rollout_recreates_r2_only_and_the_router_never_fails_a_request(
    real_tier: RealTier, tmp_path: Path
) -> None:
    old = real_tier.write_side("old")
    new = real_tier.write_side("new", real_tier.canary_args)
    spec = real_tier.workdir / "new.tier.yaml"
    r1_pid, r2_pid = real_tier.pid("r1"), real_tier.pid("r2")
    assert real_tier.router is not None
    before = real_tier.router.client.counters()
    with Traffic(real_tier.router.url, concurrency=2) as traffic:
        traffic.wait_for(4, timeout_s=300)
        plan, result = _rollout(real_tier, old, new, spec, tmp_path / "journal.jsonl")
        # Keep sending until the router routes to the new r2 again.
        real_tier.router.wait_healthy(2, timeout_s=120)
        traffic.wait_for(traffic.result.sent + 4, timeout_s=300)
    seen = traffic.result
    engine_steps = [s.service for s in plan.steps if s.role == "engine"]  # type: ignore[attr-defined]
    assert engine_steps == [real_tier.service("r2")]
    outcome = result.outcomes[0]  # type: ignore[attr-defined]
    assert outcome.status == "done"
    # The vLLM profile's gates ran: health, the running args (startup log, /v1/models,
    # cache_config_info) and the exported vllm: metrics with r2's new variant.
    assert "health: 200" in outcome.notes
    assert any(
        n.startswith("running-args:") and "max-num-seqs" not in n.split("not visible")[-1]
        for n in outcome.notes
    ), outcome.notes
    assert real_tier.pid("r1") == r1_pid
    assert real_tier.pid("r2") != r2_pid
    assert _running_args(real_tier, "r2")["max_num_seqs"] == real_tier.canary_args[CANARY_FLAG]
    assert _running_args(real_tier, "r1")["max_num_seqs"] == 8
    assert seen.sent > 8
    # The clients ran the whole rollout through (they did not stop at their request bound).
    assert seen.sent < traffic.max_requests
    assert seen.failures == [], seen.outcomes
    router_errors = real_tier.router.client.counters().minus(before).errors()
    assert router_errors == 0
    real_tier.r2_args = dict(real_tier.canary_args)


def test_a_canary_vllm_refuses_is_rolled_back_and_the_tier_keeps_serving(
    real_tier: RealTier, tmp_path: Path
) -> None:
    current = real_tier.write_side("current", real_tier.r2_args)
    # Longer than the model's 4096 positions: the flag parses (validation cannot know the
    # model), and vLLM refuses it at start-up.
    bad = real_tier.write_side("bad", {**(real_tier.r2_args or {}), "max-model-len": 8192})
    spec = real_tier.workdir / "bad.tier.yaml"
    r1_pid = real_tier.pid("r1")
    assert real_tier.router is not None
    with Traffic(real_tier.router.url, concurrency=2) as traffic:
        traffic.wait_for(4, timeout_s=300)
        with pytest.raises(TierctlError, match="rolled back to OLD") as err:
            _rollout(real_tier, current, bad, spec, tmp_path / "journal.jsonl")
        real_tier.router.wait_healthy(2, timeout_s=120)
        traffic.wait_for(traffic.result.sent + 4, timeout_s=300)
    assert "max_model_len" in err.value.message or "max-model-len" in err.value.message
    events = [json.loads(x)["event"] for x in (tmp_path / "journal.jsonl").read_text().splitlines()]
    # r2 left the router before it stopped, and OLD rejoined it after the rollback.
    assert "proxy-drained" in events
    assert events[-3:] == ["failed", "rolled-back", "proxy-restored"]
    assert real_tier.pid("r1") == r1_pid
    # r2 runs OLD again: the model's 4096 positions, not the refused 8192.
    assert _running_args(real_tier, "r2")["max_model_len"] == 4096
    assert traffic.result.sent < traffic.max_requests  # traffic throughout
    assert traffic.result.failures == [], traffic.result.outcomes
    # The failed start's log is kept beside the running one.
    logs = sorted((real_tier.state_dir / "logs").glob(f"{real_tier.service('r2')}.*.log"))
    assert len(logs) >= 3


def test_the_readout_reads_real_vllm_metrics_from_a_real_prometheus(real_tier: RealTier) -> None:
    from tierctl.realtier.tier import scrape_config
    from tierctl.rollout.planner import plan_files

    if real_tier.prometheus is None:
        pytest.fail("Debian's prometheus is not installed: `make test` runs ensure-prometheus")
    assert real_tier.router is not None
    current = real_tier.write_side("current", real_tier.r2_args)
    spec = real_tier.workdir / "current.tier.yaml"
    # The collector's scrape config as the running files render it (the collector step of a
    # rollout; the local driver does not run the collector): r2 is labelled with its variant.
    _, dep = load_sides(plan_files(str(current), str(current)))
    real_tier.prometheus.reload(scrape_config(dep))
    assert real_tier.prometheus.wait_for_scrape()  # the reloaded targets' first scrape
    start = time.time()
    # Both replicas serving at once, through the router, as in production: the readout pairs
    # control and canary step by step.
    with Traffic(real_tier.router.url, concurrency=4, max_tokens=16, max_seconds=70) as traffic:
        traffic.wait_for(10**9, timeout_s=75)
    assert traffic.result.failures == [], traffic.result.outcomes
    assert real_tier.prometheus.wait_for_scrape()  # the last of the traffic is stored
    window = int(time.time() - start)
    cmd = [
        sys.executable, "-m", "tierctl", "readout", "--spec", str(spec),
        "--prometheus", real_tier.prometheus.url, "--window", f"{window}s", "--step", "10s",
        "--min-requests", "3", "--match", 'host_machine="cpu01"', "--format", "json",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    # 70 s of traffic on a shared 2-core machine: the step-paired intervals can be too wide to
    # decide (an honest INCONCLUSIVE, exit 3, naming what is undecided); what is pinned is
    # that the readout found and paired both arms' real series.
    assert proc.returncode in (0, 1, 3), proc.stdout[-3000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["engine"] == "vllm"
    verdicts = {0: "pass", 1: "fail", 3: "inconclusive"}
    assert data["verdict"] == verdicts[proc.returncode], data["reasons"]
    if data["verdict"] == "inconclusive":
        assert any("undecided" in r for r in data["reasons"]), data["reasons"]
    assert data["drift"] == []
    rows = {m["key"]: m for m in data["metrics"]}
    for key in ("ttft_p50", "tpot_p50", "e2e_p50"):
        assert rows[key]["control_median"] is not None, key
        assert rows[key]["canary_median"] is not None, key
        assert rows[key]["result"]["n_used"] >= 3, rows[key]  # paired steps, both arms
    # Every request the clients sent was counted by the two engines' own counters.
    assert (
        data["aborts"]["control_total"] + data["aborts"]["canary_total"] >= traffic.result.ok * 0.5
    )
    _judge_answers_argo_and_flagger(real_tier, spec, window, env)


def _judge_answers_argo_and_flagger(
    real_tier: RealTier, spec: Path, window: int, env: dict[str, str]
) -> None:
    """``tierctl judge serve`` over HTTP against the same real Prometheus and the same real
    vLLM series: Argo's web provider (GET and POST) and Flagger's webhook payload each get the
    readout's verdict, Flagger's as its status code, with both arms' real series read."""
    from tierctl.readout.judge_server import FLAGGER_STATUS
    from tierctl.runtime.process import ServerProcess, free_port

    assert real_tier.prometheus is not None
    port = free_port()
    judge = ServerProcess(
        [
            sys.executable,
            "-m",
            "tierctl",
            "judge",
            "serve",
            "--spec",
            str(spec),
            "--prometheus",
            real_tier.prometheus.url,
            "--listen",
            f"127.0.0.1:{port}",
            "--step",
            "10s",
            "--window",
            f"{window + 30}s",
        ],
        real_tier.workdir / "judge.log",
        env=env,
        name="tierctl judge serve",
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    judge.start()
    try:
        judge.wait_ready(up, timeout_s=60)
        answers = [
            httpx.get(f"{base}/argo", params={"window": f"{window + 30}s"}, timeout=300),
            httpx.post(f"{base}/argo", json={"window": f"{window + 30}s"}, timeout=300),
        ]
        for answer in answers:
            assert answer.status_code == 200, answer.text  # Argo reads the verdict from the body
            doc = answer.json()
            assert doc["verdict"] in ("pass", "fail", "inconclusive"), doc
            assert doc["engine"] == "vllm", doc
            rows = {m["key"]: m for m in doc["metrics"]}
            assert rows["ttft_p50"]["control_median"] is not None, doc
            assert rows["ttft_p50"]["canary_median"] is not None, doc
        hook = {
            "name": "tiny-vllm",
            "namespace": "default",
            "phase": "Progressing",
            "metadata": {"window": f"{window + 30}s"},
        }
        flagger = httpx.post(f"{base}/flagger", json=hook, timeout=300)
        verdict = flagger.json()["verdict"]
        assert flagger.status_code == FLAGGER_STATUS[verdict], flagger.text
    finally:
        judge.stop()
