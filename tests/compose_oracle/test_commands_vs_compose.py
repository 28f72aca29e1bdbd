"""validate, import and plan on one project with ``include``, an override and profiles read
the services the real ``docker compose --profile P config`` reads.

The project: ``compose.yaml`` includes ``workers.yaml`` (two SGLang workers in the exclusive
profiles ``blue`` and ``green``, on one GPU and host port); ``override.yaml`` relabels the green
worker and adds a green-only ``spare``. Each command is run as an operator runs it and its
services compared with the binary's for the same files and profiles.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from tierctl.compose.binary import ComposeBinary
from tierctl.spec import load_spec

_WORKER = """\
  worker-{profile}:
    image: lmsysorg/sglang:v0.5.23-cu126
    profiles: [{profile}]
    command: python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-0.5B-Instruct --host 0.0.0.0 --port 30000{extra}
    ports: ["30000:30000"]
    deploy:
      resources:
        reservations:
          devices: [{{driver: nvidia, device_ids: ["0"], capabilities: [gpu]}}]
"""
PROFILES = [["blue"], ["green"], []]


def _project(folder: Path, extra: str = "", variant: str = "green-2") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    workers = "".join(_WORKER.format(profile=p, extra=extra) for p in ("blue", "green"))
    (folder / "workers.yaml").write_text("services:\n" + workers)
    (folder / "compose.yaml").write_text(
        'include: [workers.yaml]\nservices:\n  proxy:\n    image: nginx:1.27\n    ports: ["8080:80"]\n'
    )
    (folder / "override.yaml").write_text(
        f"services:\n  worker-green:\n    labels: {{variant: {variant}}}\n"
        '  spare:\n    image: nginx:1.27\n    profiles: [green]\n    ports: ["8081:80"]\n'
    )
    return [folder / "compose.yaml", folder / "override.yaml"]


def _compose_services(binary: ComposeBinary, files: list[Path], profiles: list[str]) -> set[str]:
    argv = [*binary.argv, "--project-name", "p"]
    for f in files:
        argv += ["-f", str(f)]
    for p in profiles:
        argv += ["--profile", p]
    proc = subprocess.run(
        [*argv, "config", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "COMPOSE_PROFILES": ""},
        timeout=60,
    )
    return set(json.loads(proc.stdout)["services"])


def _profile_args(profiles: list[str]) -> list[str]:
    return [a for p in profiles for a in ("--profile", p)]


@pytest.mark.parametrize("profiles", PROFILES, ids=lambda p: "+".join(p) or "none")
def test_validate_reads_the_services_compose_reads(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary, profiles: list[str]
) -> None:
    files = _project(tmp_path)
    theirs = _compose_services(compose_binary, files, profiles)
    result = run_cli("validate", *map(str, files), *_profile_args(profiles), "--format", "json")
    assert result.code == 0, result.out + result.err
    report = json.loads(result.out)
    assert "cross-checked with docker-compose" in report["compose_reader"]
    if profiles:
        # One project, the active one: exactly compose's services, none read differently.
        assert f"({len(theirs)} services compared, no difference)" in report["compose_reader"]
    else:
        assert "no difference" in report["compose_reader"]


@pytest.mark.parametrize("profiles", PROFILES[:2], ids=lambda p: "+".join(p))
def test_import_imports_the_services_compose_runs(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary, profiles: list[str]
) -> None:
    files = _project(tmp_path)
    theirs = _compose_services(compose_binary, files, profiles)
    spec_path = tmp_path / "tier.yaml"
    result = run_cli(
        "import", *map(str, files), *_profile_args(profiles), "--output", str(spec_path)
    )
    assert result.code == 0, result.err
    assert "round trip: the spec renders an equivalent file" in result.err
    spec = load_spec(spec_path)
    assert set(spec.replicas) | set(spec.services) == theirs


def test_import_takes_compose_profiles_from_the_environment(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _project(tmp_path)
    monkeypatch.setenv("COMPOSE_PROFILES", "green")
    result = run_cli("import", *map(str, files))
    assert result.code == 0, result.err
    assert "worker-green:" in result.out
    assert "worker-blue" not in result.out
    assert "spare:" in result.out


def _compose_config(binary: ComposeBinary, files: list[Path], profiles: list[str]) -> dict:
    argv = [*binary.argv, "--project-name", "p"]
    for f in files:
        argv += ["-f", str(f)]
    for p in profiles:
        argv += ["--profile", p]
    proc = subprocess.run(
        [*argv, "config", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "COMPOSE_PROFILES": ""},
        timeout=60,
    )
    return dict(json.loads(proc.stdout)["services"])


@pytest.mark.parametrize("profiles", PROFILES[:2], ids=lambda p: "+".join(p))
def test_plan_plans_the_services_compose_runs(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary, profiles: list[str]
) -> None:
    """Both files per side, merged as `docker compose -f compose.yaml -f override.yaml`."""
    old = _project(tmp_path / "old")
    new = _project(tmp_path / "new", extra=" --mem-fraction-static 0.8")
    theirs = _compose_services(compose_binary, new, profiles)
    sides = [a for f in old for a in ("--from", str(f))] + [
        a for f in new for a in ("--to", str(f))
    ]
    result = run_cli("plan", *sides, "--format", "json", *_profile_args(profiles))
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert {s["service"] for s in plan["services"]} == theirs
    assert [s["service"] for s in plan["steps"]] == [f"worker-{profiles[0]}"]
    assert [r["spec"] for r in plan["target_overrides"]] == [str(new[1])]


@pytest.mark.parametrize("profiles", PROFILES[:2], ids=lambda p: "+".join(p))
def test_plan_sees_a_change_made_only_in_the_override(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary, profiles: list[str]
) -> None:
    """The override relabels worker-green on NEW: compose's merged reading changes exactly
    when green runs, and so does the plan (planned from the base file alone, it would not)."""
    old = _project(tmp_path / "old")
    new = _project(tmp_path / "new", variant="green-3")
    before = _compose_config(compose_binary, old, profiles)
    after = _compose_config(compose_binary, new, profiles)
    changed = sorted(n for n in after if after[n] != before.get(n))
    sides = [a for f in old for a in ("--from", str(f))] + [
        a for f in new for a in ("--to", str(f))
    ]
    result = run_cli("plan", *sides, "--format", "json", *_profile_args(profiles))
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert sorted(s["service"] for s in plan["services"] if s["change"] != "unchanged") == changed
    assert changed == (["worker-green"] if profiles == ["green"] else [])


def test_a_plan_of_several_files_is_rolled_out_with_every_file(run_cli, tmp_path: Path) -> None:
    """A plan of a base and an override per side rolls out (#37: it was refused): the rollout
    reads both files again, merged, and checks each is the file planned."""
    old = _project(tmp_path / "old")
    new = _project(tmp_path / "new", variant="green-3")
    sides = [a for f in old for a in ("--from", str(f))] + [
        a for f in new for a in ("--to", str(f))
    ]
    out = tmp_path / "plan.json"
    assert run_cli("plan", *sides, "--profile", "green", "-o", str(out)).code == 0
    result = run_cli("rollout", "--plan", str(out), "--driver", "local", "--dry-run")
    assert result.code == 0, result.out + result.err
    assert "01-recreate-worker-green: checked" in result.out
    # The override changed after planning: refused, naming it.
    new[1].write_text(new[1].read_text() + "  extra:\n    image: nginx:1.27\n")
    changed = run_cli("rollout", "--plan", str(out), "--driver", "local", "--dry-run")
    assert changed.code == 2
    assert f"{new[1]} changed since the plan was made" in changed.err


def test_the_runbook_of_several_files_runs_compose_on_every_file(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary
) -> None:
    """The runbook's `docker compose` commands name the base and the override, in order: run
    as `config` by the real Compose they read what compose reads from both files."""
    sides, new = [], []
    for side, variant in (("old", "a"), ("new", "b")):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "compose.yaml").write_text(
            "services:\n  worker:\n    image: nginx:1.27\n    labels: {variant: a}\n"
        )
        (folder / "override.yaml").write_text(
            f"services:\n  worker:\n    labels: {{variant: {variant}}}\n"
            "  spare:\n    image: nginx:1.27\n"
        )
        files = [folder / "compose.yaml", folder / "override.yaml"]
        sides += [a for f in files for a in (f"--{'from' if side == 'old' else 'to'}", str(f))]
        new = files
    result = run_cli("runbook", *sides)
    assert result.code == 0, result.err
    line = next(x for x in result.out.splitlines() if x.startswith("# or: docker compose ") and
                "--dry-run" in x)  # fmt: skip
    head = line.removeprefix("# or: docker compose ").split(" --dry-run")[0]
    assert head == f"-f {new[0]} -f {new[1]}"
    assert f'"overrides": ["{new[1]}"]' in result.out  # the agent's call names it too
    argv = [*compose_binary.argv, *shlex.split(head), "config", "--format", "json"]
    theirs = json.loads(
        subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    )
    assert theirs["services"]["worker"]["labels"] == {"variant": "b"}
    assert "spare" in theirs["services"]
