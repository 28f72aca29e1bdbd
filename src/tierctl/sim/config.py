"""The engine configuration the simulator models, read from a real SGLang or vLLM argv.

``EngineConfig.from_argv`` accepts the full command line a replica is started with (with or
without its launcher: ``python3 -m sglang.launch_server``, ``vllm serve MODEL``,
``python -m vllm.entrypoints.openai.api_server``). Tokens are grouped into flags by
:func:`tierctl.compose.argv.parse_flags` with the engine's flag catalog, so a flag takes exactly
the values the engine's parser would give it. The flags the scheduler model uses are typed and
validated; every other ``--flag [value ...]`` is kept verbatim in ``extra_args`` so
``/server_info`` can show it, because a simulator that rejected a real deployment's argv would
be useless as a drop-in engine.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any

from tierctl.compose.argv import FlagUse, parse_flags
from tierctl.engine_catalog import Catalog
from tierctl.engines import profile_for
from tierctl.engines.base import SimRules
from tierctl.errors import InputError, Location
from tierctl.sim.surface import SGLANG, SURFACES, VLLM, detect_engine, surface

# The modelled flags: name -> (field, parser). The parser turns the raw token into the value.

#: The largest count the simulator takes: a token count, a round count or a size beyond it
#: means nothing to a scheduler (and past 2**53 a float no longer holds it exactly).
MAX_COUNT = 1 << 53


def _INT(v: str) -> int:
    """An integer flag value, bounded by :data:`MAX_COUNT`."""
    if len(v.strip()) > 20:
        raise ValueError(f"expected an integer of at most 16 digits, got {len(v)} characters")
    x = int(v)
    if abs(x) > MAX_COUNT:
        raise ValueError(f"must be at most 2**53 ({MAX_COUNT:,}) in magnitude")
    return x


def _FLOAT(v: str) -> float:
    """A finite float flag value (``nan`` and ``inf`` are refused: int(nan) downstream)."""
    x = float(v)
    if not math.isfinite(x) or abs(x) > MAX_COUNT:
        raise ValueError(f"expected a finite number, got {v[:40]!r}")
    return x


def _str(v: str) -> str:
    return v


def _bool_flag(v: str) -> bool:
    low = v.lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ValueError(f"expected a boolean, got {v!r}")


def _human_int(v: str) -> int:
    """vLLM's human-readable sizes (``32k``, ``1M``; lower case 1000s, upper case 1024s)."""
    mult = {"k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}
    if v and v[-1] in mult:
        return _INT(str(int(_FLOAT(v[:-1]) * mult[v[-1]])))
    return _INT(v)


def _speculative_json(v: str) -> str:
    """vLLM's ``--speculative-config`` JSON, kept as written once it is an object whose
    ``num_speculative_tokens`` (when given) is a positive integer."""
    import json

    try:
        doc = json.loads(v)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise ValueError("must be a JSON object")
    n = doc.get("num_speculative_tokens")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= 64):
        raise ValueError("num_speculative_tokens must be an integer in 1..64")
    return v


def _kv_transfer_json(v: str) -> str:
    """vLLM's ``--kv-transfer-config`` JSON, kept as written once it is an object whose
    ``kv_role`` (when given) is a string."""
    import json

    try:
        doc = json.loads(v)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON: {exc.msg}") from None
    if not isinstance(doc, dict):
        raise ValueError("must be a JSON object")
    role = doc.get("kv_role")
    if role is not None and not isinstance(role, str):
        raise ValueError("kv_role must be a string")
    return v


# Flags both engines share in meaning.
_COMMON: dict[str, tuple[str, Any]] = {
    "served-model-name": ("served_model_name", _str),
    "host": ("host", _str),
    "port": ("port", _INT),
}

_MODELLED: dict[str, tuple[str, Any]] = {
    **_COMMON,
    "model-path": ("model_path", _str),
    "model": ("model_path", _str),
    "tp-size": ("tp_size", _INT),
    "tp": ("tp_size", _INT),
    "tensor-parallel-size": ("tp_size", _INT),
    "chunked-prefill-size": ("chunked_prefill_size", _INT),
    "max-prefill-tokens": ("max_prefill_tokens", _INT),
    "max-running-requests": ("max_running_requests", _INT),
    "max-queued-requests": ("max_queued_requests", _INT),
    "max-total-tokens": ("max_total_tokens", _INT),
    "prefill-decode-interval": ("prefill_decode_interval", _INT),
    "prefill-decode-interval-min-bs": ("prefill_decode_interval_min_bs", _INT),
    "enable-mixed-chunk": ("enable_mixed_chunk", _bool_flag),
    "disable-radix-cache": ("disable_radix_cache", _bool_flag),
    "disable-overlap-schedule": ("disable_overlap_schedule", _bool_flag),
    "enable-dynamic-batch-tokenizer": ("enable_dynamic_batch_tokenizer", _bool_flag),
    "dynamic-batch-tokenizer-batch-size": ("dynamic_batch_tokenizer_batch_size", _INT),
    "dynamic-batch-tokenizer-batch-timeout": ("dynamic_batch_tokenizer_batch_timeout", _FLOAT),
    "enable-metrics": ("enable_metrics", _bool_flag),
    "page-size": ("page_size", _INT),
    "enable-hierarchical-cache": ("enable_hierarchical_cache", _bool_flag),
    "enable-hicache": ("enable_hierarchical_cache", _bool_flag),
    "hicache-ratio": ("hicache_ratio", _FLOAT),
    "speculative-algorithm": ("speculative_algorithm", _str),
    "speculative-num-steps": ("speculative_num_steps", _INT),
    "speculative-num-draft-tokens": ("speculative_num_draft_tokens", _INT),
    "speculative-eagle-topk": ("speculative_eagle_topk", _INT),
    "enable-priority-scheduling": ("enable_priority_scheduling", _bool_flag),
    "schedule-low-priority-values-first": ("schedule_low_priority_values_first", _bool_flag),
    "schedule-conservativeness": ("schedule_conservativeness", _FLOAT),
    "disaggregation-mode": ("disaggregation_mode", _str),
    "disaggregation-transfer-backend": ("disaggregation_transfer_backend", _str),
    "enable-dp-attention": ("enable_dp_attention", _bool_flag),
    "dp-size": ("dp_size", _INT),
    "data-parallel-size": ("dp_size", _INT),
}

_MODELLED_VLLM: dict[str, tuple[str, Any]] = {
    **_COMMON,
    "model": ("model_path", _str),
    "tensor-parallel-size": ("tp_size", _INT),
    "tp": ("tp_size", _INT),
    "max-num-batched-tokens": ("max_num_batched_tokens", _human_int),
    "max-num-seqs": ("max_num_seqs", _INT),
    "long-prefill-token-threshold": ("long_prefill_token_threshold", _INT),
    "long-prefill-token-threshold-adaptive": ("long_prefill_token_threshold_adaptive", _bool_flag),
    "enable-chunked-prefill": ("enable_chunked_prefill", _bool_flag),
    "enable-prefix-caching": ("enable_prefix_caching", _bool_flag),
    "max-model-len": ("max_model_len", _human_int),
    "num-gpu-blocks-override": ("num_gpu_blocks_override", _INT),
    "block-size": ("block_size", _INT),
    "scheduler-reserve-full-isl": ("scheduler_reserve_full_isl", _bool_flag),
    "watermark": ("watermark", _FLOAT),
    "disable-log-stats": ("disable_log_stats", _bool_flag),
    "speculative-config": ("speculative_config", _speculative_json),
    "scheduling-policy": ("scheduling_policy", _str),
    "kv-transfer-config": ("kv_transfer_config", _kv_transfer_json),
}

#: The flags each simulated engine's config reads, by the kind of its surface.
_TABLES = {SGLANG.kind: _MODELLED, VLLM.kind: _MODELLED_VLLM}

# vLLM's KV block (tokens per block) when neither --block-size nor the device is known (its
# CUDA default; the engine profile's SimRules.kv_block_tokens has each device's).
VLLM_DEFAULT_BLOCK_TOKENS = 16


def _vllm(default: Any) -> Any:
    return field(default=default, metadata={"engine": "vllm"})


def _sglang(default: Any) -> Any:
    return field(default=default, metadata={"engine": "sglang"})


@functools.cache
def default_catalog(engine: str) -> Catalog | None:
    """The shipped catalog of the release the simulator imitates (None if absent)."""
    from tierctl.catalog.store import load_catalog

    try:
        return load_catalog(engine, surface(engine).version)
    except InputError:
        return None


@dataclass(frozen=True)
class EngineConfig:
    """The engine flags the scheduler model uses, plus every other argv flag verbatim.

    ``None`` for a size means "let the cost model's preset decide", as SGLang and vLLM derive
    those from the GPU memory at start-up. Fields marked for one engine are ignored by the
    other's scheduler.
    """

    engine: str = "sglang"
    model_path: str = "sim/model"
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 1
    chunked_prefill_size: int | None = _sglang(None)
    max_prefill_tokens: int = _sglang(16384)
    max_running_requests: int | None = _sglang(None)
    max_queued_requests: int | None = _sglang(None)
    max_total_tokens: int | None = _sglang(None)
    prefill_decode_interval: int = _sglang(0)
    prefill_decode_interval_min_bs: int = _sglang(0)
    enable_mixed_chunk: bool = _sglang(False)
    disable_radix_cache: bool = _sglang(False)
    disable_overlap_schedule: bool = _sglang(False)
    enable_dynamic_batch_tokenizer: bool = _sglang(False)
    dynamic_batch_tokenizer_batch_size: int = _sglang(32)
    dynamic_batch_tokenizer_batch_timeout: float = _sglang(0.002)
    enable_metrics: bool = _sglang(False)
    page_size: int = _sglang(1)
    enable_hierarchical_cache: bool = _sglang(False)
    hicache_ratio: float | None = _sglang(None)
    speculative_algorithm: str | None = _sglang(None)
    speculative_num_steps: int | None = _sglang(None)
    speculative_num_draft_tokens: int | None = _sglang(None)
    speculative_eagle_topk: int | None = _sglang(None)
    enable_priority_scheduling: bool = _sglang(False)
    schedule_low_priority_values_first: bool = _sglang(False)
    enable_dp_attention: bool = _sglang(False)
    dp_size: int = _sglang(1)
    schedule_conservativeness: float = _sglang(1.0)
    disaggregation_mode: str = _sglang("null")
    disaggregation_transfer_backend: str = _sglang("mooncake")
    max_num_batched_tokens: int | None = _vllm(None)
    max_num_seqs: int | None = _vllm(None)
    long_prefill_token_threshold: int = _vllm(0)
    long_prefill_token_threshold_adaptive: bool = _vllm(False)
    enable_chunked_prefill: bool = _vllm(True)
    enable_prefix_caching: bool = _vllm(True)
    max_model_len: int | None = _vllm(None)
    num_gpu_blocks_override: int | None = _vllm(None)
    block_size: int | None = _vllm(None)
    scheduler_reserve_full_isl: bool = _vllm(True)
    watermark: float = _vllm(0.0)
    disable_log_stats: bool = _vllm(False)
    speculative_config: str | None = _vllm(None)
    scheduling_policy: str = _vllm("fcfs")
    kv_transfer_config: str | None = _vllm(None)
    extra_args: tuple[tuple[str, Any], ...] = field(default=())
    argv: tuple[str, ...] = field(default=())
    # The release whose rules apply (the spec's pinned version, else the simulated one).
    engine_version: str = ""
    # Every flag as written, canonical name -> values, for comparing two arms flag by flag.
    flags: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    @property
    def max_prompt_tokens(self) -> int | None:
        """The longest prompt this engine accepts as configured (None: the model's own limit,
        unknown to the simulator). vLLM refuses a prompt that does not fit ``--max-model-len``."""
        return self.max_model_len if self.engine == "vllm" else None

    @property
    def release(self) -> str:
        """The engine release whose rules the model applies."""
        return self.engine_version or surface(self.engine).version

    def release_lacks(self, flag: str) -> bool:
        """Whether the pinned release's own catalog has no flag ``flag`` (``--name``); False
        when there is no such catalog to say so."""
        return _lacks(_release_catalog(self.engine, self.release), self.release, flag)

    @property
    def rules(self) -> SimRules:
        """The pinned release's scheduler and start-up rules (its engine profile's)."""
        return profile_for(self.engine).sim_rules(self.release)

    @property
    def speculative(self) -> tuple[int, int] | None:
        """(draft steps, draft tokens verified per sequence) when speculative decoding is on
        (SGLang ``--speculative-algorithm``; unset steps and tokens take 3 and steps + 1, a
        chain as topk 1 drafts it; vLLM ``--speculative-config``'s
        ``num_speculative_tokens``); None when off."""
        if self.engine == "vllm" and self.speculative_config:
            import json

            # vLLM drafts num_speculative_tokens per request per step and verifies them
            # (plus the sampled token) in the same forward; unset, one draft token.
            n = json.loads(self.speculative_config).get("num_speculative_tokens") or 1
            return n, n + 1
        if self.engine != "sglang" or not self.speculative_algorithm:
            return None
        steps = self.speculative_num_steps or 3
        return steps, self.speculative_num_draft_tokens or steps + 1

    @property
    def disaggregation_role(self) -> str | None:
        """This replica's side of a prefill/decode disaggregated pair, as the pinned release
        reads it (its profile's ``SimRules.disaggregation``): ``"prefill"``, ``"decode"``,
        ``"either"`` (vLLM ``kv_both``: the router decides), or None when colocated."""
        from tierctl.sim.disagg_config import role_of

        return role_of(self)

    @property
    def model_name(self) -> str:
        """The name served in ``/v1/models`` and the ``model_name`` metric label."""
        return self.served_model_name or self.model_path

    @classmethod
    def from_argv(
        cls,
        argv: list[str] | tuple[str, ...],
        *,
        source: str = "argv",
        engine: str | None = None,
        catalog: Catalog | None = None,
        version: str | None = None,
        strict: bool = False,
    ) -> EngineConfig:
        """Parse an engine argv; modelled flags are typed, others kept verbatim.

        Args:
            argv: the engine command line; a leading launcher (``python3 -m
                sglang.launch_server``, ``vllm serve``) is skipped, and for vLLM the
                positional model after it is read as ``--model``.
            source: where the argv came from, for error locations.
            engine: ``sglang`` or ``vllm``; detected from the launcher when omitted.
            catalog: the engine release's flag catalog; the shipped catalog of the release
                the simulator imitates when omitted.
            version: the pinned release (its rules and catalog); the release the simulator
                imitates when omitted.
            strict: refuse flags the pinned release's catalog lacks, as its parser would
                (the offline what-ifs do; ``sim serve`` keeps every flag, so a drop-in engine
                takes any deployment's argv).

        Raises:
            InputError: a modelled flag has a value of the wrong type or range, a token is
                not a flag, or a flag is not one of the pinned release's (its catalog's
                did-you-mean in the fix), as the engine's parser refuses it at start-up.
        """
        kind = engine or detect_engine(argv)
        if kind not in SURFACES:
            raise InputError(
                f"the simulator does not model engine {kind!r}",
                location=Location(file=source),
                rule="engine is one of " + ", ".join(SURFACES),
                value=kind,
                fix="simulate an sglang or vllm replica",
            )
        release = version or surface(kind).version
        cat = catalog if catalog is not None else _release_catalog(kind, release)
        tokens = tuple(argv)
        launcher = profile_for(kind).launcher_tokens()
        start = 0
        while start < len(tokens) and (
            tokens[start] in launcher or tokens[start].endswith(("/python3", "/python"))
        ):
            start += 1
        values: dict[str, Any] = {"engine": kind, "engine_version": release}
        if (
            kind == "vllm"
            and start < len(tokens)
            and not tokens[start].startswith("-")
            and start > 0
        ):
            values["model_path"] = tokens[start]  # vllm serve MODEL
            start += 1
        if kind == "vllm":
            values["port"] = surface(kind).default_port
        table = _TABLES[kind]
        extra: dict[str, Any] = {}
        seen: list[tuple[str, tuple[str, ...]]] = []
        for use in parse_flags(tokens, start, cat):
            if not use.token:
                raise InputError(
                    f"unexpected argument {use.values[0]!r} in the engine argv",
                    location=Location(file=source, path=f"argv[{use.index}]"),
                    rule="every engine argument is --flag [value ...]"
                    + (" after the positional model" if kind == "vllm" else ""),
                    value=use.values[0],
                    fix="quote values that contain spaces, or drop the stray token",
                )
            if strict:
                _refuse_unknown(use, cat, kind, release, source)
            name, raw, negated = _canonical(use, cat)
            seen.append((("no-" if negated else "") + name, raw))
            _take(table, use, name, raw, negated, values, extra, source, kind)
        cfg = cls(**values, extra_args=tuple(extra.items()), argv=tuple(argv), flags=tuple(seen))
        cfg._check(source)
        return cfg

    def _check(self, source: str) -> None:
        checks = [
            ("prefill-decode-interval", self.prefill_decode_interval, 0),
            ("prefill-decode-interval-min-bs", self.prefill_decode_interval_min_bs, 0),
            ("max-prefill-tokens", self.max_prefill_tokens, 1),
            ("dynamic-batch-tokenizer-batch-size", self.dynamic_batch_tokenizer_batch_size, 1),
            ("tp-size", self.tp_size, 1),
            ("page-size", self.page_size, 1),
            ("dp-size", self.dp_size, 1),
            ("port", self.port, 0),
            ("long-prefill-token-threshold", self.long_prefill_token_threshold, 0),
        ]
        optional = [
            ("max-running-requests", self.max_running_requests, 1),
            ("max-queued-requests", self.max_queued_requests, 1),
            ("max-total-tokens", self.max_total_tokens, 1),
            ("max-num-batched-tokens", self.max_num_batched_tokens, 1),
            ("max-num-seqs", self.max_num_seqs, 1),
            ("max-model-len", self.max_model_len, 1),
            ("num-gpu-blocks-override", self.num_gpu_blocks_override, 1),
            ("block-size", self.block_size, 1),
            ("speculative-num-steps", self.speculative_num_steps, 1),
            ("speculative-num-draft-tokens", self.speculative_num_draft_tokens, 1),
            ("speculative-eagle-topk", self.speculative_eagle_topk, 1),
        ]
        for name, value, low in checks + [o for o in optional if o[1] is not None]:
            assert value is not None
            if value < low:
                raise _bad(name, value, f"must be >= {low}", source, self.engine)
        if not 0.0 <= self.watermark < 1.0:
            raise _bad("watermark", self.watermark, "must be in [0, 1)", source, self.engine)
        if self.schedule_conservativeness < 0:
            raise _bad(
                "schedule-conservativeness",
                self.schedule_conservativeness,
                "must be >= 0",
                source,
                self.engine,
            )
        from tierctl.sim.disagg_config import check_role

        check_role(self, source)
        if self.scheduling_policy not in ("fcfs", "priority"):
            raise _bad(
                "scheduling-policy",
                self.scheduling_policy,
                "must be fcfs or priority",
                source,
                self.engine,
            )
        if self.hicache_ratio is not None and self.hicache_ratio < 0:
            raise _bad("hicache-ratio", self.hicache_ratio, "must be >= 0", source, self.engine)
        if self.dynamic_batch_tokenizer_batch_timeout < 0:
            raise _bad(
                "dynamic-batch-tokenizer-batch-timeout",
                self.dynamic_batch_tokenizer_batch_timeout,
                "must be >= 0",
                source,
                self.engine,
            )

    def server_args(self) -> dict[str, Any]:
        """Every effective arg as the engine names it (underscored keys, as SGLang's
        ``/server_info`` and vLLM's dev-mode ``/server_info`` show them)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("extra_args", "argv", "flags", "engine", "engine_version"):
                continue
            if f.metadata.get("engine", self.engine) != self.engine:
                continue
            out[f.name] = getattr(self, f.name)
        if self.engine == "vllm":
            out["model"] = out.pop("model_path")
        out["served_model_name"] = self.model_name
        out.update(dict(self.extra_args))
        return out

    def flag_map(self) -> dict[str, tuple[str, ...]]:
        """The argv's flags by canonical name (the last occurrence wins, as in argparse)."""
        return dict(self.flags)


def _take(
    table: dict[str, tuple[str, Any]],
    use: FlagUse,
    name: str,
    raw: tuple[str, ...],
    negated: bool,
    values: dict[str, Any],
    extra: dict[str, Any],
    source: str,
    kind: str,
) -> None:
    """File one flag: a modelled one typed into ``values``, any other verbatim in ``extra``."""
    if name in table:
        fname, parse = table[name]
        if negated:
            values[fname] = False
            return
        if not raw:
            if parse is not _bool_flag:
                raise _bad(name, None, "needs a value", source, kind)
            values[fname] = True
            return
        if len(raw) != 1:
            if fname == "served_model_name" and kind == "vllm":
                values[fname] = raw[0]  # vLLM takes several; the first is reported
                return
            raise _bad(name, " ".join(raw), "takes exactly one value", source, kind)
        try:
            values[fname] = parse(raw[0])
        except ValueError as exc:
            raise _bad(name, raw[0], str(exc), source, kind) from None
    else:
        value = False if negated else _loose(list(raw))
        # Reported as written, and under the engine's own name when that differs
        # (an alias: SGLang's /server_info shows the dest).
        extra[use.name.replace("-", "_")] = value
        extra.setdefault(name.replace("-", "_"), value)


def _release_catalog(kind: str, version: str) -> Catalog | None:
    """The shipped catalog of ``kind`` ``version``, else the simulated release's."""
    from tierctl.catalog.store import load_catalog

    try:
        return load_catalog(kind, version)
    except InputError:
        return default_catalog(kind)


def _lacks(cat: Catalog | None, version: str, token: str) -> bool:
    """Whether ``version``'s own catalog has no flag ``token``. Only the pinned release's
    own catalog can say so: without one (or with another release's), nothing is lacking."""
    return cat is not None and cat.version == version and cat.lookup(token) is None


def _refuse_unknown(
    use: FlagUse, cat: Catalog | None, kind: str, version: str, source: str
) -> None:
    """Refuse a flag the pinned release's catalog lacks, as that release's parser refuses it
    at start-up (a simulator that modelled it would answer for an engine that never runs)."""
    if not _lacks(cat, version, use.token):
        return
    assert cat is not None  # _lacks says so only from a catalog
    from tierctl.catalog.store import did_you_mean, unknown_flag

    raise InputError(
        unknown_flag(kind, version, use.token),
        location=Location(file=source, path=f"argv[{use.index}]"),
        rule=f"every flag is one of {kind} {version}'s (its shipped catalog)",
        value=use.token,
        fix=did_you_mean(cat, use.token),
    )


def _canonical(use: FlagUse, cat: Catalog | None) -> tuple[str, tuple[str, ...], bool]:
    """The flag's primary name (catalog spelling), its values, and whether it is a --no- form."""
    flag = cat.lookup(use.token) if cat is not None else None
    name = use.name
    if flag is None:
        return name, use.values, False
    primary = flag.name.lstrip("-")
    negated = flag.action == "boolean_optional" and name.startswith("no-") and primary != name
    return primary, use.values, negated


def unmodelled_differences(a: EngineConfig, b: EngineConfig) -> list[str]:
    """Flags that differ between two arms and that the simulator does not model.

    A flag the scheduler or cost model does not read cannot change a simulated figure, so a
    ratio of 1.00 between such arms says nothing about the real engines. Replica identity
    and logging flags (host, port, addresses) are left out: arms differ in them by design.
    """
    surf = surface(b.engine)
    fa, fb = a.flag_map(), b.flag_map()
    out = []
    for name in sorted(set(fa) | set(fb)):
        if fa.get(name) == fb.get(name):
            continue
        base = name[3:] if name.startswith("no-") else name
        if name in surf.modelled_flags or base in surf.modelled_flags:
            continue
        if base in surf.neutral_flags or base in b.rules.step_cost_flags:
            continue
        out.append(name)
    return out


def step_cost_differences(a: EngineConfig, b: EngineConfig) -> list[str]:
    """Flags that differ between two arms and change a step's cost (numerics, kernels, CUDA
    graphs, KV dtype, quantization; the engine profile's ``SimRules.step_cost_flags``).

    A cost model is fitted (or derived) at one setting of these, so the simulation holds the
    step cost fixed: the ratio it prints for such a difference is not the engine's, and
    ``sim compare`` says so beside it rather than print a silent 1.00.
    """
    cost_flags = b.rules.step_cost_flags | a.rules.step_cost_flags
    fa, fb = a.flag_map(), b.flag_map()
    out = []
    for name in sorted(set(fa) | set(fb)):
        base = name[3:] if name.startswith("no-") else name
        if base in cost_flags and fa.get(name) != fb.get(name):
            out.append(name)
    return out


def _loose(raw: list[str]) -> Any:
    """Value of an unmodelled flag: bare -> True, one token -> typed scalar, many -> list."""
    if not raw:
        return True
    vals = [_scalar(r) for r in raw]
    return vals[0] if len(vals) == 1 else vals


def _scalar(raw: str) -> Any:
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    if raw in ("true", "True"):
        return True
    if raw in ("false", "False"):
        return False
    return raw


def _bad(name: str, value: object, why: str, source: str, engine: str) -> InputError:
    # The engine's own help, by its profile's default launcher: `vllm serve --help`.
    helper = " ".join(profile_for(engine).default_launcher()) + " --help"
    return InputError(
        f"--{name} {why}",
        location=Location(file=source, path=f"--{name}"),
        rule=f"--{name} {why}",
        value=value,
        fix=f"give --{name} a valid value (see `{helper}`)",
    )
