"""The tier spec (``tier.yaml``) as pydantic models.

One file describes one serving tier: the engine and its pinned version, the ordered base argv,
tier-wide overlays, the replicas with their overrides, the telemetry variant template, the
pairing rules and the other services of the host. Shapes are checked here; rules that relate
several fields (a GPU given twice, an overlay clashing with the base argv) live in
:mod:`tierctl.spec.checks` so that they can name every place involved.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

# --- flag values --------------------------------------------------------------------------

_SCALAR_SCHEMA: dict[str, Any] = {"type": ["string", "integer", "number", "boolean"]}
_FLAG_VALUE_SCHEMA: dict[str, Any] = {
    "description": (
        "A flag's value: a scalar (`--flag value`), true (bare `--flag`), false (omitted), "
        "a list (`--flag a b c`), {json: ...} (one compact JSON token) or {repeat: [...]} "
        "(`--flag a --flag b`)."
    ),
    "anyOf": [
        _SCALAR_SCHEMA,
        {"type": "array", "items": _SCALAR_SCHEMA},
        {
            "type": "object",
            "properties": {"json": {}},
            "required": ["json"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"repeat": {"type": "array", "items": _SCALAR_SCHEMA}},
            "required": ["repeat"],
            "additionalProperties": False,
        },
    ],
}
_OVERRIDE_SCHEMA: dict[str, Any] = {
    "description": "Like a flag value; null removes the flag from this replica.",
    "anyOf": [*_FLAG_VALUE_SCHEMA["anyOf"], {"type": "null"}],
}


def _is_scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


def _check_flag_value(value: Any) -> Any:
    """Accept the flag value shapes the renderer knows how to turn into argv tokens."""
    if _is_scalar(value):
        return value
    if isinstance(value, list):
        if not value:
            raise ValueError("an empty list renders no value; use true for a bare flag")
        if not all(_is_scalar(v) and not isinstance(v, bool) for v in value):
            raise ValueError("list items must be strings or numbers (one token each)")
        return value
    if isinstance(value, dict):
        if set(value) == {"json"}:
            return value
        if set(value) == {"repeat"} and isinstance(value["repeat"], list):
            if not all(_is_scalar(v) and not isinstance(v, bool) for v in value["repeat"]):
                raise ValueError("repeat items must be strings or numbers")
            return value
        raise ValueError(
            "a mapping value must be {json: <value>} for a JSON-valued flag or "
            "{repeat: [a, b]} for a repeated flag"
        )
    raise ValueError(f"unsupported flag value of type {type(value).__name__}")


def _check_override(value: Any) -> Any:
    return None if value is None else _check_flag_value(value)


FlagValue = Annotated[Any, AfterValidator(_check_flag_value), WithJsonSchema(_FLAG_VALUE_SCHEMA)]
FlagOverride = Annotated[Any, AfterValidator(_check_override), WithJsonSchema(_OVERRIDE_SCHEMA)]


FlagMap = dict[str, FlagValue]
OverrideMap = dict[str, FlagOverride]


# --- env values ---------------------------------------------------------------------------


class SecretRef(BaseModel):
    """An environment value that must come from the deployer's environment, never the file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Name of the variable the deployer sets; rendered as ${NAME:?message}.",
    )
    message: str | None = Field(
        default=None, description="Message compose prints when the variable is unset."
    )


class HostEnv(BaseModel):
    """An environment variable passed through from the host running compose (compose's bare
    ``- NAME`` / ``NAME:``): set in the container only when set there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    from_host: Literal[True] = Field(description="Always true: rendered as a bare NAME: (null).")


EnvValue = str | int | float | bool | SecretRef | HostEnv
EnvOverride = str | int | float | bool | SecretRef | HostEnv | None

# --- models -------------------------------------------------------------------------------


def _check_engine_kind(value: str) -> str:
    from tierctl.engines import kinds

    if value not in kinds():
        raise ValueError(f"unknown engine {value!r}; known: {', '.join(kinds())}")
    return value


def _engine_kind_schema() -> dict[str, Any]:
    from tierctl.engines import kinds

    return {"type": "string", "enum": list(kinds())}


EngineKind = Annotated[
    str, AfterValidator(_check_engine_kind), WithJsonSchema(_engine_kind_schema())
]


#: Keys of a replica's compose fragment the renderer merges into mappings of its own; each must
#: itself be a mapping (``logging: json-file`` was a bare ValueError deep in the renderer).
_MERGED_MAPPINGS: tuple[tuple[str, ...], ...] = (
    ("logging",),
    ("logging", "options"),
    ("deploy",),
    ("deploy", "resources"),
    ("deploy", "resources", "reservations"),
)


def _check_fragment(value: dict[str, Any]) -> dict[str, Any]:
    """A replica compose fragment whose merged keys have the shapes compose gives them."""
    for path in _MERGED_MAPPINGS:
        node: Any = value
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict):
            dotted = ".".join(path)
            raise ValueError(
                f"{dotted} must be a mapping (compose's {dotted}: {{...}}), "
                f"not {type(node).__name__} {_short(node)}"
            )
    devices = _nested(value, "deploy", "resources", "reservations", "devices")
    if devices is not None and not isinstance(devices, list):
        raise ValueError("deploy.resources.reservations.devices must be a list")
    return value


def _nested(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}... ({len(text)} characters)"


def _no_nul(value: str) -> str:
    """Refuse a NUL byte: no path, name or label can hold one (``Path.resolve`` raised)."""
    if "\x00" in value:
        raise ValueError("contains a NUL byte (\\0), which no path or name can hold")
    return value


ReplicaCompose = Annotated[dict[str, Any], AfterValidator(_check_fragment)]
PathText = Annotated[str, AfterValidator(_no_nul)]


def _file_name(value: str) -> str:
    """Refuse an output that names a folder, not a file (``.``, ``out/``, ``a/..``): the
    renderings are written to it and beside it (``compose.k8s.yaml``), which needs a name
    (``output: "."`` ended ``render --target kubernetes`` in a ValueError, issue #42)."""
    name = value.replace("\\", "/").rstrip().rpartition("/")[2]
    if value.endswith(("/", "\\")) or name in ("", ".", ".."):
        raise ValueError(
            f"output {value[:60]!r} names a folder, not a file: write a file name, e.g. "
            "compose.yaml or deploy/compose.yaml"
        )
    return value


OutputPath = Annotated[str, AfterValidator(_no_nul), AfterValidator(_file_name)]


class StrictModel(BaseModel):
    """Base for spec models: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ShellWrapper(StrictModel):
    """A shell script the engine runs inside (``bash -c "pip install x && python3 -m ..."``)."""

    command: list[str] = Field(
        description="The command tokens before the script (e.g. [bash, -c]; [] when the "
        "entrypoint is the shell)."
    )
    script: str = Field(
        description="The script, with {argv} where the engine's command goes (each token "
        "shell-quoted where it needs it, one space between tokens)."
    )
    in_entrypoint: bool = Field(
        default=False,
        description="The script is the replicas' entrypoint (entrypoint: [bash, -c, SCRIPT], "
        "no command) instead of their command.",
    )
    spelling: dict[str, str] = Field(
        default_factory=dict,
        description="How the script writes some of the engine command's words (`$${MODEL}` "
        'as `"$${MODEL}"`): a word of the argv found here is written so, any other word '
        "shell-quoted where it needs it (`tierctl import` keeps the file's quoting).",
    )


class Engine(StrictModel):
    """The engine every replica runs."""

    kind: EngineKind = Field(
        description="Engine family: one with a profile under tierctl/engines/ (sglang, vllm)."
    )
    version: str = Field(
        pattern=r"^\d+(\.\d+)*([.-]?(post|rc|dev|a|b)\d*)*$",
        max_length=64,
        description="Pinned engine release; selects the flag catalog used by validation.",
    )
    image: str = Field(description="Container image, pinned by digest (name@sha256:<64 hex>).")
    service: str = Field(
        default="engine-{replica}",
        description="Service (and container) name template; must contain {replica}.",
    )
    launcher: list[str] | None = Field(
        default=None,
        description=(
            "argv before the flags. Default: python3 -m sglang.launch_server (sglang), "
            "vllm serve (vllm)."
        ),
    )
    args: FlagMap = Field(
        description=(
            "Base flags, in order, without leading dashes. An engine's positional argument is "
            "written as an arg too: vLLM's model as `model: /models/x`, rendered "
            "`vllm serve /models/x` (or `--model /models/x` with the api_server launcher). "
            "false renders `--no-flag` for a boolean_optional flag of the pinned catalog."
        )
    )
    env: dict[str, EnvValue] = Field(
        default_factory=dict, description="Environment of every replica."
    )
    overlays: dict[str, FlagMap] = Field(
        default_factory=dict,
        description=(
            "Named flag sets added to every replica after the base args. An overlay may not "
            "set a flag the base args already carry."
        ),
    )
    compose: ReplicaCompose = Field(
        default_factory=dict,
        description="Compose keys added to every replica service (volumes, ipc, healthcheck...).",
    )
    backend_url: str = Field(
        default="http://{service}:{port}",
        description="How the proxy reaches a replica; placeholders {service}, {port}, {replica}.",
    )
    entrypoint: list[str] | None = Field(
        default=None,
        description=(
            "The replicas' compose `entrypoint` (an entrypoint launcher: entrypoint "
            "[python3, -m, sglang.launch_server] with launcher [] and the flags as command)."
        ),
    )
    container_name: bool = Field(
        default=True,
        description="Render container_name (the service name) on every replica service.",
    )
    shell: ShellWrapper | None = Field(
        default=None,
        description="The shell script the replicas' engine command runs inside, if any.",
    )
    equals_flags: list[str] = Field(
        default_factory=list,
        description="Flags rendered as one `--name=value` token instead of `--name value`.",
    )
    argv_tail: str | None = Field(
        default=None,
        max_length=4096,
        description=(
            "Words after the engine's flags that compose splits only after interpolation "
            "(`${QUANT:+--quantization ${QUANT}}`, `${EXTRA_ARGS}`): the command is rendered "
            "as one string, the flags then this text, so they give as many words as their "
            "values have. Their flags are not checked."
        ),
    )
    command_string: bool = Field(
        default=False,
        description=(
            "Render the replicas' command as one string, as the file wrote it: compose splits "
            "it after interpolation, so `--api-key ${KEY}` with KEY unset gives no word "
            "(a list would give an empty one)."
        ),
    )
    positional: bool | None = Field(
        default=None,
        description=(
            "How the engine's positional argument (vLLM's model) is written: null: where the "
            "launcher takes it (`vllm serve MODEL`, also behind an entrypoint or image "
            "ENTRYPOINT running `vllm`), else `--model MODEL`; true: positionally; false: "
            "as `--model MODEL` (files written that way, kept by `tierctl import`)."
        ),
    )
    image_policy: Literal["digest", "tag", "as-written"] = Field(
        default="digest",
        description=(
            "digest: engine images must be pinned by digest; tag: a release tag is accepted "
            "(not latest), as in hand-written files brought under tierctl by `tierctl import`; "
            "as-written: every image of the tier is kept as the file wrote it (latest, main, "
            "${IMG:-repo:tag}), which `tierctl import` says with one warning per image."
        ),
    )


#: How a replica's GPUs are written in its compose service (see ``Replica.gpu_style``).
GpuStyle = Literal["deploy", "gpus", "runtime", "amd", "amd-hip", "amd-rocr", "as-written"]


class Replica(StrictModel):
    """One engine replica."""

    gpus: list[Annotated[int, Field(ge=0, le=999_999)]] = Field(
        default_factory=list,
        description="GPU indices this replica owns (rendered as device_ids).",
    )
    gpu_count: Annotated[int, Field(ge=0, le=999_999)] | Literal["all"] | None = Field(
        default=None,
        description=(
            "Instead of gpus: reserve a number of GPUs (count: N) or all of them (count: all), "
            "as files that do not name device ids do; 0 is a CPU replica (no GPU reserved)."
        ),
    )
    role: Literal["control", "canary"] | None = Field(
        default=None, description="control (the live baseline) or canary (the change)."
    )
    args: OverrideMap = Field(
        default_factory=dict,
        description="Flag overrides: set or change a flag (kept in place), null removes it.",
    )
    env: dict[str, EnvOverride] = Field(
        default_factory=dict, description="Environment additions/overrides; null removes."
    )
    image: str | None = Field(default=None, description="Image override for this replica.")
    compose: ReplicaCompose = Field(
        default_factory=dict, description="Compose keys merged into this replica's service."
    )
    container_name: str | None = Field(
        default=None,
        description=(
            "The replica's container name when it is not the service name (a hand-written "
            "file's container_name, kept by `tierctl import`)."
        ),
    )
    service: str | None = Field(
        default=None,
        pattern=r"^[a-zA-Z0-9._-]+$",
        max_length=128,
        description="This replica's compose service name where the engine's template cannot "
        "give it (a hand-written file's `llm-A`, `vllm.main`, kept by `tierctl import`).",
    )
    equals_flags: list[str] | None = Field(
        default=None,
        description="This replica's `--name=value` flags, where they are not the engine's "
        "equals_flags (a file whose replicas spell them differently).",
    )
    gpu_style: GpuStyle = Field(
        default="deploy",
        description=(
            "How the GPUs are granted in the rendered service. deploy: "
            "deploy.resources.reservations.devices [{driver: nvidia, device_ids|count, "
            "capabilities: [gpu]}]; gpus: compose's `gpus: all`; runtime: `runtime: nvidia` "
            "with NVIDIA_VISIBLE_DEVICES (the ids, or all); amd: the ROCm devices /dev/kfd and "
            "/dev/dri (every GPU); amd-hip / amd-rocr: those devices with HIP_VISIBLE_DEVICES / "
            "ROCR_VISIBLE_DEVICES naming the replica's gpus; as-written: the replica's compose "
            "keys grant them as the file wrote "
            "them (gpus/gpu_count, when known, only tell tierctl how many)."
        ),
    )

    @model_validator(mode="after")
    def _one_gpu_form(self) -> Replica:
        if self.gpu_style == "as-written" and not self.gpus and self.gpu_count is None:
            return self  # the file's keys grant GPUs tierctl cannot count
        if bool(self.gpus) == (self.gpu_count is not None):
            raise ValueError(
                "give either gpus (a list of GPU indices) or gpu_count (a number, or all)"
            )
        if self.gpu_style in ("gpus", "amd") and self.gpu_count != "all":
            raise ValueError(f"gpu_style {self.gpu_style} grants every GPU: use gpu_count: all")
        if self.gpu_style in ("amd-hip", "amd-rocr") and not self.gpus:
            raise ValueError(
                f"gpu_style {self.gpu_style} names the replica's GPUs: give gpus (indices)"
            )
        return self


class EnvToken(StrictModel):
    """A variant token that appears when an environment variable has a value."""

    env: str = Field(description="Environment variable to look at (effective env).")
    equals: str | None = Field(
        default=None, description="Required value; default: set, non-empty, not 0/false."
    )
    text: str = Field(description="Text the token contributes to the variant.")


class FlagToken(StrictModel):
    """A variant token that appears when a flag is on."""

    flag: str = Field(description="Flag to look at (effective argv, without dashes).")
    equals: str | int | float | bool | None = Field(
        default=None, description="Required value; default: present and not false."
    )
    text: str = Field(description="Text the token contributes to the variant.")


Place = Literal["service-labels", "log-tags", "collector-scrape-config"]
ALL_PLACES: tuple[Place, ...] = ("service-labels", "log-tags", "collector-scrape-config")


class Telemetry(StrictModel):
    """The config_variant each replica reports, and where it is written."""

    label: str = Field(default="config_variant", description="Label key carrying the variant.")
    variant: str = Field(
        description=(
            "Template: {flag-name} is the flag's effective value, {token} a token's text, "
            "{replica}/{host}/{tier} the names."
        )
    )
    tokens: dict[str, EnvToken | FlagToken] = Field(
        default_factory=dict, description="Named conditional text pieces for the template."
    )
    places: list[Place] = Field(
        default_factory=lambda: list(ALL_PLACES),
        description="Where the variant is written.",
    )
    log_tag: str = Field(
        default="{service}|{variant}",
        description="Log tag template; placeholders {service}, {variant}, {replica}, {host}.",
    )


class Condition(StrictModel):
    """A conjunction over a replica's effective flags and env."""

    args: dict[str, FlagValue] = Field(default_factory=dict, description="Flag == value.")
    env: dict[str, str] = Field(default_factory=dict, description="Env var == value.")


class Rule(StrictModel):
    """A pairing rule: when ``when`` holds on a replica, ``require`` must hold too."""

    id: str | None = Field(default=None, description="Short name used in reports.")
    when: Condition = Field(description="Condition that triggers the rule.")
    require: Condition = Field(description="What must then hold.")
    because: str = Field(description="Why: shown with every violation.")


class ScrapeConfig(StrictModel):
    """The collector's per-replica scrape config, rendered as a compose ``configs`` entry."""

    config: str = Field(default="tierctl-scrape", description="Compose config name.")
    target: str = Field(description="Path of the rendered file inside the collector.")
    format: Literal["prometheus", "otelcol"] = Field(
        default="prometheus",
        description="prometheus: a scrape_configs document; otelcol: wrapped in a collector config.",
    )
    address: str = Field(
        default="{service}:{port}", description="Scrape target; {service}, {port}, {replica}."
    )
    metrics_path: str = Field(default="/metrics", description="Metrics path on the engine.")
    interval_s: int = Field(default=15, ge=1, description="Scrape interval in seconds.")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra static labels for every replica; {host}, {tier}, {replica} expand.",
    )
    otelcol: dict[str, Any] = Field(
        default_factory=dict,
        description="With format otelcol: the rest of the collector config (exporters, service).",
    )


ServiceRole = Literal[
    "proxy", "registrar", "collector", "gpu-exporter", "downloader", "nginx", "other"
]


class Service(StrictModel):
    """A non-engine service of the host, as a compose fragment."""

    role: ServiceRole = Field(description="What the service is for.")
    compose: dict[str, Any] = Field(
        description=(
            "The compose service. Strings may hold {{backends}}, {{replica_services}}, "
            "{{host}}, {{tier}}; a list item that is exactly {{backends}} or "
            "{{replica_services}} expands to one item per replica."
        )
    )
    scrape: ScrapeConfig | None = Field(
        default=None, description="For the collector: the per-replica scrape config."
    )
    rollout: Literal["never", "allowed"] | None = Field(
        default=None,
        description="Whether a rollout may recreate it; default never for proxy and registrar.",
    )

    @property
    def recreate_policy(self) -> Literal["never", "allowed"]:
        """The effective rollout policy (proxy and registrar default to never)."""
        if self.rollout is not None:
            return self.rollout
        return "never" if self.role in ("proxy", "registrar") else "allowed"


class TierSpec(StrictModel):
    """A whole serving tier: one file per tier."""

    tier: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Tier name (compose project).")
    host: str = Field(description="Host the tier runs on (e.g. gpu02).")
    description: str | None = Field(default=None, description="Free text.")
    output: OutputPath = Field(
        min_length=1, description="Where `render --write` writes, relative to the spec file."
    )
    engine: Engine = Field(description="The engine all replicas run.")
    replicas: dict[str, Replica] = Field(min_length=1, description="Replicas by name.")
    telemetry: Telemetry = Field(description="The config_variant and where it goes.")
    rules: list[Rule] = Field(default_factory=list, description="Pairing rules.")
    services: dict[str, Service] = Field(
        default_factory=dict, description="The other services of the host."
    )
    volumes: dict[str, Any] = Field(
        default_factory=dict, description="Top-level compose volumes (named volumes used)."
    )
    networks: dict[str, Any] = Field(
        default_factory=dict, description="Top-level compose networks."
    )
    secrets: dict[str, Any] = Field(
        default_factory=dict, description="Top-level compose secrets (file: or environment:)."
    )
    configs: dict[str, Any] = Field(
        default_factory=dict,
        description="Top-level compose configs (the collector's scrape config is added).",
    )
    extensions: dict[Annotated[str, Field(pattern=r"^x-")], Any] = Field(
        default_factory=dict,
        description="Top-level compose extension keys (x-...), written into the rendered "
        "file as they are (`tierctl import` carries a file's own; x-tierctl is tierctl's).",
    )
