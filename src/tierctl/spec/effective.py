"""What each replica actually runs: effective flags, argv, env, variant.

The effective flags of a replica are the base args, then every overlay (appended in the order
declared), then the replica's overrides: a changed flag keeps its position, a new flag is
appended, ``null`` removes it. The argv and the telemetry variant are both derived from these
effective flags, which is what makes a variant unable to disagree with the flags it describes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierctl.compose.shellwords import ShellWordsError, split_shell_words
from tierctl.engine_catalog import Catalog
from tierctl.engines import EngineProfile, default_profile, profile_for
from tierctl.engines.base import format_scalar
from tierctl.errors import InputError
from tierctl.spec.tier_spec import EnvToken, HostEnv, SecretRef, Service, ShellWrapper, TierSpec

_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")
_FALSY_ENV = {"", "0", "false", "False", "no", "off"}


class VariantError(ValueError):
    """The variant template cannot be applied to a replica's effective flags and env."""

    def __init__(self, placeholder: str, reason: str) -> None:
        super().__init__(f"{{{placeholder}}}: {reason}")
        self.placeholder = placeholder
        self.reason = reason


def flag_tokens(name: str, value: Any) -> list[str]:
    """The argv tokens of one flag: ``--name value``, bare ``--name``, repeated or JSON.

    Engine-neutral (``false`` gives no tokens): what a rule or a summary compares. The tokens
    are the engine profiles' (:meth:`tierctl.engines.EngineProfile.flag_tokens`, the one
    renderer), which differ between engines only for ``false`` (``--no-name``); the argv a
    replica runs is rendered by its own engine's profile (:func:`replica_argv`), which also
    places positional arguments.
    """
    if value is False:
        return []
    return default_profile().flag_tokens(name, value)


def argv_from_flags(flags: dict[str, Any]) -> list[str]:
    """The flag part of an argv, in the flags' order."""
    tokens: list[str] = []
    for name, value in flags.items():
        tokens += flag_tokens(name, value)
    return tokens


def equals_form(argv: list[str], names: list[str]) -> list[str]:
    """Join ``--name value`` into ``--name=value`` for the flags in ``names`` (the spec's
    ``engine.equals_flags``, for files written that way)."""
    if not names:
        return argv
    wanted = {f"--{n}" for n in names}
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in wanted and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def effective_flags(spec: TierSpec, replica: str) -> dict[str, Any]:
    """Base args, then overlays, then the replica's overrides (see the module docstring)."""
    flags: dict[str, Any] = dict(spec.engine.args)
    for overlay in spec.engine.overlays.values():
        flags.update(overlay)
    for name, value in spec.replicas[replica].args.items():
        if value is None:
            flags.pop(name, None)
        else:
            flags[name] = value
    return flags


def flag_path(spec: TierSpec, replica: str, name: str) -> tuple[str, ...] | None:
    """Where in the spec the value of flag ``name`` that ``replica`` runs with is set: its
    override, the last overlay that sets it, or the base args (None when nowhere)."""
    if name in spec.replicas[replica].args:
        return ("replicas", replica, "args", name)
    for overlay, flags in reversed(spec.engine.overlays.items()):
        if name in flags:
            return ("engine", "overlays", overlay, name)
    if name in spec.engine.args:
        return ("engine", "args", name)
    return None


def env_text(value: Any) -> str | None:
    """An env value as compose writes it; secrets become ``${NAME:?message}``, a value passed
    through from the host None (a bare key)."""
    if isinstance(value, HostEnv):
        return None
    if isinstance(value, SecretRef):
        message = value.message or f"set {value.secret} in the deployer's environment"
        return f"${{{value.secret}:?{message}}}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def effective_env(spec: TierSpec, replica: str) -> dict[str, str | None]:
    """Engine env, then the replica's additions and overrides (``null`` removes)."""
    env: dict[str, Any] = dict(spec.engine.env)
    for name, value in spec.replicas[replica].env.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return {k: env_text(v) for k, v in env.items()}


def engine_profile(spec: TierSpec) -> EngineProfile:
    """The profile of the spec's engine."""
    return profile_for(spec.engine.kind)


def engine_catalog(spec: TierSpec) -> Catalog | None:
    """The shipped flag catalog of the pinned release, or None when none is shipped."""
    from tierctl.catalog.store import load_catalog

    try:
        return load_catalog(spec.engine.kind, spec.engine.version)
    except InputError:
        return None


def launcher(spec: TierSpec) -> list[str]:
    """The argv before the flags (and before any positional argument)."""
    if spec.engine.launcher is not None:
        return list(spec.engine.launcher)
    return list(engine_profile(spec).default_launcher())


def replica_argv(spec: TierSpec, flags: dict[str, Any], image: str | None = None) -> list[str]:
    """The whole command of a replica, in its engine's syntax: the launcher, positional
    arguments where the launcher takes them (``vllm serve MODEL``, also when the entrypoint
    or the image's ENTRYPOINT says ``vllm`` or ``vllm serve``), then the flags, with
    ``false`` as ``--no-name`` for a ``boolean_optional`` flag of the pinned catalog."""
    profile = engine_profile(spec)
    head = launcher(spec)
    return profile.render_argv(
        head, flags, engine_catalog(spec), launcher_context(spec, image), spec.engine.positional
    )


def launcher_context(spec: TierSpec, image: str | None = None) -> tuple[str, ...]:
    """What runs before the spec's launcher: the engine's entrypoint, or the image's
    ENTRYPOINT where the launcher is empty (()) inside a shell script): with it, the
    launcher ``serve`` behind ``entrypoint: [vllm]`` takes the model positionally."""
    if spec.engine.shell is not None:
        return ()
    if spec.engine.entrypoint is not None:
        return tuple(spec.engine.entrypoint)
    if not launcher(spec):
        return engine_profile(spec).image_entrypoint(image or spec.engine.image)
    return ()


def takes_positional(spec: TierSpec, image: str | None = None) -> bool:
    """Whether the replicas' commands hold the engine's positional arguments (vLLM's model)
    positionally: ``engine.positional``, else where the launcher in its context takes them."""
    if spec.engine.positional is not None:
        return spec.engine.positional
    head = (*launcher_context(spec, image), *launcher(spec))
    return engine_profile(spec).takes_positional(head)


# A token the shell reads as itself (no quoting needed). ``$VAR`` and ``${VAR...}`` are left
# bare on purpose (``$$VAR`` too: compose's escape of ``$``), so ``--model-path $MODEL`` keeps
# expanding in the script; other braces are quoted (bash would brace-expand ``{a,b}``).
_SHELL_SAFE = re.compile(
    r"(?:[A-Za-z0-9_@%+=:,./-]|\$\$?\{[^{}'\"\\\s]*\}|\$\$?[A-Za-z_][A-Za-z0-9_]*)+"
)
ARGV_SLOT = "{argv}"


def shell_join(argv: list[str] | tuple[str, ...], spelling: Mapping[str, str] | None = None) -> str:
    """Tokens as one shell command line: as ``spelling`` writes them, else bare where the
    shell reads them as themselves, single-quoted otherwise."""
    out = []
    for token in argv:
        if spelling and token in spelling:
            out.append(spelling[token])
        elif _SHELL_SAFE.fullmatch(token):
            out.append(token)
        else:
            out.append("'" + token.replace("'", "'\\''") + "'")
    return " ".join(out)


def wrap_command(shell: ShellWrapper | None, argv: list[str]) -> list[str]:
    """A replica's compose ``command``: its argv, or the shell script that runs it."""
    if shell is None:
        return list(argv)
    head, _, tail = shell.script.partition(ARGV_SLOT)
    return [*shell.command, head + shell_join(argv, shell.spelling) + tail]


def unwrap_command(shell: ShellWrapper | None, command: tuple[str, ...]) -> tuple[str, ...] | None:
    """The engine argv inside a rendered ``command`` (the inverse of :func:`wrap_command`);
    None when the command is not the wrapper's shape."""
    if shell is None:
        return command
    head, _, tail = shell.script.partition(ARGV_SLOT)
    n = len(shell.command)
    if len(command) != n + 1 or list(command[:n]) != shell.command:
        return None
    script = command[n]
    if not (script.startswith(head) and script.endswith(tail)) or len(script) < len(head + tail):
        return None
    try:
        words, cut = split_shell_words(script[len(head) : len(script) - len(tail)])
    except ShellWordsError:
        return None
    return tuple(words) if cut < 0 else None


def service_name(spec: TierSpec, replica: str) -> str:
    """The compose service (and container) name of a replica."""
    own = spec.replicas[replica].service if replica in spec.replicas else None
    return own or spec.engine.service.replace("{replica}", replica)


def replica_port(spec: TierSpec, flags: dict[str, Any]) -> int:
    """The HTTP port the replica listens on (its --port, else the engine's default)."""
    default = engine_profile(spec).default_port
    port = flags.get("port", default)
    try:
        return int(port)
    except (TypeError, ValueError, OverflowError):  # OverflowError: port: .inf
        return default


def token_on(token: Any, flags: dict[str, Any], env: Mapping[str, str | None]) -> bool:
    """Whether a telemetry token's condition holds on these effective flags and env."""
    if isinstance(token, EnvToken):
        value = env.get(token.env)
        if value is None:
            return False
        return value == token.equals if token.equals is not None else value not in _FALSY_ENV
    value = flags.get(token.flag)
    if value is None or value is False:
        return False
    if token.equals is None:
        return True
    return flag_tokens(token.flag, value) == flag_tokens(token.flag, token.equals)


def render_variant(
    spec: TierSpec, replica: str, flags: dict[str, Any], env: Mapping[str, str | None]
) -> str:
    """Apply the telemetry template to a replica's effective flags and env.

    Raises:
        VariantError: a placeholder is neither a token, a name, nor a valued flag here.
    """
    names = {"replica": replica, "host": spec.host, "tier": spec.tier}

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        token = spec.telemetry.tokens.get(key)
        if token is not None:
            return token.text if token_on(token, flags, env) else ""
        if key in names:
            return names[key]
        if key not in flags or flags[key] is False:
            raise VariantError(key, f"replica {replica} does not set --{key}")
        value = flags[key]
        if value is True or isinstance(value, list | dict):
            raise VariantError(
                key, f"--{key} is not a single value on replica {replica}; use a token"
            )
        return format_scalar(value)

    return _PLACEHOLDER.sub(substitute, spec.telemetry.variant)


@dataclass(frozen=True)
class ResolvedReplica:
    """A replica as it will run: every value derived from the spec."""

    name: str
    service: str
    role: str | None
    gpus: tuple[int, ...]  # () when the replica reserves a count or all GPUs
    image: str
    flags: dict[str, Any]
    argv: list[str]
    env: dict[str, str | None]  # None: passed through from the host (a bare key)
    variant: str
    port: int
    gpu_count: int | str = 0  # len(gpus), a count (count: N), or "all"

    @property
    def backend_url_context(self) -> dict[str, str]:
        """Placeholders available to URL and address templates."""
        return {"service": self.service, "port": str(self.port), "replica": self.name}


@dataclass(frozen=True)
class Tier:
    """The resolved tier: replicas in spec order and the other services."""

    spec: TierSpec
    replicas: dict[str, ResolvedReplica]
    services: dict[str, Service]


def fill(template: str, context: dict[str, str]) -> str:
    """Replace ``{name}`` placeholders from ``context``; unknown ones are left as they are."""
    return _PLACEHOLDER.sub(lambda m: context.get(m.group(1), m.group(0)), template)


#: The ROCm devices a container needs for AMD GPUs (``gpu_style: amd``).
AMD_DEVICES = ("/dev/kfd", "/dev/dri")
#: The variable that picks a replica's AMD GPUs, by ``gpu_style``.
AMD_VISIBLE = {"amd-hip": "HIP_VISIBLE_DEVICES", "amd-rocr": "ROCR_VISIBLE_DEVICES"}


def gpu_grant(
    style: str, gpus: tuple[int, ...], count: int | str
) -> tuple[dict[str, Any], dict[str, str]]:
    """(compose keys, environment) that give a replica its GPUs in ``style`` (the spec's
    ``gpu_style``): nothing for a CPU replica (``count`` 0) or ``as-written`` (the replica's
    compose fragment holds the keys as the file wrote them)."""
    if count == 0 or style == "as-written":
        return {}, {}
    if style == "gpus":
        return {"gpus": "all"}, {}
    if style == "amd":
        return {"devices": list(AMD_DEVICES)}, {}
    if style in AMD_VISIBLE:
        return {"devices": list(AMD_DEVICES)}, {AMD_VISIBLE[style]: ",".join(map(str, gpus))}
    if style == "runtime":
        visible = ",".join(str(g) for g in gpus) if gpus else str(count)
        return {"runtime": "nvidia"}, {"NVIDIA_VISIBLE_DEVICES": visible}
    device: dict[str, Any] = {"driver": "nvidia"}
    if gpus:
        device["device_ids"] = [str(g) for g in gpus]
    else:
        device["count"] = count  # count: N, or count: all
    device["capabilities"] = ["gpu"]
    return {"deploy": {"resources": {"reservations": {"devices": [device]}}}}, {}


def resolve_replica(spec: TierSpec, name: str) -> ResolvedReplica:
    """Everything one replica runs with (raises VariantError on a bad template)."""
    replica = spec.replicas[name]
    flags = effective_flags(spec, name)
    env = effective_env(spec, name)
    count = replica.gpu_count if replica.gpu_count is not None else len(replica.gpus)
    # The runtime style grants GPUs through the environment (NVIDIA_VISIBLE_DEVICES).
    env.update(gpu_grant(replica.gpu_style, tuple(replica.gpus), count)[1])
    return ResolvedReplica(
        name=name,
        service=service_name(spec, name),
        role=replica.role,
        gpus=tuple(replica.gpus),
        gpu_count=replica.gpu_count if replica.gpu_count is not None else len(replica.gpus),
        image=replica.image or spec.engine.image,
        flags=flags,
        argv=equals_form(
            replica_argv(spec, flags, replica.image or spec.engine.image),
            spec.engine.equals_flags if replica.equals_flags is None else replica.equals_flags,
        ),
        env=env,
        variant=render_variant(spec, name, flags, env),
        port=replica_port(spec, flags),
    )


def resolve_tier(spec: TierSpec) -> Tier:
    """Resolve every replica of a checked spec (see :func:`tierctl.spec.load_spec`)."""
    return Tier(
        spec=spec,
        replicas={name: resolve_replica(spec, name) for name in spec.replicas},
        services=dict(spec.services),
    )
