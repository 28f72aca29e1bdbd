"""`tierctl plan`, `runbook` and `rollout` as an operator runs them, on the bundled example."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tierctl.cli.main import main
from tierctl.render import render_compose
from tierctl.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "glm53-long-context" / "tier.yaml"
R1 = "model-sg-glm53-w4afp8-tp4-r1"
R2 = "model-sg-glm53-w4afp8-tp4-r2"


def tierctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI in-process (fast), as `tierctl ARGS` would: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["tierctl", *args], code, out.getvalue(), err.getvalue())


def render(tmp: Path, name: str, mutate: object = None) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    if callable(mutate):
        mutate(doc)
    spec = tmp / f"{name}.tier.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp / f"{name}.yaml"
    out.write_text(render_compose(load_spec(spec), spec_path=spec))
    return out


@pytest.fixture
def canary(tmp_path: Path) -> tuple[Path, Path]:
    old = render(
        tmp_path, "old", lambda d: d["replicas"]["r2"]["args"].pop("prefill-decode-interval")
    )
    return old, render(tmp_path, "new")


def test_plan_prints_the_steps_and_what_stays_untouched(canary: tuple[Path, Path]) -> None:
    old, new = canary
    res = tierctl("plan", "--from", str(old), "--to", str(new), "--spec", str(EXAMPLE))
    assert res.returncode == 0, res.stderr
    assert f"01-recreate-{R2}  (canary changed: argv, labels, logging)" in res.stdout
    assert "02-recreate-otelcol-contrib  (collector changed: config)" in res.stdout
    assert "command: --prefill-decode-interval: 1 -> 2" in res.stdout
    untouched = res.stdout.split("untouched: ")[1]
    assert R1 in untouched
    assert "proxy-glm53" in untouched
    assert "model-proxy-registrar" in untouched


def test_plan_json_round_trips_into_rollout_dry_run(
    canary: tuple[Path, Path], tmp_path: Path
) -> None:
    old, new = canary
    plan_path = tmp_path / "plan.json"
    res = tierctl(
        "plan", "--from", str(old), "--to", str(new), "--format", "json", "-o", str(plan_path)
    )
    assert res.returncode == 0, res.stderr
    assert [s["service"] for s in json.loads(res.stdout)["steps"]] == [R2, "otelcol-contrib"]
    # The local driver's dry run checks each step without starting anything or journaling.
    dry = tierctl(
        "rollout",
        "--plan",
        str(plan_path),
        "--driver",
        "local",
        "--dry-run",
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        f"01-recreate-{R2}: checked",
        "02-recreate-otelcol-contrib: checked",
    ]
    assert not (tmp_path / "plan.journal.jsonl").exists()


def test_a_changed_file_after_planning_is_refused(
    canary: tuple[Path, Path], tmp_path: Path
) -> None:
    old, new = canary
    plan_path = tmp_path / "plan.json"
    tierctl("plan", "--from", str(old), "--to", str(new), "-o", str(plan_path))
    new.write_text(new.read_text() + "\n# edited\n")
    res = tierctl("rollout", "--plan", str(plan_path), "--driver", "local", "--dry-run")
    assert res.returncode == 2
    assert "changed since the plan was made" in res.stderr
    assert "Traceback" not in res.stderr


def test_a_plan_touching_the_proxy_is_refused_without_a_traceback(tmp_path: Path) -> None:
    def slower_probe(doc: dict) -> None:  # type: ignore[type-arg]
        cmd = doc["services"]["proxy-glm53"]["compose"]["command"]
        cmd[cmd.index("3s")] = "5s"

    old, new = render(tmp_path, "old"), render(tmp_path, "new", slower_probe)
    # A real process, to see exactly what an operator sees.
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "tierctl",
            "plan",
            "--from",
            str(old),
            "--to",
            str(new),
            "--spec",
            str(EXAMPLE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert res.returncode == 1
    assert res.stderr.startswith("error: the plan would change protected services: proxy-glm53")
    assert "--allow proxy-glm53" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "/nonexistent.yaml", "--to", "/nonexistent.yaml"], "cannot read compose file"),
        (["--from", "git:only-ref", "--to", "x"], "malformed git source"),
    ],
)
def test_bad_inputs_exit_2_with_a_message(args: list[str], message: str) -> None:
    res = tierctl("plan", *args)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr


def test_compose_manager_needs_a_token_from_the_environment(
    canary: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = canary
    plan_path = tmp_path / "plan.json"
    tierctl("plan", "--from", str(old), "--to", str(new), "-o", str(plan_path))
    monkeypatch.delenv("TIERCTL_AGENT_TOKEN", raising=False)
    res = tierctl(
        "rollout",
        "--plan",
        str(plan_path),
        "--driver",
        "compose-manager",
        "--agent-url",
        "http://127.0.0.1:9",
        "--dry-run",
    )
    assert res.returncode == 2
    assert "no compose-manager token" in res.stderr
    assert "TIERCTL_AGENT_TOKEN" in res.stderr
    # There is no command-line option that could carry a token.
    assert "--token " not in tierctl("rollout", "--help").stdout


def test_runbook_names_calls_checks_and_rollbacks(tmp_path: Path) -> None:
    old = render(tmp_path, "old", lambda d: d["engine"].pop("overlays"))
    new = render(tmp_path, "new")
    res = tierctl("runbook", "--from", str(old), "--to", str(new), "--spec", str(EXAMPLE))
    assert res.returncode == 0, res.stderr
    md = res.stdout
    steps = [line for line in md.splitlines() if line.startswith("### 0")]
    assert steps == [
        f"### 01-recreate-{R2}: recreate `{R2}` (engine)",
        f"### 02-recreate-{R1}: recreate `{R1}` (engine)",
        "### 03-recreate-otelcol-contrib: recreate `otelcol-contrib` (collector)",
    ]
    assert "+ --enable-dynamic-batch-tokenizer" in md
    assert (
        'count by (container_name, config_variant) (sglang:num_running_reqs{host_machine="gpu02"})'
        in md
    )
    assert f'"services": ["{R2}"], "env": {{}}, "force_recreate": true, "dry_run": true' in md
    assert md.count("Rollback (recreate the service from OLD, scoped to it)") == 3
    assert (
        f"tierctl readout --spec {EXAMPLE} --prometheus $PROMETHEUS --window 24h --step 5m "
        "--match 'host_machine=\"gpu02\"' --canary r2 --control r1"
    ) in md
    assert "$TIERCTL_AGENT_TOKEN" in md
    # Every placeholder is defined before the first command that uses it.
    before = md.index("## Before you start")
    first_command = md.index("curl ")
    assert before < first_command
    for name in ("`$AGENT`", "`$TIERCTL_AGENT_TOKEN`", "`$PROMETHEUS`", "`<TAG>`"):
        assert before < md.index(f"| {name} |") < first_command, name
    assert "<TAG>" in md[first_command:]  # files read from disk: the tag is the operator's
    # Each rollback has the docker command beside the compose-manager calls.
    rollback = md.split("Rollback (recreate the service from OLD, scoped to it):")[1]
    assert f"# or: docker compose -f {old} up -d --no-deps --force-recreate {R2}" in rollback
