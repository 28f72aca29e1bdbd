"""tierctl validate as a command: default file, explicit catalog, unusable input."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import GLM_SPEC, SMALL_SPEC


def test_default_file_is_the_specs_rendered_output(run_cli) -> None:
    result = run_cli("validate", "--spec", str(GLM_SPEC))
    assert result.code == 0
    assert "GLM-5.3-Flash-SGL-TP4-W4AFP8-LongContext.yaml" in result.out


def test_missing_rendered_file_is_exit_2(run_cli, tmp_path: Path) -> None:
    shutil.copy(SMALL_SPEC, tmp_path / "tier.yaml")
    result = run_cli("validate", "--spec", str(tmp_path / "tier.yaml"))
    assert result.code == 2
    assert "cannot read compose file" in result.err
    assert "Traceback" not in result.err


def test_older_catalog_reports_flags_added_later(run_cli) -> None:
    result = run_cli("validate", "--spec", str(GLM_SPEC), "--catalog", "sglang==0.5.16")
    assert result.code == 1
    assert "--prefill-decode-interval is not a flag of sglang 0.5.16: added in 0.5.23" in result.out


def test_spec_error_is_exit_2(run_cli, tmp_path: Path) -> None:
    spec = tmp_path / "tier.yaml"
    spec.write_text("tier: x\n")
    result = run_cli("validate", "--spec", str(spec))
    assert result.code == 2
    assert result.err.startswith("error: ")
