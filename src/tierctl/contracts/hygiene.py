"""TC006 hygiene: pinned images, exclusive GPUs, no port clashes, no literal secrets, and
exactly the services the spec lists.

The checks that compare services (GPUs, host ports, ``--port``, container names, what a
service depends on) compare only services that can run together under the file's profiles
(:class:`~tierctl.compose.profiles.ProfileScope`): workers kept in mutually exclusive profiles
may share a GPU or a port.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tierctl.compose import ComposeFile, ComposeService
from tierctl.compose.forms import TAGGED_IMAGE, command_cut
from tierctl.compose.profiles import ProfileScope
from tierctl.contracts.context import Context, config_content
from tierctl.contracts.credentials import embedded_credential, literal_secret, secret_positions
from tierctl.contracts.report import Violation
from tierctl.engine_catalog import Catalog
from tierctl.errors import InputError

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_REFERENCE = re.compile(r"\$\{[^}]*\}")


def check(ctx: Context) -> Iterator[Violation]:
    """All hygiene checks over every service of the file."""
    yield from _services_present(ctx)
    spec = ctx.tier.spec
    tags_ok = set(ctx.tier.services)
    if spec.engine.image_policy == "tag":
        tags_ok |= {r.service for r in ctx.tier.replicas.values()}
    if spec.engine.image_policy != "as-written":  # as-written: the spec keeps every image
        yield from images(ctx.compose, tags_ok)
    yield from gpus(ctx.compose, ctx.scope)
    host_flags = [
        (v.expected.service, v.flags)
        for v in ctx.replicas.values()
        if v.service is not None and v.service.data.get("network_mode") == "host"
    ]
    yield from ports(ctx.compose, host_flags, ctx.scope)
    yield from healthcheck_ports(
        ctx.compose,
        [
            (v.expected.service, v.expected.port)
            for v in ctx.replicas.values()
            if v.service is not None
        ],
    )
    yield from container_names(ctx.compose, ctx.scope)
    yield from dependencies(ctx.compose, ctx.scope)
    yield from secrets(ctx.compose)
    yield from cut_commands(ctx.compose)
    yield from mount_targets(ctx.compose)


def _services_present(ctx: Context) -> Iterator[Violation]:
    expected = [r.service for r in ctx.tier.replicas.values()] + list(ctx.tier.services)
    for name in expected:
        if name not in ctx.compose.services:
            yield Violation(
                rule="TC006",
                service=name,
                message=f"service {name} is in the spec but not in the file",
                location=ctx.compose.location("services"),
            )
    for name in ctx.compose.services:
        if name not in expected:
            yield Violation(
                rule="TC006",
                service=name,
                message=f"service {name} is in the file but not in the spec",
                location=ctx.compose.location("services", name),
            )


def images(compose: ComposeFile, tags_ok: set[str] | None = None) -> Iterator[Violation]:
    """Every service runs a pushed image pinned by digest (no ``build:``); the services in
    ``tags_ok`` may name a release tag instead (not ``latest``), as their spec allows."""
    for name, service in compose.services.items():
        if "build" in service.data:
            yield Violation(
                rule="TC006",
                service=name,
                message="build: is not allowed; deploy a pushed image pinned by digest",
                location=compose.location("services", name, "build"),
                fix="push the image and reference it as name@sha256:<digest>",
            )
        image = service.image
        if image is None:
            if "build" not in service.data:
                yield Violation(
                    rule="TC006",
                    service=name,
                    message="no image",
                    location=compose.location("services", name),
                )
        elif tags_ok and name in tags_ok and TAGGED_IMAGE.match(image):
            continue
        elif not _DIGEST.search(image):
            yield Violation(
                rule="TC006",
                service=name,
                message=f"image {image!r} is not pinned by digest (expected name@sha256:<64 hex>)",
                location=compose.location("services", name, "image"),
                found=image,
                fix=f"pin it: docker buildx imagetools inspect {image} gives the digest; "
                "write name:tag@sha256:<digest>",
            )


def gpus(compose: ComposeFile, scope: ProfileScope | None = None) -> Iterator[Violation]:
    """No GPU is reserved by two services that can run together (``scope``: the profiles;
    default: every project the file can run)."""
    scope = scope or ProfileScope.of(compose)
    owners: dict[str, list[str]] = {}
    claims: dict[str, list[str]] = {}
    for name, service in compose.services.items():
        for gpu in service.gpu_ids:
            claims.setdefault(gpu, []).append(name)
    for name, service in compose.services.items():
        for gpu in service.gpu_ids:
            first = _first_together(scope, owners.setdefault(gpu, []), name)
            if first is not None and _shared_by_fraction(compose, scope, claims[gpu], name):
                continue  # engines sharing the GPU, each with its share of the memory
            if first is not None:
                yield Violation(
                    rule="TC006",
                    service=name,
                    message=f"GPU {gpu} is also given to {first}" + _together(scope, first, name),
                    location=compose.location("services", name, "deploy"),
                    found=gpu,
                    fix="give each service its own device_ids"
                    + (", or put them in profiles that exclude each other" if scope.named else ""),
                )


def memory_share(service: ComposeService) -> float | None:
    """The share of a GPU's memory an engine service takes (vLLM's
    ``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static``), when its command sets
    one (a number in (0, 1])."""
    from tierctl.engines import PROFILES, profile_for_argv

    argv = (*(service.entrypoint or ()), *(service.command or ()))
    profile = profile_for_argv(argv)
    if profile is None:
        profile = next((p for p in PROFILES.values() if p.matches_image(service.image)), None)
        if profile is not None and not service.entrypoint:
            argv = (*profile.image_entrypoint(service.image), *argv)
    flag = profile.memory_fraction_flag if profile is not None else None
    if profile is None or flag is None:
        return None
    value = profile.command_flags(argv).get(flag)
    try:
        share = float(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return share if share is not None and 0 < share <= 1 else None


def _shared_by_fraction(
    compose: ComposeFile, scope: ProfileScope, claimants: list[str], name: str
) -> bool:
    """Whether the services given one GPU that run with ``name`` each set a memory share
    and the shares fit in the GPU (two engines sharing it, as a tier may plan)."""
    together = [c for c in claimants if c == name or scope.together(c, name)]
    shares = [memory_share(compose.services[c]) for c in together]
    return all(v is not None for v in shares) and sum(v or 0.0 for v in shares) <= 1.0 + 1e-9


# A probe of this container itself: localhost, a loopback address or 0.0.0.0, and a port.
_LOCAL_PROBE = re.compile(
    r"(?i)(?:https?://)?(?:localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|0\.0\.0\.0|\[::1?\])"
    r":(?P<port>\d{1,5})\b"
)


def healthcheck_ports(
    compose: ComposeFile, engines: Sequence[tuple[str, int | None]]
) -> Iterator[Violation]:
    """An engine's healthcheck probes the port the engine listens on (its ``--port``, else
    the engine's default): a probe of another port fails forever, so compose never sees the
    engine healthy and what depends on it never starts. ``engines``: (service, port; None
    where the port is a variable's value)."""
    for name, port in engines:
        service = compose.services.get(name)
        health = service.data.get("healthcheck") if service is not None else None
        test = health.get("test") if isinstance(health, dict) else None
        if port is None or health is None or not isinstance(health, dict):
            continue
        text = " ".join(str(t) for t in test) if isinstance(test, list) else str(test or "")
        probed = sorted({int(m.group("port")) for m in _LOCAL_PROBE.finditer(text)})
        if probed and port not in probed:
            yield Violation(
                rule="TC006",
                service=name,
                message=f"the healthcheck probes port {probed[0]}, but the engine listens on "
                f"{port}: the service never becomes healthy",
                location=compose.location("services", name, "healthcheck", "test"),
                expected=str(port),
                found=str(probed[0]),
                fix=f"probe http://localhost:{port}/health (the engine's --port)",
            )


def _first_together(scope: ProfileScope, claimants: list[str], name: str) -> str | None:
    """The first earlier claimant that can run with ``name`` (None: none); ``name`` joins."""
    if name in claimants or not scope.runs(name):
        return None
    first = next((c for c in claimants if scope.together(c, name)), None)
    claimants.append(name)
    return first


def _together(scope: ProfileScope, a: str, b: str) -> str:
    """`` (both run with profile P)`` when the file has profiles, else nothing."""
    return f" (both run {scope.why_together(a, b)})" if scope.named else ""


def ports(
    compose: ComposeFile,
    host_flags: list[tuple[str, dict[str, Any]]],
    scope: ProfileScope | None = None,
) -> Iterator[Violation]:
    """No host port published twice; on the host network, no engine ``--port`` or
    ``--dist-init-addr`` shared (``host_flags``: (service, flags) of those engines); only
    among services that can run together (``scope``)."""
    scope = scope or ProfileScope.of(compose)
    seen: dict[tuple[str, str], list[str]] = {}

    def claim(kind: str, value: str, service: str) -> Violation | None:
        first = _first_together(scope, seen.setdefault((kind, value), []), service)
        if first is None:
            return None
        return Violation(
            rule="TC006",
            service=service,
            message=f"{kind} {value} is also used by {first}" + _together(scope, first, service),
            location=compose.location("services", service),
            found=value,
            fix=f"give {service} its own {kind}",
        )

    # In its own network namespace each container may listen on the same port; only
    # replicas on the host's network share one port space.
    for service_name, flags in host_flags:
        for key in ("port", "dist-init-addr"):
            value = flags.get(key)
            if isinstance(value, str):
                hit = claim(f"--{key}", value, service_name)
                if hit:
                    yield hit
    # Ports as Compose reads them: 127.0.0.1:8000 and 10.0.0.1:8000 are two ports, tcp and
    # udp on one number too; a wildcard address (0.0.0.0, ::, none) overlaps every address.
    # Only services that can run together (``scope``) share the host's ports.
    bound: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (port, proto) -> (ip, service)
    reported: set[tuple[str, str]] = set()
    for name, service in compose.services.items():
        if not scope.runs(name):
            continue
        for port in service.ports:
            ip = str(port.get("host_ip") or "")
            ip = "" if ip in ("0.0.0.0", "::") else ip
            proto = str(port.get("protocol", "tcp"))
            for host in _host_ports(port.get("published")):
                shown = (f"{ip}:{host}" if ip else host) + ("" if proto == "tcp" else f"/{proto}")
                others = bound.setdefault((host, proto), [])
                clash = next(
                    (
                        s
                        for i, s in others
                        if s != name and (not i or not ip or i == ip) and scope.together(s, name)
                    ),
                    None,
                )
                others.append((ip, name))
                if clash is None or (name, shown) in reported:
                    continue
                reported.add((name, shown))
                yield Violation(
                    rule="TC006",
                    service=name,
                    message=f"host port {shown} is also used by {clash}"
                    + _together(scope, clash, name),
                    location=compose.location("services", name),
                    found=shown,
                    fix=f"give {name} its own host port",
                )


def container_names(compose: ComposeFile, scope: ProfileScope | None = None) -> Iterator[Violation]:
    """No container name used by two services that can run together (compose refuses the
    project: "container name ... is already in use")."""
    scope = scope or ProfileScope.of(compose)
    owners: dict[str, list[str]] = {}
    for name, service in compose.services.items():
        container = service.container_name
        if container is None:
            continue
        first = _first_together(scope, owners.setdefault(container, []), name)
        if first is not None:
            yield Violation(
                rule="TC007",
                service=name,
                message=f"container name {container!r} is also used by {first}"
                + _together(scope, first, name)
                + "; compose refuses the project",
                location=compose.location("services", name, "container_name"),
                found=container,
                fix=f"give {name} its own container_name, or drop it (compose names it)",
            )


def dependencies(compose: ComposeFile, scope: ProfileScope | None = None) -> Iterator[Violation]:
    """A service may depend (``required: true``, compose's default) only on services that run
    in the same project: compose refuses ``depends on undefined service`` otherwise. Checked
    in each project of ``scope``, each pair reported once."""
    scope = scope or ProfileScope.of(compose)
    reported: set[tuple[str, str]] = set()
    for service_set in scope.sets():
        members = set(service_set.services)
        for name in service_set.services:
            for dep, how in compose.services[name].depends_on.items():
                required = not isinstance(how, dict) or how.get("required", True) is not False
                if dep in members or dep not in compose.services or not required:
                    continue
                if (name, dep) in reported:
                    continue
                reported.add((name, dep))
                needs = ", ".join(scope.profiles.get(dep, ()))
                yield Violation(
                    rule="TC007",
                    service=name,
                    message=f"{name} depends on {dep}, which does not run in "
                    f"{service_set.label} ({dep} runs only with profile {needs}); compose "
                    f"refuses the project: depends on undefined service",
                    location=compose.location("services", name, "depends_on"),
                    found=dep,
                    fix=f"give {name} the profile {needs.split(', ')[0]} too, or mark the "
                    "dependency required: false",
                )


def _host_ports(published: Any) -> list[str]:
    """The host ports of a ``published`` value: ``8000``, or each port of ``6000-6001``."""
    text = str(published or "")
    lo, dash, hi = text.partition("-")
    if dash and lo.isdigit() and hi.isdigit() and int(lo) <= int(hi):
        return [str(p) for p in range(int(lo), int(hi) + 1)]
    return [text] if text.isdigit() else []


def _embedded(
    compose: ComposeFile, name: str, what: str, value: str, inside: str, *path: str | int
) -> Violation:
    """A value that carries a credential inside it (a header, a bearer token, a URL)."""
    return Violation(
        rule="TC006",
        service=name,
        message=f"{what} carries {inside} with a literal credential ({len(value)} chars)",
        location=compose.location("services", name, *path),
        fix=_EMBEDDED_FIX[inside],
    )


_DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?-[^}]*\}")


def _literal_env(compose: ComposeFile, name: str, key: str, value: str) -> Violation:
    """An environment credential written into the file: as the whole value, or as the
    default of a reference (``${PG_PASSWORD:-admin}``: used whenever the variable is unset)."""
    where = compose.location("services", name, "environment", key)
    default = _DEFAULTED.search(value)
    if default is not None:
        var = default.group(1)
        return Violation(
            rule="TC006",
            service=name,
            message=f"environment {key} defaults to a literal credential when {var} is unset "
            f"(a ${{{var}:-...}} default written in the file)",
            location=where,
            fix=f"drop the default: write ${{{var}:?set {var}}} and set {var} where you deploy",
        )
    return Violation(
        rule="TC006",
        service=name,
        message=f"environment {key} holds a literal value ({len(value)} chars) "
        f"where a ${{{key}}} reference belongs",
        location=where,
        fix=f"write {key}: ${{{key}:?set {key}}} and set it where you deploy",
    )


def secrets(
    compose: ComposeFile, catalogs: Mapping[str, Catalog] | None = None
) -> Iterator[Violation]:
    """No literal credential in an environment value or a command token; ``catalogs``: each
    engine service's flag catalog, so a flag is read as its engine's parser reads it (an
    abbreviation such as ``--max-num-batched-token`` is that flag, not a token)."""
    for name, service in compose.services.items():
        for key, value in service.environment.items():
            if not value:
                continue
            inside = embedded_credential(value)
            if inside is not None:
                yield _embedded(
                    compose, name, f"environment {key}", value, inside, "environment", key
                )
            elif literal_secret(key, value):
                yield _literal_env(compose, name, key, value)
        catalog = (catalogs or {}).get(name)
        # The entrypoint too: `entrypoint: [sh, -c, "vllm serve ... --api-key sk-..."]`.
        for part, argv in (("command", service.command), ("entrypoint", service.entrypoint)):
            yield from _argv_secrets(compose, name, part, argv or (), catalog)
        for key, value in service.labels.items():
            if value and literal_secret(key, value):
                yield Violation(
                    rule="TC006",
                    service=name,
                    message=f"label {key} holds a literal credential ({len(value)} chars); "
                    "labels are readable by anyone who can `docker inspect`",
                    location=compose.location("services", name, "labels", key),
                    fix="keep credentials out of labels; pass them as ${VAR} environment",
                )
    yield from _config_secrets(compose)


def _flag_name(catalog: Catalog) -> Callable[[str], str]:
    """A flag token's whole name in ``catalog``'s parser (the token itself when unknown)."""

    def name(token: str) -> str:
        flag = catalog.lookup(token)
        return token if flag is None else flag.name

    return name


# How to take the credential out of a value that carries one inside it.
_EMBEDDED_FIX = {
    "a password in a URL": "write the password as a reference, scheme://USER:${PASSWORD}@HOST, "
    "and set PASSWORD where you deploy",
    "a credential header": "write the header's value as a reference, "
    '"Authorization: Bearer ${TOKEN}", and set TOKEN where you deploy',
    "a bearer token": 'write the token as a reference, "Bearer ${TOKEN}", and set TOKEN where '
    "you deploy",
    "a credential in a URL's query": "write the parameter as a reference, ?token=${TOKEN}, "
    "and set TOKEN where you deploy",
    "a credential flag's value": "write the flag's value as a reference, --api-key ${API_KEY}, "
    "and set API_KEY where you deploy",
}


def _argv_secrets(
    compose: ComposeFile, name: str, part: str, argv: Sequence[str], catalog: Catalog | None
) -> Iterator[Violation]:
    """A literal credential in a command's (or entrypoint's) tokens: a credential flag's
    value, or one token carrying a credential inside it."""
    positions = secret_positions(argv, None if catalog is None else _flag_name(catalog))
    for i, value in positions:
        yield Violation(
            rule="TC006",
            service=name,
            message=f"{part} token {i} is a literal credential ({len(value)} chars); "
            "pass it through a ${VAR} reference or a secret file",
            location=compose.location("services", name, part, i),
            fix="replace the token with a ${VAR:?message} reference",
        )
    flagged = {i for i, _ in positions}
    for i, token in enumerate(argv):
        inside = None if i in flagged else embedded_credential(token)
        if inside is not None:
            yield _embedded(compose, name, f"{part} token {i}", token, inside, part, i)


def _config_secrets(compose: ComposeFile) -> Iterator[Violation]:
    """Literal credentials in an inline config (a collector's scrape config, an otelcol
    config): ``password:``, ``bearer_token:``, ``headers: {Authorization: ...}``."""
    configs = compose.data.get("configs")
    for cname, config in (configs if isinstance(configs, dict) else {}).items():
        content = config.get("content") if isinstance(config, dict) else None
        if not isinstance(content, str):
            continue
        try:
            doc = config_content(content, str(cname))
        except InputError:
            continue  # not YAML (a plain text config): nothing keyed to check
        for key, value in _scalar_items(doc):
            if literal_secret(key, value):
                yield Violation(
                    rule="TC006",
                    service=str(cname),
                    message=f"config {cname} sets {key} to a literal credential "
                    f"({len(value)} chars)",
                    location=compose.location("configs", str(cname), "content"),
                    fix=f"write {key}: ${{VAR}} (compose interpolates config content) or use a "
                    "credentials file the collector reads",
                )


def _scalar_items(doc: Any) -> Iterator[tuple[str, str]]:
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, str | int | float) and not isinstance(v, bool):
                    yield str(k), str(v)
                else:
                    stack.append(v)
        elif isinstance(node, list):
            stack.extend(node)


def mount_targets(compose: ComposeFile) -> Iterator[Violation]:
    """Every volume's container path is absolute, without ``..`` or a NUL byte: a target that
    climbs (``/../../etc/x``) names a different place to each reader (docker cleans it, a
    local run lays it under its state folder) and is refused by the local driver."""
    for name, service in compose.services.items():
        volumes = service.data.get("volumes")
        for i, entry in enumerate(volumes if isinstance(volumes, list) else []):
            if isinstance(entry, dict):
                target = entry.get("target")
            elif isinstance(entry, str):
                # A ${VAR:?message} reference holds colons that are not separators; a target
                # that is (or holds) one is the variable's value, not in the file.
                parts = _REFERENCE.sub("${VAR}", entry).split(":")
                target = parts[1] if len(parts) >= 2 else parts[0]
            else:
                continue
            if not isinstance(target, str) or "${" in target:
                continue
            problem = (
                "holds a NUL byte"
                if "\0" in target
                else "is not absolute"
                if not target.startswith("/")
                else "climbs with '..'"
                if ".." in target.split("/")
                else None
            )
            if problem:
                yield Violation(
                    rule="TC006",
                    service=name,
                    message=f"volume {i}'s container path {target!r} {problem}",
                    location=compose.location("services", name, "volumes", i),
                    found=target,
                    fix="write the container path as an absolute path without '..' (/models/x)",
                )


def cut_commands(compose: ComposeFile) -> Iterator[Violation]:
    """A string command that compose cuts at an unquoted ``;&|<>`` (the rest never runs)."""
    for name, service in compose.services.items():
        for key in ("command", "entrypoint"):
            dropped = command_cut(service.data.get(key))
            if dropped:
                yield Violation(
                    rule="TC006",
                    service=name,
                    message=f"compose splits {key} with go-shellwords and drops {dropped!r} "
                    "(an unquoted ; & | < > ends the command)",
                    location=compose.location("services", name, key),
                    found=dropped,
                    fix=f'wrap it in a shell: {key}: ["sh", "-c", "..."], or quote the operator',
                )
