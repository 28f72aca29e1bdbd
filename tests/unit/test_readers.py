"""The bounded reader: every hostile input is a located InputError, fast and small."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tierctl.errors import ComposeInputError, InputError, SpecError
from tierctl.readers import (
    Limits,
    csv_rows,
    decode,
    json_line,
    load_json,
    load_yaml,
    read_bytes,
    read_text,
)

BOMB = """a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_alias_bomb_is_refused_with_the_limit_and_how_to_raise_it() -> None:
    with pytest.raises(SpecError) as info:
        load_yaml(BOMB, "tier.yaml", error=SpecError)
    text = info.value.format()
    assert "tier.yaml:" in text
    assert "1,000,000 nodes" in text
    assert "TIERCTL_MAX_NODES" in text


def test_node_limit_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    small = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"
    assert load_yaml(small, "x.yaml").data["b"][2] == [1, 2, 3]
    monkeypatch.setenv("TIERCTL_MAX_NODES", "10")
    with pytest.raises(InputError, match="more than 10 nodes"):
        load_yaml(small, "x.yaml")


def test_recursive_anchor_is_located() -> None:
    with pytest.raises(ComposeInputError) as info:
        load_yaml("services:\n  a: &x\n    b: *x\n", "c.yaml", error=ComposeInputError)
    assert "refers to itself" in info.value.message
    assert info.value.location is not None
    assert info.value.location.line == 2


def test_depth_limit() -> None:
    deep = "a: " + "[" * 80 + "]" * 80 + "\n"
    with pytest.raises(InputError, match="deeper than 64") as info:
        load_yaml(deep, "d.yaml")
    assert "TIERCTL_MAX_DEPTH" in (info.value.fix or "")
    # Deeper than libyaml's own limit: still a located error, never a crash.
    with pytest.raises(InputError, match="not valid YAML"):
        load_yaml("a: " + "[" * 5000 + "\n", "d.yaml")


def test_shared_anchor_counts_depth_through_every_use() -> None:
    inner = "x: &x " + "[" * 40 + "]" * 40 + "\n"
    ok = inner + "y: *x\n"
    load_yaml(ok, "d.yaml")
    nested = inner + "y: " + "[" * 30 + "*x" + "]" * 30 + "\n"
    with pytest.raises(InputError, match="deeper than 64"):
        load_yaml(nested, "d.yaml")


def test_duplicate_keys_and_binary_tags() -> None:
    with pytest.raises(InputError, match=r"duplicate key 'a' \(first given at line 1\)"):
        load_yaml("a: 1\nb: 2\na: 3\n", "d.yaml")
    assert load_yaml("a: 1\na: 3\n", "d.yaml", duplicates=False).data == {"a": 3}
    with pytest.raises(InputError, match="!!binary values are not allowed") as info:
        load_yaml("a:\n  b: !!binary aGVsbG8=\n", "d.yaml")
    assert info.value.location is not None
    assert info.value.location.line == 2


def test_line_map_first_occurrence_and_through_aliases() -> None:
    doc = load_yaml("base: &b\n  k: 1\nuse:\n  <<: *b\n  z: [1, 2]\n", "m.yaml")
    assert doc.lines.line(("base", "k")) == 2
    assert doc.lines.line(("use", "z", 1)) == 5
    assert doc.lines.line(("use", "nope", "deeper")) == 3
    assert doc.data["use"]["k"] == 1


def test_bad_bytes_are_located(tmp_path: Path) -> None:
    p = tmp_path / "w.yaml"
    p.write_bytes(b"a: 1\nb: caf\xe9\n")
    with pytest.raises(InputError) as info:
        read_text(p, what="workload")
    assert info.value.location is not None
    assert (info.value.location.line, info.value.location.column) == (2, 7)
    assert "0xe9" in info.value.message
    assert decode(b"\xef\xbb\xbfa: 1\n", "x") == "a: 1\n"


def test_nul_in_path_directory_and_missing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="NUL byte"):
        read_bytes(str(tmp_path / "a\x00b"))
    with pytest.raises(InputError, match="is a directory"):
        read_bytes(tmp_path)
    with pytest.raises(InputError, match="cannot read trace file: no such file"):
        read_bytes(tmp_path / "missing.jsonl", what="trace")


def test_dev_zero_and_a_fifo_are_refused_without_blocking(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a regular file"):
        read_bytes("/dev/zero")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result: list[BaseException] = []

    def attempt() -> None:
        try:
            read_bytes(fifo)
        except InputError as exc:
            result.append(exc)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive(), "reading a FIFO with no writer blocked"
    assert result
    assert "not a regular file" in str(result[0])


def test_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "big.yaml"
    p.write_bytes(b"a: " + b"x" * (2 * 1024 * 1024) + b"\n")
    monkeypatch.setenv("TIERCTL_MAX_INPUT_MB", "1")
    with pytest.raises(InputError, match="larger than the 1 MiB limit") as info:
        read_text(p)
    assert "TIERCTL_MAX_INPUT_MB" in (info.value.fix or "")
    monkeypatch.setenv("TIERCTL_MAX_INPUT_MB", "zero")
    with pytest.raises(InputError, match="TIERCTL_MAX_INPUT_MB must be a positive integer"):
        read_text(p)


def test_json_limits() -> None:
    with pytest.raises(InputError, match="more than 400 digits") as info:
        json_line('{"a": ' + "9" * 5000 + "}", "t.jsonl", 7)
    assert info.value.location is not None
    assert info.value.location.line == 7
    with pytest.raises(InputError, match="deeper than"):
        load_json("[" * 100_000 + "]" * 100_000, "p.json")
    with pytest.raises(InputError, match="NaN is not a JSON number"):
        load_json('{"a": NaN}', "p.json")
    with pytest.raises(InputError, match="not JSON") as info:
        load_json('{\n"a": }', "p.json")
    assert info.value.location is not None
    assert info.value.location.line == 2
    assert load_json('{"a": [1, 2.5, "x"]}', "p.json") == {"a": [1, 2.5, "x"]}


def test_csv_field_limit_is_located() -> None:
    text = "a,b\n1,2\n3," + "x" * 2000 + "\n"
    header, rows = csv_rows(text, "t.csv", limits=Limits(max_field_bytes=1000))
    assert header == ["a", "b"]
    assert next(rows) == (2, {"a": "1", "b": "2"})
    with pytest.raises(InputError, match="larger than 1,000 bytes") as info:
        next(rows)
    assert info.value.location is not None
    assert info.value.location.line == 3
    assert "TIERCTL_MAX_CSV_FIELD_KB" in (info.value.fix or "")


def test_compose_never_imports_spec() -> None:
    """The layering is one-way: compose reads files, spec builds on it (never the reverse)."""
    import ast

    import tierctl.compose

    root = Path(tierctl.compose.__file__).parent
    offenders = []
    for file in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{file.name}: {n}" for n in names if n.startswith("tierctl.spec")]
    assert offenders == []


def test_every_input_goes_through_the_reader() -> None:
    """No module outside the reader parses YAML itself or reads a user's file unbounded."""
    import tierctl

    root = Path(tierctl.__file__).parent
    direct = []
    for file in sorted(root.rglob("*.py")):
        text = file.read_text(encoding="utf-8")
        rel = file.relative_to(root).as_posix()
        if rel in {"readers.py", "yaml12.py"}:
            continue
        for needle in ("yaml.safe_load(", "yaml.load(", "YAML(typ", "yaml.compose("):
            if needle in text:
                direct.append(f"{rel}: {needle}")
    assert direct == []


def test_dates_stay_strings_and_timestamp_tags_are_refused() -> None:
    assert load_yaml("a: 2001-12-14\nb: 2001-12-14T21:59:43Z\n", "d.yaml").data == {
        "a": "2001-12-14",
        "b": "2001-12-14T21:59:43Z",
    }
    with pytest.raises(InputError, match="!!timestamp values are not allowed"):
        load_yaml("a: !!timestamp 2001-12-14\n", "d.yaml")


#: Reads that are not of a user's input, each with why it need not pass through the reader.
#: Anything else that reads a file (``.read_text(``, ``.read_bytes(``, ``.open("rb")``) must.
OWN_READS = {
    "runtime/process.py": "the log of a process tierctl started; /proc",
    "rollout/drivers/local.py": "the driver's own state file and its engines' logs; /proc",
    "bundled_tokenizer.py": "package data",
    "contracts/schema.py": "package data",
    "kubernetes/schemas.py": "package data: the core Kubernetes schemas kubernetes-validate ships",
    "realengine/tiny_model.py": "its own source, hashed as the model's cache key",
    "demo/offline.py": "the file the demo rendered a step before",
    "demo/ingestion.py": "the log of the router the demo started",
    "bench/health.py": "/proc, and the tail of an engine log from a seek (bounded)",
    "catalog/wheel.py": "a wheel, hashed in chunks; build_catalog refuses a non-regular file",
    "agent/oplog.py": "the agent's own operation log, read at start to mark interrupted calls",
    "paths.py": "the existing output file, compared before it is replaced (not an input)",
    "testhosts/dockerd.py": "/proc/self/mounts, to unmount what a dockerd of its own left",
    "demo/fleet.py": "the fleet journal the demo's own rollout wrote a step before",
}


def test_every_other_file_read_goes_through_the_reader() -> None:
    """A read of a user's file outside readers.py is unbounded: a FIFO blocks, /dev/zero grows
    without end. Every such read found is one of the known non-input reads above."""
    import re

    import tierctl

    root = Path(tierctl.__file__).parent
    read = re.compile(r"\.read_text\(|\.read_bytes\(|\.open\(\"rb?\"\)|json\.load\(")
    found = sorted(
        {
            file.relative_to(root).as_posix()
            for file in root.rglob("*.py")
            if file.name != "readers.py" and read.search(file.read_text(encoding="utf-8"))
        }
    )
    assert [f for f in found if f not in OWN_READS] == []
    assert sorted(OWN_READS) == sorted(set(found) & set(OWN_READS))  # no stale entry
