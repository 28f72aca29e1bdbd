"""The file half of hostile-input fuzzing for fleet files and Kubernetes manifests, driven
through tierctl's CLI (issue #38, round 4).

A case is rebuilt from ``(seed, surface, n)`` alone (its own ``random.Random``), like the other
fuzzers' inputs (:func:`tests.schema_fuzz.input_at`, :mod:`tests.http_fuzz`). Two surfaces:

* **fleet**: a fleet file drawn from ``FleetFile.model_json_schema()`` (the pydantic model
  tierctl reads, :mod:`tierctl.rollout.fleet`), over a real two-commit git repository, then
  made hostile: one schema path set to a :func:`tests.schema_fuzz.hostile_value` or a
  fleet-specific one (ports ``99999``, ``-1``, ``"1 "``, ``http://[::1``, a 300-character
  host, unicode digits); run by ``fleet plan`` (json and text), ``runbook --fleet -o``,
  ``rollout --fleet --dry-run`` and ``readout --fleet`` (which may also exit 3: inconclusive).
* **kube**: a manifest of the public corpus (``tests/fixtures/kube_public``) or one generated
  whole, edited along the paths of the real schema of its kind: the Kubernetes 1.33 strict
  schemas ``kubernetes-validate`` ships (Deployment, StatefulSet, Pod, Service) or tierctl's
  LeaderWorkerSet schema (``kubernetes/crds``); run by ``validate`` (auto and ``--target
  kubernetes``, json and text; the bytes also on standard input, ``validate -``) and
  ``import -o``.

Every case also plants a secret (:func:`plant`): a fresh ``sk-...`` value put where an
operator might write one: URL userinfo, ``?token=``, an unknown ``password:`` key, a
``token_file``'s content, the agent token's environment variable, a container's
``--api-key`` inside ``sh -c``, ``EXTRA_ARGS``, an env value, an annotation. One case in four
is then edited as text (:func:`text_edit`): a BOM, bytes that are no UTF-8, a NUL, a
duplicated key, a bounded alias bomb, 300 levels of flow nesting, a 300+-character kind.

Each case runs in its own fresh folder (the working directory, ``HOME``, ``XDG_*`` and
``TMPDIR`` inside it). The properties (:func:`check`): no traceback (no exception out of
``main``, no "Traceback" printed), the exit code 0, 1 or 2, an exit 2 names the file, the
secret in no output (stdout, stderr, every file the run wrote, journals) in any encoding
(raw, URL-encoded, JSON-escaped, base64, hex, repr: :func:`tests.secret_search.holds_any`),
and no file written but under the case's ``out/`` (the tree of the case folder and of the
shared repository snapshotted before and after).

Run more than the suite's batch: ``PYTHONPATH=src:. python -m tests.file_fuzz --count 2000
--seed 7`` (or ``TIERCTL_FILE_FUZZ_COUNT=2000`` under pytest).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.schema_fuzz import Schema, generate, hostile_value, schema_paths
from tests.schema_fuzz import _set as set_path
from tests.secret_search import holds_any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "kube_public"
SURFACES = ("fleet", "kube")
#: The exit codes a command may end with (docs/fuzzing.md): done, a finding, bad input.
ALLOWED_EXITS = {0, 1, 2}
#: ``readout`` also exits 3: inconclusive (docs/readout.md), as a closed Prometheus makes it.
READOUT_EXITS = {0, 1, 2, 3}
#: The spec ``readout --fleet`` reads its arms from.
READOUT_SPEC = ROOT / "examples" / "small-model" / "tier.yaml"
#: One case in this many is also run as a real subprocess (``python -m tierctl``).
SUBPROCESS_EVERY = 20
#: The Kubernetes kinds whose schema drives the kube surface, and where it is.
KUBE_SCHEMAS = {
    "Deployment": "deployment-apps-v1.json",
    "StatefulSet": "statefulset-apps-v1.json",
    "Pod": "pod-v1.json",
    "Service": "service-v1.json",
    "LeaderWorkerSet": "crd:leaderworkerset.x-k8s.io_v1_LeaderWorkerSet.json",
}
_API = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Pod": "v1",
    "Service": "v1",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
}

# --------------------------------------------------------------------------- schemas


def _rewrite_refs(node: Any) -> Any:
    """Point every ``..._definitions.json#/$defs/X`` reference at the root's ``$defs``."""
    if isinstance(node, dict):
        out = {k: _rewrite_refs(v) for k, v in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and "#/$defs/" in ref:
            out["$ref"] = "#/$defs/" + ref.split("#/$defs/", 1)[1]
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v) for v in node]
    return node


@functools.cache
def _core_defs() -> dict[str, Any]:
    import importlib.resources

    folder = importlib.resources.files("kubernetes_validate").joinpath(
        "kubernetes-json-schema", "v1.33.0-local-strict"
    )
    defs = json.loads(folder.joinpath("_definitions.json").read_text(encoding="utf-8"))
    return dict(_rewrite_refs(defs["$defs"]))


@functools.cache
def kube_schema(kind: str) -> Schema:
    """The JSON schema tierctl checks a ``kind`` object against, its refs resolvable."""
    name = KUBE_SCHEMAS[kind]
    if name.startswith("crd:"):
        import tierctl.kubernetes

        path = Path(tierctl.kubernetes.__file__).with_name("crds") / name.removeprefix("crd:")
        doc = json.loads(path.read_text(encoding="utf-8"))
    else:
        import importlib.resources

        folder = importlib.resources.files("kubernetes_validate").joinpath(
            "kubernetes-json-schema", "v1.33.0-local-strict"
        )
        doc = json.loads(folder.joinpath(name).read_text(encoding="utf-8"))
    root = dict(_rewrite_refs(doc))
    root["$defs"] = {**_core_defs(), **root.get("$defs", {})}
    return root


@functools.cache
def fleet_schema() -> Schema:
    """``FleetFile``'s JSON schema, from the model tierctl reads."""
    from tierctl.rollout.fleet import FleetFile

    return FleetFile.model_json_schema()


@functools.cache
def paths_of(surface_kind: str) -> list[tuple[tuple[str, ...], Schema]]:
    """Every field path of a schema (``fleet`` or a Kubernetes kind), deep enough to reach
    a container's env and args (``spec.template.spec.containers[].env[].value``)."""
    if surface_kind == "fleet":
        return schema_paths(fleet_schema())
    return schema_paths(kube_schema(surface_kind), max_depth=9)


# --------------------------------------------------------------------------- seeds


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "f", "GIT_AUTHOR_EMAIL": "f@x"}
    env.update(GIT_COMMITTER_NAME="f", GIT_COMMITTER_EMAIL="f@x", GIT_CONFIG_NOSYSTEM="1")
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def make_repo(where: Path) -> Path:
    """A deployment repository of two hosts' compose files, tagged v1 and v2 (NEW adds a
    flag to each host's second replica): what a fleet file points at."""
    repo = where / "repo"
    small = (ROOT / "examples" / "small-model" / "compose.yaml").read_text()
    for host in ("gpu01", "gpu02"):
        (repo / host).mkdir(parents=True, exist_ok=True)
        (repo / host / "compose.yaml").write_text(small)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "v1")
    _git(repo, "tag", "v1")
    at = small.rindex("      - --enable-metrics")
    for host in ("gpu01", "gpu02"):
        (repo / host / "compose.yaml").write_text(
            small[:at] + "      - --log-requests\n" + small[at:]
        )
    _git(repo, "commit", "-qam", "v2")
    _git(repo, "tag", "v2")
    return repo


def fleet_seed(repo: Path) -> dict[str, Any]:
    """A valid fleet of two hosts over ``repo`` (a canary, then one wave)."""
    return {
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
            },
            {"name": "gpu02", "file": "gpu02/compose.yaml", "agent_url": "http://127.0.0.1:2"},
        ],
        "waves": {"size": 1, "max_parallel": 1},
    }


@functools.cache
def kube_corpus() -> list[tuple[str, list[Any]]]:
    """Each public manifest that parses (file name, its YAML documents): a few files of the
    corpus do not parse as published (a merge-conflict marker, a bad indent) and are tested
    as such by the corpus tests; the fuzzer edits the ones a parser can read."""
    out = []
    for path in sorted(CORPUS.glob("*.yaml")):
        try:
            loaded = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue
        docs = [d for d in loaded if isinstance(d, dict)]
        if docs:
            out.append((path.name, docs))
    return out


# --------------------------------------------------------------------------- hostility

#: Values a fleet's URL, port or name field is refused for (each was a traceback once, or
#: could be: urllib's own parsing).
FLEET_HOSTILE: list[Any] = [
    "http://127.0.0.1:99999",
    "http://127.0.0.1:-1",
    "http://127.0.0.1:1 ",
    "http://127.0.0.1:+1",
    "http://127.0.0.1:\u0663",
    "http://[::1",
    "http://[::1]:1",
    "http://[zz::1]:1",
    "http://" + "h" * 300 + ":1",
    "http:///x",
    "http://h:1/$(id)",
    "https://xn--n3h.example:443/\u2603",
    "ftp://h:1",
    "h" * 300,
    "-1",
    99999,
    -1,
    "1 ",
    "\ufeffgpu01",
    "gpu\x0001",
    "\u202egpu01",
]

#: Values of Kubernetes fields: ports past range, names past 253, kinds no schema file has.
KUBE_HOSTILE: list[Any] = [
    99999,
    -1,
    "1 ",
    "8000\x00",
    "x" * 300,
    "K" * 300,
    "a/b",
    "../../etc",
    "http://[::1",
    "nvidia.com/gpu",
    {"nvidia.com/gpu": "1e400"},
    {"nvidia.com/gpu": -1},
    {"nvidia.com/gpu": "9" * 400},
    ["--tp-size", "inf"],
    ["--port", "99999"],
    ["sh", "-c", "vllm serve m --port 99999 --tp $(nproc)"],
]


#: Ports no field takes: past the range, negative, padded, not a number.
HOSTILE_PORTS: list[Any] = [99999, 65536, 0, -1, "1 ", " 8000", "8000\x00", 2**63, "http", 1.5]


def targeted_kube(docs: list[Any], rng: random.Random) -> str:
    """One edit at a place tierctl reads by name (ports, names, kinds, GPU counts, engine
    flags): a random schema path reaches them rarely. What was edited."""
    objs = [d for d in docs if isinstance(d, dict)]
    if not objs:
        return "none"
    obj = rng.choice(objs)
    containers = list(_containers(obj))
    what = rng.choice(["port", "name", "kind", "api", "gpu", "flag", "service-port"])
    if what in ("port", "gpu", "flag") and containers:
        c = rng.choice(containers)
        if what == "port":
            c["ports"] = [{"name": "http", "containerPort": rng.choice(HOSTILE_PORTS)}]
        elif what == "gpu":
            c["resources"] = {"limits": {"nvidia.com/gpu": rng.choice(KUBE_HOSTILE[9:13])}}
        else:
            args = c.get("args") if isinstance(c.get("args"), list) else []
            flag = rng.choice(["--port", "--tensor-parallel-size", "--tp-size", "--dp-size"])
            c["args"] = [*args, flag, str(rng.choice([*HOSTILE_PORTS, "1e400", "9" * 400]))]
    elif what == "service-port":
        obj["spec"] = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        obj["spec"]["ports"] = [{"port": rng.choice(HOSTILE_PORTS), "targetPort": "h" * 300}]
    elif what == "name":
        meta = obj.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta["name"] = rng.choice(["n" * 300, "a/b", "\u00e9\u202e", "", "-x", 5])
    elif what == "kind":
        obj["kind"] = rng.choice(["K" * 300, "Deployment/../x", "", 7, "Deployment\x00"])
    else:
        obj["apiVersion"] = rng.choice(["apps/v1/../x", "", 5, "a" * 300 + "/v1", "/v1"])
    return what


def targeted_fleet(doc: Any, rng: random.Random) -> str:
    """One edit of a fleet's URL, wave or host-name field with a value its readers refuse."""
    if not isinstance(doc, dict):
        return "none"
    hosts = doc.get("hosts")
    host = hosts[0] if isinstance(hosts, list) and hosts and isinstance(hosts[0], dict) else {}
    what = rng.choice(["agent_url", "prometheus", "size", "max_parallel", "name", "canary"])
    if what in ("agent_url", "prometheus"):
        host[what] = rng.choice(FLEET_HOSTILE[:13])
    elif what == "size":
        doc["waves"] = {"size": rng.choice(["1e400%", "0%", "\u0663", "101%", "nan%", 2**63, 0])}
    elif what == "max_parallel":
        doc["waves"] = {"max_parallel": rng.choice([2**63, 0, -1, "1 ", 1e308])}
    elif what == "name":
        host["name"] = rng.choice([*FLEET_HOSTILE[13:], "g" * 300])
    else:
        doc["waves"] = {"canary": rng.choice([["nope"], "gpu01", [None], ["gpu01"] * 3])}
    return what


def _hostile(rng: random.Random, extra: list[Any]) -> Any:
    return copy.deepcopy(rng.choice(extra)) if rng.random() < 0.4 else hostile_value(rng)


def mutate_schema(
    doc: Any,
    root: Schema,
    paths: list[tuple[tuple[str, ...], Schema]],
    rng: random.Random,
    extra: list[Any],
) -> Any:
    """1-3 edits of ``doc`` along ``paths`` of ``root``: a valid value drawn from the path's
    schema, or a hostile one (mostly one edit: a document wrong in one place reaches the
    code that reads that place)."""
    for _ in range(rng.choices((1, 2, 3), weights=(6, 3, 1))[0]):
        path, sub = rng.choice(paths)
        value = generate(root, sub, rng) if rng.random() < 0.4 else _hostile(rng, extra)
        doc = set_path(doc, path, value, rng)
    return doc


# --------------------------------------------------------------------------- secrets


def new_secret(rng: random.Random) -> str:
    """A secret-like value nobody else writes: ``sk-`` and 24 random hex digits."""
    return "sk-" + "".join(rng.choice("0123456789abcdef") for _ in range(24))


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    """Every container mapping under ``node`` (any ``containers:`` list, at any depth)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                yield from (c for c in value if isinstance(c, dict))
            else:
                yield from _containers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _containers(value)


def plant_fleet(doc: Any, secret: str, rng: random.Random, case: Path) -> tuple[str, Any]:
    """Put ``secret`` in a fleet file where an operator might: (how, the document)."""
    hosts = doc.get("hosts") if isinstance(doc, dict) else None
    host = hosts[0] if isinstance(hosts, list) and hosts and isinstance(hosts[0], dict) else None
    # Half the plants are where tierctl takes the value (a token file, the environment, a
    # Prometheus URL's login): those files get past the model, to the plan, the runbook and
    # the dry run's requests; the other half are refused, and the refusal must not echo it.
    how = rng.choice(
        ["token-file", "env-only", "prometheus", "prometheus-query"]
        if rng.random() < 0.5
        else [
            "userinfo",
            "user",
            "query",
            "fragment",
            "unknown-top",
            "unknown-host",
            "label",
            "label-key",
            "fleet-name",
            "repo-url",
            "ref",
            "file",
            "override",
            "gate-host",
            "host-label",
        ]
    )
    if not isinstance(doc, dict) or (host is None and how not in ("unknown-top", "fleet-name")):
        return "env-only", doc
    if how == "userinfo":
        host["agent_url"] = f"http://admin:{secret}@127.0.0.1:1"
    elif how == "user":
        host["agent_url"] = f"http://{secret}@127.0.0.1:1"
    elif how == "query":
        host["agent_url"] = f"http://127.0.0.1:1/v1?token={secret}"
    elif how == "fragment":
        host["agent_url"] = f"http://127.0.0.1:1/#{secret}"
    elif how == "prometheus":
        host["prometheus"] = f"http://u:{secret}@127.0.0.1:9090"
    elif how == "prometheus-query":
        host["prometheus"] = f"http://127.0.0.1:9090/?token={secret}"
    elif how == "label-key":
        host["labels"] = {f"Authorization: Bearer {secret}": "x"}
    elif how == "file":
        host["file"] = f"https://u:{secret}@git.example/gpu01/compose.yaml"
    elif how == "override":
        host["overrides"] = [f"gpu01/compose.yaml?token={secret}"]
    elif how == "gate-host":
        host["gate_host"] = f"u:{secret}@10.0.0.1/"
    elif how == "host-label":
        host["host_label"] = f"--api-key {secret}"
    elif how == "unknown-top":
        doc["password"] = secret
    elif how == "unknown-host":
        host[rng.choice(["password", "token", "api_key"])] = secret
    elif how == "label":
        host.setdefault("labels", {})
        if isinstance(host["labels"], dict):
            host["labels"]["url"] = f"http://u:{secret}@h"
    elif how == "token-file":
        (case / "token").write_text(secret + "\n")
        host["token_file"] = str(case / "token")
    elif how == "fleet-name":
        doc["fleet"] = f"http://admin:{secret}@h/v1"
    elif how == "repo-url":
        doc["repo"] = f"https://git:{secret}@example.invalid/deploy.git"
    elif how == "ref":
        doc["new"] = f"https://u:{secret}@h/ref"
    return how, doc


def plant_kube(docs: list[Any], secret: str, rng: random.Random) -> str:
    """Put ``secret`` in one container of ``docs`` (or an annotation): how it was put."""
    containers = [c for d in docs for c in _containers(d)]
    how = rng.choice(
        [
            "sh-c",
            "args",
            "args-eq",
            "extra-args",
            "env-key",
            "env-hf",
            "env-url",
            "unknown-key",
            "annotation",
            "probe-header",
            "image",
        ]
    )
    if not containers or how == "annotation":
        meta = docs[0].setdefault("metadata", {}) if isinstance(docs[0], dict) else None
        if isinstance(meta, dict):
            meta.setdefault("annotations", {})
            if isinstance(meta["annotations"], dict):
                meta["annotations"]["password"] = secret
        return "annotation"
    c = rng.choice(containers)
    env = c.setdefault("env", [])
    if not isinstance(env, list):
        env = c["env"] = []
    if how == "sh-c":
        c["command"] = ["sh", "-c", f"vllm serve m --port 8000 --api-key {secret}"]
        c.pop("args", None)
    elif how == "args":
        args = c.get("args") if isinstance(c.get("args"), list) else []
        c["args"] = [*args, "--api-key", secret]
    elif how == "args-eq":
        args = c.get("args") if isinstance(c.get("args"), list) else []
        c["args"] = [*args, f"--api-key={secret}"]
    elif how == "extra-args":
        env.append({"name": "EXTRA_ARGS", "value": f"--max-model-len 4096 --api-key {secret}"})
    elif how == "env-key":
        env.append({"name": "OPENAI_API_KEY", "value": secret})
    elif how == "env-hf":
        env.append({"name": "HF_TOKEN", "value": secret})
    elif how == "env-url":
        env.append({"name": "REDIS_URL", "value": f"redis://default:{secret}@redis:6379/0"})
    elif how == "unknown-key":
        c["password"] = secret
    elif how == "probe-header":
        c["readinessProbe"] = {
            "httpGet": {
                "path": "/health",
                "port": 8000,
                "httpHeaders": [{"name": "Authorization", "value": f"Bearer {secret}"}],
            }
        }
    elif how == "image":
        c["image"] = f"u:{secret}@registry.example/vllm/vllm-openai:v0.10.0"
    return how


# --------------------------------------------------------------------------- text edits


def text_edit(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One edit of the YAML text no parsed document can hold: (what, the bytes)."""
    what = rng.choice(
        [
            "bom",
            "latin1",
            "nul",
            "dup-key",
            "alias-bomb",
            "deep",
            "long-kind",
            "tab",
            "cr",
            "surrogate",
            "big-number",
            "tag",
        ]
    )
    lines = data.split(b"\n")
    at = rng.randrange(len(lines))
    if what == "bom":
        return what, b"\xef\xbb\xbf" + data
    if what == "latin1":
        lines[at] += b" # caf\xe9 \xff\xfe"
    elif what == "nul":
        lines[at] += b"\x00"
    elif what == "dup-key":
        first = next((ln for ln in lines if ln and not ln.startswith((b" ", b"-", b"#"))), b"")
        lines.append(first)
    elif what == "alias-bomb":
        bomb = [b"x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        bomb += [
            f"x{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 9)}]".encode() for i in range(1, 9)
        ]
        return what, b"\n".join(bomb) + b"\n" + data
    elif what == "deep":
        lines.append(b"deep: " + b"[" * 300 + b"]" * 300)
    elif what == "long-kind":
        return what, data.replace(b"kind: ", b"kind: " + b"K" * 320, 1) + b"\nkind: " + b"Q" * 300
    elif what == "tab":
        lines[at] = b"\t" + lines[at]
    elif what == "cr":
        return what, data.replace(b"\n", b"\r")
    elif what == "surrogate":
        lines.append(b'sur: "\\ud800"')
    elif what == "big-number":
        lines.append(b"big: " + b"9" * 5000)
    elif what == "tag":
        lines.append(b"tagged: !!python/object/apply:os.system ['id']")
    return what, b"\n".join(lines)


def _dump(doc: Any) -> bytes:
    try:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        text = yaml.dump_all(doc, Dumper=dumper, sort_keys=False, allow_unicode=True)
        return text.encode("utf-8", "surrogatepass")
    except (yaml.YAMLError, RecursionError, UnicodeError, ValueError):
        return "\n---\n".join(json.dumps(d, default=str) for d in doc).encode(
            "utf-8", "surrogatepass"
        )


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One input file: its bytes, the secret planted in it, and how it was built."""

    surface: str
    n: int
    data: bytes
    secret: str
    what: str


def build_case(surface: str, seed: int, n: int, repo: Path, case: Path) -> Case:
    """Case ``n`` of ``surface`` (files it needs, like a token file, written into ``case``)."""
    rng = random.Random(f"tierctl-file-fuzz:{seed}:{surface}:{n}")
    secret = new_secret(rng)
    parts: list[str] = []
    if surface == "fleet":
        root = fleet_schema()
        if rng.random() < 0.1:
            doc = generate(root, root, rng)
            doc = {**fleet_seed(repo), **doc} if isinstance(doc, dict) else doc
            parts.append("generated")
        else:
            doc = fleet_seed(repo)
        # Some cases are left valid but for the secret: they reach the plan, the runbook and
        # the dry run's requests, past the model's checks.
        if rng.random() < 0.6:
            doc = mutate_schema(doc, root, paths_of("fleet"), rng, FLEET_HOSTILE)
            parts.append("schema")
        if rng.random() < 0.3:
            parts.append(f"target:{targeted_fleet(doc, rng)}")
        how, doc = plant_fleet(doc, secret, rng, case)
        docs = [doc]
    else:
        name, docs = rng.choice(kube_corpus())
        docs = copy.deepcopy(docs)
        parts.append(name.split("--")[0])
        if rng.random() < 0.15:
            kind = rng.choice(sorted(KUBE_SCHEMAS))
            gen = generate(kube_schema(kind), kube_schema(kind), rng)
            if isinstance(gen, dict):
                gen.update(apiVersion=_API[kind], kind=kind)
            docs = [gen]
            parts.append(f"generated-{kind}")
        targets = [d for d in docs if isinstance(d, dict) and d.get("kind") in KUBE_SCHEMAS]
        if targets and rng.random() < 0.85:
            target = rng.choice(targets)
            kind = str(target["kind"])
            i = docs.index(target)
            docs[i] = mutate_schema(target, kube_schema(kind), paths_of(kind), rng, KUBE_HOSTILE)
            parts.append(f"schema-{kind}")
        if rng.random() < 0.35:
            parts.append(f"target:{targeted_kube(docs, rng)}")
        how = plant_kube(docs, secret, rng)
    parts.append(f"secret:{how}")
    data = _dump(docs)
    if rng.random() < 0.25:
        edit, data = text_edit(data, rng)
        parts.append(f"text:{edit}")
    return Case(surface, n, data, secret, " ".join(parts))


def commands(surface: str, path: Path) -> list[list[str]]:
    """The command lines a case's file is given to (``out/`` is the only folder they may
    write in)."""
    p = str(path)
    if surface == "fleet":
        return [
            ["fleet", "plan", p, "--format", "json"],
            ["fleet", "plan", p],
            ["runbook", "--fleet", p, "-o", "out/runbook.md"],
            [
                "rollout",
                "--fleet",
                p,
                "--dry-run",
                "--agent-attempts",
                "1",
                "--agent-timeout-s",
                "2",
            ],
            # The readout over the fleet's hosts: each host's Prometheus (a closed port, or
            # the case's URL) queried, its answer judged.
            [
                "readout",
                "--fleet",
                p,
                "--spec",
                str(READOUT_SPEC),
                "--prometheus",
                "http://127.0.0.1:9",
                "--since",
                "1765000000",
            ],
        ]
    return [
        ["validate", "--no-compose-binary", "--format", "json", p],
        ["validate", "--target", "kubernetes", p],
        ["import", p, "-o", "out/spec.yaml"],
        # The same bytes on standard input (`helm template ... | tierctl validate -`).
        ["validate", "--target", "kubernetes", "--format", "json", "-"],
    ]


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    """One command's run: exit code, its streams, an exception out of ``main``."""

    argv: list[str]
    code: int
    out: str
    err: str
    exception: str | None = None
    seconds: float = 0.0


def _env(case: Path, secret: str) -> dict[str, str]:
    """The environment of a case: its own HOME and XDG/TMP folders; the agent token is the
    planted secret (a dry run sends it, never prints it)."""
    for sub in ("home", "tmp", "out"):
        (case / sub).mkdir(exist_ok=True)
    return {
        "HOME": str(case / "home"),
        "XDG_CACHE_HOME": str(case / "home" / ".cache"),
        "XDG_CONFIG_HOME": str(case / "home" / ".config"),
        "XDG_STATE_HOME": str(case / "home" / ".local" / "state"),
        "TMPDIR": str(case / "tmp"),
        "TIERCTL_AGENT_TOKEN": secret,
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }


@contextlib.contextmanager
def _inside(case: Path, env: dict[str, str]) -> Iterator[None]:
    old_env = {k: os.environ.get(k) for k in env}
    old_cwd = os.getcwd()
    os.environ.update(env)
    tempfile.tempdir = None
    os.chdir(case)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        tempfile.tempdir = None


@contextlib.contextmanager
def _stdin(data: bytes | None) -> Iterator[None]:
    """``data`` as standard input, a text stream over bytes as a terminal's or a pipe's is."""
    if data is None:
        yield
        return
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    try:
        yield
    finally:
        sys.stdin = old


def run_inprocess(argv: list[str], stdin: bytes | None = None) -> Run:
    """``tierctl ARGV`` in this process (its real ``main``), ``stdin`` its standard input."""
    from tierctl.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code, exception = 0, None
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _stdin(stdin):
        try:
            main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tierctl" in f.filename]
            at = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
            exception = f"{type(exc).__name__} at {at}: {str(exc)[:200]}"
            code = -1
    return Run(argv, code, out.getvalue(), err.getvalue(), exception, time.monotonic() - start)


def run_subprocess(
    argv: list[str], case: Path, env: dict[str, str], stdin: bytes | None = None
) -> Run:
    """``python -m tierctl ARGV`` as its own process: the CLI end to end."""
    import tierctl

    # The tierctl this process imported (the worktree's, or another checkout's to compare).
    full = {**os.environ, **env, "PYTHONPATH": str(Path(tierctl.__file__).parents[1])}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tierctl", *argv],
        cwd=case,
        env=full,
        input=stdin or b"",
        capture_output=True,
        timeout=120,
        check=False,
    )
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    return Run(argv, proc.returncode, out, err, None, time.monotonic() - start)


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``roots``: path -> (size, mtime in ns)."""
    out: dict[str, tuple[int, int]] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                p = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    st = os.lstat(p)
                    out[p] = (st.st_size, st.st_mtime_ns) if name in files else (-1, 0)
    return out


def outside_writes(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], allowed: Path
) -> list[str]:
    """What a run created, changed or removed anywhere but under ``allowed``."""
    inside = str(allowed) + os.sep
    touched = {p for p, v in after.items() if before.get(p) != v}
    touched |= set(before) - set(after)
    return sorted(p for p in touched if p != str(allowed) and not p.startswith(inside))


@dataclass(frozen=True)
class Finding:
    """A broken property: its class, the case, the command, what was seen."""

    cls: str
    surface: str
    n: int
    argv: str
    detail: str

    def line(self) -> str:
        return f"[{self.cls}] {self.surface}#{self.n} `tierctl {self.argv}`: {self.detail}"


def _located(err: str, path: Path) -> bool:
    """Whether an error names the input: the file, standard input, or (for a fleet) a file of
    its repository."""
    return path.name in err or "git:" in err or "<stdin>" in err


def check(case: Case, path: Path, run: Run, written: dict[str, bytes]) -> list[Finding]:
    """The properties of one run (module docstring)."""
    found: list[Finding] = []
    argv = " ".join(run.argv)[:160]

    def add(cls: str, detail: str) -> None:
        found.append(Finding(cls, case.surface, case.n, argv, detail))

    if run.exception is not None:
        add("traceback", run.exception)
    elif "Traceback (most recent call last)" in run.out + run.err:
        add("traceback", run.err[-300:])
    elif run.code not in (READOUT_EXITS if run.argv[:1] == ["readout"] else ALLOWED_EXITS):
        add("exit", f"exit {run.code}: {run.err[-200:]}")
    elif run.code == 2 and not (run.err.strip() and _located(run.err, path)):
        add("unlocated", run.err.strip()[-240:] or "(no message)")
    for where, text in [("stdout", run.out), ("stderr", run.err)] + [
        (name, data.decode("utf-8", "replace")) for name, data in written.items()
    ]:
        # repr() escapes what JSON writes otherwise (``'\\n'``, single quotes): its form too.
        if holds_any(text, [case.secret, repr(case.secret)[1:-1]]):
            at = next((ln for ln in text.splitlines() if case.secret[:8] in ln), "")
            add("secret", f"{case.what}: in {where}: {at.strip()[:160]}")
    return found


@dataclass
class SurfaceRun:
    """What a batch of one surface did."""

    surface: str
    cases: int = 0
    runs: int = 0
    subprocess_runs: int = 0
    exits: Counter[int] = field(default_factory=Counter)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        by = Counter(f.cls for f in self.findings)
        return (
            f"{self.surface}: {self.cases} cases, {self.runs} runs ({self.subprocess_runs} as "
            f"subprocesses), exits {dict(sorted(self.exits.items()))}, findings "
            f"{dict(sorted(by.items())) or 0}, {self.seconds:.1f} s"
        )


def run_case(case: Case, work: Path, repo: Path, result: SurfaceRun) -> None:
    """Run every command of ``case`` in ``work`` (its fresh folder), checking each run."""
    path = work / ("fleet.yaml" if case.surface == "fleet" else "manifest.yaml")
    path.write_bytes(case.data)
    env = _env(work, case.secret)
    argvs = commands(case.surface, path)
    # One case in SUBPROCESS_EVERY runs one of its commands, each in turn, as a process.
    as_process = (case.n // SUBPROCESS_EVERY) % len(argvs) if case.n % SUBPROCESS_EVERY == 0 else -1
    for i, argv in enumerate(argvs):
        stdin = case.data if "-" in argv else None
        before = snapshot(work, repo)
        if i == as_process:
            run = run_subprocess(argv, work, env, stdin)
            result.subprocess_runs += 1
        else:
            with _inside(work, env):
                run = run_inprocess(argv, stdin)
        after = snapshot(work, repo)
        changed = [p for p, v in after.items() if before.get(p) != v and v[0] >= 0]
        written = {}
        for p in changed:
            with contextlib.suppress(OSError):
                written[p] = Path(p).read_bytes()[:2_000_000]
        outside = outside_writes(before, after, work / "out")
        result.runs += 1
        result.exits[int(run.code)] += 1
        result.findings += check(case, path, run, written)
        for p in outside:
            result.findings.append(
                Finding(
                    "write-outside",
                    case.surface,
                    case.n,
                    " ".join(argv)[:160],
                    os.path.relpath(p, work),
                )
            )
        # A file out/ kept from the command before would be a later command's input.
        for p in changed:
            if p.startswith(str(work / "out") + os.sep):
                with contextlib.suppress(OSError):
                    os.unlink(p)


def run_surface(
    surface: str,
    seed: int,
    count: int,
    max_seconds: float,
    root: Path,
    repo: Path,
    log: Callable[[str], None] | None = None,
) -> SurfaceRun:
    """``count`` cases of ``surface`` (fewer when ``max_seconds`` runs out first)."""
    result = SurfaceRun(surface)
    start = time.monotonic()
    for n in range(count):
        if time.monotonic() - start > max_seconds:
            break
        work = root / f"{surface}-{n}"
        work.mkdir(parents=True)
        case = build_case(surface, seed, n, repo, work)
        run_case(case, work, repo, result)
        result.cases += 1
        if log and n % 50 == 49:
            log(result.summary())
    result.seconds = time.monotonic() - start
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.file_fuzz``: a larger run, its figures and findings printed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--surfaces", default=",".join(SURFACES))
    parser.add_argument("--max-seconds", type=float, default=3600.0)
    parser.add_argument("--only", type=int, default=None, help="run case N only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="file-fuzz-") as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        failed = 0
        for surface in args.surfaces.split(","):
            if args.only is not None:
                result = SurfaceRun(surface)
                work = root / f"{surface}-{args.only}"
                work.mkdir(parents=True)
                case = build_case(surface, args.seed, args.only, repo, work)
                print(case.what)
                run_case(case, work, repo, result)
                result.cases = 1
            else:
                result = run_surface(
                    surface,
                    args.seed,
                    args.count,
                    args.max_seconds,
                    root / "cases",
                    repo,
                    log=print,
                )
            print(result.summary())
            for f in result.findings:
                print(f.line())
            failed += len(result.findings)
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
