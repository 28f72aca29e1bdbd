"""``compare_with_binary`` against the real Compose v2 on a project with overrides, profiles
and ``include``: no difference where both read alike, a located difference where not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.compose import load_compose, merge_compose
from tierctl.compose.binary import compose_config, find_compose_binary
from tierctl.compose.crosscheck import compare_with_binary
from tierctl.contracts.schema import refuse_invalid

pytestmark = pytest.mark.integration

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/root", "PORT": "8001"}


@pytest.fixture(scope="module", autouse=True)
def _binary() -> None:
    if find_compose_binary() is None:
        pytest.fail("no Docker Compose v2 binary: install the compose extra (make test does)")


def _project(folder: Path) -> list[Path]:
    (folder / "common.env").write_text("HF_HUB_OFFLINE=1\n")
    (folder / "extra.env").write_text("LOG=debug\n")
    (folder / "metrics.yml").write_text(
        "services:\n  prom:\n    image: prom/prometheus:v3\n    profiles: [metrics]\n"
        "    ports: ['127.0.0.1:9090:9090']\n"
    )
    base = folder / "compose.yml"
    base.write_text(
        "include: [metrics.yml]\n"
        "services:\n"
        "  r1:\n    image: lmsysorg/sglang:v0.5.9\n    env_file: [common.env]\n"
        "    ports: ['${PORT:-8000}:30000', '127.0.0.1:8002:30001/udp']\n"
        "    volumes: ['./models:/models:ro', 'hf:/root/.cache']\n"
        "  r2:\n    image: lmsysorg/sglang:v0.5.9\n    profiles: [canary]\n"
        "    ports: ['8000:30000']\n"
        "volumes: {hf: {}}\n"
    )
    over = folder / "override.yml"
    over.write_text(
        "services:\n  r1:\n    env_file: extra.env\n    ports: ['8001:30000']\n"
        "    volumes: ['/nvme/models:/models:ro']\n"
    )
    return [base, over]


@pytest.mark.parametrize("profiles", [(), ("canary",), ("metrics", "canary")])
def test_no_difference_on_overrides_profiles_and_include(
    tmp_path: Path, profiles: tuple[str, ...]
) -> None:
    files = _project(tmp_path)
    found = compare_with_binary(files, profiles=profiles, environ=ENV, check=refuse_invalid)
    assert found == [], [d.text() for d in found]


def test_validate_reads_the_merge_compose_runs(tmp_path: Path) -> None:
    """The reading validate uses (merge_compose) holds the env files and ports Compose has.

    validate reads without the deployment's variables, so `${PORT:-8000}` is its default
    there; Compose is given no PORT either."""
    files = _project(tmp_path)
    merged = merge_compose([load_compose(f) for f in files])
    r1 = merged.services["r1"]
    assert r1.data["env_file"] == ["common.env", "extra.env"]
    env = {k: v for k, v in ENV.items() if k != "PORT"}
    compose = compose_config(files, env=env)["services"]["r1"]
    assert compose["environment"] == {"HF_HUB_OFFLINE": "1", "LOG": "debug"}
    published = sorted(p.get("published") for p in r1.ports)
    assert published == sorted(p.get("published") for p in compose["ports"])
    assert compose["volumes"][0]["source"] == "/nvme/models"
    assert r1.data["volumes"][0] == "/nvme/models:/models:ro"


def test_a_refusal_on_one_side_is_a_located_difference(tmp_path: Path) -> None:
    """tierctl's one deliberate refusal (an include's env_file while substituting)."""
    (tmp_path / "inc.env").write_text("X=1\n")
    (tmp_path / "inc.yml").write_text("services: {a: {image: busybox}}\n")
    path = tmp_path / "compose.yml"
    path.write_text("include:\n  - path: inc.yml\n    env_file: inc.env\nservices: {}\n")
    [difference] = compare_with_binary([path], environ=ENV)
    assert difference.path == "(project)"
    assert difference.tierctl.startswith("refused")
    assert difference.compose == "accepted"
    assert difference.location is not None
    assert difference.location.line == 3
