"""TC003 shared-runtime: replicas share everything the spec does not declare per replica.

Per-replica by declaration: the command (TC001 pins it), labels, container name, log tag,
GPU ids, the environment, the image when a replica overrides it, and any compose key a
replica's ``compose`` fragment sets. Every other key must be equal across the replicas; a
difference is reported with its path, and the replica that departs from what the spec renders
is the one named. The environment and the GPUs are held to the spec variable by variable and
id by id instead, which also catches a change made to every replica at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tierctl.contracts.context import Context, ReplicaView
from tierctl.contracts.credentials import literal_secret, looks_secret_name
from tierctl.contracts.report import Violation
from tierctl.render.compose import compose_document

_PER_REPLICA_TOP = {"command", "labels", "container_name", "environment"}


def check(ctx: Context) -> Iterator[Violation]:
    """Pairwise differences in undeclared keys, then env and GPUs against the spec."""
    spec = ctx.tier.spec
    views = [v for v in ctx.replicas.values() if v.service is not None]
    if not views:
        return
    declared: set[tuple[str, ...]] = set()
    for replica in spec.replicas.values():
        declared |= set(_flatten(replica.compose, ()).keys())
        if replica.image is not None:
            declared.add(("image",))
    flat = {v.expected.name: _flatten(_shared_part(v.service.data), ()) for v in views if v.service}
    # What the spec renders is only needed to name the replica that departs: it is built
    # the first time a key differs (rendering the tier is most of this check's cost).
    want: dict[str, dict[tuple[str, ...], Any]] = {}
    paths = sorted({p for f in flat.values() for p in f} - declared, key=lambda p: p)
    for path in paths:
        values = {name: f.get(path, _MISSING) for name, f in flat.items()}
        if len({repr(v) for v in values.values()}) <= 1:
            continue
        if not want:
            rendered = compose_document(ctx.tier)["services"]
            want = {
                v.expected.name: _flatten(_shared_part(rendered.get(v.expected.service, {})), ())
                for v in views
            }
        shown = ", ".join(f"{n} has {_show(v)}" for n, v in values.items())
        for view in views:
            name = view.expected.name
            expected = want[name].get(path, _MISSING)
            if values[name] == expected and len(views) > 1:
                continue
            yield Violation(
                rule="TC003",
                service=view.expected.service,
                message=f"{'.'.join(path)} differs between replicas ({shown}); "
                f"the spec gives {_show(expected)}",
                location=ctx.compose.location("services", view.expected.service, *path),
                expected=_show(expected),
                found=_show(values[name]),
            )
    for view in views:
        yield from _env(ctx, view)
        yield from _gpus(ctx, view)


def _env(ctx: Context, view: ReplicaView) -> Iterator[Violation]:
    assert view.service is not None
    expected = view.expected.env
    actual = view.service.environment
    svc = view.expected.service
    for key in [*expected, *(k for k in actual if k not in expected)]:
        want, got = expected.get(key, _MISSING), actual.get(key, _MISSING)
        if got is _MISSING:
            message = f"environment {key} is missing; the spec gives {want!r}"
        elif want is _MISSING:
            message = f"environment {key} is not in the spec (found {_redact(key, got)})"
        elif got != want:
            others = [
                o.expected.name
                for o in ctx.other_replicas(view.expected.name)
                if o.service is not None and o.service.environment.get(key) == want
            ]
            tail = (
                f" ({', '.join(others)} still {'has' if len(others) == 1 else 'have'} it)"
                if others
                else ""
            )
            message = f"environment {key}: spec gives {_redact(key, want)}, found {_redact(key, got)}{tail}"
        else:
            continue
        yield Violation(
            rule="TC003",
            service=svc,
            message=message,
            location=ctx.compose.location("services", svc, "environment", key),
            expected=None if want is _MISSING else _redact(key, want),
            found=None if got is _MISSING else _redact(key, got),
        )


def _gpus(ctx: Context, view: ReplicaView) -> Iterator[Violation]:
    assert view.service is not None
    if ctx.tier.spec.replicas[view.expected.name].gpu_style != "deploy":
        return  # granted by other keys (gpus:, runtime:, devices:), compared as compose keys
    found = list(view.service.gpu_ids)
    want = [str(g) for g in view.expected.gpus]
    if view.expected.gpu_count == 0:  # a CPU replica: no device reserved at all
        found = found or [f"count:{c}" for c in _counts(view.service.data)]
    elif not want:  # the spec reserves a count (count: N / all), not device ids
        want = [f"count:{view.expected.gpu_count}"]
        found = found or [f"count:{c}" for c in _counts(view.service.data)]
    if found != want:
        yield Violation(
            rule="TC003",
            service=view.expected.service,
            message=f"GPUs: the spec gives {','.join(want) or 'none (gpu_count: 0, a CPU replica)'}"
            f", found {','.join(found) if found else 'none'}",
            location=ctx.compose.location("services", view.expected.service, "deploy"),
            expected=",".join(want),
            found=",".join(found),
        )


def _counts(data: dict[str, Any]) -> list[str]:
    deploy = data.get("deploy")
    resources = deploy.get("resources") if isinstance(deploy, dict) else None
    reservations = resources.get("reservations") if isinstance(resources, dict) else None
    devices = reservations.get("devices") if isinstance(reservations, dict) else None
    if not isinstance(devices, list):  # `devices: true` is TC007's to report, not a crash
        return []
    return [str(d["count"]) for d in devices if isinstance(d, dict) and "count" in d]


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


_MISSING: Any = _Missing()


def _show(value: Any) -> str:
    return "nothing" if value is _MISSING else repr(value)


def _redact(key: str, value: str | None) -> str:
    """Env values can be secrets: show references, lengths for anything that looks secret."""
    if value is None:
        return "unset (a bare key)"
    if (looks_secret_name(key) and "${" not in value) or literal_secret(key, value):
        return f"<literal, {len(value)} chars>"
    return repr(value)


def _shared_part(service: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in service.items() if k not in _PER_REPLICA_TOP}
    logging = out.get("logging")
    if isinstance(logging, dict) and isinstance(logging.get("options"), dict):
        options = {k: v for k, v in logging["options"].items() if k != "tag"}
        out["logging"] = {**logging, "options": options}
    deploy = out.get("deploy")
    if isinstance(deploy, dict):
        out["deploy"] = _strip_device_ids(deploy)
    return out


def _strip_device_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_device_ids(v) for k, v in node.items() if k != "device_ids"}
    if isinstance(node, list):
        return [_strip_device_ids(v) for v in node]
    return node


def _flatten(node: Any, path: tuple[str, ...]) -> dict[tuple[str, ...], Any]:
    if isinstance(node, dict) and node:
        out: dict[tuple[str, ...], Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, (*path, str(k))))
        return out
    return {path: node} if path else {}
