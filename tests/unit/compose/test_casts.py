"""``tierctl.compose.casts``: strings at typed keys, as Compose's interpolation casts them.

The binary is the judge in tests/compose_oracle/typed.py (every path, every kind of string);
these pin the parsers' laws and the project reading without it.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.compose.casts import float32, go_bool, go_float, go_int
from tierctl.compose.forms import FormError
from tierctl.compose.project import project_config
from tierctl.errors import ComposeInputError


@given(st.integers(-(2**63), 2**63 - 1), st.sampled_from(["", "+", "0", "00"]))
def test_go_int_reads_every_int64(number: int, prefix: str) -> None:
    text = prefix + str(number) if number >= 0 else str(number)
    assert go_int(text) == number


@given(st.integers(2**63, 10**40) | st.integers(-(10**40), -(2**63) - 1))
def test_go_int_refuses_past_int64(number: int) -> None:
    with pytest.raises(FormError, match="value out of range"):
        go_int(str(number))


@pytest.mark.parametrize("text", ["", " 7", "7 ", "1_000", "0x10", "1.0", "1e3", "٣", "+-1"])
def test_go_int_refuses_what_strconv_refuses(text: str) -> None:
    with pytest.raises(FormError, match="invalid syntax"):
        go_int(text)


def test_go_int_reads_5000_digits_of_zeros_without_int_limits() -> None:
    assert go_int("0" * 5000 + "7") == 7
    with pytest.raises(FormError, match="out of range"):
        go_int("9" * 5000)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_float_reads_what_python_prints(value: float) -> None:
    assert go_float(repr(value)) == value


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_float32_keeps_a_float32_and_prints_it_shortest(value: float) -> None:
    single = float32(value)
    assert struct.unpack("f", struct.pack("f", single))[0] == value
    assert float32(single) == single


@pytest.mark.parametrize(
    ("text", "bits", "want"),
    [("1_000", 64, 1000.0), ("1_0.5", 64, 10.5), ("0x1p4", 64, 16.0), ("0x_1p4", 64, 16.0),
     (".5", 64, 0.5), ("5.", 64, 5.0), ("123456789", 32, 123456790.0), ("0.3", 32, 0.3)],
)  # fmt: skip
def test_go_float_forms(text: str, bits: int, want: float) -> None:
    assert go_float(text, bits) == want


@pytest.mark.parametrize(
    ("text", "why"),
    [("_1", "invalid syntax"), ("1__0", "invalid syntax"), ("1_", "invalid syntax"),
     ("0x10", "invalid syntax"), (" 1", "invalid syntax"), ("1e400", "value out of range"),
     ("inf", "unsupported value: \\+Inf"), ("NaN", "unsupported value: NaN")],
)  # fmt: skip
def test_go_float_refusals(text: str, why: str) -> None:
    with pytest.raises(FormError, match=why):
        go_float(text)


def test_go_float_32_bit_range() -> None:
    assert math.isclose(go_float("3.4e38", 32), 3.4e38, rel_tol=1e-7)
    with pytest.raises(FormError, match="out of range"):
        go_float("3.5e38", 32)


@pytest.mark.parametrize(
    ("text", "want"),
    [("true", True), ("TRUE", True), ("y", True), ("Yes", True), ("on", True),
     ("false", False), ("N", False), ("no", False), ("OFF", False)],
)  # fmt: skip
def test_go_bool(text: str, want: bool) -> None:
    assert go_bool(text) is want


@pytest.mark.parametrize("text", ["", "1", "0", "maybe", "t", "yes "])
def test_go_bool_refuses_the_rest(text: str) -> None:
    with pytest.raises(FormError, match="invalid boolean"):
        go_bool(text)


def _config(tmp_path: Path, text: str) -> dict[str, object]:
    path = tmp_path / "compose.yaml"
    path.write_text(text)
    return json.loads(json.dumps(project_config([path], None)))


def test_a_project_reads_typed_strings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("R", "3")
    svc = _config(
        tmp_path,
        "services:\n  a:\n    image: x\n    tty: 'yes'\n    read_only: 'off'\n"
        "    cpu_count: '+7'\n    cpus: '123456789'\n    deploy: {replicas: '${R}'}\n"
        "    healthcheck: {retries: '3', disable: 'false'}\n    ports: [{target: '80'}]\n",
    )["services"]["a"]  # type: ignore[index]
    assert svc["tty"] is True
    assert "read_only" not in svc  # false, left out as Compose leaves it out
    assert svc["cpu_count"] == 7
    assert svc["cpus"] == 123456790
    assert svc["deploy"]["replicas"] == 3
    assert svc["healthcheck"] == {"retries": 3}
    assert svc["ports"][0]["target"] == 80


def test_a_string_that_does_not_cast_is_refused_located(tmp_path: Path) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n  a:\n    image: x\n    cpu_shares: 1g\n")
    with pytest.raises(ComposeInputError) as info:
        project_config([path], None)
    text = info.value.format()
    assert "compose.yaml:4" in text
    assert (
        "error while interpolating services.a.cpu_shares: failed to cast to expected type: "
        'strconv.ParseInt: parsing "1g": invalid syntax'
    ) in text


def test_the_schema_sees_the_cast_value(tmp_path: Path) -> None:
    """``cpu_percent: "1.5"`` is refused as the float it becomes (an integer 0..100 or a
    string), as Compose validates after casting; the string passed before."""
    from tierctl.contracts.schema import refuse_invalid

    path = tmp_path / "compose.yaml"
    path.write_text("services:\n  a:\n    image: x\n    cpu_percent: '1.5'\n")
    with pytest.raises(ComposeInputError, match="cpu_percent"):
        project_config([path], None, check=refuse_invalid)


@pytest.mark.parametrize(
    ("key", "value", "want"),
    [("mem_swappiness", "60", "60"), ("mem_swappiness", "0", None), ("cpu_shares", "0", None),
     ("pids_limit", "0", None), ("shm_size", "1.5", None), ("cpu_shares", "1.7", 1),
     ("cpu_shares", str(2**63), -(2**63)), ("cpu_shares", str(2**64 - 1), -1),
     ("scale", "0", 0), ("attach", "false", False), ("mem_limit", str(2**63), None)],
)  # fmt: skip
def test_numbers_print_as_compose_prints_them(
    tmp_path: Path, key: str, value: str, want: object
) -> None:
    svc = _config(tmp_path, f"services:\n  a:\n    image: x\n    {key}: {value}\n")
    assert svc["services"]["a"].get(key) == want  # type: ignore[index, union-attr]


@pytest.mark.parametrize(
    ("body", "message"),
    [("healthcheck: {retries: -1}", "'services[a].healthcheck.retries' cannot parse value as "
      "'uint64': -1 overflows uint"),
     ("ports: [{target: -1}]", "'services[a].ports[0].target' cannot parse value as 'uint32'"),
     ("deploy: {replicas: -1}", "services.a.deploy.replicas: must be greater than or equal to 0"),
     ("scale: -1", "scale: must be greater than or equal to 0"),
     ("scale: 9223372036854775808", "scale: must be greater than or equal to 0")],
)  # fmt: skip
def test_negative_counts_are_refused_as_compose_refuses_them(
    tmp_path: Path, body: str, message: str
) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text(f"services:\n  a:\n    image: x\n    {body}\n")
    with pytest.raises(ComposeInputError) as info:
        project_config([path], None)
    assert message in info.value.format()


@pytest.mark.parametrize(
    "body",
    [
        "mem_limit: '" + "9" * 5000 + "'",  # float('9' * 5000) is inf: int() of it raised
        "build: {context: ., shm_size: '" + "9" * 5000 + "'}",
        "blkio_config: {device_read_bps: [{path: /dev/sda, rate: '" + "9" * 5000 + "'}]}",
        "cpus: '0x1p99999'",  # float.fromhex overflowed
        "ports: [{target: '" + "9" * 5000 + "'}]",  # int() of 5,000 digits (two places)
    ],
    ids=["mem_limit", "build.shm_size", "blkio.rate", "cpus-hex", "ports.target"],
)
def test_hostile_sizes_and_numbers_exit_2_or_read(
    run_cli: object, tmp_path: Path, body: str
) -> None:
    """Found by hand after the casts (session 11): each was an unhandled exception in
    ``compose config`` or ``validate``. Compose reads a size past int64 as the smallest
    int64 (float64 arithmetic, then the conversion) and refuses the rest."""
    path = tmp_path / "compose.yaml"
    path.write_text(f"services:\n  a:\n    image: x\n    {body}\n")
    for command in (("compose", "config"), ("validate", "--no-compose-binary")):
        r = run_cli(*command, str(path))  # type: ignore[operator]
        assert "Traceback" not in r.err
        assert r.code in (0, 1, 2), (command, r.err)
        if command[0] == "compose":
            assert r.code in (0, 2), r.err


def test_a_size_past_int64_is_the_smallest_int64(tmp_path: Path) -> None:
    svc = _config(tmp_path, "services:\n  a:\n    image: x\n    mem_limit: '" + "9" * 30 + "'\n")
    assert svc["services"]["a"]["mem_limit"] == str(-(2**63))  # type: ignore[index]
