"""One set of checks: render refuses what validate would reject, located in tier.yaml; render
--write keeps file modes and stays in the spec's folder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "small-model" / "tier.yaml"


def _spec(tmp_path: Path, edit: str | None = None, extra: str = "") -> Path:
    text = EXAMPLE.read_text()
    if edit:
        text = text.replace("    enable-metrics: true\n", "    enable-metrics: true\n" + edit)
    path = tmp_path / "tier.yaml"
    path.write_text(text + extra)
    return path


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_write_refuses_a_bad_flag_naming_the_spec_line_once(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path, "    mem-fraction-statc: 0.8\n")
    result = run_cli("render", "--write", str(spec))
    assert result.code == 2
    assert not (tmp_path / "compose.yaml").exists()
    line = _line(spec, "mem-fraction-statc")
    assert f"{spec}:{line}:" in result.err
    assert "engine.args.mem-fraction-statc" in result.err
    assert "did you mean --mem-fraction-static" in result.err
    # One base flag, one problem (naming both replicas), not one per replica.
    assert result.err.count("--mem-fraction-statc is not a flag") == 1
    assert "qwen-r1, qwen-r2" in result.err
    # Explicitly allowed, it writes; printing only warns.
    assert run_cli("render", "--write", "--allow-invalid", str(spec)).code == 0
    printed = run_cli("render", str(spec))
    assert printed.code == 0
    assert "warning:" in printed.err


def test_wrong_type_and_tp_over_gpus_are_refused_at_their_keys(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path, "    chunked-prefill-size: big\n")
    text = spec.read_text().replace("  r2: {gpus: [1]}", "  r2: {gpus: [1], args: {tp-size: 8}}")
    spec.write_text(text)
    result = run_cli("render", "--write", str(spec))
    assert result.code == 2
    assert "expects an integer, found 'big'" in result.err
    assert f"{spec}:{_line(spec, 'r2:')}:" in result.err
    assert "needs 8 GPUs" in result.err
    assert "replicas.r2.gpus" in result.err


def test_a_rule_naming_an_unknown_flag_is_reported(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    rule = (
        "rules:\n  - id: fp8\n    when: {args: {kv-cache-dtyp: fp8_e4m3}}\n"
        "    require: {args: {attention-backend: flashinfer}}\n    because: x\n"
    )
    spec = _spec(tmp_path, extra=rule)
    result = run_cli("render", "--write", str(spec))
    assert result.code == 2
    assert "never fires" in result.err
    assert "did you mean kv-cache-dtype" in result.err
    assert f"{spec}:{_line(spec, 'kv-cache-dtyp')}:" in result.err


def test_validate_points_at_the_spec_and_the_file(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path, "    mem-fraction-statc: 0.8\n")
    assert run_cli("render", "--write", "--allow-invalid", str(spec)).code == 0
    result = run_cli("validate", "--spec", str(spec), "--format", "json")
    assert result.code == 1
    [v] = [v for v in json.loads(result.out)["violations"] if v["rule"] == "TC004"]
    assert v["spec_line"] == _line(spec, "mem-fraction-statc")
    assert v["spec_path"] == "engine.args.mem-fraction-statc"
    assert v["file"].endswith("compose.yaml")
    assert v["fix"].startswith("did you mean")


def test_write_keeps_the_replaced_files_mode(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path)
    target = tmp_path / "compose.yaml"
    assert run_cli("render", "--write", str(spec)).code == 0
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    target.chmod(0o640)
    spec.write_text(spec.read_text().replace("host: gpu01", "host: gpu09"))
    assert run_cli("render", "--write", str(spec)).code == 0
    assert "gpu09" in target.read_text()
    assert target.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("output", ["../elsewhere/compose.yaml", "/tmp/tierctl-outside.yaml"])
def test_output_outside_the_spec_folder_is_refused(tmp_path: Path, run_cli, output: str) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "spec"
    folder.mkdir()
    spec = _spec(folder)
    spec.write_text(spec.read_text().replace("output: compose.yaml", f"output: {output}"))
    result = run_cli("render", "--write", str(spec))
    assert result.code == 2
    assert "outside the spec's folder" in result.err
    assert not (tmp_path / "elsewhere").exists()
    allowed = tmp_path / "allowed"
    shutil.rmtree(allowed, ignore_errors=True)
    explicit = run_cli("render", "--write", "--output", str(allowed / "c.yaml"), str(spec))
    assert explicit.code == 0
    assert (allowed / "c.yaml").exists()


def test_variant_placeholder_typo_gets_did_you_mean_once(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    spec = _spec(tmp_path)
    spec.write_text(spec.read_text().replace("qwen-small-{replica}", "qwen-small-{replca}"))
    result = run_cli("render", str(spec))
    assert result.code == 2
    assert "did you mean {replica}?" in result.err
    # Both replicas lack it; the template is reported once.
    assert result.err.count("variant placeholder {replca}") == 1
