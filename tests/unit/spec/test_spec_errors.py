"""Spec errors: exit code 2, the file and line, the field path, the rule, the fix; no traceback."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import GLM_SPEC, CliResult

GOOD = GLM_SPEC.read_text()


def _mutate(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    assert GOOD.count(old) >= 1, f"fixture text not found: {old!r}"
    path = tmp_path / "tier.yaml"
    path.write_text(GOOD.replace(old, new, count))
    return path


def _line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return i
    raise AssertionError(needle)


def _assert_spec_error(result: CliResult, file: Path, line: int, *phrases: str) -> None:
    assert result.code == 2, result.err
    assert "Traceback" not in result.err + result.out
    assert f"{file}:{line}" in result.err, result.err
    for phrase in phrases:
        assert phrase in result.err, f"{phrase!r} not in {result.err!r}"


def test_unknown_key_names_line_path_and_close_match(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    spec = _mutate(tmp_path, "    role: canary\n", "    role: canary\n    gpu: [8]\n")
    result = run_cli("render", str(spec))
    _assert_spec_error(
        result,
        spec,
        _line_of(spec, "gpu: [8]"),
        "replicas.r2.gpu",
        "unknown key 'gpu'",
        "did you mean 'gpus'",
    )


def test_wrong_type_names_value(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    spec = _mutate(tmp_path, "    gpus: [4, 5, 6, 7]", "    gpus: [4, five, 6, 7]")
    result = run_cli("render", str(spec))
    _assert_spec_error(result, spec, _line_of(spec, "five"), "replicas.r2.gpus[1]", "'five'")


def test_duplicate_replica(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    spec = _mutate(tmp_path, "  r2:\n", "  r1:\n")
    result = run_cli("render", str(spec))
    first = _line_of(spec, "  r1:")
    second = [i for i, text in enumerate(spec.read_text().splitlines(), 1) if text == "  r1:"][1]
    _assert_spec_error(result, spec, second, "duplicate key 'r1'", f"first given at line {first}")


def test_gpu_given_twice_names_both_replicas(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    spec = _mutate(tmp_path, "gpus: [4, 5, 6, 7]", "gpus: [3, 5, 6, 7]")
    result = run_cli("render", str(spec))
    _assert_spec_error(
        result,
        spec,
        _line_of(spec, "gpus: [3, 5"),
        "replicas.r2.gpus[0]",
        "GPU 3 is given also to replica r1",
        f"line {_line_of(spec, 'gpus: [0, 1')}",
        "rule: gpu-overlap",
    )


def test_overlay_refuses_flag_already_in_base_args(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    # The field report: the generator refuses a source that already carries the flag.
    spec = _mutate(
        tmp_path,
        "    prefill-decode-interval: 1\n",
        "    prefill-decode-interval: 1\n    enable-dynamic-batch-tokenizer: true\n",
    )
    result = run_cli("render", str(spec))
    base_line = _line_of(spec, "    enable-dynamic-batch-tokenizer: true")
    overlay_line = _line_of(spec, "      enable-dynamic-batch-tokenizer: true")
    _assert_spec_error(
        result,
        spec,
        overlay_line,
        "engine.overlays.ingestion.enable-dynamic-batch-tokenizer",
        "overlay 'ingestion' sets --enable-dynamic-batch-tokenizer",
        f"engine.args.enable-dynamic-batch-tokenizer, line {base_line}",
        "rule: overlay-clash",
    )


def test_removing_a_flag_nobody_sets(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    spec = _mutate(
        tmp_path, "prefill-decode-interval: 2}", "prefill-decode-interval: 2, no-such: null}"
    )
    result = run_cli("render", str(spec))
    _assert_spec_error(
        result,
        spec,
        _line_of(spec, "no-such"),
        "replicas.r2.args.no-such",
        "removes --no-such, which no base arg or overlay sets",
    )


def test_malformed_yaml(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    spec = _mutate(tmp_path, "    tp-size: 4\n", "    tp-size: [4\n")
    result = run_cli("render", str(spec))
    assert result.code == 2
    assert "Traceback" not in result.err
    assert re.search(rf"{re.escape(str(spec))}:\d+", result.err)
    assert "rule: yaml-syntax" in result.err


def test_literal_secret_is_refused_and_not_echoed(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    token = "hf_" + "a1B2c3D4" * 4
    spec = _mutate(
        tmp_path,
        "    HF_TOKEN: {secret: HF_TOKEN, message: set HF_TOKEN for gated model files}",
        f"    HF_TOKEN: {token}",
    )
    result = run_cli("render", str(spec))
    _assert_spec_error(result, spec, _line_of(spec, token), "engine.env.HF_TOKEN", "literal-secret")
    assert token not in result.err + result.out


def test_unpinned_image(tmp_path: Path, run_cli: Callable[..., CliResult]) -> None:
    spec = _mutate(
        tmp_path,
        "image: docker.io/example/sglang@sha256:4b3c2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b",
        "image: docker.io/example/sglang:v0.5.23",
    )
    result = run_cli("render", str(spec))
    _assert_spec_error(
        result, spec, _line_of(spec, "sglang:v0.5.23"), "engine.image", "not pinned by digest"
    )


def test_variant_placeholder_without_flag(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    spec = _mutate(tmp_path, "-h200-tp{tp-size}", "-h200-tp{tp-size}-ep{ep-size}")
    result = run_cli("render", str(spec))
    _assert_spec_error(
        result,
        spec,
        _line_of(spec, "ep{ep-size}"),
        "telemetry.variant",
        "{ep-size}: replica r1 does not set --ep-size",
    )


def test_compose_fragment_may_not_set_the_argv(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    spec = _mutate(tmp_path, "    ipc: host\n", "    ipc: host\n    command: [serve]\n")
    result = run_cli("render", str(spec))
    _assert_spec_error(
        result, spec, _line_of(spec, "command: [serve]"), "engine.compose.command", "owned-key"
    )


def test_missing_file(run_cli: Callable[..., CliResult]) -> None:
    result = run_cli("render", "/nonexistent/tier.yaml")
    assert result.code == 2
    assert "spec file not found" in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("flag", ["--prefill-decode-interval", "-x"])
def test_flag_names_without_dashes(
    tmp_path: Path, run_cli: Callable[..., CliResult], flag: str
) -> None:
    spec = _mutate(tmp_path, "    tp-size: 4\n", f"    tp-size: 4\n    '{flag}': 1\n")
    result = run_cli("render", str(spec))
    assert result.code == 2
    assert "written with leading dashes" in result.err
    assert f"{spec}:{_line_of(spec, flag)}" in result.err


def test_debug_shows_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    spec = _mutate(tmp_path, "gpus: [4, 5, 6, 7]", "gpus: [3, 5, 6, 7]")
    proc = subprocess.run(
        [sys.executable, "-m", "tierctl", "--debug", "render", str(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr


def test_yaml_12_scalars_like_compose(tmp_path: Path) -> None:
    """`no`, `on` and `22:22` are strings, as compose (go-yaml v3) reads them."""
    from tierctl.spec import load_spec_text

    text = GOOD.replace('HF_HUB_OFFLINE: "1"', "HF_HUB_OFFLINE: no\n    PORTS: 22:22")
    spec = load_spec_text(text, "x.yaml")
    assert spec.engine.env["HF_HUB_OFFLINE"] == "no"
    assert spec.engine.env["PORTS"] == "22:22"
