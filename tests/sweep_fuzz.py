"""A third, independent generator: a systematic sweep of every field by every hostile value.

The other two generators draw at random: :mod:`tests.fuzzing` mutates bytes, lines and trees
of the bundled examples, :mod:`tests.schema_fuzz` sets random schema paths to random values.
This one is built differently, the way a hostile user's own generator would be:

* **Exhaustive, not sampled.** For each input kind it lists *slots* (every concrete node of the
  bundled example, every field path of the kind's schema, every key, every CSV cell, every
  line of a text format) and *value classes* (below), and walks their product with a stride
  coprime to its size, so ``len(slots) * len(classes)`` inputs of a kind cover every pair once.
* **Text-level values.** A value is written into the document *as text* of its format (YAML,
  JSON, CSV, Prometheus text, a log line), so it can be what no parsed value is: a tag
  (``!!python/object/apply``, ``!!binary``, ``!!set``, ``!!timestamp``), an anchor that
  references itself, a billion-laughs bomb at one field, a duplicate key, a merge key, a
  complex (unhashable) key, ``NaN``/``Infinity``/``-0``/``1e999`` JSON numbers, a lone
  surrogate escape, a YAML 1.1 ``yes``/``0o17``/``1:30``/``2001-12-14`` that becomes a bool,
  an int or a date, 10,000 levels of flow nesting, 200,000 list items.
* **Encodings of the whole file**: a UTF-8 BOM, UTF-16, CRLF, bare CR, 300,000 blank or comment
  lines first, a second document, a ``%TAG`` directive, tabs, trailing NULs, a cut mid-character.
* **More kinds**: fleet files (``fleet plan`` over a real git repository), engine catalogs
  (``catalog show``/``diff`` on a file), Prometheus text (every parser of it), engine logs
  (``sim fit --from sglang-log|vllm-log``), kube plans between specs, and ``cli``: hostile
  option values and environment variables (``--out`` into missing or unwritable places,
  ports 0/70000, counts of 10**12, NaN rates, ``COMPOSE_PROFILES``/``COLUMNS``/``TIERCTL_*``
  junk) on the commands that take them.

It also checks what the others do not: no output may carry the sentinel secret a hostile
value holds (``SWEEP_SECRET``, in a URL's userinfo, a header, an env value), in any encoding
(raw, URL, base64, hex); a run that prints it is counted as an exception (``SecretLeak``).

``input_at(seeds, seed, n)`` rebuilds input ``n`` from ``(seed, n)`` alone, like the others;
``benchmarks/fuzz.py --generator sweep`` runs it (``all`` runs the three interleaved).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import subprocess
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.fuzzing import EXAMPLES, KINDS, PATH_FORMS, Seeds, _cli, _lib
from tests.fuzzing import _paths as tree_paths

#: Kinds only this generator makes (their seeds: :func:`add_seeds`).
EXTRA_KINDS = ("fleet", "catalog", "promtext", "enginelog", "kube", "cli")
SWEEP_KINDS = (*KINDS, *EXTRA_KINDS)

#: Written into hostile values; no command may print or write it back in any encoding.
SWEEP_SECRET = "hunter2-s3cr3t-0xC0FFEE"

_HOLE = "TIERCTLHOLE7F3A"
_KEYHOLE = "TIERCTLKEY7F3A"

_YAML_KINDS = ("spec", "compose", "workload", "fleet", "kube")
_JSON_KINDS = ("plan", "results", "costmodel", "catalog")
_JSONL_KINDS = ("jsonl", "mooncake", "steplog")
_CSV_KINDS = ("azure", "burstgpt")
_TEXT_KINDS = ("promtext", "enginelog")


# --------------------------------------------------------------------------- value classes


def _nest(open_: str, close: str, n: int, leaf: str = "1") -> str:
    return open_ * n + leaf + close * n


def _laughs_yaml() -> str:
    """A billion-laughs bomb as one flow value (each level defines the anchor the next uses)."""
    levels = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 9):
        levels.append(f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    return "[" + ", ".join(levels) + "]"


#: YAML text of hostile values (each fits after ``key: `` or ``- `` in block context).
YAML_VALUES: tuple[str, ...] = (
    # numbers YAML 1.1 reads in surprising ways, and numbers at and past float's edges
    "1.0e999",
    "-1.0e999",
    ".nan",
    ".inf",
    "-.inf",
    "1.0e308",
    "-0",
    "-0.0",
    "5.0e-324",
    "0x7fffffffffffffffffffffff",
    "0o777",
    "0b1010",
    "1_000_000",
    "190:20:30",
    "99999999999999999999999999999",
    "9" * 4300,
    "!!float 1e400",
    "!!int '0x10'",
    # bools and nulls where anything else is
    "yes",
    "off",
    "~",
    "",
    "!!null ''",
    "!!bool 'true'",
    # strings
    '"\\0"',
    '"a\\0b"',
    '"\\e[31mred\\e[0m\\r\\x08"',
    '"\\u202eevil\\u2066\\u200b"',
    '"\\ud800"',
    '"\\udc80trail"',
    '"\\U0010ffff\\ufeff"',
    '"[/]"',
    '"[bold red]x[/bold red] [fp8] [link=file:///etc/passwd]y[/link]"',
    '"../../../../../../etc/passwd"',
    "/etc/shadow",
    "~root/.ssh/id_rsa",
    '"~"',
    f'"http://admin:{SWEEP_SECRET}@127.0.0.1:1/v1"',
    f'"Authorization: Bearer {SWEEP_SECRET}"',
    '"$(touch /tmp/pwned) `id` ${HOME} $$ %s%n {0.__class__}"',
    '"' + "x" * 100_000 + '"',
    '"' + "\\n" * 20_000 + '"',
    "|\n" + "".join("  line\n" for _ in range(5000)),
    '"\\t \\v\\f"',
    '" "',
    "-- --output=/tmp/x",
    # tags, dates and other constructors
    '!!python/object/apply:os.system ["true"]',
    "!!python/name:os.system",
    "!!binary AAECAwQF/w==",
    "!!timestamp 2001-12-14t21:59:43.10-05:00",
    "2001-12-14",
    "!!set {a, b}",
    "!!omap [a: 1, b: 2]",
    "!!pairs [a: 1, a: 2]",
    "!custom x",
    "!<tag:yaml.org,2002:str> x",
    "!reset []",
    "!override {a: 1}",
    # containers
    "[]",
    "{}",
    "[1, a, null, [], {}, 1.5, true]",
    "{[a, b]: c}",
    "{1: a, null: b, true: c, 1.5: d}",
    "{a: 1, a: 2}",
    "&self [*self]",
    "&selfmap {a: *selfmap}",
    "{<<: {a: 1}}",
    "{<<: [{a: 1}, 5]}",
    "*undefined_anchor",
    _nest("[", "]", 10_000),
    _nest("{a: ", "}", 10_000),
    _laughs_yaml(),
    "[" + "1, " * 200_000 + "1]",
    "{" + ", ".join(f"k{i}: {i}" for i in range(50_000)) + "}",
)

#: JSON text of hostile values.
JSON_VALUES: tuple[str, ...] = (
    "NaN",
    "Infinity",
    "-Infinity",
    "-0",
    "-0.0",
    "1e999",
    "-1e999",
    "1e308",
    "5e-324",
    "123456789012345678901234567890",
    "9" * 4300,
    "1" + "0" * 400 + ".5",
    "true",
    "false",
    "null",
    '"1e308"',
    '"NaN"',
    '"\\u0000"',
    '"a\\u0000b"',
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\\u001b[31m\\u202e\\u2066"',
    '"[/]"',
    '"[bold]x[/bold][fp8]"',
    '"../../../../../../etc/passwd"',
    '"/etc/shadow"',
    '"~"',
    f'"http://admin:{SWEEP_SECRET}@127.0.0.1:1/v1"',
    '"' + "x" * 100_000 + '"',
    '""',
    "[]",
    "{}",
    '[1, "a", null, [], {}, 1.5, true]',
    '{"a": 1, "a": 2}',
    '{"": null}',
    _nest("[", "]", 10_000),
    _nest('{"a": ', "}", 10_000),
    "[" + "1," * 200_000 + "1]",
    # not JSON at all
    "undefined",
    "0x10",
    "'single'",
    "01",
    "+1",
    ".5",
    "1.",
)

#: CSV cells.
CSV_VALUES: tuple[str, ...] = (
    "",
    " ",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "-0",
    "1e999",
    "1e308",
    "-1",
    "9" * 4300,
    "0x10",
    "1_000",
    "\uff11\uff12",  # fullwidth digits: int() reads them
    "\u00b2",  # superscript two: isdigit() but not int()
    "\u0663",  # Arabic-Indic three
    '"a,b"',
    '"multi\nline"',
    '"unterminated',
    'x"y',
    "\x00",
    "=cmd|' /C calc'!A0",
    "x" * 100_000,
    "1,2,3,4,5,6,7,8,9",
    "2023-13-45 25:61:61",
    "1970-01-01 00:00:00",
    "9999-12-31 23:59:59.9999999",
    "0001-01-01 00:00:00",
    "\ufeff1",
    f"http://admin:{SWEEP_SECRET}@127.0.0.1:1/",
)

#: Values of one Prometheus sample line's parts.
PROM_VALUES: tuple[str, ...] = (
    "NaN",
    "+Inf",
    "-Inf",
    "1e999",
    "-0",
    "9" * 4300,
    "0x10",
    "",
    "1 99999999999999999999999",
    '{le="+Inf"',
    '{a="\\"}',
    '{a="' + "x" * 100_000 + '"}',
    "{" + ",".join(f'l{i}="{i}"' for i in range(5000)) + "}",
    '{a="\x00"}',
    '{="v"}',
    "{" * 5000,
    '"' * 5000,
)


def _lines(n: int, line: str) -> str:
    return line * n


#: Whole-file encodings (applied to one input in four).
def _encodings() -> tuple[tuple[str, Callable[[bytes], bytes]], ...]:
    return (
        ("bom", lambda b: b"\xef\xbb\xbf" + b),
        ("utf16", lambda b: b.decode("utf-8", "surrogateescape").encode("utf-16", "surrogatepass")),
        ("crlf", lambda b: b.replace(b"\n", b"\r\n")),
        ("cr", lambda b: b.replace(b"\n", b"\r")),
        ("blank-lines", lambda b: b"\n" * 300_000 + b),
        ("comment-lines", lambda b: b"# c\n" * 300_000 + b),
        ("second-doc", lambda b: b + b"\n---\n" + b),
        ("end-marker", lambda b: b + b"\n...\n\x00garbage: [\n"),
        ("tag-directive", lambda b: b"%TAG !! tag:yaml.org,2002:python/object:\n---\n" + b),
        ("yaml-directive", lambda b: b"%YAML 9.9\n---\n" + b),
        ("tabs", lambda b: b.replace(b"  ", b"\t")),
        ("trailing-nul", lambda b: b + b"\x00" * 64),
        ("cut-mid-char", lambda b: b + "é".encode()[:1]),
        ("latin1", lambda b: b.decode("utf-8", "replace").encode("latin-1", "replace")),
    )


ENCODINGS = _encodings()


# --------------------------------------------------------------------------- seeds


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "f",
        "GIT_AUTHOR_EMAIL": "f@x",
        "GIT_COMMITTER_NAME": "f",
    }
    env["GIT_COMMITTER_EMAIL"] = "f@x"
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def _prom_seed() -> bytes:
    lines = [
        "# HELP vllm:num_requests_running Number of requests running.",
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 2.0',
        'vllm:num_requests_waiting{engine="0",model_name="m"} 0.0',
        'vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="400"} 1.0',
        'vllm:e2e_request_latency_seconds_bucket{le="0.5",model_name="m"} 3.0',
        'vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 4.0',
        'vllm:e2e_request_latency_seconds_count{model_name="m"} 4.0',
        'vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.5',
        'sglang:num_running_reqs{tp_rank="0"} 1.0',
        'smg_http_responses_total{status_code="200"} 10',
        'smg_http_requests_total{path="/v1/completions"} 10',
        'smg_worker_health_checks_total{result="ok"} 5',
        'smg_worker_health{worker="http://127.0.0.1:30001"} 1',
        "process_start_time_seconds 1.76e9",
    ]
    return ("\n".join(lines) + "\n").encode()


def _log_seed() -> bytes:
    lines = [
        "[2026-12-01 08:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 8192, "
        "#cached-token: 0, token usage: 0.01, #running-req: 0, #queue-req: 0, "
    ]
    for b, k in [(1, 10_000), (4, 50_000), (8, 400_000), (16, 100_000), (32, 900_000)]:
        step = 0.005 + 0.001 * b + 1e-8 * k
        lines.append(
            f"[2026-12-01 08:00:{b:02d} TP0] Decode batch. #running-req: {b}, #token: {k}, "
            f"token usage: 0.10, cuda graph: True, gen throughput (token/s): {b / step:.4f}, "
            "#queue-req: 0, "
        )
    for i in range(1, 9):
        lines.append(
            f"(APIServer pid=1) INFO 12-01 09:21:35 [loggers.py:199] Engine 000: Iteration({i}): "
            f"{i % 2} context requests, {512 * (i % 2)} context tokens, {i} generation requests, "
            f"{i} generation tokens, iteration elapsed time: {1.5 + i:.2f} ms, "
            "CPU KV cache usage: 3.0%"
        )
    return ("\n".join(lines) + "\n").encode()


def add_seeds(seeds: Seeds, work: Path) -> Seeds:
    """Add the seeds of :data:`EXTRA_KINDS` (a fleet over a two-commit git repository, the
    smallest shipped catalog, a metrics page, an engine log, specs for ``kube plan``)."""
    if "fleet" in seeds.by_kind:
        return seeds
    repo = work / "fleet-repo"
    host = repo / "gpu01"
    host.mkdir(parents=True, exist_ok=True)
    small = (EXAMPLES / "small-model" / "compose.yaml").read_bytes()
    (host / "compose.yaml").write_bytes(small)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "v1")
    _git(repo, "tag", "v1")
    text = small.decode()
    at = text.rindex("      - --enable-metrics")  # r2's: NEW gives it one more flag
    (host / "compose.yaml").write_text(text[:at] + "      - --log-requests\n" + text[at:])
    _git(repo, "commit", "-qam", "v2")
    _git(repo, "tag", "v2")
    fleet = {
        "fleet": "f",
        "repo": str(repo),
        "old": "v1",
        "new": "v2",
        "hosts": [
            {
                "name": "gpu01",
                "file": "gpu01/compose.yaml",
                "agent_url": "http://127.0.0.1:1",
                "labels": {"role": "canary"},
            }
        ],
        "waves": {"size": 1, "max_parallel": 1},
    }
    seeds.by_kind["fleet"] = [yaml.safe_dump(fleet, sort_keys=False).encode()]
    from tierctl.catalog.store import data_dir

    smallest = min(data_dir().glob("*.json"), key=lambda p: p.stat().st_size)
    doc = json.loads(smallest.read_text())
    # A catalog of a dozen flags: the walk reaches every field without 1,000 copies.
    if isinstance(doc.get("flags"), list):
        doc["flags"] = doc["flags"][:12]
    elif isinstance(doc.get("flags"), dict):
        doc["flags"] = dict(list(doc["flags"].items())[:12])
    seeds.by_kind["catalog"] = [json.dumps(doc, indent=1).encode()]
    seeds.by_kind["promtext"] = [_prom_seed()]
    seeds.by_kind["enginelog"] = [_log_seed()]
    seeds.by_kind["kube"] = list(seeds.by_kind["spec"])
    seeds.by_kind["cli"] = [b"{}"]
    # The CLI kind's fixed inputs (written now: a --kinds selection drops the other seeds).
    (work / "sweep-plan.json").write_bytes(seeds.by_kind["plan"][0])
    (work / "sweep-fleet.yaml").write_bytes(seeds.by_kind["fleet"][0])
    (work / "sweep-steps.jsonl").write_bytes(seeds.by_kind["steplog"][0])
    return seeds


# --------------------------------------------------------------------------- slots


@dataclass(frozen=True)
class Slot:
    """Where a value goes: a tree path (a value, or ``key``: the key's name), a CSV cell, a
    text line (``part``: what of the line)."""

    path: tuple[Any, ...]
    key: bool = False
    add: bool = False


def _schema_paths(kind: str) -> list[tuple[Any, ...]]:
    """Field paths of a kind's pydantic model or schema (``"*"``/``"[]"`` wildcards)."""
    from tests.schema_fuzz import schema_for, schema_paths

    if kind in ("spec", "workload", "plan", "compose", "kube"):
        schema = schema_for("spec" if kind == "kube" else kind)
    elif kind == "fleet":
        from tierctl.rollout.fleet import FleetFile

        schema = FleetFile.model_json_schema()
    elif kind == "catalog":
        from tierctl.engine_catalog import Catalog

        schema = Catalog.json_schema()
    else:
        return []
    return [p for p, _ in schema_paths(schema, max_depth=6)]


def _parse(kind: str, data: bytes) -> Any:
    if kind in _YAML_KINDS:
        return yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if kind in _JSON_KINDS:
        return json.loads(data)
    if kind in _JSONL_KINDS:
        return [json.loads(x) for x in data.decode().splitlines() if x.strip()]
    if kind in _CSV_KINDS:
        return [row.split(",") for row in data.decode().splitlines()]
    return data.decode().splitlines()


_SLOT_CACHE: dict[tuple[str, int], list[Slot]] = {}


def slots(kind: str, which: int, doc: Any) -> list[Slot]:
    """Every slot of seed ``which`` of ``kind``: each node's value and key, an added key in
    each mapping, and each schema field path (also where the seed leaves it out)."""
    cached = _SLOT_CACHE.get((kind, which))
    if cached is not None:
        return cached
    out: list[Slot] = []
    if kind in _CSV_KINDS or kind in _TEXT_KINDS:
        rows = doc
        for r, row in enumerate(rows):
            cells = row if kind in _CSV_KINDS else _line_parts(row)
            out.extend(Slot((r, c)) for c in range(len(cells)))
            out.append(Slot((r,), add=True))
    else:
        for path in tree_paths(doc):
            out.append(Slot(path))
            node = _get(doc, path)
            if path and isinstance(path[-1], str):
                out.append(Slot(path, key=True))
            if isinstance(node, dict):
                out.append(Slot((*path, _KEYHOLE), add=True))
        for path in _schema_paths(kind):
            out.append(Slot(path))
    _SLOT_CACHE[(kind, which)] = out
    return out


def _line_parts(line: str) -> list[str]:
    return line.split(" ") if line else [""]


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    node = doc
    for part in path:
        node = node[part]
    return node


def _set_path(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """Set ``path`` in ``doc`` (wildcards: the first existing key or item, or a new one)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head == "[]" or isinstance(head, int):
        items = doc if isinstance(doc, list) else []
        i = head if isinstance(head, int) else 0
        if i < len(items):
            items[i] = _set_path(items[i], rest, value)
        else:
            items.append(_set_path(None, rest, value))
        return items
    node = doc if isinstance(doc, dict) else {}
    if head == "*":
        head = next((k for k in node if isinstance(k, str)), "x")
    node[head] = _set_path(node.get(head), rest, value)
    return node


def _rename_key(doc: Any, path: tuple[Any, ...]) -> Any:
    parent = _get(doc, path[:-1])
    if isinstance(parent, dict) and path[-1] in parent:
        items = [(_KEYHOLE if k == path[-1] else k, v) for k, v in parent.items()]
        parent.clear()
        parent.update(items)
    return doc


# --------------------------------------------------------------------------- emitting


def _values_for(kind: str) -> tuple[str, ...]:
    if kind in _YAML_KINDS:
        return YAML_VALUES
    if kind in _CSV_KINDS:
        return CSV_VALUES
    if kind == "promtext":
        return PROM_VALUES
    if kind == "enginelog":
        return CSV_VALUES + PROM_VALUES
    return JSON_VALUES


def _yaml_key(raw: str) -> str:
    """A hostile value as a mapping key (flow collections and multi-line scalars quoted)."""
    if "\n" in raw or len(raw) > 1000:
        return json.dumps(raw[:1000])
    return raw if raw else '""'


def emit(kind: str, doc: Any, slot: Slot, raw: str) -> bytes:
    """The document with ``raw`` written as text at ``slot``."""
    if kind in _CSV_KINDS or kind in _TEXT_KINDS:
        rows = [list(r) if kind in _CSV_KINDS else _line_parts(r) for r in doc]
        r = slot.path[0]
        if slot.add:
            rows.insert(r, [raw])
        else:
            rows[r][slot.path[1]] = raw
        sep = "," if kind in _CSV_KINDS else " "
        text = "\n".join(sep.join(cells) for cells in rows) + "\n"
        return text.encode("utf-8", "surrogatepass")
    doc = _rename_key(doc, slot.path) if slot.key else _set_path(doc, slot.path, _HOLE)
    if kind in _YAML_KINDS:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text = yaml.dump(doc, Dumper=dumper, sort_keys=False, width=10**9, allow_unicode=True)
        if slot.key:
            text = text.replace(_KEYHOLE, _yaml_key(raw), 1)
        elif "\n" in raw:  # a block scalar: indent its lines under the key
            at = text.find(_HOLE)
            line_start = text.rfind("\n", 0, at) + 1
            indent = " " * (at - line_start + 2)
            first, *rest = raw.split("\n")
            text = text.replace(_HOLE, first + "\n" + "\n".join(indent + x for x in rest), 1)
        else:
            text = text.replace(_HOLE, raw, 1)
        text = text.replace(_KEYHOLE, "extra_key")
        return text.encode("utf-8", "surrogatepass")
    if kind in _JSONL_KINDS:
        text = "".join(json.dumps(row) + "\n" for row in doc)
    else:
        text = json.dumps(doc, indent=1)
    if slot.key:
        key = raw if raw.startswith('"') else json.dumps(raw)
        text = text.replace(json.dumps(_KEYHOLE), key, 1)
    else:
        text = text.replace(json.dumps(_HOLE), raw, 1)
    text = text.replace(json.dumps(_KEYHOLE), '"extra_key"')
    return text.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------- the stream

#: A stride coprime to every product size the walk meets (a prime above them all).
_STRIDE = 1_000_003


def _pick(rng: random.Random, n_slots: int, n_values: int, m: int, seed: int) -> tuple[int, int]:
    """Pair ``m`` of the kind's walk: every (slot, value) once per ``n_slots * n_values``."""
    size = n_slots * n_values
    offset = zlib.crc32(f"{seed}".encode()) % size
    idx = (m * _STRIDE + offset) % size
    return idx // n_values, idx % n_values


def input_at(seeds: Seeds, seed: int, n: int) -> tuple[str, int, bytes, str | None]:
    """Input ``n`` of the sweep stream of ``seed``: (kind, seed index, bytes, path form)."""
    import copy

    rng = random.Random(f"tierctl-sweep:{seed}:{n}")
    kinds = [k for k in SWEEP_KINDS if seeds.by_kind.get(k)]
    kind = kinds[n % len(kinds)]
    m = n // len(kinds)
    if kind == "cli":
        return kind, 0, cli_input(seed, m), None
    pool = seeds.by_kind[kind]
    which = m % len(pool)
    doc = _parse(kind, pool[which])
    all_slots = slots(kind, which, doc)
    values = _values_for(kind)
    s, v = _pick(rng, len(all_slots), len(values), m // len(pool), seed)
    data = emit(kind, copy.deepcopy(doc), all_slots[s], values[v])
    if rng.random() < 0.25:
        _, encode = rng.choice(ENCODINGS)
        data = encode(data)
    form = rng.choice(PATH_FORMS) if rng.randrange(48) == 0 else None
    return kind, which, data[: 8 * 1024 * 1024], form


def inputs(seeds: Seeds, count: int, seed: int) -> Iterator[tuple[str, int, bytes]]:
    """``count`` inputs of the sweep (kind, seed index, bytes), for the tests."""
    for n in range(count):
        kind, which, data, _ = input_at(seeds, seed, n)
        yield kind, which, data


# --------------------------------------------------------------------------- the CLI itself

#: Option values as a shell would pass them (no NUL: argv and environ cannot hold one).
CLI_VALUES: tuple[str, ...] = (
    "0",
    "-1",
    "70000",
    "65536",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "1e999",
    "1000000000000",
    "99999999999999999999999",
    "",
    " ",
    "x",
    "1x",
    "8x",
    "x8",
    "0x0",
    "-5x-5",
    "99999999x99999999",
    "1.5",
    "[/]",
    "../../../../x.out",
    "{work}/no/such/dir/x.out",
    "{work}",
    "{work}/input.yaml/x.out",
    "/dev/full",
    "/proc/version",
    "/dev/null",
    "~/x.out",
    f"http://admin:{SWEEP_SECRET}@127.0.0.1:1/",
    "http://127.0.0.1:70000/",
    "http://[::1",
    "ftp://127.0.0.1:1/",
    "127.0.0.1:99999",
    "127.0.0.1:-1",
    "1.2.3.4.5:80",
    "[::1]:",
    ":",
    "host:port",
    "1e999h",
    "-5m",
    "0s",
    "9" * 400,
    "sglang==" + "9" * 700,
    "vllm==../../../etc/passwd",
    "==",
    "é" * 300,
    "a\nb",
    "--help",
)

_SMALL = ["--workload", "burst", "--count", "2", "--input-tokens", "2000", "--output-tokens", "4"]
_HAMMER = ["--workload", "hammer", "--rate", "1", "--duration-s", "5"]
_BENCH = ["bench", "run", "--url", "http://127.0.0.1:1", "--no-probe", "--max-duration", "3"]
_BENCH_OUT = [*_BENCH, "--burst", "1x10", "--timeout", "1", "--no-plots"]

#: (argv template, environment template): ``{V}`` is the hostile value; ``{spec}``,
#: ``{compose}``, ``{old}``, ``{trace}``, ``{plan}``, ``{fleet}``, ``{work}``, ``{steps}``
#: the seeds. Only commands that end by themselves (no server that would serve on a good value).
CLI_TEMPLATES: tuple[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], ...] = (
    (("render", "{spec}", "-o", "{V}"), ()),
    (("render", "{spec}", "--target", "kubernetes", "-o", "{V}"), ()),
    (("render", "{spec}", "--profile", "{V}"), ()),
    (("plan", "--from", "{old}", "--to", "{compose}", "-o", "{V}"), ()),
    (("plan", "--from", "{old}", "--to", "{V}"), ()),
    (("plan", "--from", "{old}", "--to", "{compose}", "--protect", "{V}", "--format", "json"), ()),
    (("runbook", "--from", "{old}", "--to", "{compose}", "-o", "{V}"), ()),
    (("import", "{compose}", "-o", "{V}"), ()),
    (("import", "{compose}", "--engine", "{V}"), ()),
    (("import", "{compose}", "--tier", "{V}", "--host", "{V}"), ()),
    (("import", "{compose}", "--profile", "{V}"), ()),
    (("import", "{compose}"), (("COMPOSE_PROFILES", "{V}"),)),
    (("validate", "--no-compose-binary", "{compose}"), (("COMPOSE_PROFILES", "{V}"),)),
    (("validate", "--no-compose-binary", "{compose}", "--engine", "{V}"), ()),
    (("validate", "--no-compose-binary", "{compose}", "--catalog", "{V}"), ()),
    (("validate", "--no-compose-binary", "{compose}", "--kube-version", "{V}"), ()),
    (("compose", "config", "{compose}", "-p", "{V}"), ()),
    (("compose", "config", "{compose}", "--env-file", "{V}"), ()),
    (("compose", "config", "{compose}"), (("COMPOSE_PROJECT_NAME", "{V}"),)),
    (("show", "{spec}"), (("COLUMNS", "{V}"),)),
    (("show", "{spec}"), (("TIERCTL_MAX_INPUT_MB", "{V}"),)),
    (("validate", "--spec", "{spec}"), (("TIERCTL_MAX_DEPTH", "{V}"),)),
    (("sim", "run", "--trace", "{trace}"), (("TIERCTL_MAX_TRACE_MB", "{V}"),)),
    (("sim", "run", "--workload", "burst", "--count", "{V}", "--input-tokens", "100"), ()),
    (("sim", "run", *_SMALL[:4], "--input-tokens", "{V}", "--output-tokens", "4"), ()),
    (("sim", "run", *_SMALL[:6], "--output-tokens", "{V}"), ()),
    (("sim", "run", "--workload", "hammer", "--rate", "{V}", "--duration-s", "5"), ()),
    (("sim", "run", "--workload", "hammer", "--rate", "1", "--duration-s", "{V}"), ()),
    (("sim", "run", "--workload", "day", "--hours", "{V}"), ()),
    (("sim", "run", *_SMALL, "--seed", "{V}"), ()),
    (("sim", "run", *_SMALL, "--engine-version", "{V}"), ()),
    (("sim", "run", *_SMALL, "--", "--chunked-prefill-size", "{V}"), ()),
    (("sim", "run", *_SMALL, "--", "--max-running-requests", "{V}"), ()),
    (("sim", "run", *_SMALL, "--", "--mem-fraction-static", "{V}"), ()),
    (("sim", "run", *_HAMMER, "--", "--max-total-tokens", "{V}"), ()),
    (("sim", "run", "--engine", "vllm", *_SMALL, "--", "--max-num-batched-tokens", "{V}"), ()),
    (("sim", "run", "--engine", "vllm", *_SMALL, "--", "--max-model-len", "{V}"), ()),
    (("sim", "compare", *_SMALL, "--control", "{V}", "--candidate", "--tp-size 1"), ()),
    (("sim", "fit", "{steps}", "--from", "steps", "--output", "{V}"), ()),
    (("sim", "fit-plan", *_SMALL, "--control", "", "--candidate", "", "--output", "{V}"), ()),
    (("sim", "serve", "--port", "{V}", "--time-scale", "nan"), ()),
    (("sim", "serve", "--time-scale", "{V}", "--port", "70000"), ()),
    ((*_BENCH_OUT, "--output", "{V}"), ()),
    ((*_BENCH[:2], "--url", "{V}", "--burst", "1x10", "--no-probe", "--max-duration", "3"), ()),
    ((*_BENCH, "--burst", "{V}", "--timeout", "1"), ()),
    ((*_BENCH, "--hammer-rate", "{V}", "--hammer-count", "2", "--timeout", "1"), ()),
    ((*_BENCH, "--hammer-rate", "1", "--hammer-tokens", "{V}", "--hammer-count", "2"), ()),
    ((*_BENCH, "--trace", "{trace}", "--time-scale", "{V}", "--timeout", "1"), ()),
    ((*_BENCH, "--burst", "1x10", "--timeout", "{V}"), ()),
    ((*_BENCH[:-1], "{V}", "--burst", "1x10", "--timeout", "1"), ()),
    ((*_BENCH[:4], "--probe", "{V}", "--burst", "1x10", "--max-duration", "2"), ()),
    ((*_BENCH, "--burst", "1x10", "--tokenizer", "{V}"), ()),
    ((*_BENCH, "--workload", "{V}"), ()),
    (("readout", "--spec", "{spec}", "--prometheus", "{V}"), ()),
    (("readout", "--spec", "{spec}", "--prometheus", "http://127.0.0.1:1", "--window", "{V}"), ()),
    (("readout", "--spec", "{spec}", "--prometheus", "http://127.0.0.1:1", "--step", "{V}"), ()),
    (("readout", "--spec", "{spec}", "--prometheus", "http://127.0.0.1:1", "--end", "{V}"), ()),
    (("readout", "--spec", "{spec}", "--prometheus", "http://127.0.0.1:1", "--match", "{V}"), ()),
    (
        ("readout", "--spec", "{spec}", "--prometheus", "http://127.0.0.1:1", "--tolerance", "{V}"),
        (),
    ),
    (("readout", "--spec", "{spec}", "--prometheus", "http://127.0.0.1:1", "--control", "{V}"), ()),
    (
        (
            "judge",
            "serve",
            "--spec",
            "{spec}",
            "--prometheus",
            "http://127.0.0.1:1",
            "--listen",
            "{V}",
        ),
        (),
    ),
    (("rollout", "--plan", "{plan}", "--driver", "local", "--dry-run", "--state-dir", "{V}"), ()),
    (("rollout", "--plan", "{plan}", "--driver", "local", "--dry-run", "--journal", "{V}"), ()),
    (("rollout", "--plan", "{plan}", "--driver", "local", "--dry-run", "--time-scale", "{V}"), ()),
    (("rollout", "--plan", "{plan}", "--driver", "local", "--dry-run", "--soak-s", "{V}"), ()),
    (("rollout", "--plan", "{plan}", "--driver", "local", "--dry-run", "--gate-host", "{V}"), ()),
    (("rollout", "--plan", "{V}", "--driver", "local", "--dry-run"), ()),
    (("catalog", "show", "{V}"), ()),
    (("catalog", "show", "sglang==0.5.23", "--flag", "{V}"), ()),
    (("catalog", "diff", "{V}", "sglang==0.5.23"), ()),
    (("fleet", "plan", "{fleet}", "--spec", "{V}"), ()),
    (("fleet", "plan", "{V}"), ()),
    (("kube", "plan", "{spec}", "{spec}", "--manifest", "{V}"), ()),
)


def cli_input(seed: int, m: int) -> bytes:
    """CLI input ``m``: a template and a value (every pair once per product), as JSON."""
    t, v = _pick(random.Random(m), len(CLI_TEMPLATES), len(CLI_VALUES), m, seed)
    argv, env = CLI_TEMPLATES[t]
    return json.dumps({"template": t, "argv": argv, "env": env, "value": CLI_VALUES[v]}).encode()


# --------------------------------------------------------------------------- commands


def _no_leak(
    run: Callable[[], tuple[int, str, str]], where: Path | None = None
) -> Callable[[], tuple[int, str, str]]:
    """``run``, then fail (``SecretLeak``) if its output, or a file it wrote under ``where``,
    holds :data:`SWEEP_SECRET` raw, URL-encoded, base64 or hex."""

    def files() -> dict[Path, tuple[int, int]]:
        """Every plain file under ``where``, with its (mtime, size)."""
        found: dict[Path, tuple[int, int]] = {}
        if where is not None and where.is_dir():
            for f in where.rglob("*"):
                with contextlib.suppress(OSError):
                    if f.is_file() and not f.is_symlink():
                        st = f.stat()
                        found[f] = (st.st_mtime_ns, st.st_size)
        return found

    def wrapped() -> tuple[int, str, str]:
        # Only what this run wrote or changed: an earlier input's file (``import -o`` to a
        # path that is the secret URL, whose spec names its output after it) was blamed on
        # every later run. A snapshot, not a time cut: file times tick coarser than the clock.
        before = files()
        code, out, err = run()
        text = out + err
        for f, stamp in files().items():
            if before.get(f) != stamp and stamp[1] < 4_000_000:
                with contextlib.suppress(OSError):
                    text += f.read_text(errors="replace")
        for form in _secret_forms():
            if form in text:
                raise SecretLeak(f"the sentinel secret appears ({form[:12]}...)")
        return code, out, err

    return wrapped


class SecretLeak(Exception):
    """A run printed or wrote the sentinel secret back."""


def _secret_forms() -> list[str]:
    from urllib.parse import quote

    s = SWEEP_SECRET.encode()
    return [SWEEP_SECRET, quote(SWEEP_SECRET, safe=""), base64.b64encode(s).decode(), s.hex()]


def _with_env(
    env: dict[str, str], cwd: Path, fn: Callable[[], tuple[int, str, str]]
) -> Callable[[], tuple[int, str, str]]:
    def wrapped() -> tuple[int, str, str]:
        saved = {k: os.environ.get(k) for k in env}
        here = os.getcwd()
        os.environ.update(env)
        os.chdir(cwd)
        try:
            return fn()
        finally:
            os.chdir(here)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    return wrapped


def _cli_command(
    path: Path, seeds: Seeds, work: Path
) -> list[tuple[str, Callable[[], tuple[int, str, str]]]]:
    doc = json.loads(path.read_text())
    sandbox = work / "cli" / "a" / "b" / "c" / "d"
    sandbox.mkdir(parents=True, exist_ok=True)
    value = str(doc["value"]).replace("{work}", str(work / "cli"))
    fills = {
        "{spec}": str(seeds.compose_specs[0]),
        "{compose}": str(seeds.compose_olds[0]),
        "{old}": str(seeds.compose_olds[0]),
        "{trace}": str(EXAMPLES / "workloads" / "traces" / "tiny.jsonl"),
        "{plan}": str(work / "sweep-plan.json"),
        "{fleet}": str(work / "sweep-fleet.yaml"),
        "{steps}": str(work / "sweep-steps.jsonl"),
        "{work}": str(work / "cli"),
    }

    def fill(s: str) -> str:
        s = s.replace("{V}", value)
        for k, v in fills.items():
            s = s.replace(k, v)
        return s

    argv = [fill(a) for a in doc["argv"]]
    env = {k: fill(v) for k, v in doc["env"]}
    name = "cli-" + "-".join(a for a in doc["argv"][:2] if not a.startswith("{"))
    run = _with_env(env, sandbox, lambda: _cli(argv))
    raw = list(doc["argv"])
    url = any(a == "{V}" and i and raw[i - 1] in _URL_OPTIONS for i, a in enumerate(raw))
    return [(name, _no_leak(run, work / "cli") if url else run)]


#: Options whose value is a URL: one with userinfo is printed and written masked.
_URL_OPTIONS = ("--url", "--prometheus", "--probe")


def _promtext_commands(path: Path) -> list[tuple[str, Callable[[], tuple[int, str, str]]]]:
    from tierctl.engines.vllm import _cache_config_labels
    from tierctl.proxies.sglang_router import parse_counters
    from tierctl.readers import read_text
    from tierctl.runtime.promtext import metric_total, parse_metrics

    def text() -> str:
        return read_text(path, what="metrics page")

    return [
        ("parse_metrics", lambda: _lib(lambda: metric_total(parse_metrics(text()), "x"))),
        ("parse_counters", lambda: _lib(lambda: parse_counters(text()))),
        ("cache-config", lambda: _lib(lambda: _cache_config_labels(text(), ("vllm:",)))),
    ]


def _engine_log_readers(path: Path) -> None:
    """Every engine profile's reader of its own log text."""
    from tierctl.engines import kinds, profile_for
    from tierctl.engines.vllm import parse_non_default_args
    from tierctl.readers import read_text

    text = read_text(path, what="engine log")
    parse_non_default_args(text)
    for kind in kinds():
        profile = profile_for(kind)
        profile.fatal_lines(text)
        for attr in ("decode_log_stats", "iteration_log_steps"):
            fn = getattr(profile, attr, None)
            if callable(fn):
                fn(text)


def _enginelog_commands(path: Path) -> list[tuple[str, Callable[[], tuple[int, str, str]]]]:
    p = str(path)
    return [
        (
            "sim-fit-sglang-log",
            lambda: _cli(["sim", "fit", p, "--from", "sglang-log", "--format", "json"]),
        ),
        (
            "sim-fit-vllm-log",
            lambda: _cli(["sim", "fit", p, "--from", "vllm-log", "--format", "json"]),
        ),
        ("sim-fit-auto", lambda: _cli(["sim", "fit", p, "--format", "json"])),
        ("engine-log-readers", lambda: _lib(lambda: _engine_log_readers(path))),
    ]


def _render_then_validate(spec: str, work: Path) -> tuple[int, str, str]:
    """``render --target kubernetes -o F``, then ``validate --target kubernetes F``."""
    out = work / "sweep-k8s.yaml"
    out.unlink(missing_ok=True)
    code, stdout, stderr = _cli(["render", spec, "--target", "kubernetes", "-o", str(out)])
    if code != 0 or not out.exists():
        return code, stdout, stderr
    return _cli(["validate", "--target", "kubernetes", str(out)])


def extra_commands(
    kind: str, path: Path, seeds: Seeds, work: Path
) -> list[tuple[str, Callable[[], tuple[int, str, str]]]]:
    """The commands that read an input of one of :data:`EXTRA_KINDS`."""
    p = str(path)
    if kind == "fleet":
        spec = str(seeds.compose_specs[0])
        return [
            ("fleet-plan", _no_leak(lambda: _cli(["fleet", "plan", p, "--format", "json"]))),
            ("fleet-plan-spec", _no_leak(lambda: _cli(["fleet", "plan", p, "--spec", spec]))),
        ]
    if kind == "catalog":
        return [
            ("catalog-show", lambda: _cli(["catalog", "show", p, "--format", "json"])),
            ("catalog-show-text", lambda: _cli(["catalog", "show", p])),
            ("catalog-diff", lambda: _cli(["catalog", "diff", p, "sglang==0.5.23"])),
            (
                "validate-catalog",
                lambda: _cli(
                    ["validate", "--no-compose-binary", "--catalog", p, str(seeds.compose_olds[0])]
                ),
            ),
        ]
    if kind == "promtext":
        return _promtext_commands(path)
    if kind == "enginelog":
        return _enginelog_commands(path)
    if kind == "kube":
        old = str(seeds.compose_specs[0])
        return [
            ("kube-plan", lambda: _cli(["kube", "plan", old, p])),
            ("kube-plan-old", lambda: _cli(["kube", "plan", p, old])),
            ("render-kube", lambda: _cli(["render", p, "--target", "kubernetes"])),
            ("validate-kube", lambda: _render_then_validate(p, work)),
        ]
    if kind == "cli":
        return _cli_command(path, seeds, work)
    raise ValueError(kind)


def coverage(seeds: Seeds) -> dict[str, int]:
    """Slots x values per kind: the inputs a kind needs for its walk to cover every pair."""
    out = {}
    for kind in SWEEP_KINDS:
        if kind == "cli":
            out[kind] = len(CLI_TEMPLATES) * len(CLI_VALUES)
            continue
        pool = seeds.by_kind.get(kind) or []
        out[kind] = sum(
            len(slots(kind, i, _parse(kind, data))) * len(_values_for(kind))
            for i, data in enumerate(pool)
        )
    return out


__all__ = [
    "CLI_TEMPLATES",
    "CLI_VALUES",
    "ENCODINGS",
    "EXTRA_KINDS",
    "SWEEP_KINDS",
    "SWEEP_SECRET",
    "SecretLeak",
    "add_seeds",
    "coverage",
    "emit",
    "extra_commands",
    "input_at",
    "inputs",
    "slots",
]
