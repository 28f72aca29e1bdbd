"""A third engine touches three files, as docs/engines.md promises.

The package is copied to a scratch folder and the three steps of "Adding an engine" are made
there, for a stub engine (``stubllm``, a vLLM-like server under another name, launcher, image
and metric prefix): its profile module, one entry in ``PROFILES``, its flag catalog. The test
asserts that exactly those three files differ from the package, then runs the copy as a user
would (``python -m tierctl``, in a fresh process): the spec accepts the kind, render and
validate work through the profile (a flag typo is caught by the stub's catalog), standalone
validate finds the stub's service by its launcher, the metrics name it, every kind list the CLI
offers holds it, and the simulator says plainly that it does not model it.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tierctl

SRC = Path(tierctl.__file__).parent

STUB_PROFILE = '''\
"""StubLLM: a third engine for the test (a vLLM-like server under its own names)."""

from tierctl.engines.vllm import VLLMProfile


class StubProfile(VLLMProfile):
    """StubLLM's launch, HTTP surface and metrics."""

    kind = "stubllm"
    title = "StubLLM"
    distributions = ("stubllm",)
    launchers = (("stubllm", "serve"),)
    positional = ()
    positional_launchers = ()
    command_markers = ("stubllm.server",)
    images = ("stubllm",)
    image_launcher = ()
    launcher_images = ()
    default_port = 9000
    metric_prefixes = ("stubllm:", "stubllm_")


PROFILE = StubProfile()
'''

SPEC = """\
tier: stub
host: gpu01
output: compose.yaml
engine:
  kind: stubllm
  version: 1.0.0
  image: docker.io/example/stubllm@sha256:{digest}
  service: stub-{{replica}}
  args:
    model: /models/m
    max-num-seqs: 8
replicas:
  r1: {{gpus: [0]}}
telemetry:
  variant: "stub-{{replica}}"
  places: [service-labels]
""".format(digest="0" * 64)

CHECK = """\
import json, sys
from tierctl.engines import PROFILES, profile_for_argv, profile_for_metrics
from tierctl.cli.bench import bench
from tierctl.sim.surface import SURFACES
stub = PROFILES["stubllm"]
choices = [p.type.choices for p in bench.commands["ab"].params if p.name == "engine"][0]
print(json.dumps({
    "kinds": list(PROFILES),
    "metrics": profile_for_metrics({"stubllm:num_requests_running"}).kind,
    "argv": profile_for_argv(["stubllm", "serve", "--port", "9000"]).kind,
    "bench_choices": list(choices),
    "simulated": "stubllm" in SURFACES,
}))
"""


def _make_third_engine(root: Path) -> Path:
    """Copy the package and add the stub engine in docs/engines.md's three steps."""
    pkg = root / "tierctl"
    shutil.copytree(SRC, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    # 1. the profile module
    (pkg / "engines" / "stubllm.py").write_text(STUB_PROFILE, encoding="utf-8")
    # 2. its entry in PROFILES
    init = pkg / "engines" / "__init__.py"
    text = init.read_text(encoding="utf-8")
    text = text.replace(
        "from tierctl.engines.vllm import PROFILE as VLLM\n",
        "from tierctl.engines.vllm import PROFILE as VLLM\n"
        "from tierctl.engines.stubllm import PROFILE as STUBLLM\n",
    )
    registry = "PROFILES: dict[str, EngineProfile] = {p.kind: p for p in (SGLANG, VLLM)}"
    assert registry in text, "the registry line moved: update this test with it"
    text = text.replace(registry, registry.replace("(SGLANG, VLLM)", "(SGLANG, VLLM, STUBLLM)"))
    init.write_text(text, encoding="utf-8")
    # 3. its flag catalog (the vLLM 0.33 flags, as if built from the stub's own source)
    catalog = json.loads((SRC / "catalog/data/vllm-0.33.0.json").read_text(encoding="utf-8"))
    catalog.update(engine="stubllm", version="1.0.0")
    catalog["source"]["distribution"] = "stubllm"
    (pkg / "catalog/data/stubllm-1.0.0.json").write_text(json.dumps(catalog), encoding="utf-8")
    return pkg


def _changed(left: Path, right: Path, rel: str = "") -> set[str]:
    """Files that differ or exist on one side only (``rel``-relative, posix)."""
    cmp = filecmp.dircmp(left, right, ignore=["__pycache__"])
    out = {f"{rel}{n}" for n in (*cmp.left_only, *cmp.right_only, *cmp.diff_files)}
    for sub in cmp.common_dirs:
        out |= _changed(left / sub, right / sub, f"{rel}{sub}/")
    return out


def _run(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def third(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("third-engine")
    _make_third_engine(root)
    return root


def test_a_third_engine_is_three_files(third: Path) -> None:
    assert _changed(SRC, third / "tierctl") == {
        "engines/stubllm.py",
        "engines/__init__.py",
        "catalog/data/stubllm-1.0.0.json",
    }


def test_the_lifecycle_works_through_the_third_profile(third: Path, tmp_path: Path) -> None:
    (tmp_path / "tier.yaml").write_text(SPEC, encoding="utf-8")
    tierctl_ = ("-m", "tierctl")
    rendered = _run(third, *tierctl_, "render", "--write", "tier.yaml", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    compose = (tmp_path / "compose.yaml").read_text(encoding="utf-8")
    assert "stubllm" in compose
    assert "--max-num-seqs" in compose
    ok = _run(
        third, *tierctl_, "validate", "--no-compose-binary", "--spec", "tier.yaml", cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # A flag the stub's catalog lacks is caught, located, by the stub's catalog.
    (tmp_path / "typo.yaml").write_text(
        compose.replace("--max-num-seqs", "--max-num-seqz"), encoding="utf-8"
    )
    bad = _run(
        third,
        *tierctl_,
        "validate",
        "--no-compose-binary",
        "--engine",
        "stubllm==1.0.0",
        "typo.yaml",
        cwd=tmp_path,
    )
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "--max-num-seqz" in bad.stdout
    schema = _run(third, *tierctl_, "schema", cwd=tmp_path)
    assert '"stubllm"' in schema.stdout


def test_every_kind_list_holds_the_third_engine(third: Path, tmp_path: Path) -> None:
    done = _run(third, "-c", textwrap.dedent(CHECK), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["kinds"] == ["sglang", "vllm", "stubllm"]
    assert seen["metrics"] == seen["argv"] == "stubllm"
    assert "stubllm" in seen["bench_choices"]
    assert seen["simulated"] is False  # the simulator models only engines with a policy
