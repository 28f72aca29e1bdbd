"""Reproducers of the fresh seed 2026120610's exceptions (issue #22, session 10), rebuilt by
``benchmarks/fuzz.py --generator all --seed 2026120610 --only N``.

- input 8495 (results): ``"failed": -Infinity`` in a bench results file's run counts was
  ``int(-inf)``, an OverflowError, in ``sim fit --from bench`` and the request reader;
- input 9004 (compose): a ulimit given as a 5,000-digit string was ``int()`` past Python's
  4,300-digit limit (ValueError) in ``validate`` and ``compose config``; Compose itself
  refuses it as out of int64 range (``strconv.Atoi``), and so does tierctl now;
- input 35654 (compose): a service named ``-.inf`` (a YAML float key): sorting the names was a
  TypeError; refused as Compose refuses it ("non-string key in services: -Inf");
- input 45650 (compose): a secret's ``mode`` of 105 digits was ``float()`` of the int, an
  OverflowError; a mode past int64 is refused, as Compose refuses it;
- seed 2026120611 input 5870 (compose, the second fresh seed): ``!reset []`` as a mapping key
  built a hashable object that JSON output failed on; a sequence or mapping as a key is
  refused by the YAML reader, as Compose refuses it ("invalid map key");
- seed 2026120612 input 25862 (compose, the third fresh seed; a hang): a flow list of 200,000
  wrong items made validate compute every schema error; at most 1,000 are drawn now.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult
from tierctl.errors import FOUND_MAX_CHARS, InputError
from tierctl.results import read_results

RunCli = Callable[..., CliResult]


def _results(path: Path, **counts: object) -> Path:
    req = {"outcome": "completed", "sent_s": 0.1, "input_tokens": 800, "output_tokens": 32,
           "ttft_s": 0.05, "tpot_s": 0.01, "itl_s": [0.01] * 31, "e2e_s": 0.4}  # fmt: skip
    run = {"sent": 1, "completed": 1, "failed": 0, "timed_out": 0, **counts, "requests": [req]}
    path.write_text(json.dumps({"schema_version": 1, "kind": "run", "run": run}))
    return path


@pytest.mark.parametrize("bad", [float("-inf"), float("inf"), float("nan"), -1, 0.5, 2.0**60])
def test_a_run_count_that_is_no_count_is_refused_naming_it(tmp_path: Path, bad: float) -> None:
    path = tmp_path / "results.json"
    # json.dumps writes inf and nan as JavaScript's Infinity and NaN, as the fuzz input had
    path.write_text(json.dumps({"kind": "run", "run": {"sent": 1, "failed": bad, "requests": []}}))
    with pytest.raises(InputError) as info:
        read_results(path)
    text = info.value.format()
    assert "failed is not a count" in text
    assert "run.failed" in text


def test_input_8495_sim_fit_from_bench_exits_2(run_cli: RunCli, tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    _results(path)
    path.write_text(path.read_text().replace('"failed": 0', '"failed": -Infinity'))
    r = run_cli("sim", "fit", str(path), "--from", "bench", "--", "vllm", "serve", "m")
    assert r.code == 2, r.err
    assert "failed is not a count" in r.err
    assert "Traceback" not in r.err
    # whole counts (and absent ones, and non-numbers, as before) still read
    ok = read_results(_results(tmp_path / "ok.json", failed=3, timed_out="n/a"))
    assert (ok.runs[0].failed, ok.runs[0].timed_out) == (3, 0)


def _ulimit_file(tmp_path: Path, soft: str) -> Path:
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  a:\n    image: x\n    ulimits:\n      nofile:\n"
        f'        soft: "{soft}"\n        hard: 5\n'
    )
    return path


@pytest.mark.parametrize("command", [("compose", "config")])
def test_input_9004_a_5000_digit_ulimit_is_out_of_range(
    run_cli: RunCli, tmp_path: Path, command: tuple[str, ...]
) -> None:
    path = _ulimit_file(tmp_path, "9" * 5000)
    r = run_cli(*command, str(path))
    assert r.code == 2, r.out + r.err
    assert "value out of range" in r.err
    assert "Traceback" not in r.err
    assert "(5,000 characters)" in r.err
    # the offending value is named, not printed whole
    assert max(len(line) for line in r.err.splitlines()) < FOUND_MAX_CHARS + 200


@pytest.mark.parametrize(
    ("soft", "want"),
    [
        ("9223372036854775807", 9223372036854775807),
        ("-0009223372036854775808", -9223372036854775808),
        ("0" * 5000 + "7", 7),
    ],
)
def test_int64_ulimits_read_as_compose_reads_them(
    run_cli: RunCli, tmp_path: Path, soft: str, want: int
) -> None:
    r = run_cli("compose", "config", str(_ulimit_file(tmp_path, soft)), "--format", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["services"]["a"]["ulimits"]["nofile"]["soft"] == want


def test_9223372036854775808_is_past_int64(run_cli: RunCli, tmp_path: Path) -> None:
    r = run_cli("compose", "config", str(_ulimit_file(tmp_path, "9223372036854775808")))
    assert r.code == 2
    assert "value out of range" in r.err


@pytest.mark.parametrize(
    ("key", "shown"),
    [("5", "5"), ("-.inf", "-Inf"), ("1.5", "1.5"), ("true", "true"), ("~", "<nil>")],
)
def test_input_35654_a_service_named_by_a_number_is_refused_as_compose_does(
    run_cli: RunCli, tmp_path: Path, key: str, shown: str
) -> None:
    """``-.inf:`` as a service name: sorting the names was a TypeError (float against str);
    Compose says "non-string key in services: -Inf"."""
    path = tmp_path / "compose.yaml"
    path.write_text(f"services:\n  a:\n    image: x\n  {key}:\n    image: y\n")
    r = run_cli("compose", "config", str(path))
    assert r.code == 2, r.out + r.err
    assert f"non-string key in services: {shown}" in r.err
    path.write_text(f"services:\n  a:\n    image: x\nnetworks:\n  {key}: {{}}\n")
    r = run_cli("compose", "config", str(path))
    assert r.code == 2, r.out + r.err
    assert "non-string key in networks" in r.err


@pytest.mark.parametrize(
    ("mode", "want"),
    [("9" * 105, None), (str(2**63), None), (str(2**63 - 1), "0" + f"{2**63 - 1:o}")],
)
def test_input_45650_a_105_digit_file_mode(
    run_cli: RunCli, tmp_path: Path, mode: str, want: str | None
) -> None:
    """``mode: 999...9`` (105 digits) was ``float()`` of the int, an OverflowError; Compose
    decodes an int64 mode and refuses a larger one."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        "services:\n  a:\n    image: x\n    secrets:\n      - source: s\n"
        f"        mode: {mode}\nsecrets:\n  s:\n    file: ./compose.yaml\n"
    )
    r = run_cli("compose", "config", str(path), "--format", "json")
    if want is None:
        assert r.code == 2, r.out + r.err
        assert "invalid file mode" in r.err
        assert "Traceback" not in r.err
    else:
        assert r.code == 0, r.err
        assert json.loads(r.out)["services"]["a"]["secrets"][0]["mode"] == want


@pytest.mark.parametrize(
    "key", ["!reset []", "? [a, b]\n       ", "? {a: 1}\n       ", "!override {b: 2}"]
)
def test_seed_2026120611_input_5870_a_collection_as_a_mapping_key(
    run_cli: RunCli, tmp_path: Path, key: str
) -> None:
    """``!reset []: value`` as a logging option's key built a hashable ``Reset`` key, and
    ``compose config`` failed writing JSON (TypeError); Compose says "invalid map key". A
    sequence or mapping key is refused by the reader, located, for every file it reads."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        f"services:\n  a:\n    image: x\n    logging:\n      options:\n       {key}: v\n"
    )
    for command in (("compose", "config"), ("validate", "--no-compose-binary")):
        r = run_cli(*command, str(path))
        assert r.code == 2, r.out + r.err
        assert "invalid map key" in r.err
        assert "compose.yaml:6" in r.err
        assert "Traceback" not in r.err


def test_seed_2026120612_input_25862_a_long_wrong_list_is_not_every_error_computed(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """``device_write_bps: [1, 1, ...]`` (200,000 items, each "must be a mapping") made
    validate compute, sort and count 200,000 schema errors to print 20: 9 s of tierctl's own
    reading, 20 s with the Compose cross-check (the harness's hang). At most 1,000 are drawn;
    the count says "at least". The test counts the errors the validator yields, not seconds."""
    from tierctl.contracts import schema

    items = ", ".join(["1"] * 5000)
    path = tmp_path / "compose.yaml"
    path.write_text(
        f"services:\n  a:\n    image: x\n    blkio_config:\n      device_write_bps: [{items}]\n"
    )
    drawn = 0
    real = schema._validator

    def counting() -> object:
        v = real()

        class Counting:
            def iter_errors(self, data: object) -> object:
                nonlocal drawn
                for e in v.iter_errors(data):
                    drawn += 1
                    yield e

        return Counting()

    schema._validator = counting  # type: ignore[assignment]
    try:
        r = run_cli("validate", "--no-compose-binary", str(path))
    finally:
        schema._validator = real  # type: ignore[assignment]
    assert r.code == 1, r.err
    assert "and at least 980 more schema errors" in r.out
    assert drawn == schema.MAX_COLLECTED + 1
