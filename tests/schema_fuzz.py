"""Inputs generated from tierctl's own schemas, then made hostile: the schema half of fuzzing.

The hand-listed mutations of :mod:`tests.fuzzing` only know the fields someone wrote down. Here
every input type is driven by its schema, read at run time, so a field added to a model is
fuzzed the day it is added:

* tier specs: ``TierSpec.model_json_schema()``; bench workloads: ``BenchWorkload``'s; rollout
  plans: ``Plan``'s; compose files: the vendored compose-spec JSON schema
  (``src/tierctl/contracts/schema/compose-spec.json``); traces: one row schema per format of
  :mod:`tierctl.traces` (its field names, docs/traces.md), numbers and ``hash_ids``.
* :func:`schema_paths` walks a schema (``$ref``, ``anyOf``/``oneOf``/``allOf``, properties,
  ``additionalProperties``/``patternProperties``, items) and lists every field path with its
  sub-schema; :func:`generate` draws a value that satisfies a sub-schema (types, enums,
  ``pattern`` through a small regex generator, bounds, required keys).
* :func:`hostile_input` takes a bundled example of the kind (so that the document gets past the
  first checks and reaches the deep code) and, 1-3 times, sets one schema path to a value drawn
  from its schema or to a hostile one (a wrong type, a huge or non-finite number, a NUL, rich
  markup, a 100 KB string, 300 levels of nesting, a path escape), or replaces an existing node.

Everything is drawn from one ``random.Random``: a seed reproduces an input. The strategies for
Hypothesis are :func:`hostile_documents` (``st.integers()`` seeds mapped through the generator).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import random
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import yaml
from hypothesis import strategies as st

from tests.fuzzing import KINDS, PATH_FORMS, Seeds, mutate
from tests.fuzzing import _paths as tree_paths

#: The kinds whose documents are generated from a schema (traces share the row schemas).
SCHEMA_KINDS = ("spec", "compose", "workload", "plan", "jsonl", "mooncake", "azure", "burstgpt")

Schema = dict[str, Any]
Path_ = tuple[str, ...]  # "*" is any key of a mapping, "[]" any item of a list


# --------------------------------------------------------------------------- the schemas


@functools.cache
def schema_for(kind: str) -> Schema:
    """The JSON schema of an input kind, read from the code (or the vendored file)."""
    if kind == "spec":
        from tierctl.spec.tier_spec import TierSpec

        return TierSpec.model_json_schema()
    if kind == "workload":
        from tierctl.bench.workload import BenchWorkload

        return BenchWorkload.model_json_schema()
    if kind == "plan":
        from tierctl.rollout.plan_schema import Plan

        return Plan.model_json_schema()
    if kind == "compose":
        text = (resources.files("tierctl.contracts") / "schema" / "compose-spec.json").read_text()
        return dict(json.loads(text))
    return _trace_row_schema(kind)


def _trace_row_schema(fmt: str) -> Schema:
    """One row of a trace format: its arrival and token fields (from tierctl.traces) are
    numbers; the JSON formats may carry ``hash_ids`` and ``rid``."""
    from tierctl.traces import _FORMATS

    keys = _FORMATS[fmt].keys
    props: dict[str, Schema] = {
        keys[0]: {"type": "number", "minimum": 0, "maximum": 1e6},
        keys[1]: {"type": "integer", "minimum": 1, "maximum": 1_000_000},
        keys[2]: {"type": "integer", "minimum": 0, "maximum": 10_000},
    }
    if fmt in ("jsonl", "mooncake"):
        props["hash_ids"] = {"type": "array", "items": {"type": "integer"}, "maxItems": 8}
        props["rid"] = {"type": "string"}
    return {"type": "object", "properties": props, "required": list(keys)}


def _resolve(root: Schema, node: Schema) -> Schema:
    seen = 0
    while "$ref" in node and seen < 20:
        ref = str(node["$ref"])
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        seen += 1
    return node


def _alternatives(root: Schema, node: Schema) -> list[Schema]:
    node = _resolve(root, node)
    alts = node.get("anyOf") or node.get("oneOf")
    if alts:
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        return [{**rest, **_resolve(root, a)} for a in alts if isinstance(a, dict)] or [rest]
    if node.get("allOf"):
        merged = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            merged.update(_resolve(root, part))
        return [merged]
    return [node]


def schema_paths(root: Schema, max_depth: int = 7) -> list[tuple[Path_, Schema]]:
    """Every field path of ``root`` with its sub-schema, through refs and alternatives."""
    out: list[tuple[Path_, Schema]] = []
    seen: set[tuple[Path_, str]] = set()

    def walk(node: Schema, path: Path_) -> None:
        if len(path) > max_depth:
            return
        for alt in _alternatives(root, node):
            key = (path, json.dumps(alt, sort_keys=True, default=str)[:200])
            if key in seen:
                continue
            seen.add(key)
            if path:
                out.append((path, alt))
            for name, sub in (alt.get("properties") or {}).items():
                if isinstance(sub, dict):
                    walk(sub, (*path, name))
            extra = alt.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                walk(extra, (*path, "*"))
            for sub in (alt.get("patternProperties") or {}).values():
                if isinstance(sub, dict):
                    walk(sub, (*path, "*"))
            items = alt.get("items")
            if isinstance(items, dict):
                walk(items, (*path, "[]"))

    walk(root, ())
    return out


# --------------------------------------------------------------------------- generation


def _from_regex(pattern: str, rng: random.Random) -> str:
    """A string matching ``pattern`` (the subset of regex schemas use), or "" when unsure."""
    import re._parser as sre  # type: ignore[import-not-found]

    try:
        tree = sre.parse(pattern)
    except re.error:
        return ""

    def emit(items: Any, depth: int = 0) -> str:
        out = []
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(arg))
            elif name == "NOT_LITERAL":
                out.append("a" if arg != ord("a") else "b")
            elif name == "ANY":
                out.append(rng.choice("abc0_"))
            elif name == "IN":
                out.append(_class(arg))
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                lo, hi, sub = arg
                n = rng.randint(lo, min(hi, lo + 3))
                out.extend(emit(sub, depth + 1) for _ in range(n))
            elif name == "SUBPATTERN":
                out.append(emit(arg[-1], depth + 1))
            elif name == "BRANCH":
                out.append(emit(rng.choice(arg[1]), depth + 1))
            elif name == "CATEGORY":
                out.append(_category(str(arg)))
        return "".join(out)

    def _class(arg: Any) -> str:
        if arg and str(arg[0][0]) == "NEGATE":
            return "a"
        op, val = rng.choice(arg)
        if str(op) == "LITERAL":
            return chr(val)
        if str(op) == "RANGE":
            return chr(rng.randint(val[0], val[1]))
        if str(op) == "CATEGORY":
            return _category(str(val))
        return "a"

    def _category(name: str) -> str:
        if "DIGIT" in name:
            return rng.choice("0123456789") if "NOT" not in name else "a"
        if "SPACE" in name:
            return " " if "NOT" not in name else "a"
        return rng.choice("abcxyz_") if "NOT" not in name else "-"

    return emit(tree)


_WORDS = ["a", "r1", "r2", "x", "main", "qwen-r1", "proxy", "gpu0", "v1", "tier"]


def generate(root: Schema, node: Schema, rng: random.Random, depth: int = 0) -> Any:
    """A value that satisfies ``node`` (a sub-schema of ``root``), mostly small."""
    alt = rng.choice(_alternatives(root, node))
    if "const" in alt:
        return copy.deepcopy(alt["const"])
    if alt.get("enum"):
        return copy.deepcopy(rng.choice(alt["enum"]))
    types = alt.get("type")
    if isinstance(types, list):
        types = rng.choice(types) if types else None
    if types is None:
        types = (
            "object"
            if "properties" in alt or "additionalProperties" in alt
            else "array"
            if "items" in alt
            else rng.choice(["string", "integer", "boolean"])
        )
    if types == "object":
        return _object(root, alt, rng, depth)
    if types == "array":
        items = alt.get("items") if isinstance(alt.get("items"), dict) else {}
        lo = int(alt.get("minItems", 0))
        hi = int(alt.get("maxItems", lo + 3))
        n = rng.randint(lo, max(lo, min(hi, lo + (3 if depth < 5 else 0))))
        values = [generate(root, items, rng, depth + 1) for _ in range(n)]
        if alt.get("uniqueItems"):
            unique: list[Any] = []
            for v in values:
                if v not in unique:
                    unique.append(v)
            values = unique
        return values
    if types == "string":
        if "pattern" in alt:
            return _from_regex(str(alt["pattern"]), rng)
        lo = int(alt.get("minLength", 0))
        hi = int(alt.get("maxLength", max(lo, 12)))
        word = rng.choice(_WORDS)
        return (word * (lo // len(word) + 1))[: max(lo, min(hi, len(word)))]
    if types in ("integer", "number"):
        lo, hi = _bounds(alt, integer=types == "integer")
        if types == "integer":
            ilo = math.ceil(lo)
            return rng.randint(ilo, max(ilo, math.floor(min(hi, lo + 64))))
        return round(rng.uniform(lo, max(lo, min(hi, lo + 100.0))), 3) or (lo + hi) / 2
    if types == "boolean":
        return rng.random() < 0.5
    return None


def _bounds(alt: Schema, *, integer: bool) -> tuple[float, float]:
    """The closed range a number schema allows (exclusive bounds nudged inside)."""
    step = 1.0 if integer else 1e-3
    lo = float(alt.get("minimum", 0.0 if "maximum" not in alt else alt["maximum"] - 64))
    if "exclusiveMinimum" in alt:
        lo = max(lo, float(alt["exclusiveMinimum"]) + step)
    hi = float(alt.get("maximum", lo + 64))
    if "exclusiveMaximum" in alt:
        hi = min(hi, float(alt["exclusiveMaximum"]) - step)
    return lo, max(lo, hi)


def _object(root: Schema, alt: Schema, rng: random.Random, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    props = alt.get("properties") or {}
    required = set(alt.get("required") or ())
    optional_p = 0.35 if depth < 4 else 0.05
    for name, sub in props.items():
        if name in required or rng.random() < optional_p:
            out[name] = generate(root, sub, rng, depth + 1)
    extra = alt.get("additionalProperties")
    least = int(alt.get("minProperties", 0))
    if isinstance(extra, dict) and (depth < 5 or least):
        words = rng.sample(_WORDS, k=min(len(_WORDS), max(least, rng.randint(0, 2))))
        for word in words:
            out[word] = generate(root, extra, rng, depth + 1)
    for pattern, sub in (alt.get("patternProperties") or {}).items():
        if depth < 5 and rng.random() < 0.2 and isinstance(sub, dict):
            key = _from_regex(pattern, rng) + rng.choice(_WORDS)
            out[key] = generate(root, sub, rng, depth + 1)
    return out


# --------------------------------------------------------------------------- hostility


def _deep(n: int) -> Any:
    node: Any = "leaf"
    for _ in range(n):
        node = [node]
    return node


#: Values no schema asks for: the hostile half of every draw.
HOSTILE: list[Any] = [
    None,
    True,
    "",
    [],
    {},
    {"a": {"b": [1, {"c": None}]}},
    -1,
    0,
    2**63,
    10**30,
    -(10**30),
    1e308,
    -1e-308,
    float("nan"),
    float("inf"),
    float("-inf"),
    "1e18",
    "NaN",
    "9" * 5000,
    "\x00",
    "a\x00b",
    "[/]",
    "[bold]x[/bold]",
    "[fp8]",
    "x" * 100_000,
    "é" * 3000,
    "\u202e\ufeff",
    "${SECRET}",
    "$",
    "../../../../etc/hostname",
    "/etc/passwd",
    "--output=/tmp/x",
    "a b; rm -rf /",
    "http://user:password@127.0.0.1:1/",
]


def hostile_value(rng: random.Random) -> Any:
    """One hostile value (a deep nesting some of the time)."""
    if rng.random() < 0.05:
        return _deep(rng.choice([80, 300]))
    return copy.deepcopy(rng.choice(HOSTILE))


def _set(doc: Any, path: Path_, value: Any, rng: random.Random) -> Any:
    """Set ``path`` (with "*"/"[]" resolved to an existing or new key/item) in ``doc``."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head == "[]":
        items = doc if isinstance(doc, list) else []
        if items and rng.random() < 0.8:
            i = rng.randrange(len(items))
            items[i] = _set(items[i], rest, value, rng)
        else:
            items.append(_set(None, rest, value, rng))
        return items
    node = doc if isinstance(doc, dict) else {}
    key = head
    if head == "*":
        keys = [k for k in node if isinstance(k, str)]
        key = rng.choice(keys) if keys and rng.random() < 0.8 else rng.choice(_WORDS)
    node[key] = _set(node.get(key), rest, value, rng)
    return node


def mutate_document(doc: Any, kind: str, rng: random.Random) -> Any:
    """1-3 schema-driven edits of ``doc``: a schema path set to a valid or hostile value, or
    an existing node replaced by a hostile one."""
    schema = schema_for(kind)
    paths = _paths_cached(kind)
    # Mostly one edit: a document wrong in one place gets past the other checks to the code
    # that reads that place.
    for _ in range(rng.choices((1, 2, 3), weights=(6, 3, 1))[0]):
        r = rng.random()
        if r < 0.45 and paths:
            path, sub = rng.choice(paths)
            doc = _set(doc, path, generate(schema, sub, rng), rng)
        elif r < 0.8 and paths:
            path, _ = rng.choice(paths)
            doc = _set(doc, path, hostile_value(rng), rng)
        else:
            target = rng.choice(list(tree_paths(doc)))
            if not target:
                doc = hostile_value(rng)
                continue
            parent = doc
            for part in target[:-1]:
                parent = parent[part]
            parent[target[-1]] = hostile_value(rng)
    return doc


@functools.cache
def _paths_cached(kind: str) -> list[tuple[Path_, Schema]]:
    return schema_paths(schema_for(kind))


# --------------------------------------------------------------------------- documents


def _parse_seed(data: bytes, kind: str) -> Any:
    if kind in ("jsonl", "mooncake"):
        return [json.loads(x) for x in data.decode().splitlines() if x.strip()]
    if kind in ("azure", "burstgpt"):
        lines = data.decode().splitlines()
        head = lines[0].split(",")
        return [dict(zip(head, row.split(","), strict=False)) for row in lines[1:]]
    if kind == "plan":
        return json.loads(data)
    return yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _dump(doc: Any, kind: str) -> bytes:
    if kind in ("jsonl", "mooncake"):
        rows = doc if isinstance(doc, list) else [doc]
        return "".join(json.dumps(r, default=str) + "\n" for r in rows).encode()
    if kind in ("azure", "burstgpt"):
        rows = [r for r in (doc if isinstance(doc, list) else [doc]) if isinstance(r, dict)]
        head = list(dict.fromkeys(k for r in rows for k in r)) or ["x"]
        body = "".join(
            ",".join(str(r.get(k, "")).replace("\n", " ") for k in head) + "\n" for r in rows
        )
        return (",".join(map(str, head)) + "\n" + body).encode("utf-8", "surrogatepass")
    if kind == "plan":
        return json.dumps(doc, default=str).encode()
    try:
        # libyaml's emitter (pure Python's is most of the generator's time at size).
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text = yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=True)
        return text.encode("utf-8", "surrogatepass")
    except (yaml.YAMLError, RecursionError, UnicodeError):
        return json.dumps(doc, default=str).encode("utf-8", "surrogatepass")


def hostile_input(seeds: Seeds, kind: str, rng: random.Random) -> tuple[int, bytes]:
    """(seed index, bytes): a bundled example of ``kind`` edited from its schema, or (one in
    eight) a whole document generated from the schema."""
    pool = seeds.by_kind[kind]
    which = rng.randrange(len(pool))
    if kind in ("jsonl", "mooncake", "azure", "burstgpt"):
        rows = _parse_seed(pool[which], kind)
        schema = schema_for(kind)
        if rng.random() < 0.25:
            rows.append(generate(schema, schema, rng))
        k = rng.randrange(len(rows))
        rows[k] = mutate_document(rows[k], kind, rng)
        return which, _dump(rows, kind)
    if rng.random() < 0.125:
        schema = schema_for(kind)
        return which, _dump(generate(schema, schema, rng), kind)
    doc = _parse_seed(pool[which], kind)
    return which, _dump(mutate_document(doc, kind, rng), kind)


def hostile_inputs(seeds: Seeds, count: int, seed: int) -> Iterator[tuple[str, int, bytes]]:
    """``count`` (kind, seed index, bytes) inputs over every schema kind, from ``seed``."""
    rng = random.Random(seed)
    kinds = [k for k in SCHEMA_KINDS if seeds.by_kind.get(k)]
    for n in range(count):
        kind = kinds[n % len(kinds)]
        which, data = hostile_input(seeds, kind, rng)
        yield kind, which, data


#: One input in this many is given through a special path (:data:`tests.fuzzing.PATH_FORMS`).
PATH_FORM_EVERY = 32


def input_at(seeds: Seeds, generator: str, seed: int, n: int) -> tuple[str, int, bytes, str | None]:
    """Input ``n`` of the stream ``(generator, seed)``: (kind, seed index, bytes, path form).

    Each input has its own generator, seeded from ``(seed, n)``, so that any one input is
    rebuilt without the ones before it, and workers can share a stream by index. ``both``
    takes even ``n`` from the mutation generator and odd ``n`` from the schema one.
    """
    if generator == "all":  # the three interleaved: mutation, schema, sweep
        generator, n = ("mutation", "schema", "sweep")[n % 3], n // 3
        if generator != "sweep":
            return input_at(seeds, generator, seed, n)
    if generator == "sweep":
        from tests.sweep_fuzz import input_at as sweep_input_at

        return sweep_input_at(seeds, seed, n)
    rng = random.Random(f"tierctl-fuzz:{seed}:{n}")
    if generator == "both":
        generator, n = ("mutation", n // 2) if n % 2 == 0 else ("schema", n // 2)
    if generator == "mutation":
        kinds = [k for k in KINDS if seeds.by_kind.get(k)]
        kind = kinds[n % len(kinds)]
        which = rng.randrange(len(seeds.by_kind[kind]))
        data = mutate(seeds.by_kind[kind][which], kind, rng)
    elif generator == "schema":
        kinds = [k for k in SCHEMA_KINDS if seeds.by_kind.get(k)]
        kind = kinds[n % len(kinds)]
        which, data = hostile_input(seeds, kind, rng)
    else:
        raise ValueError(generator)
    form = rng.choice(PATH_FORMS) if rng.randrange(PATH_FORM_EVERY) == 0 else None
    return kind, which, data, form


def hostile_documents(seeds: Seeds, kind: str) -> st.SearchStrategy[tuple[int, bytes]]:
    """A Hypothesis strategy of hostile inputs of ``kind`` (each drawn from a seed)."""
    return st.integers(0, 2**64).map(lambda s: hostile_input(seeds, kind, random.Random(s)))


def coverage(kind: str) -> list[str]:
    """The dotted schema paths of ``kind`` (what :func:`mutate_document` can reach)."""
    return sorted({".".join(p) for p, _ in _paths_cached(kind)})


__all__ = [
    "HOSTILE",
    "SCHEMA_KINDS",
    "coverage",
    "generate",
    "hostile_documents",
    "hostile_input",
    "hostile_inputs",
    "hostile_value",
    "input_at",
    "mutate_document",
    "schema_for",
    "schema_paths",
]


if __name__ == "__main__":  # pragma: no cover
    for k in SCHEMA_KINDS:
        print(k, len(_paths_cached(k)), "paths")
