"""What the simulator must know about each engine it imitates, in one place.

Launcher tokens, the release it answers as, its metric family names and which of its flags the
scheduler model uses. Everything engine-specific the simulator says (to a parser, over HTTP, in
``/metrics``) is read from here, so that moving onto the shared engine profiles
(``tierctl.engines``) is one line per name.
"""

from __future__ import annotations

from dataclasses import dataclass

ENGINES = ("sglang", "vllm")


@dataclass(frozen=True)
class EngineSurface:
    """The parts of one engine the simulator imitates."""

    kind: str
    version: str  # the release the simulated server reports
    launcher_tokens: frozenset[str]  # argv tokens before the first flag that are the launcher
    default_port: int
    owned_by: str  # /v1/models "owned_by"
    metric_prefix: str
    # Flags the scheduler or cost model reads: a difference between two arms changes results.
    modelled_flags: frozenset[str]
    # Flags that identify or address a replica, or only change logging: arms differ in them
    # as a matter of course and the simulation is rightly blind to them.
    neutral_flags: frozenset[str]


SGLANG = EngineSurface(
    kind="sglang",
    version="0.5.23",
    launcher_tokens=frozenset({"python", "python3", "-m", "sglang.launch_server", "sglang"}),
    default_port=30000,
    owned_by="sglang",
    metric_prefix="sglang:",
    modelled_flags=frozenset(
        {
            "chunked-prefill-size",
            "max-prefill-tokens",
            "max-running-requests",
            "max-queued-requests",
            "max-total-tokens",
            "prefill-decode-interval",
            "prefill-decode-interval-min-bs",
            "enable-mixed-chunk",
            "disable-radix-cache",
            "enable-dynamic-batch-tokenizer",
            "dynamic-batch-tokenizer-batch-size",
            "dynamic-batch-tokenizer-batch-timeout",
            "enable-hierarchical-cache",
            "enable-hicache",
            "hicache-ratio",
        }
    ),
    neutral_flags=frozenset(
        {
            "model-path",
            "model",
            "served-model-name",
            "host",
            "port",
            "dist-init-addr",
            "nccl-port",
            "enable-metrics",
            "log-level",
            "log-requests",
            "log-requests-level",
            "decode-log-interval",
            "api-key",
            "trust-remote-code",
            "skip-server-warmup",
            "enable-cache-report",
        }
    ),
)

VLLM = EngineSurface(
    kind="vllm",
    version="0.33.0",
    launcher_tokens=frozenset(
        {"vllm", "serve", "python", "python3", "-m", "vllm.entrypoints.openai.api_server"}
    ),
    default_port=8000,
    owned_by="vllm",
    metric_prefix="vllm:",
    modelled_flags=frozenset(
        {
            "max-num-batched-tokens",
            "max-num-seqs",
            "long-prefill-token-threshold",
            "long-prefill-token-threshold-adaptive",
            "max-num-partial-prefills",
            "max-long-partial-prefills",
            "enable-chunked-prefill",
            "no-enable-chunked-prefill",
            "enable-prefix-caching",
            "no-enable-prefix-caching",
            "max-model-len",
            "num-gpu-blocks-override",
            "block-size",
        }
    ),
    neutral_flags=frozenset(
        {
            "model",
            "served-model-name",
            "host",
            "port",
            "api-key",
            "disable-log-stats",
            "disable-log-requests",
            "enable-log-requests",
            "uvicorn-log-level",
            "trust-remote-code",
            "enforce-eager",
            "dtype",
            "seed",
        }
    ),
)

SURFACES: dict[str, EngineSurface] = {s.kind: s for s in (SGLANG, VLLM)}


def surface(kind: str) -> EngineSurface:
    """The surface of engine ``kind`` (``sglang`` or ``vllm``)."""
    return SURFACES[kind]


def detect_engine(argv: tuple[str, ...] | list[str]) -> str:
    """The engine an argv launches: vLLM when its launcher names vLLM, else SGLang."""
    for token in argv:
        if token.startswith("-") and token != "-m":
            break
        if "vllm" in token:
            return "vllm"
    return "sglang"
