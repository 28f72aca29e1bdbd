"""Kubernetes objects against their schemas: the core API's, and the custom resources'.

Core objects (Deployment, Service, ...) are checked against the real OpenAPI-derived schemas
of one Kubernetes release in strict mode (an unknown field is an error, as ``kubectl apply
--validate=strict`` makes it), carried by the ``kubernetes-validate`` package. Custom
resources (LWS, KServe's LLMInferenceService, Dynamo, RBG, InferencePool, Argo Rollouts,
Flagger, the Prometheus operator's monitors) are checked against schemas tierctl writes from
their published APIs (``kubernetes/crds/``; each says which fields it checks in
``x-tierctl-checked``); pod templates inside them are checked against the core schema.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierctl.errors import InputError
from tierctl.kubernetes.manifests import Manifest
from tierctl.readers import load_json, read_text

#: The package that carries the core schemas (an extra: ``pip install -e '.[kube]'``).
CORE_SCHEMAS = "kubernetes_validate"
_CRDS = Path(__file__).with_name("crds")
#: At most this many schema errors per object (a wrong indentation breaks everything below).
MAX_ERRORS = 20

#: The most schema errors drawn from the validator for one manifest.
MAX_DRAWN = 1000


@dataclass(frozen=True)
class SchemaFinding:
    """One place an object breaks its schema."""

    path: tuple[str | int, ...]
    message: str


def crd_kinds() -> dict[tuple[str, str], Path]:
    """(apiVersion, kind) -> schema file, for every custom resource tierctl has a schema of."""
    out: dict[tuple[str, str], Path] = {}
    for path in sorted(_CRDS.glob("*.json")):
        group, version, kind = path.stem.split("_")
        out[(f"{group}/{version}", kind)] = path
    return out


def crd_checked(api_version: str, kind: str) -> str | None:
    """What tierctl's schema of a custom resource checks (its ``x-tierctl-checked``)."""
    path = crd_kinds().get((api_version, kind))
    if path is None:
        return None
    return str(_crd_schema(path).get("x-tierctl-checked", ""))


@functools.lru_cache(maxsize=64)
def _crd_schema(path: Path) -> dict[str, Any]:
    doc = load_json(read_text(path, what="schema"), str(path))
    return doc if isinstance(doc, dict) else {}


def _core_dir(version: str) -> Any:
    import importlib.resources

    root = importlib.resources.files(CORE_SCHEMAS).joinpath("kubernetes-json-schema")
    wanted = f"v{version}.0-local-strict"
    if not root.joinpath(wanted).is_dir():
        have = sorted(p.name for p in root.iterdir() if p.name.endswith("-strict"))
        raise InputError(
            f"no core schemas for Kubernetes {version}",
            rule="the Kubernetes release checked against is one kubernetes-validate carries",
            value=version,
            fix="pick one of " + ", ".join(h.removeprefix("v").split(".0-")[0] for h in have),
        )
    return root.joinpath(wanted)


@functools.lru_cache(maxsize=4)
def _registry(version: str) -> Any:
    from referencing import Registry, Resource

    folder = _core_dir(version)
    import json

    defs = json.loads(folder.joinpath("_definitions.json").read_text(encoding="utf-8"))
    return Resource.from_contents(defs) @ Registry()


def _core_file(api_version: str, kind: str) -> str:
    """kubernetes-validate's file name: ``deployment-apps-v1.json``, ``service-v1.json``."""
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return f"{kind.lower()}-{api}.json"


@functools.lru_cache(maxsize=256)
def _validator(version: str, api_version: str, kind: str) -> Any:
    """The strict validator of one kind, or None when no schema knows it."""
    import json

    import jsonschema

    crd = crd_kinds().get((api_version, kind))
    if crd is not None:
        schema = _crd_schema(crd)
    else:
        name = _core_file(api_version, kind)
        if "/" in name or name.startswith(".") or len(name.encode()) > 255:
            return None  # no schema file is named so (the manifest reader refuses such kinds)
        path = _core_dir(version).joinpath(name)
        if not path.is_file():
            return None
        schema = json.loads(path.read_text(encoding="utf-8"))
        # The core files' own apiVersion enum also allows null: a kind is only that kind.
    from tierctl.bounded_schema import bounded

    return bounded(jsonschema.Draft202012Validator)(schema, registry=_registry(version))


def has_schema(version: str, manifest: Manifest) -> bool:
    """Whether a schema (core or tierctl's) knows this object's apiVersion and kind."""
    return _validator(version, manifest.api_version, manifest.kind) is not None


def _best(error: Any) -> Any:
    """The deepest, most specific error under a oneOf/anyOf (the rest are alternatives)."""
    import jsonschema

    return jsonschema.exceptions.best_match([error, *(error.context or [])]) or error


def schema_findings(version: str, manifest: Manifest) -> Iterator[SchemaFinding]:
    """Where ``manifest`` breaks its schema (nothing when no schema knows its kind)."""
    validator = _validator(version, manifest.api_version, manifest.kind)
    if validator is None:
        return
    # At most MAX_DRAWN errors are computed (a long list of wrong items is one error each).
    drawn = itertools.islice(validator.iter_errors(manifest.data), MAX_DRAWN)
    errors = sorted(drawn, key=lambda e: list(map(str, e.path)))
    for error in errors[:MAX_ERRORS]:
        best = _best(error)
        path = tuple(best.absolute_path)
        if best.validator == "additionalProperties" and isinstance(best.instance, dict):
            # Point at the unknown key itself, not at the mapping that holds it.
            known = set(best.schema.get("properties", {}))
            extra = sorted(k for k in best.instance if k not in known)
            path = (*path, extra[0]) if extra else path
        yield SchemaFinding(path, _message(best))


def _message(error: Any) -> str:
    """A short message: long instance dumps cut, null alternatives (strict files') left out."""
    text = str(error.message).replace(", 'null'", "").replace("['string', 'null']", "'string'")
    return text if len(text) <= 240 else text[:200] + "... (cut)"
