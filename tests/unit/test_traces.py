"""The shared trace reader: the four formats, hash_ids, and bad rows rejected with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.errors import InputError
from tierctl.traces import TRACE_FORMATS, read_trace


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_jsonl_rows_are_sorted_and_shifted_to_zero(tmp_path):
    p = _write(
        tmp_path,
        "t.jsonl",
        '{"arrival_s": 12.5, "input_tokens": 10, "output_tokens": 3}\n'
        "\n"
        '{"arrival_s": 10.0, "input_tokens": 20, "output_tokens": 4}\n',
    )
    rows = read_trace(p, "jsonl")
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.line) for r in rows] == [
        (0.0, 20, 4, 3),
        (2.5, 10, 3, 1),
    ]


FORMAT_CASES = [
    (
        "mooncake",  # timestamps in milliseconds; hash_ids carried for the prefix cache
        '{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}\n'
        '{"timestamp": 1500, "input_length": 200, "output_length": 6}\n'
        '{"timestamp": 2500, "input_length": 1536, "output_length": 5, "hash_ids": [1, 2, 3]}\n',
        [(0.0, 1024, 10, (1, 2)), (1.5, 200, 6, ()), (2.5, 1536, 5, (1, 2, 3))],
    ),
    (
        "burstgpt",  # a zero response asks for one token
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "7,GPT-4,1087,0,1087,API log\n",
        [(0.0, 472, 18, ()), (2.0, 1087, 1, ())],
    ),
]


@pytest.mark.parametrize(("fmt", "text", "expected"), FORMAT_CASES)
def test_formats_give_arrival_tokens_and_hashes(tmp_path, fmt, text, expected):
    rows = read_trace(_write(tmp_path, "t.trace", text), fmt)
    assert [(r.arrival_s, r.input_tokens, r.output_tokens, r.hash_ids) for r in rows] == expected
    assert {r.block_tokens for r in rows} == {512}


def test_jsonl_keeps_rid_and_hash_ids_and_offsets_without_rebase(tmp_path):
    p = _write(
        tmp_path,
        "t.jsonl",
        '{"rid": "b", "arrival_s": 7.5, "input_tokens": 600, "output_tokens": 2, "hash_ids": [4]}\n'
        '{"arrival_s": 3.0, "input_tokens": 9, "output_tokens": 1}\n',
    )
    rows = read_trace(p, "jsonl", rebase=False)
    assert [(r.arrival_s, r.rid, r.hash_ids, r.line) for r in rows] == [
        (3.0, None, (), 2),
        (7.5, "b", (4,), 1),
    ]
    assert [r.arrival_s for r in read_trace(p, "jsonl")] == [0.0, 4.5]


def test_azure_date_times_are_relative_even_without_rebase(tmp_path):
    p = _write(
        tmp_path,
        "az.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.1805900,396,109\n",
    )
    for rows in (read_trace(p, "azure"), read_trace(p, "azure", rebase=False)):
        assert [r.input_tokens for r in rows] == [374, 396]
        assert rows[0].arrival_s == 0.0
        assert rows[1].arrival_s == pytest.approx(3.5)


def test_azure_csv_with_seven_fraction_digits(tmp_path):
    p = _write(
        tmp_path,
        "a.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n",
    )
    rows = read_trace(p, "azure")
    assert rows[1].arrival_s == pytest.approx(4.314579, abs=1e-6)
    assert (rows[1].input_tokens, rows[1].output_tokens) == (396, 109)


def test_limit_reads_only_the_first_rows(tmp_path):
    lines = "".join(
        f'{{"arrival_s": {i}, "input_tokens": 5, "output_tokens": 5}}\n' for i in range(10)
    )
    assert len(read_trace(_write(tmp_path, "t.jsonl", lines), "jsonl", limit=3)) == 3


BAD = [
    (
        "jsonl",
        '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 1}\n{"arrival_s": -1, "input_tokens": 5, "output_tokens": 1}\n',
        2,
        "negative arrival",
    ),
    (
        "jsonl",
        '{"arrival_s": 0, "input_tokens": 5.5, "output_tokens": 1}\n',
        1,
        "input tokens must be an integer",
    ),
    ("jsonl", '{"arrival_s": 0, "input_tokens": 5}\n', 1, "missing field(s) output_tokens"),
    ("jsonl", '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 1}\n{oops\n', 2, "not JSON"),
    (
        "jsonl",
        '{"arrival_s": "soon", "input_tokens": 5, "output_tokens": 1}\n',
        1,
        "arrival is not a number",
    ),
    (
        "jsonl",
        '{"arrival_s": 0, "input_tokens": 0, "output_tokens": 1}\n',
        1,
        "input tokens must be an integer >= 1",
    ),
    (
        "mooncake",
        '{"timestamp": 0, "input_length": 3, "output_len": 1}\n',
        1,
        "missing field(s) output_length",
    ),
    (
        "azure",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,2\nyesterday,10,2\n",
        3,
        "TIMESTAMP is not a date-time",
    ),
    (
        "azure",
        "TIME,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,2\n",
        1,
        "CSV header lacks column(s) TIMESTAMP",
    ),
    (
        "burstgpt",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,m,10,2,12,x\n2,m,ten,2,12,x\n",
        3,
        "input tokens is not a number",
    ),
]


@pytest.mark.parametrize(("fmt", "text", "line", "message"), BAD)
def test_bad_rows_are_rejected_with_file_and_line(tmp_path, fmt, text, line, message):
    p = _write(tmp_path, "bad.trace", text)
    with pytest.raises(InputError) as info:
        read_trace(p, fmt)
    rendered = info.value.format()
    assert f"bad.trace:{line}" in rendered
    assert message in rendered
    assert info.value.exit_code == 2


def test_empty_trace_and_unknown_format(tmp_path):
    with pytest.raises(InputError, match="no rows"):
        read_trace(_write(tmp_path, "e.jsonl", "\n"), "jsonl")
    with pytest.raises(InputError, match="unknown trace format"):
        read_trace(_write(tmp_path, "x.jsonl", ""), "parquet")
    with pytest.raises(InputError, match="cannot read trace file"):
        read_trace(tmp_path / "missing.jsonl")  # the format defaults to jsonl
    assert TRACE_FORMATS == ("jsonl", "mooncake", "azure", "burstgpt")


@pytest.mark.parametrize(
    ("fmt", "text", "needle"),
    [
        ("jsonl", '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 1}\nnot json\n', ":2"),
        ("jsonl", '{"arrival_s": "soon", "input_tokens": 5, "output_tokens": 1}\n', "arrival_s"),
        ("mooncake", '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": "x"}\n', "hash_ids"),
        ("jsonl", '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 1, "hash_ids": [1, true]}\n', "hash_ids"),
        ("azure", "a,b\n1,2\n", "TIMESTAMP"),
        ("jsonl", "", "no requests"),
    ],
)  # fmt: skip
def test_malformed_traces_are_located_input_errors(tmp_path, fmt, text, needle):
    p = _write(tmp_path, "t.txt", text)
    with pytest.raises(InputError) as exc:
        read_trace(p, fmt)
    assert needle in exc.value.format()
    assert str(p) in exc.value.format()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=1e5, allow_nan=False),
            st.integers(min_value=1, max_value=10**6),
            st.integers(min_value=1, max_value=10**5),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_jsonl_round_trip(tmp_path_factory, rows):
    # Law: reading what was written gives the same rows, sorted and shifted to start at 0.
    path = tmp_path_factory.mktemp("rt") / "t.jsonl"
    path.write_text(
        "".join(
            json.dumps({"arrival_s": a, "input_tokens": i, "output_tokens": o}) + "\n"
            for a, i, o in rows
        ),
        encoding="utf-8",
    )
    got = read_trace(path, "jsonl")
    t0 = min(a for a, _, _ in rows)
    assert sorted((r.arrival_s, r.input_tokens, r.output_tokens) for r in got) == sorted(
        (a - t0, i, o) for a, i, o in rows
    )
    assert [r.arrival_s for r in got] == sorted(r.arrival_s for r in got)
    assert got[0].arrival_s == 0.0


def test_the_reader_needs_none_of_the_extras():
    import subprocess
    import sys

    code = (
        "import sys, tierctl.traces;"
        "heavy = {'numpy', 'aiohttp', 'orjson', 'scipy', 'tokenizers', 'tierctl.sim', 'tierctl.bench'};"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
