"""The design's change 1 on the real SGLang: examples/tiny-sglang's r2 rolled out to the
``--prefill-decode-interval 2`` canary by the local driver, every engine gate on.

Rendered and validated against SGLang 0.5.23's catalog, planned (r2 alone is recreated),
rolled out: the driver starts r2 from ``scripts/ensure-sglang``'s virtualenv, and the SGLang
profile's gates judge the real engine -- ``/health``, ``/server_info`` against every rendered
flag, the exported ``sglang:`` metrics with the new variant, a short soak. r1 is not started
(one SGLang at a time on this machine), and no router runs, so the proxy drain is off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tierctl.realengine import env as realenv
from tierctl.render import render_compose
from tierctl.render.yaml_emit import dump_yaml
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.entrypoints import make_plan
from tierctl.rollout.executor import RolloutOptions, load_sides, run_rollout
from tierctl.rollout.gates import GateSettings
from tierctl.runtime.process import free_port
from tierctl.spec import load_spec_text

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tiny-sglang" / "tier.yaml"
START_TIMEOUT_S = float(os.environ.get("TIERCTL_REAL_START_TIMEOUT_S", "600"))


def _side(doc: dict[str, Any], workdir: Path, name: str, r2_interval: int) -> Path:
    doc = yaml.safe_load(yaml.safe_dump(doc))
    doc["output"] = f"{name}.yaml"
    doc["replicas"]["r2"]["args"]["prefill-decode-interval"] = r2_interval
    spec = workdir / f"{name}.tier.yaml"
    text = dump_yaml(doc)
    spec.write_text(text)
    out = workdir / f"{name}.yaml"
    out.write_text(render_compose(load_spec_text(text, str(spec)), spec))
    return out


def test_rollout_of_the_interval_canary_on_the_real_sglang(
    sglang_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERCTL_TINY_MODEL", str(realenv.tiny_model(sglang_python)))
    doc = yaml.safe_load(EXAMPLE.read_text())
    r2_port = free_port()
    doc["replicas"]["r1"]["args"]["port"] = free_port()
    doc["replicas"]["r2"]["args"]["port"] = r2_port
    old = _side(doc, tmp_path, "old", 0)
    new = _side(doc, tmp_path, "new", 2)
    spec = tmp_path / "new.tier.yaml"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT / "src")
    validate = subprocess.run(
        [sys.executable, "-m", "tierctl", "validate", "--spec", str(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "contracts hold" in validate.stdout

    plan = make_plan(str(old), str(new), spec=spec)
    engine_steps = [s.service for s in plan.steps if s.role == "engine"]
    assert engine_steps == ["tiny-r2"]
    driver = LocalDriver(tmp_path / "state", engine="real", start_timeout_s=START_TIMEOUT_S)
    gates = GateSettings(
        health_timeout_s=START_TIMEOUT_S, poll_interval_s=0.5, request_timeout_s=10, soak_s=5
    )
    o, n = load_sides(plan)
    try:
        result = run_rollout(
            plan, driver, o, n, RolloutOptions(tmp_path / "j.jsonl", gates=gates, proxy_drain=False)
        )
        outcome = result.outcomes[0]
        assert outcome.step.endswith("tiny-r2")
        assert outcome.status == "done", outcome.notes
        notes = " | ".join(outcome.notes)
        assert "health: 200" in notes
        assert "flags match (/server_info)" in notes
        assert "variant tiny-sglang-cpu-pdi2-dyntok" in notes
        info = httpx.get(f"http://127.0.0.1:{r2_port}/server_info", timeout=10).json()
        assert info["prefill_decode_interval"] == 2
        assert info["enable_dynamic_batch_tokenizer"] is True
        log = Path(driver.state()["tiny-r2"]["log"]).read_text(errors="replace")
        assert "tierctl sgl_kernel stand-in:" not in log
    finally:
        stopped = driver.stop_recorded()
    assert [s for s, _, _ in stopped] == ["tiny-r2"]
