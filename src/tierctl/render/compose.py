"""Render a tier spec into a docker compose file.

The output is deterministic (same spec, same bytes, on any machine) and explicit: every
replica is its own service with its whole argv, because compose replaces ``command`` whole in
override files and YAML merge keys replace lists, which is how per-replica flags and env drift.
The replica's variant is written to every place the spec names (service labels, log tags, the
collector's scrape config), all derived from the same effective flags.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from tierctl.engines import profile_for
from tierctl.render.yaml_emit import dump_yaml
from tierctl.spec.effective import (
    ResolvedReplica,
    Tier,
    fill,
    gpu_grant,
    resolve_tier,
    shell_join,
    wrap_command,
)
from tierctl.spec.tier_spec import ScrapeConfig, Service, TierSpec

_REFERENCE = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


# Fields added after the digest was defined: left out while at their default, so that adding
# them did not make every rendered file on disk stale.
_LATER_ENGINE_FIELDS = (
    "entrypoint",
    "container_name",
    "equals_flags",
    "image_policy",
    "shell",
    "positional",
    "argv_tail",
    "command_string",
)
_LATER_REPLICA_FIELDS = ("gpu_count", "container_name", "gpu_style", "equals_flags", "service")
_LATER_TOP_FIELDS = ("volumes", "networks", "secrets", "configs", "extensions")


def spec_digest(spec: TierSpec) -> str:
    """sha256 of the normalised spec: comment or formatting edits do not change it."""
    engine_defaults = {
        name
        for name in _LATER_ENGINE_FIELDS
        if getattr(spec.engine, name)
        == type(spec.engine).model_fields[name].get_default(call_default_factory=True)
    }
    exclude: dict[str, Any] = {name: True for name in _LATER_TOP_FIELDS if not getattr(spec, name)}
    exclude["engine"] = engine_defaults
    replica_fields = type(next(iter(spec.replicas.values()))).model_fields
    replicas = {
        n: {
            name
            for name in _LATER_REPLICA_FIELDS
            if getattr(r, name) == replica_fields[name].get_default(call_default_factory=True)
        }
        for n, r in spec.replicas.items()
    }
    replicas = {n: fields for n, fields in replicas.items() if fields}
    if replicas:
        exclude["replicas"] = replicas
    return hashlib.sha256(spec.model_dump_json(exclude=exclude).encode()).hexdigest()


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Merge mappings recursively; ``over`` wins; lists are replaced, not concatenated."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _labels_map(labels: Any) -> dict[str, str]:
    if isinstance(labels, list):
        out: dict[str, str] = {}
        for item in labels:
            key, _, value = str(item).partition("=")
            out[key] = value
        return out
    # Any other shape (a string) is not compose's: the schema contract reports it.
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _replica_service(tier: Tier, r: ResolvedReplica) -> dict[str, Any]:
    spec = tier.spec
    fragment = deep_merge(spec.engine.compose, spec.replicas[r.name].compose)
    places = spec.telemetry.places
    labels = _labels_map(fragment.pop("labels", None))
    if "service-labels" in places:
        labels[spec.telemetry.label] = r.variant
    labels.update(
        {
            "tierctl.tier": spec.tier,
            "tierctl.replica": r.name,
            "tierctl.role": r.role or "none",
        }
    )
    logging = fragment.pop("logging", None) or {"driver": "json-file"}
    if "log-tags" in places:
        tag = fill(
            spec.telemetry.log_tag,
            {"service": r.service, "variant": r.variant, "replica": r.name, "host": spec.host},
        )
        logging = deep_merge(logging, {"options": {"tag": tag}})
    replica = spec.replicas[r.name]
    deploy = fragment.pop("deploy", {})
    gpu_keys, _ = gpu_grant(replica.gpu_style, r.gpus, r.gpu_count)
    if "deploy" in gpu_keys:
        deploy = deep_merge(deploy, gpu_keys.pop("deploy"))
    service: dict[str, Any] = {"image": r.image}
    if replica.container_name is not None:
        service["container_name"] = replica.container_name
    elif spec.engine.container_name:
        service["container_name"] = r.service
    if spec.engine.entrypoint is not None:
        service["entrypoint"] = list(spec.engine.entrypoint)
    shell = spec.engine.shell
    command = list(r.argv)
    entry = profile_for(spec.engine.kind).image_entrypoint(r.image)
    # The image's ENTRYPOINT already runs the default launcher (vllm/vllm-openai:
    # `vllm serve`): the command is its arguments, or Docker runs the launcher twice.
    if (
        shell is None
        and spec.engine.entrypoint is None
        and entry
        and tuple(command[: len(entry)]) == entry
    ):
        command = command[len(entry) :]
    if shell is not None and shell.in_entrypoint:
        service["entrypoint"] = wrap_command(shell, command)
    elif shell is None and not command and spec.engine.argv_tail is None:
        pass  # no argv at all (a base service for `extends`): the image's CMD, as written
    elif shell is None and (spec.engine.argv_tail is not None or spec.engine.command_string):
        # One string: compose splits it after interpolation, so the references give as many
        # words as their values have (a list would make each one word, an empty one too).
        tail = spec.engine.argv_tail or ""
        service["command"] = f"{shell_join(command)} {tail}".strip()
    else:
        service["command"] = wrap_command(shell, command)
    service |= {
        "environment": dict(r.env),
        "labels": labels,
        "logging": logging,
    }
    if deploy:
        service["deploy"] = deploy
    service |= gpu_keys
    service.update(fragment)
    return service


def _references(tier: Tier) -> dict[str, list[str]]:
    spec = tier.spec
    return {
        "backends": [
            fill(spec.engine.backend_url, r.backend_url_context) for r in tier.replicas.values()
        ],
        "replica_services": [r.service for r in tier.replicas.values()],
        "host": [spec.host],
        "tier": [spec.tier],
    }


def _resolve_refs(node: Any, refs: dict[str, list[str]]) -> Any:
    """Expand {{name}} references: a list item that is exactly one becomes several items."""
    if isinstance(node, dict):
        return {k: _resolve_refs(v, refs) for k, v in node.items()}
    if isinstance(node, list):
        out: list[Any] = []
        for item in node:
            whole = _REFERENCE.fullmatch(item.strip()) if isinstance(item, str) else None
            if whole and whole.group(1) in refs:
                out.extend(refs[whole.group(1)])
            else:
                out.append(_resolve_refs(item, refs))
        return out
    if isinstance(node, str):
        return _REFERENCE.sub(lambda m: ",".join(refs.get(m.group(1), [m.group(0)])), node)
    return node


def scrape_document(tier: Tier, scrape: ScrapeConfig) -> dict[str, Any]:
    """The collector's scrape config: one job per replica, labelled with its variant."""
    spec = tier.spec
    names = {"host": spec.host, "tier": spec.tier}
    jobs = []
    for r in tier.replicas.values():
        ctx = {**r.backend_url_context, **names}
        labels: dict[str, str] = {"container_name": r.service}
        if "collector-scrape-config" in spec.telemetry.places:
            labels[spec.telemetry.label] = r.variant
        labels["replica"] = r.name
        labels["role"] = r.role or "none"
        labels.update({k: fill(v, ctx) for k, v in scrape.labels.items()})
        jobs.append(
            {
                "job_name": r.service,
                "scrape_interval": f"{scrape.interval_s}s",
                "metrics_path": scrape.metrics_path,
                "static_configs": [{"targets": [fill(scrape.address, ctx)], "labels": labels}],
            }
        )
    doc: dict[str, Any] = {"scrape_configs": jobs}
    if scrape.format == "otelcol":
        doc = deep_merge({"receivers": {"prometheus": {"config": doc}}}, scrape.otelcol)
    return doc


def _other_service(tier: Tier, service: Service, refs: dict[str, list[str]]) -> dict[str, Any]:
    body: dict[str, Any] = _resolve_refs(service.compose, refs)
    if service.scrape is not None:
        mount = {"source": service.scrape.config, "target": service.scrape.target}
        body = dict(body)
        body["configs"] = [*body.get("configs", []), mount]
    return body


def compose_document(tier: Tier) -> dict[str, Any]:
    """The compose file as plain data, services in spec order (replicas first)."""
    spec = tier.spec
    refs = _references(tier)
    services: dict[str, Any] = {}
    for r in tier.replicas.values():
        services[r.service] = _replica_service(tier, r)
    configs: dict[str, Any] = {}
    for name, service in tier.services.items():
        services[name] = _other_service(tier, service, refs)
        if service.scrape is not None:
            # Left unescaped on purpose: a ${VAR} the author wrote in `otelcol` is meant for
            # compose's interpolation, like every other ${VAR} in the file.
            content = dump_yaml(scrape_document(tier, service.scrape))
            configs[service.scrape.config] = {"content": content}
    doc: dict[str, Any] = {"name": spec.tier, "services": services}
    for key in ("volumes", "networks", "secrets"):
        declared = getattr(spec, key)
        if declared:
            doc[key] = dict(declared)
    configs = {**spec.configs, **configs}
    if configs:
        doc["configs"] = configs
    doc.update({k: v for k, v in spec.extensions.items() if k != "x-tierctl"})
    return doc


def _header(spec: TierSpec, spec_ref: str, digest: str) -> str:
    return (
        f"# Generated by tierctl from {spec_ref} (spec sha256 {digest[:16]}).\n"
        "# Do not edit by hand: change the spec, then run `tierctl render --write "
        f"{spec_ref}`.\n"
        f"# Tier {spec.tier} on {spec.host}: "
        f"{', '.join(spec.replicas)} ({spec.engine.kind} {spec.engine.version}).\n"
    )


def output_path(spec: TierSpec, spec_path: str | Path) -> Path:
    """Where ``render --write`` writes: the spec's ``output``, relative to the spec file."""
    return Path(spec_path).parent / spec.output


def render_compose(spec: TierSpec, spec_path: str | Path | None = None) -> str:
    """Render ``spec`` to compose YAML text (deterministic).

    Args:
        spec: a checked spec (see :func:`tierctl.spec.load_spec`).
        spec_path: where the spec lives; the header names it relative to the output file,
            so the text does not depend on the directory it is rendered from.
    """
    tier = resolve_tier(spec)
    digest = spec_digest(spec)
    if spec_path is not None:
        out_dir = output_path(spec, spec_path).parent
        spec_ref = Path(os.path.relpath(Path(spec_path), out_dir)).as_posix()
    else:
        spec_ref = "<spec>"
    doc = compose_document(tier)
    doc = {
        "name": doc.pop("name"),
        "x-tierctl": {
            "tier": spec.tier,
            "host": spec.host,
            "spec": spec_ref,
            "spec_sha256": digest,
        },
        **doc,
    }
    return _header(spec, spec_ref, digest) + dump_yaml(doc)
