"""The engine configuration the simulator models, read from a real SGLang argv.

``EngineConfig.from_argv`` accepts the full command line an SGLang replica is started with
(with or without the ``python3 -m sglang.launch_server`` launcher). The flags the scheduler
model uses are typed and validated; every other ``--flag [value ...]`` is kept verbatim in
``extra_args`` so ``/server_info`` can show it, because a simulator that rejected a real
deployment's argv would be useless as a drop-in engine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tierctl.errors import InputError, Location

# Flags that never take a value in SGLang (store_true). Any other ``--enable-*`` /
# ``--disable-*`` flag is also treated as bare when the next token is another flag.
_BARE_FLAGS = frozenset(
    {
        "enable-mixed-chunk",
        "disable-radix-cache",
        "enable-dynamic-batch-tokenizer",
        "enable-metrics",
        "enable-hierarchical-cache",
        "enable-hicache",
        "trust-remote-code",
        "skip-server-warmup",
        "enable-priority-scheduling",
        "enable-cache-report",
        "log-requests",
    }
)

# The modelled flags: name -> (field, parser). The parser turns the raw token into the value.
_INT = int
_FLOAT = float


def _str(v: str) -> str:
    return v


def _bool_flag(v: str) -> bool:
    low = v.lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise ValueError(f"expected a boolean, got {v!r}")


_MODELLED: dict[str, tuple[str, Any]] = {
    "model-path": ("model_path", _str),
    "model": ("model_path", _str),
    "served-model-name": ("served_model_name", _str),
    "host": ("host", _str),
    "port": ("port", _INT),
    "tp-size": ("tp_size", _INT),
    "tp": ("tp_size", _INT),
    "chunked-prefill-size": ("chunked_prefill_size", _INT),
    "max-prefill-tokens": ("max_prefill_tokens", _INT),
    "max-running-requests": ("max_running_requests", _INT),
    "max-queued-requests": ("max_queued_requests", _INT),
    "max-total-tokens": ("max_total_tokens", _INT),
    "prefill-decode-interval": ("prefill_decode_interval", _INT),
    "prefill-decode-interval-min-bs": ("prefill_decode_interval_min_bs", _INT),
    "enable-mixed-chunk": ("enable_mixed_chunk", _bool_flag),
    "disable-radix-cache": ("disable_radix_cache", _bool_flag),
    "enable-dynamic-batch-tokenizer": ("enable_dynamic_batch_tokenizer", _bool_flag),
    "dynamic-batch-tokenizer-batch-size": ("dynamic_batch_tokenizer_batch_size", _INT),
    "dynamic-batch-tokenizer-batch-timeout": ("dynamic_batch_tokenizer_batch_timeout", _FLOAT),
    "enable-metrics": ("enable_metrics", _bool_flag),
    "page-size": ("page_size", _INT),
    "enable-hierarchical-cache": ("enable_hierarchical_cache", _bool_flag),
    "enable-hicache": ("enable_hierarchical_cache", _bool_flag),
    "hicache-ratio": ("hicache_ratio", _FLOAT),
}

_LAUNCHER_TOKENS = ("python", "python3", "-m", "sglang.launch_server", "sglang")


@dataclass(frozen=True)
class EngineConfig:
    """The engine flags the scheduler model uses, plus every other argv flag verbatim.

    ``None`` for a size means "let the cost model's preset decide", as SGLang derives those
    from the GPU memory at start-up.
    """

    model_path: str = "sim/model"
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    tp_size: int = 1
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = 16384
    max_running_requests: int | None = None
    max_queued_requests: int | None = None
    max_total_tokens: int | None = None
    prefill_decode_interval: int = 0
    prefill_decode_interval_min_bs: int = 0
    enable_mixed_chunk: bool = False
    disable_radix_cache: bool = False
    enable_dynamic_batch_tokenizer: bool = False
    dynamic_batch_tokenizer_batch_size: int = 32
    dynamic_batch_tokenizer_batch_timeout: float = 0.002
    enable_metrics: bool = False
    page_size: int = 1
    enable_hierarchical_cache: bool = False
    hicache_ratio: float | None = None
    extra_args: tuple[tuple[str, Any], ...] = field(default=())
    argv: tuple[str, ...] = field(default=())

    @property
    def model_name(self) -> str:
        """The name served in ``/v1/models`` and the ``model_name`` metric label."""
        return self.served_model_name or self.model_path

    @classmethod
    def from_argv(cls, argv: list[str] | tuple[str, ...], *, source: str = "argv") -> EngineConfig:
        """Parse an SGLang argv; modelled flags are typed, others kept verbatim.

        Args:
            argv: the engine command line; a leading ``python3 -m sglang.launch_server`` is
                skipped.
            source: where the argv came from, for error locations.

        Raises:
            InputError: a modelled flag has a value of the wrong type or range, or a token
                is not a flag.
        """
        tokens = list(argv)
        while tokens and (tokens[0] in _LAUNCHER_TOKENS or tokens[0].endswith("/python3")):
            tokens.pop(0)
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if not tok.startswith("--") or tok == "--":
                raise InputError(
                    f"unexpected argument {tok!r} in the engine argv",
                    location=Location(file=source, path=f"argv[{i}]"),
                    rule="every engine argument is --flag [value ...]",
                    value=tok,
                    fix="quote values that contain spaces, or drop the stray token",
                )
            name, eq, inline = tok[2:].partition("=")
            raw: list[str] = [inline] if eq else []
            j = i + 1
            if not eq and name not in _BARE_FLAGS:
                while j < len(tokens) and not tokens[j].startswith("--"):
                    raw.append(tokens[j])
                    j += 1
            i = j
            if name in _MODELLED:
                fname, parse = _MODELLED[name]
                if not raw:
                    if parse is not _bool_flag:
                        raise _bad(name, None, "needs a value", source)
                    values[fname] = True
                    continue
                try:
                    values[fname] = parse(raw[0]) if len(raw) == 1 else None
                except ValueError as exc:
                    raise _bad(name, raw[0], str(exc), source) from None
                if len(raw) != 1:
                    raise _bad(name, " ".join(raw), "takes exactly one value", source)
            else:
                extra[name.replace("-", "_")] = _loose(raw)
        cfg = cls(**values, extra_args=tuple(extra.items()), argv=tuple(argv))
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
            ("port", self.port, 0),
        ]
        optional = [
            ("max-running-requests", self.max_running_requests, 1),
            ("max-queued-requests", self.max_queued_requests, 1),
            ("max-total-tokens", self.max_total_tokens, 1),
        ]
        for name, value, low in checks + [o for o in optional if o[1] is not None]:
            assert value is not None
            if value < low:
                raise _bad(name, value, f"must be >= {low}", source)
        if self.hicache_ratio is not None and self.hicache_ratio < 0:
            raise _bad("hicache-ratio", self.hicache_ratio, "must be >= 0", source)
        if self.dynamic_batch_tokenizer_batch_timeout < 0:
            raise _bad(
                "dynamic-batch-tokenizer-batch-timeout",
                self.dynamic_batch_tokenizer_batch_timeout,
                "must be >= 0",
                source,
            )

    def server_args(self) -> dict[str, Any]:
        """Every effective arg as SGLang names it in ``/server_info`` (underscored keys)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("extra_args", "argv"):
                continue
            out[f.name] = getattr(self, f.name)
        out["served_model_name"] = self.model_name
        out.update(dict(self.extra_args))
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


def _bad(name: str, value: object, why: str, source: str) -> InputError:
    return InputError(
        f"--{name} {why}",
        location=Location(file=source, path=f"--{name}"),
        rule=f"--{name} {why}",
        value=value,
        fix=f"give --{name} a valid value (see `python -m sglang.launch_server --help`)",
    )
