"""Reproducers of the sweep generator's fresh seed 5150301 (issue #22, session 8), rebuilt by
``benchmarks/fuzz.py --generator sweep --seed 5150301 --only N``: each ended in a traceback.

- input 14414 (kube): a healthcheck ``start_period: -1.0e999`` made ``render --target
  kubernetes`` (and ``kube plan``) raise the duration parser's FormError;
- input 12953 (cli): ``rollout --plan ""`` raised ValueError deriving the journal's name;
- input 15622 (cli): ``readout --prometheus 'http://[::1'`` raised httpx.InvalidURL.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "glm53-long-context" / "tier.yaml"

RunCli = Callable[..., CliResult]


def test_a_start_period_that_is_no_duration_renders_with_the_default_budget(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "tier.yaml"
    shutil.copy(FIXTURES / "fuzz" / "5150301-14414-kube-start-period.yaml", spec)
    assert "start_period: -1.0e999" in spec.read_text()
    monkeypatch.chdir(tmp_path)
    result = run_cli("render", str(spec), "--target", "kubernetes", "-o", str(tmp_path / "k"))
    assert result.code in (0, 1), result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("plan", ["", ".", "/", ".."])
def test_a_plan_path_naming_a_folder_is_refused_with_exit_2(run_cli: RunCli, plan: str) -> None:
    result = run_cli("rollout", "--plan", plan, "--driver", "local", "--dry-run")
    assert result.code == 2
    assert "names a folder, not a plan file" in result.err


def test_a_prometheus_url_that_does_not_parse_is_refused_with_exit_2(run_cli: RunCli) -> None:
    result = run_cli("readout", "--spec", str(EXAMPLE), "--prometheus", "http://[::1")
    assert result.code == 2
    assert "not a valid URL" in result.err
    assert "Traceback" not in result.err
