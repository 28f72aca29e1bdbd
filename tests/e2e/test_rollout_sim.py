"""End-to-end rollouts with the local driver over `tierctl sim serve` engines.

The bundled long-context example is rendered twice (OLD without, NEW with the change) on free
loopback ports; OLD's two replicas are started as simulated engines; then `tierctl plan` and
`tierctl rollout --driver local` run as an operator would run them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tierctl.render import render_compose
from tierctl.rollout.drivers.local import LocalDriver
from tierctl.rollout.entrypoints import load_plan
from tierctl.rollout.executor import load_sides
from tierctl.runtime.polling import wait_until
from tierctl.runtime.process import free_port
from tierctl.spec import load_spec

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("tierctl.sim.server") is None,
        reason="needs `tierctl sim serve` (tierctl.sim.server, branch sim), not on this branch yet",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "glm53-long-context" / "tier.yaml"
R1 = "model-sg-glm53-w4afp8-tp4-r1"
R2 = "model-sg-glm53-w4afp8-tp4-r2"
TIME_SCALE = "100"


class Story:
    """Two renders of the example on free ports, and the local driver's state directory."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = (free_port(), free_port())
        self.state = tmp / "state"
        self.plan = tmp / "plan.json"
        self.journal = tmp / "plan.journal.jsonl"
        self.driver = LocalDriver(self.state, time_scale=float(TIME_SCALE))

    def render(self, name: str, mutate: Callable[[dict[str, Any]], None]) -> Path:
        doc = yaml.safe_load(EXAMPLE.read_text())
        doc["engine"]["args"]["host"] = "127.0.0.1"
        doc["replicas"]["r1"]["args"]["port"] = self.ports[0]
        doc["replicas"]["r2"]["args"]["port"] = self.ports[1]
        mutate(doc)
        spec = self.tmp / f"{name}.tier.yaml"
        spec.write_text(yaml.safe_dump(doc, sort_keys=False))
        out = self.tmp / f"{name}.yaml"
        out.write_text(render_compose(load_spec(spec), spec_path=spec))
        return out

    def tierctl(self, *args: str) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        return subprocess.Popen(
            [sys.executable, "-m", "tierctl", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = self.tierctl(*args)
        out, err = proc.communicate(timeout=180)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def rollout_args(self, *extra: str) -> list[str]:
        return [
            "rollout",
            "--plan",
            str(self.plan),
            "--driver",
            "local",
            "--state-dir",
            str(self.state),
            "--time-scale",
            TIME_SCALE,
            "--health-timeout-s",
            "60",
            *extra,
        ]

    def start_old(self, old: Path, new: Path) -> None:
        res = self.run(
            "plan",
            "--from",
            str(old),
            "--to",
            str(new),
            "--spec",
            str(EXAMPLE),
            "-o",
            str(self.plan),
        )
        assert res.returncode == 0, res.stderr
        old_side, _ = load_sides(load_plan(self.plan))
        for svc in (R1, R2):
            self.driver.apply(old_side, [svc])

    def info(self, svc: str) -> dict[str, Any]:
        url = self.driver.state()[svc]["url"]
        body: dict[str, Any] = httpx.get(f"{url}/server_info", timeout=5).json()
        return body

    def pid(self, svc: str) -> int:
        return int(self.driver.state()[svc]["pid"])

    def events(self) -> list[dict[str, Any]]:
        if not self.journal.exists():
            return []
        return [json.loads(x) for x in self.journal.read_text().splitlines() if x.strip()]


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    s = Story(tmp_path)
    yield s
    s.driver.down_all()


def _no_ingestion(doc: dict[str, Any]) -> None:
    doc["engine"].pop("overlays")


def test_ingestion_rollout_survives_a_kill_and_resumes_without_repeating(story: Story) -> None:
    old = story.render("old", _no_ingestion)
    new = story.render("new", lambda d: None)
    story.start_old(old, new)
    assert story.info(R2)["enable_dynamic_batch_tokenizer"] is False
    # A soak keeps each engine step open long enough to kill the rollout inside step 02.
    proc = story.tierctl(*story.rollout_args("--soak-s", "2"))

    def in_step_02() -> bool:
        return any(
            e["event"] == "applied" and e.get("step", "").startswith("02-") for e in story.events()
        )

    try:
        wait_until(lambda: proc.poll() is not None or in_step_02(), 120, poll_s=0.02)
        if proc.poll() is None and in_step_02():
            proc.send_signal(signal.SIGKILL)
    finally:
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"rollout was not killed mid-plan: {out}{err}"
    r2_pid = story.pid(R2)

    rerun = story.run(*story.rollout_args())
    assert rerun.returncode == 2
    assert "pass --resume" in rerun.stderr

    resumed = story.run(*story.rollout_args("--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[:3] == [
        f"01-recreate-{R2}: skipped",
        f"02-recreate-{R1}: done",
        "03-recreate-otelcol-contrib: done",
    ]
    begins = [e["step"] for e in story.events() if e["event"] == "begin"]
    assert begins == [
        f"01-recreate-{R2}",
        f"02-recreate-{R1}",
        f"02-recreate-{R1}",
        "03-recreate-otelcol-contrib",
    ]
    assert story.pid(R2) == r2_pid
    for svc in (R1, R2):
        info = story.info(svc)
        assert info["enable_dynamic_batch_tokenizer"] is True
        assert info["tierctl_sim"]["argv"][-2:] == ["--dist-init-addr", info["dist_init_addr"]]
    assert "health: 200" in resumed.stderr
    assert "flags match" in resumed.stderr
    # Each skipped step is listed once (stdout), and the resume is announced once (stderr).
    assert resumed.stdout.count("skipped") == 1
    assert resumed.stderr.count("earlier run") == 1
    # The finished plan run again: nothing to do, exit 0, no advice to --resume.
    again = story.run(*story.rollout_args())
    assert again.returncode == 0, again.stderr
    assert "this plan already completed; nothing to do" in again.stderr
    assert "--resume" not in again.stderr + again.stdout
    assert again.stdout.startswith("already completed: 3 step(s), nothing run")
    assert story.pid(R2) == r2_pid


def test_a_replica_whose_variant_would_be_misreported_is_rolled_back(story: Story) -> None:
    old = story.render("old", lambda d: d["replicas"]["r2"]["args"].pop("prefill-decode-interval"))
    new = story.render("new", lambda d: None)
    # NEW hand-edited after rendering: the collector's scrape config still says pdi1 for r2.
    text = new.read_text()
    marker = "container_name: model-sg-glm53-w4afp8-tp4-r2\n"
    head, tail = text.rsplit(marker, 1)  # the last one is in the scrape config
    new.write_text(head + marker + tail.replace("-pdi2-", "-pdi1-", 1))
    story.start_old(old, new)
    r1_pid = story.pid(R1)

    res = story.run(*story.rollout_args())
    assert res.returncode == 1
    assert (
        "would be reported as 'long-context-w4afp8-c16384-qsplit-dyntok-pdi1-h200-tp4'"
        in res.stderr
    )
    assert f"{R2} was rolled back to OLD" in res.stderr
    assert "Traceback" not in res.stderr
    assert story.info(R2)["prefill_decode_interval"] == 1
    assert story.pid(R1) == r1_pid
    assert [e["event"] for e in story.events()][-2:] == ["gate-failed", "rolled-back"]
