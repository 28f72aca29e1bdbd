"""TC002 variant-truthfulness: every place that carries a replica's variant carries the one
its actual argv and env produce.

The variant is re-derived from the compose file's own command and environment (not copied
from the spec), so a hand edit that changes a flag without changing the label is caught even
when the argv contract is waived. A wrong variant that is exactly another replica's is named
as such: that is the "r1 and r2 swapped labels" mistake.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tierctl.contracts.context import Context, ReplicaView, config_content
from tierctl.contracts.report import Violation
from tierctl.errors import InputError, Location
from tierctl.spec.effective import VariantError, fill, render_variant


def check(ctx: Context) -> Iterator[Violation]:
    """Labels, log tags and scrape-config labels against the derived variant."""
    spec = ctx.tier.spec
    places = spec.telemetry.places
    label = spec.telemetry.label
    derived: dict[str, str] = {}
    for name, view in ctx.replicas.items():
        if view.service is None:
            continue
        try:
            derived[name] = render_variant(spec, name, view.flags, view.env)
        except VariantError as exc:
            yield Violation(
                rule="TC002",
                service=view.expected.service,
                message=f"cannot derive the variant from the file's argv: {exc}",
                location=ctx.compose.location("services", view.expected.service, "command"),
                expected=view.expected.variant,
            )
    scrape_labels = _scrape_labels(ctx)
    for name, variant in derived.items():
        view = ctx.replicas[name]
        assert view.service is not None
        svc = view.expected.service
        # (what, found, path, expected) in the order of telemetry places.
        found_places: list[tuple[str, str | None, tuple[str | int, ...], str]] = []
        if "service-labels" in places:
            found_places.append(
                (f"label {label}", view.service.labels.get(label), ("labels", label), variant)
            )
        if "log-tags" in places:
            tag = _get(view.service.data, "logging", "options", "tag")
            want_tag = fill(
                spec.telemetry.log_tag,
                {"service": svc, "variant": variant, "replica": name, "host": spec.host},
            )
            if tag != want_tag:
                found_places.append(("log tag", tag, ("logging", "options", "tag"), want_tag))
        if "collector-scrape-config" in places:
            if scrape_labels is None:
                pass  # no collector with a scrape config in the spec: nothing to compare
            elif isinstance(scrape_labels, str):
                yield Violation(
                    rule="TC002",
                    service=svc,
                    message=scrape_labels,
                    location=ctx.compose.location("configs"),
                )
            else:
                job = scrape_labels.get(svc)
                if job is None:
                    yield Violation(
                        rule="TC002",
                        service=svc,
                        message=f"collector scrape config has no job for {svc}",
                        location=ctx.compose.location("configs"),
                        expected=variant,
                    )
                else:
                    found_places.append(
                        (
                            "collector scrape label " + label,
                            job.get(label),
                            ("configs", _scrape_config_name(ctx), "content", svc, label),
                            variant,
                        )
                    )
        for what, found, path, expected in found_places:
            if found != expected:
                yield _wrong(ctx, view, what, found, expected, variant, path)


def _wrong(
    ctx: Context,
    view: ReplicaView,
    what: str,
    found: Any,
    expected: str,
    variant: str,
    path: tuple[str | int, ...],
) -> Violation:
    svc = view.expected.service
    owner = ""
    for other in ctx.other_replicas(view.expected.name):
        if isinstance(found, str) and other.expected.variant and other.expected.variant in found:
            owner = f" - that is {other.expected.name}'s variant"
            break
        if variant == other.expected.variant:
            owner = f" - its argv/env are {other.expected.name}'s configuration"
            break
    shown = "missing" if found is None else repr(found)
    location = (
        ctx.compose.location("services", svc, *path)
        if path[0] != "configs"
        else _content_location(ctx, str(path[1]), str(path[3]), str(path[4]))
    )
    return Violation(
        rule="TC002",
        service=svc,
        message=f"{what} is {shown}, but its argv/env give variant {variant!r}{owner}",
        location=location,
        expected=expected,
        found=None if found is None else str(found),
    )


def _scrape_config_name(ctx: Context) -> str:
    return next(s.scrape.config for s in ctx.tier.services.values() if s.scrape is not None)


def _content_location(ctx: Context, config: str, service: str, label: str) -> Location:
    """The file line of ``label`` in the scrape job of ``service`` inside a block-scalar
    ``configs.<config>.content`` (the key's line when the content is not a block)."""
    base = ctx.compose.location("configs", config, "content")
    content = _get(ctx.compose.data, "configs", config, "content")
    if base.line is None or not isinstance(content, str):
        return base
    lines = content.splitlines()
    start = next((i for i, text in enumerate(lines) if f"container_name: {service}" in text), None)
    if start is None:
        return base
    # The labels of one static config sit together; look a few lines around the container name.
    for i in range(max(0, start - 8), min(len(lines), start + 8)):
        if lines[i].strip().startswith(f"{label}:"):
            return Location(file=base.file, line=base.line + 1 + i, path=base.path)
    return base


def _get(node: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _scrape_labels(ctx: Context) -> dict[str, dict[str, str]] | str | None:
    """container_name -> static labels of its scrape job; a str explains why unreadable."""
    collectors = [s for s in ctx.tier.services.values() if s.scrape is not None]
    if not collectors:
        return None
    out: dict[str, dict[str, str]] = {}
    for service in collectors:
        assert service.scrape is not None
        name = service.scrape.config
        config = _get(ctx.compose.data, "configs", name)
        content = config.get("content") if isinstance(config, dict) else None
        if not isinstance(content, str):
            return f"configs.{name}.content (the collector's scrape config) is missing"
        try:
            doc = config_content(content, str(name))
        except InputError as exc:
            return f"configs.{name}.content is not valid YAML: {exc.message}"
        scrape_configs = _get(doc, "scrape_configs")
        if scrape_configs is None:
            scrape_configs = _get(doc, "receivers", "prometheus", "config", "scrape_configs")
        if not isinstance(scrape_configs, list):
            return f"configs.{name}.content has no scrape_configs list"
        for job in scrape_configs:
            statics = job.get("static_configs") if isinstance(job, dict) else None
            for static in statics if isinstance(statics, list) else []:
                labels = static.get("labels") if isinstance(static, dict) else None
                if not isinstance(labels, dict):
                    continue
                found = {str(k): str(v) for k, v in labels.items()}
                assert isinstance(job, dict)
                out[found.get("container_name") or str(job.get("job_name"))] = found
    return out
