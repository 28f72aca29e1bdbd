"""Reproducers of the fresh seed 2026120614's exceptions (issue #22, session 11), rebuilt by
``benchmarks/fuzz.py --generator all --seed 2026120614 --only N``.

- input 37684 (compose, with its spec): ``deploy.resources.reservations.devices: true`` on a
  CPU replica made TC003's GPU count walk a boolean (TypeError); the schema reports the
  value, and TC003 reads no device from it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

RunCli = Callable[..., CliResult]
TINY = Path(__file__).resolve().parents[2] / "examples" / "tiny-vllm"


@pytest.mark.parametrize("devices", ["true", "5", "'all'", "{count: 1}"])
def test_seed_2026120614_input_37684_devices_that_are_not_a_list(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, devices: str
) -> None:
    monkeypatch.setenv("TIERCTL_TINY_MODEL", str(tmp_path))
    shutil.copy(TINY / "tier.yaml", tmp_path / "tier.yaml")
    text = (TINY / "compose.yaml").read_text()
    text = text.replace(
        "    logging:\n      driver: json-file\n",
        "    logging:\n      driver: json-file\n    deploy:\n      resources:\n"
        f"        reservations:\n          devices: {devices}\n",
        1,
    )
    (tmp_path / "compose.yaml").write_text(text)
    r = run_cli(
        "validate", "--no-compose-binary", "--spec", str(tmp_path / "tier.yaml"),
        str(tmp_path / "compose.yaml"),
    )  # fmt: skip
    assert "Traceback" not in r.err
    assert r.code == 1, r.out + r.err
    assert "TC007 schema" in r.out
    assert "devices" in r.out
