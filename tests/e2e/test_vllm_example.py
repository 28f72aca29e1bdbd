"""The vLLM example (examples/vllm-llama70b) through every command an operator runs.

show, render --check, validate (and what it catches), plan, runbook, and a local rollout of the
r3 canary (--max-num-seqs 256 -> 512) against vLLM-flavoured `tierctl sim serve` engines, gated
the vLLM way: the engine's startup `non-default args` line, /v1/models and the labels of
vllm:cache_config_info.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import CliResult
from tierctl.render import render_compose
from tierctl.rollout.drivers.compose_manager import Target, apply_requests, dry_run_requests
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.entrypoints import load_plan
from tierctl.rollout.executor import load_sides
from tierctl.runtime.process import free_port
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vllm-llama70b" / "tier.yaml"
COMPOSE = EXAMPLE.parent / "compose.yaml"
R1, R2, R3 = "llama70b-r1", "llama70b-r2", "llama70b-r3"


def test_show_names_the_canary_flag(run_cli: Callable[..., CliResult]) -> None:
    res = run_cli("show", str(EXAMPLE))
    assert res.code == 0, res.err
    assert "vllm 0.33.0" in res.out
    assert "llama70b-tp8-b8192-seqs512" in res.out
    row = next(line for line in res.out.splitlines() if "--max-num-seqs" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    assert cells == ["--max-num-seqs", "256", "256", "512"]


def test_render_check_and_the_vllm_argv(run_cli: Callable[..., CliResult]) -> None:
    res = run_cli("render", "--check", str(EXAMPLE))
    assert res.code == 0, res.out + res.err
    doc = yaml.safe_load(COMPOSE.read_text())
    argv = doc["services"][R3]["command"]
    # The model is vLLM's positional argument; false is --no-x for a boolean_optional flag.
    # The image's ENTRYPOINT runs `vllm serve` (issue 23): the command is its arguments.
    assert argv[0] == "/models/Llama-3.1-70B-Instruct"
    assert "--model" not in argv
    assert argv[-2:] == ["--enable-chunked-prefill", "--no-enable-prefix-caching"]
    assert argv[argv.index("--max-num-seqs") + 1] == "512"


def test_validate_holds_and_catches_a_dropped_no_flag(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    ok = run_cli("validate", "--spec", str(EXAMPLE), str(COMPOSE))
    assert ok.code == 0, ok.out + ok.err
    assert "3 replicas" in ok.out
    bad = tmp_path / "compose.yaml"
    bad.write_text(
        COMPOSE.read_text().replace("- --no-enable-prefix-caching", "- --enable-prefix-caching", 1)
    )
    res = run_cli("validate", "--spec", str(EXAMPLE), str(bad))
    assert res.code == 1
    assert "llama70b-r1: TC001 argv-pinning" in res.out
    assert "expected '--no-enable-prefix-caching', found '--enable-prefix-caching'" in res.out
    # The positional model is read as the model, not as a stray value (TC004).
    assert "stray value" not in res.out


def _old_spec(tmp: Path) -> Path:
    """The tier before the canary: r3 at the base --max-num-seqs."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    del doc["replicas"]["r3"]["args"]["max-num-seqs"]
    spec = tmp / "old.tier.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    return spec


def test_plan_and_runbook_gate_the_canary_the_vllm_way(
    run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    old_spec = _old_spec(tmp_path)
    old = tmp_path / "old.yaml"
    old.write_text(render_compose(load_spec(old_spec), spec_path=old_spec))
    plan_path = tmp_path / "plan.json"
    res = run_cli(
        "plan",
        "--from",
        str(old),
        "--to",
        str(COMPOSE),
        "--spec",
        str(EXAMPLE),
        "-o",
        str(plan_path),
    )
    assert res.code == 0, res.err
    plan = json.loads(plan_path.read_text())
    steps = [(s["service"], s["gates"]) for s in plan["steps"]]
    assert steps == [
        (R3, ["health", "running-args", "metrics-variant", "soak"]),
        ("prometheus", ["prometheus-variants"]),
    ]
    assert set(plan["untouched"]) >= {R1, R2, "proxy-llama70b"}
    book = run_cli("runbook", "--from", str(old), "--to", str(COMPOSE), "--spec", str(EXAMPLE))
    assert book.code == 0, book.err
    text = book.out
    assert "sglang" not in text.lower()
    assert "`non-default args: {...}`" in text
    assert (
        'count by (container_name, config_variant) (vllm:num_requests_running{host_machine="gpu11"})'
        in text
    )
    # A Prometheus scraping vLLM holds `vllm:` names; the rewritten spelling is named too.
    assert "stores it as `vllm_num_requests_running`" in text
    assert (
        "count by (container_name, config_variant) "
        '(vllm:num_requests_running{container_name="llama70b-r3",host_machine="gpu11"})'
    ) in text
    # The agent bodies are the driver's: never an empty services list.
    bodies = [
        json.loads(line.split("-d '", 1)[1].rstrip("'"))
        for line in text.splitlines()
        if "-d '" in line
    ]
    expected = []
    for svc in (R3, "prometheus"):
        new_t, old_t = Target("<TAG>", str(COMPOSE)), Target("<TAG>", str(old))
        calls = dry_run_requests(new_t, [svc], {}) + apply_requests(new_t, [svc], {})
        calls += apply_requests(old_t, [svc], {})  # the rollback applies OLD
        expected += [body for _, body in calls]
    assert bodies == expected


# --- a local rollout against vLLM-flavoured simulated engines --------------------------------


class VllmStory:
    """OLD and NEW renders of the example on free loopback ports, and the local driver."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = {r: free_port() for r in ("r1", "r2", "r3")}
        self.state = tmp / "state"
        self.plan = tmp / "plan.json"
        self.driver = LocalDriver(self.state, time_scale=100.0)

    def render(self, name: str, canary_seqs: int | None) -> tuple[Path, Path]:
        doc = yaml.safe_load(EXAMPLE.read_text())
        doc["engine"]["args"]["host"] = "127.0.0.1"
        for replica, port in self.ports.items():
            doc["replicas"][replica]["args"]["port"] = port
        if canary_seqs is None:
            del doc["replicas"]["r3"]["args"]["max-num-seqs"]
        else:
            doc["replicas"]["r3"]["args"]["max-num-seqs"] = canary_seqs
        spec = self.tmp / f"{name}.tier.yaml"
        spec.write_text(yaml.safe_dump(doc, sort_keys=False))
        out = self.tmp / f"{name}.yaml"
        out.write_text(render_compose(load_spec(spec), spec_path=spec))
        return spec, out

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        return subprocess.run(
            [sys.executable, "-m", "tierctl", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    def url(self, svc: str) -> str:
        return str(self.driver.state()[svc]["url"])


@pytest.fixture
def vstory(tmp_path: Path) -> Iterator[VllmStory]:
    s = VllmStory(tmp_path)
    yield s
    s.driver.down_all()


@pytest.mark.slow
def test_local_rollout_of_the_vllm_canary(vstory: VllmStory) -> None:
    _, old = vstory.render("old", None)
    spec, new = vstory.render("new", 512)
    res = vstory.run(
        "plan", "--from", str(old), "--to", str(new), "--spec", str(spec), "-o", str(vstory.plan)
    )
    assert res.returncode == 0, res.stderr
    old_side, _ = load_sides(load_plan(vstory.plan))
    for svc in (R1, R2, R3):
        vstory.driver.apply(old_side, [svc])
    r1_pid = vstory.driver.state()[R1]["pid"]
    before = httpx.get(f"{vstory.url(R3)}/metrics", timeout=10).text
    assert "vllm:cache_config_info" in before

    res = vstory.run(
        "rollout",
        "--plan",
        str(vstory.plan),
        "--driver",
        "local",
        "--state-dir",
        str(vstory.state),
        "--time-scale",
        "100",
        "--health-timeout-s",
        "90",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    gate_note = next(line for line in res.stderr.splitlines() if "running-args:" in line)
    assert "(startup log + /v1/models + vllm:cache_config_info)" in gate_note
    assert "not visible" not in gate_note  # the startup log shows every flag
    assert "metrics-variant: vllm metrics exported" in res.stderr
    # Only r3 was recreated; it runs the canary's --max-num-seqs, as its startup log says.
    assert vstory.driver.state()[R1]["pid"] == r1_pid
    log = Path(vstory.driver.state()[R3]["log"]).read_text()
    assert "'max_num_seqs': 512" in log
    models: dict[str, Any] = httpx.get(f"{vstory.url(R3)}/v1/models", timeout=10).json()
    assert models["data"][0]["max_model_len"] == 32768


def test_sim_compare_models_the_canary_flag(run_cli: Callable[..., CliResult]) -> None:
    res = run_cli(
        "sim", "compare", "--spec", str(EXAMPLE), "--control-replica", "r1",
        "--candidate-replica", "r3", "--preset", "dense-8b-h100", "--workload", "hammer",
    )  # fmt: skip
    assert res.code == 0, res.out + res.err
    assert "TTFT p50" in res.out
    # --max-num-seqs is a flag the vLLM scheduler model reads: no not-modelled warning.
    assert "not modelled" not in (res.out + res.err).lower()
