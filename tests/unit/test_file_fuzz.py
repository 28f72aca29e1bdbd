"""The file fuzzer (``tests/file_fuzz.py``) over fleet files and Kubernetes manifests, through
tierctl's CLI: a bounded batch per surface at a fixed seed in the suite
(``TIERCTL_FILE_FUZZ_COUNT`` runs more), and the harness's own checks, each shown to catch
what it is for.

Properties: no traceback, exit 0/1/2 only, an exit 2 names the file, the planted secret in no
output or written file in any encoding, no file written outside the case's ``out/``.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from tests import file_fuzz
from tests.file_fuzz import (
    Case,
    Run,
    build_case,
    check,
    make_repo,
    outside_writes,
    paths_of,
    run_surface,
    snapshot,
)

#: Cases per surface and the most seconds a surface's batch may take (it stops early then,
#: and says how many it ran): ~0.1 s a case here, so `make test` spends ~25 s on both.
COUNT = int(os.environ.get("TIERCTL_FILE_FUZZ_COUNT", "120"))
MAX_SECONDS = float(os.environ.get("TIERCTL_FILE_FUZZ_SECONDS", "25" if COUNT <= 120 else "3600"))
SEED = 20261208


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("file-fuzz-repo"))


@pytest.mark.slow  # ~15 s a surface: in `make test`, not in `make test-fast`
@pytest.mark.parametrize("surface", file_fuzz.SURFACES)
def test_no_command_breaks_a_property_under_hostile_files(
    surface: str, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_surface(surface, SEED, COUNT, MAX_SECONDS, tmp_path / "cases", repo)
    with capsys.disabled():
        print("\n" + run.summary())  # the figures: cases, runs, exit codes, findings
    assert run.cases >= min(COUNT, 20), run.summary()  # a loaded machine still runs 20
    assert not run.findings, "\n".join(f.line() for f in run.findings[:30]) + "\n" + run.summary()
    # The batch reached both the refusals and the commands' real work, and the real CLI.
    assert run.exits[0], run.summary()
    assert run.exits[2], run.summary()
    assert run.subprocess_runs >= 1, run.summary()


# --------------------------------------------------------------------------- the generator


def test_the_generators_walk_the_real_schemas() -> None:
    fleet = {".".join(p) for p, _ in paths_of("fleet")}
    assert {"hosts.[].agent_url", "hosts.[].labels.*", "waves.size", "repo"} <= fleet
    deployment = {".".join(p) for p, _ in paths_of("Deployment")}
    # kubernetes-validate's Deployment, through its $refs, down to a container's env value.
    assert "spec.template.spec.containers.[].env.[].value" in deployment
    assert "spec.template.spec.containers.[].ports.[].containerPort" in deployment
    lws = {".".join(p) for p, _ in paths_of("LeaderWorkerSet")}
    assert any(p.startswith("spec.leaderWorkerTemplate") for p in lws)


def test_a_case_is_rebuilt_from_its_seed_alone(repo: Path, tmp_path: Path) -> None:
    for surface in file_fuzz.SURFACES:
        a = build_case(surface, 5, 17, repo, tmp_path / "a")
        b = build_case(surface, 5, 17, repo, tmp_path / "b")
        assert (a.data, a.secret, a.what) == (b.data, b.secret, b.what)
        assert a.secret.encode() in a.data or "token-file" in a.what or "env-only" in a.what


# --------------------------------------------------------------------------- the checks


#: Every 8 characters of it hold one that each encoding changes: a form is found only if
#: the check decodes it.
ODD_SECRET = "s&k=\u00e9+/\n" * 4


def _case(secret: str = "sk-0123456789abcdef01234567") -> Case:
    return Case("kube", 0, b"", secret, "test")


@pytest.mark.parametrize(
    "form",
    [
        lambda s: s,
        quote,
        lambda s: quote_plus("x " + s),
        json.dumps,
        lambda s: json.dumps(s, ensure_ascii=False),
        lambda s: base64.b64encode(s.encode()).decode(),
        lambda s: base64.urlsafe_b64encode(b"  " + s.encode()).decode(),
        lambda s: s.encode().hex(),
        repr,
        lambda s: s[:12],  # a part of it is as bad
    ],
    ids=["raw", "quote", "quote_plus", "json", "json-utf8", "b64", "b64url", "hex", "repr", "part"],
)
def test_a_secret_is_found_in_every_encoding(form: object, tmp_path: Path) -> None:
    case = _case(ODD_SECRET)
    shown = form(case.secret)  # type: ignore[operator]
    path = tmp_path / "manifest.yaml"
    clean = Run(["validate"], 0, "ok", "")
    assert not check(case, path, clean, {})
    for run, written in [
        (Run(["validate"], 0, f"a {shown} b", ""), {}),
        (Run(["validate"], 2, "", f"error: manifest.yaml: {shown}"), {}),
        (clean, {"out/spec.yaml": f"x: {shown}\n".encode()}),
    ]:
        assert [f.cls for f in check(case, path, run, written)] == ["secret"]


def test_tracebacks_exit_codes_and_unlocated_errors_are_findings(tmp_path: Path) -> None:
    path = tmp_path / "manifest.yaml"
    case = _case()
    assert [f.cls for f in check(case, path, Run([], -1, "", "", "KeyError at x.py:1"), {})] == [
        "traceback"
    ]
    printed = Run([], 1, "", "Traceback (most recent call last):\n  ...")
    assert [f.cls for f in check(case, path, printed, {})] == ["traceback"]
    assert [f.cls for f in check(case, path, Run([], 3, "", "x"), {})] == ["exit"]
    assert [f.cls for f in check(case, path, Run([], 2, "", "error: no engine"), {})] == [
        "unlocated"
    ]
    assert not check(case, path, Run([], 2, "", f"error: {path}:3: kind: bad"), {})


def test_a_write_outside_out_is_found(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "kept").write_text("a")
    before = snapshot(tmp_path)
    (tmp_path / "out" / "spec.yaml").write_text("ok")
    assert outside_writes(before, snapshot(tmp_path), tmp_path / "out") == []
    (tmp_path / "home" / ".cache").mkdir()
    (tmp_path / "kept").unlink()
    (tmp_path / "stray.md").write_text("x")
    found = outside_writes(before, snapshot(tmp_path), tmp_path / "out")
    assert [Path(p).name for p in found] == [".cache", "kept", "stray.md"]
