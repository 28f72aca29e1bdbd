"""``make demo-real ENGINE=sglang``: the whole lifecycle on two real SGLang 0.5.23 replicas.

The command an operator types (``tierctl real-engine demo --engine sglang``, shorter windows):
examples/tiny-sglang rendered and validated against SGLang's catalog, both replicas started
from scripts/ensure-sglang's virtualenv behind the real sglang-router, r2 rolled out to the
``--prefill-decode-interval 2`` canary with every gate (health, ``/server_info`` argv, the
``sglang:`` metrics with the new variant, the soak, the variant in the real Prometheus) while
clients go through the router, ``bench ab`` r1 vs r2, live traffic through the router, and the
readout from the real Prometheus to a verdict. Budgets are generous (a loaded 2-core machine);
no timing is asserted. Which verdict the short window reaches is not asserted either (on a
loaded machine it is often INCONCLUSIVE, and the demo then says what would decide it): that
it reaches one, with both variants seen, is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.real_engine, pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_the_sglang_demo_reaches_a_verdict_and_loses_nothing(
    sglang_python: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT / "src")
    work = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "tierctl", "real-engine", "demo", "--engine", "sglang",
         "--workdir", str(work), "--live-s", "45", "--soak-s", "5"],
        capture_output=True, text=True, env=env, timeout=2400, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    out = " ".join((proc.stdout + proc.stderr).split())  # rich wraps long lines
    assert "new.yaml: 0 violations" in out  # validated against SGLang 0.5.23's catalog
    # Every gate of r2's step ran and passed on the real engine.
    assert re.search(r"01-recreate-tiny-r2: server-info: \d+ flags match \(/server_info\)", out)
    assert "metrics-variant: sglang metrics exported, variant" in out
    assert "tiny-r2 reports tiny-sglang-cpu-pdi2-dyntok" in out  # in the real Prometheus
    rolled = re.search(r"rollout \d+ s: steps \['done', 'done'\]; r1 pid unchanged; "
                       r"through the router (\d+) requests, 0 failed \(router 5xx: 0\)", out)  # fmt: skip
    assert rolled, out[-6000:]
    assert int(rolled[1]) > 0
    # bench ab accounted for every request it sent to either replica.
    ab = json.loads((work / "bench-ab" / "results.json").read_text())
    assert {b["arm"] for b in ab["blocks"]} == {"A", "B"}
    for block in ab["blocks"]:
        assert block["sent"] == block["planned"] > 0
        assert block["sent"] == block["completed"] + block["failed"] + block["timed_out"]
        assert block["failed"] == 0
    assert re.search(r"through the router: sent (\d+) = completed \1 \+ failed 0", out)
    # The readout read both variants from the real Prometheus and reached a verdict.
    assert "r1: variants seen ['tiny-sglang-cpu-pdi0-dyntok']" in out
    assert "r2: variants seen ['tiny-sglang-cpu-pdi2-dyntok']" in out
    assert re.search(r"verdict: (PASS|FAIL|INCONCLUSIVE)", out)
    assert "verdict: not reached" not in out
