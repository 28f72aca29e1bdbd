"""validate, import and plan on one project with ``include``, an override and profiles read
the services the real ``docker compose --profile P config`` reads.

The project: ``compose.yaml`` includes ``workers.yaml`` (two SGLang workers in the exclusive
profiles ``blue`` and ``green``, on one GPU and host port); ``override.yaml`` relabels the green
worker and adds a green-only ``spare``. Each command is run as an operator runs it and its
services compared with the binary's for the same files and profiles.
"""

from __future__ import annotations

import json
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


def _project(folder: Path, extra: str = "") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    workers = "".join(_WORKER.format(profile=p, extra=extra) for p in ("blue", "green"))
    (folder / "workers.yaml").write_text("services:\n" + workers)
    (folder / "compose.yaml").write_text(
        'include: [workers.yaml]\nservices:\n  proxy:\n    image: nginx:1.27\n    ports: ["8080:80"]\n'
    )
    (folder / "override.yaml").write_text(
        "services:\n  worker-green:\n    labels: {variant: green-2}\n"
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
    result = run_cli("import", *map(str, files), *_profile_args(profiles), "--out", str(spec_path))
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


@pytest.mark.parametrize("profiles", PROFILES[:2], ids=lambda p: "+".join(p))
def test_plan_plans_the_services_compose_runs(
    run_cli, tmp_path: Path, compose_binary: ComposeBinary, profiles: list[str]
) -> None:
    # plan takes one file per side: the project's base file with its include.
    old = _project(tmp_path / "old")[:1]
    new = _project(tmp_path / "new", extra=" --mem-fraction-static 0.8")[:1]
    theirs = _compose_services(compose_binary, new, profiles)
    result = run_cli(
        "plan", "--from", str(old[0]), "--to", str(new[0]), "--json", *_profile_args(profiles)
    )
    assert result.code == 0, result.err
    plan = json.loads(result.out)
    assert {s["service"] for s in plan["services"]} == theirs
    assert [s["service"] for s in plan["steps"]] == [f"worker-{profiles[0]}"]


def test_plan_refuses_a_second_file_per_side(run_cli, tmp_path: Path) -> None:
    """Two --from files are refused (exit 2, both named), not planned from the last alone."""
    files = _project(tmp_path)
    result = run_cli(
        "plan", "--from", str(files[0]), "--from", str(files[1]), "--to", str(files[0])
    )
    assert result.code == 2
    assert "given 2 times" in result.err
    assert str(files[1]) in result.err
