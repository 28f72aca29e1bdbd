"""What a simulated engine says about itself: ``/server_info``, model cards, start-up lines.

SGLang answers ``/server_info`` with every server arg as a top-level key and ``/model_info``
with the model's paths; vLLM answers ``/v1/models`` with ``max_model_len``, logs its
non-default args at start-up and exports its cache config as ``cache_config_info`` labels.
The simulator reports *effective* values (what the scheduler model actually uses), never
``null`` for a size it derived itself.
"""

from __future__ import annotations

from typing import Any

from tierctl.sim.config import VLLM_DEFAULT_BLOCK_TOKENS, EngineConfig, _scalar, default_catalog
from tierctl.sim.engine import Scheduler
from tierctl.sim.surface import surface


def effective_server_args(config: EngineConfig, sched: Scheduler | None) -> dict[str, Any]:
    """The engine's args with every size the simulator derived filled in; no ``None`` left."""
    info = config.server_args()
    if sched is not None:
        if config.engine == "vllm":
            from tierctl.sim.vllm_policy import VllmScheduler

            assert isinstance(sched, VllmScheduler)
            info.update(
                max_num_batched_tokens=sched.token_budget,
                max_num_seqs=sched.max_running,
                max_model_len=sched.max_model_len,
                long_prefill_token_threshold=sched.threshold,
                block_size=sched.block,
                num_gpu_blocks_override=config.num_gpu_blocks_override
                or sched.kv_pool_tokens // sched.block,
            )
        else:
            info.update(
                chunked_prefill_size=sched.chunk_tokens if sched.chunk_tokens is not None else -1,
                max_running_requests=sched.max_running,
                max_total_tokens=sched.kv_pool_tokens,
                hicache_ratio=config.hicache_ratio if config.hicache_ratio is not None else 2.0,
            )
    return {k: v for k, v in info.items() if v is not None}


def model_card(config: EngineConfig, created: int, sched: Scheduler | None) -> dict[str, Any]:
    """One entry of ``/v1/models`` as the engine writes it."""
    card: dict[str, Any] = {
        "id": config.model_name,
        "object": "model",
        "created": created,
        "owned_by": surface(config.engine).owned_by,
        "root": config.model_path,
    }
    if config.engine == "vllm":
        from tierctl.sim.vllm_policy import VllmScheduler

        card["parent"] = None
        card["max_model_len"] = (
            sched.max_model_len if isinstance(sched, VllmScheduler) else config.max_model_len
        )
        card["permission"] = [
            {
                "id": f"modelperm-{config.model_name}",
                "object": "model_permission",
                "created": created,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ]
    return card


def sglang_model_info(config: EngineConfig) -> dict[str, Any]:
    """SGLang's ``/model_info``."""
    return {
        "model_path": config.model_path,
        "tokenizer_path": config.model_path,
        "is_generation": True,
        "preferred_sampling_params": {},
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": "simulated",
        "architectures": ["SimulatedForCausalLM"],
    }


def vllm_non_default_args(config: EngineConfig) -> dict[str, Any]:
    """What vLLM logs at start-up as ``non-default args``: each flag given whose value
    differs from the parser's default, by its dest (the positional model as ``model_tag``)."""
    cat = default_catalog("vllm")
    out: dict[str, Any] = {}
    pos = config.argv.index(config.model_path) if config.model_path in config.argv else -1
    if pos > 0 and not config.argv[pos - 1].startswith("-"):
        out["model_tag"] = config.model_path
        out["model"] = config.model_path
    for name, values in config.flags:
        negated = name.startswith("no-")
        base = name[3:] if negated else name
        flag = cat.lookup(f"--{base}") if cat is not None else None
        dest = flag.dest if flag is not None else base.replace("-", "_")
        value: Any
        if not values:
            value = not negated
        elif len(values) == 1:
            value = _scalar(values[0])
        else:
            value = [_scalar(v) for v in values]
        if flag is not None and dest == "served_model_name" and not isinstance(value, list):
            value = [value]
        if flag is not None and flag.default == value:
            continue
        out[dest] = value
    return out


def vllm_cache_config(config: EngineConfig, sched: Scheduler | None) -> dict[str, str]:
    """The ``cache_config_info`` labels (vLLM writes every value with ``str()``)."""
    block = getattr(sched, "block", None) or config.block_size or VLLM_DEFAULT_BLOCK_TOKENS
    pool = sched.kv_pool_tokens if sched is not None else 0
    extra = dict(config.extra_args)
    return {
        "block_size": str(block),
        "cache_dtype": str(extra.get("kv_cache_dtype", "auto")),
        "enable_prefix_caching": str(config.enable_prefix_caching),
        "gpu_memory_utilization": str(extra.get("gpu_memory_utilization", 0.9)),
        "num_gpu_blocks": str(pool // block),
        "num_gpu_blocks_override": str(config.num_gpu_blocks_override),
    }
