"""Reproducers found in session 7 of issue #22 (by the sweep generator, tests/sweep_fuzz.py,
and the long runs of the other two), each now a located exit 2 or a plain result.

Each test is the minimal file or argv that crashed or hung a command; it names the exception
it pinned, and fails again if the reader or model that now refuses the value stops doing so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, CliResult

SMALL = EXAMPLES / "small-model"
RunCli = Callable[..., CliResult]


def _refused(result: CliResult, *words: str) -> None:
    assert result.code == 2, result
    assert "Traceback" not in result.err
    for word in words:
        assert word in result.err, (word, result.err)


def _compose_with(tmp_path: Path, tail: str) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text((SMALL / "compose.yaml").read_text() + tail)
    return path


@pytest.mark.parametrize(
    "tail",
    [
        # ValueError: embedded null byte (Path.resolve in compose/loader.py _apply_include)
        'include:\n- path: "a\\0b"\n',
        'include:\n- path: ok.yaml\n  project_directory: "p\\0q"\n',
    ],
)
@pytest.mark.parametrize("command", ["validate", "compose", "import", "plan-as-old"])
def test_a_nul_in_an_include_path_is_refused_with_its_line(
    tmp_path: Path, run_cli: RunCli, tail: str, command: str
) -> None:
    path = _compose_with(tmp_path, tail)
    (tmp_path / "ok.yaml").write_text("services: {}\n")
    argv = {
        "validate": ["validate", "--no-compose-binary", str(path)],
        "compose": ["compose", "config", str(path)],
        "import": ["import", "--engine", "sglang==0.5.23", str(path)],
        "plan-as-old": ["plan", "--from", str(path), "--to", str(SMALL / "compose.yaml")],
    }[command]
    _refused(run_cli(*argv), "NUL", "compose.yaml:")


def test_a_nul_in_an_extends_file_is_refused(tmp_path: Path, run_cli: RunCli) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(
        'services:\n  a:\n    image: x\n    extends:\n      file: "b\\0"\n      service: a\n'
    )
    _refused(run_cli("compose", "config", str(path)), "NUL")


def test_a_non_string_service_key_does_not_crash_import(tmp_path: Path, run_cli: RunCli) -> None:
    # TypeError: '<' not supported between 'float' and 'str' (spec/semantic_diff.py: the
    # round trip sorted a service's keys, one of them the YAML float -.inf)
    text = (SMALL / "compose.yaml").read_text()
    at = text.index("  qwen-r2:\n") + len("  qwen-r2:\n")
    path = tmp_path / "compose.yaml"
    path.write_text(text[:at] + "    .inf: 1\n" + text[at:])
    result = run_cli("import", "--engine", "sglang==0.5.23", str(path))
    assert result.code in (0, 1, 2), result
    assert "Traceback" not in result.err
    assert "inf" in result.out + result.err  # the key is named, not dropped


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttft_s", 1e308),
        ("tpot_s", 1e300),
        ("ttft_s", -1.0),
        ("input_tokens", 1e300),
        # ValueError: Residuals are not finite in the initial point (scipy, in
        # sim/timing_fit.py: the fit's log ratio over a denormal TPOT overflowed)
        ("tpot_s", 5e-324),
    ],
)
def test_bench_samples_outside_plausible_ranges_are_refused(
    tmp_path: Path, run_cli: RunCli, field: str, value: float
) -> None:
    # OverflowError: cannot convert float infinity to integer (sim/engine.py _itl_bucket: a
    # fit on a 1e308 s TTFT made the simulated inter-token gap inf)
    import json

    from tests.fuzzing import load_seeds

    doc = json.loads(load_seeds(tmp_path / "seeds").by_kind["results"][0])
    doc["run"]["requests"][3][field] = value
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    _refused(run_cli("sim", "fit", str(path), "--from", "bench", "--format", "json"), "requests[3]")


def test_a_url_given_as_a_fleet_repo_path_is_printed_masked(
    tmp_path: Path, run_cli: RunCli
) -> None:
    # The sentinel password came back in `fleet plan`'s error: the path read `http:/u:pw@`
    # (one slash), which the userinfo mask did not match.
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "fleet: f\nrepo: 'http://admin:hunter2pw@127.0.0.1:1/v1'\nold: v1\nnew: v2\nhosts:\n"
        "- {name: gpu01, file: gpu01/compose.yaml, agent_url: 'http://127.0.0.1:1'}\n"
    )
    result = run_cli("fleet", "plan", str(path))
    assert result.code != 0
    assert "Traceback" not in result.err
    assert "hunter2pw" not in result.out + result.err
    assert "***" in result.err


@pytest.mark.parametrize(
    "argv",
    [
        ["--workload", "hammer", "--rate", "1", "--duration-s", "9" * 400],  # inf: never ended
        ["--workload", "hammer", "--rate", "inf", "--duration-s", "5"],
        ["--workload", "hammer", "--rate", "1", "--duration-s", "1e12"],
        ["--workload", "burst", "--count", "1000000000000", "--input-tokens", "10"],
        ["--workload", "day", "--hours", "1e308"],
        ["--workload", "burst", "--count", "2", "--input-tokens", "-5"],
    ],
)
def test_unbounded_generated_workloads_are_refused(run_cli: RunCli, argv: list[str]) -> None:
    _refused(run_cli("sim", "run", *argv), "out of range")


@pytest.mark.parametrize("target", ["/dev/full", "/dev/null", "DIR"])
def test_outputs_are_regular_files_only(tmp_path: Path, run_cli: RunCli, target: str) -> None:
    # MemoryError in paths.write_owned: `runbook -o /dev/full` read the "existing file" (zeros
    # without end); /dev/null would have been renamed over with --force.
    import stat

    out = str(tmp_path) if target == "DIR" else target
    small = str(SMALL / "compose.yaml")
    result = run_cli("runbook", "--from", small, "--to", small, "-o", out, "--force")
    _refused(result, "regular file" if target != "DIR" else "folder")
    if target.startswith("/dev/"):
        assert stat.S_ISCHR(Path(target).stat().st_mode)


@pytest.mark.parametrize("command", ["import", "sim-fit", "runbook"])
def test_an_output_name_over_255_bytes_is_refused(
    tmp_path: Path, run_cli: RunCli, command: str
) -> None:
    # OSError: [Errno 36] File name too long, from Path.exists() in `import -o` (cli/adopt.py)
    out = str(tmp_path / ("é" * 300))
    small = str(SMALL / "compose.yaml")
    steps = tmp_path / "steps.jsonl"
    steps.write_text(
        '{"kind": "decode", "batch_size": 1, "context_tokens": 9, "duration_s": 0.01}\n'
    )
    argv = {
        "import": ["import", small, "-o", out],
        "sim-fit": ["sim", "fit", str(steps), "--from", "steps", "--output", out],
        "runbook": ["runbook", "--from", small, "--to", small, "-o", out],
    }[command]
    _refused(run_cli(*argv), "255 bytes")


@pytest.mark.parametrize(
    "argv",
    [
        # OSError: File name too long (catalog/store.py resolve_catalog: Path.is_file)
        ["catalog", "show", "9" * 400],
        ["catalog", "diff", "é" * 300, "sglang==0.5.23"],
        ["import", str(SMALL / "compose.yaml"), "--engine", "é" * 300],
        # ValueError: Invalid IPv6 URL (bench/execute.py check_url: urlsplit)
        ["bench", "run", "--url", "http://[::1", "--burst", "1x10", "--no-probe"],
        ["bench", "run", "--url", "http://127.0.0.1:99999", "--burst", "1x10", "--no-probe"],
        # OverflowError: bind(): port must be 0-65535 (sim serve; --time-scale nan passed too)
        ["sim", "serve", "--time-scale", "nan", "--port", "1"],
        ["sim", "serve", "--", "--port", "70000"],
    ],
)
def test_hostile_option_values_are_refused(run_cli: RunCli, argv: list[str]) -> None:
    result = run_cli(*argv)
    assert result.code == 2, result
    assert "Traceback" not in result.err
    assert result.err.strip()
