"""vLLM (0.30+, V1 engine): ``vllm serve MODEL ...`` or
``python3 -m vllm.entrypoints.openai.api_server --model MODEL ...``.

Facts this profile encodes, checked against vLLM's source:

- the model is positional for ``vllm serve`` (``model_tag``) and ``--model`` for the module
  entry point; the spec writes it as the arg ``model`` either way, and rendering puts it where
  the launcher expects it;
- boolean engine args are ``argparse.BooleanOptionalAction``: ``--x`` / ``--no-x``, and an
  omitted one keeps the engine's default, so ``false`` renders ``--no-x``;
- ``/health`` is 200 once the engine is up; ``/server_info`` exists only with
  ``VLLM_SERVER_DEV_MODE=1``, so production servers are verified from what they do expose:
  the startup log line ``non-default args: {...}`` (every parsed arg that differs from the
  parser's default, by dest), ``/v1/models`` (``max_model_len``, the served name) and the
  labels of ``vllm:cache_config_info`` (the cache config: ``block_size``,
  ``gpu_memory_utilization``, ``enable_prefix_caching``...);
- metrics are ``vllm:<name>`` (``vllm_`` after a rewrite), labelled ``model_name`` and
  ``engine`` (the engine core index); aborts are ``vllm:request_success_total`` with
  ``finished_reason="abort"``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from tierctl.compose.argv import flag_map, format_flag_value, parse_flags
from tierctl.engine_catalog import Catalog
from tierctl.engines import dynamo
from tierctl.engines.base import (
    ArgvCheck,
    DisaggregationRule,
    EngineMetrics,
    EngineProfile,
    Fetch,
    LogPattern,
    LogprobShapeError,
    MetricRef,
    SimRules,
    TokenScore,
    same_value,
)
from tierctl.engines.sglang import CUDA_OOM, NCCL, TRACEBACK
from tierctl.runtime.promtext import parse_metrics

#: vLLM's official images: CUDA, and the CPU builds (Docker Hub's vllm-openai-cpu and the
#: release repositories on ECR, x86-64 and arm64), whose ENTRYPOINT is `vllm serve` too.
OFFICIAL_IMAGES = (
    "vllm/vllm-openai",
    "vllm/vllm-openai-cpu",
    "q9t5s3a7/vllm-cpu-release-repo",
    "q9t5s3a7/vllm-arm64-cpu-release-repo",
)

#: The startup log line listing the parsed args that differ from the parser's defaults.
NON_DEFAULT_ARGS = re.compile(r"non-default args:\s*(\{.*\})\s*$")
CACHE_CONFIG_INFO = "cache_config_info"


# One engine step of --enable-logging-iteration-details (0.32+); dummy (warm-up) steps aside.
_ITERATION_LINE = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation "
    r"requests, (\d+) generation tokens, iteration elapsed time: (\d+(?:\.\d+)?) ms(?! \(dummy\))"
)


def parse_non_default_args(log_text: str) -> dict[str, Any] | None:
    """The last ``non-default args: {...}`` dict of a vLLM log (a restart logs it again)."""
    found: dict[str, Any] | None = None
    for line in log_text.splitlines():
        m = NON_DEFAULT_ARGS.search(line)
        if m is None:
            continue
        try:
            value = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            found = {str(k): v for k, v in value.items()}
    return found


def format_non_default_args(args: dict[str, Any]) -> str:
    """The log line vLLM writes at start-up (for servers that stand in for vLLM)."""
    return f"non-default args: {args!r}"


class VLLMProfile(EngineProfile):
    """vLLM's launch, HTTP surface, metrics and logs."""

    kind = "vllm"
    title = "vLLM"
    # vLLM's CPU build is published as `vllm-cpu`: the same `vllm/` package and flags, and
    # the one that installs on a machine without a GPU.
    distributions = ("vllm", "vllm-cpu")
    flag_underscores = True
    launchers = (
        ("vllm", "serve"),
        ("python3", "-m", "vllm.entrypoints.openai.api_server"),
        ("python", "-m", "vllm.entrypoints.openai.api_server"),
    )
    positional = ("model",)
    positional_launchers = (("vllm", "serve"),)
    command_markers = ("vllm.entrypoints.openai.api_server",)
    # NVIDIA Dynamo's worker: this engine's parser beside Dynamo's own flags (engines/dynamo.py).
    wrapper_launchers = dynamo.worker_launchers(dynamo.VLLM_WORKER_MODULES)
    wrapper_flags = dynamo.VLLM_WORKER_FLAGS
    wrapper_title = dynamo.TITLE
    images = (*OFFICIAL_IMAGES, "vllm-openai", "vllm-openai-cpu", "vllm-cpu-release-repo", "vllm")
    image_launcher = ("vllm", "serve")  # the official image's ENTRYPOINT
    launcher_images = OFFICIAL_IMAGES
    # NGC's builds are tagged YY.MM (NVIDIA's container release), not with vllm's release.
    dated_images = ("nvidia/vllm",)
    parallel_flags = (
        ("tp", ("tensor-parallel-size", "tp")),
        ("pp", ("pipeline-parallel-size", "pp")),
        ("dp", ("data-parallel-size-local", "data-parallel-size", "dp")),
    )
    default_port = 8000
    memory_fraction_flag = "gpu-memory-utilization"
    health_path = "/health"
    readiness_path = "/health"
    metric_prefixes = ("vllm:", "vllm_")
    # A development endpoint: vLLM 0.32 serves it only when started with
    # VLLM_SERVER_DEV_MODE=1 (vllm/entrypoints/serve/dev/cache/api_router.py); 404 otherwise.
    flush_cache_path = "/reset_prefix_cache"
    flush_cache_needs = "vLLM serves it only when started with VLLM_SERVER_DEV_MODE=1"
    # vLLM merges tokens into one chunk when the client falls behind; with this each chunk
    # says how many tokens it carries (vllm/entrypoints/openai/protocol.py's StreamOptions).
    per_chunk_usage = MappingProxyType({"continuous_usage_stats": True})
    metrics = EngineMetrics(
        running="num_requests_running",
        waiting="num_requests_waiting",
        ttft="time_to_first_token_seconds",
        itl="inter_token_latency_seconds",
        e2e="e2e_request_latency_seconds",
        prompt_tokens="prompt_tokens_total",
        generation_tokens="generation_tokens_total",
        finished=MetricRef("request_success_total", 'finished_reason!="abort"'),
        aborted=MetricRef("request_success_total", 'finished_reason="abort"'),
        extra={
            "cache_config_info": CACHE_CONFIG_INFO,
            "kv_cache_usage": "kv_cache_usage_perc",
            "preemptions": "num_preemptions_total",
            # Tokens looked up in / served from the prefix cache (what an A/B's blocks must
            # not share: tests/realengine/test_evidence_real.py).
            "prefix_cache_queries": "prefix_cache_queries_total",
            "prefix_cache_hits": "prefix_cache_hits_total",
            # Speculative decoding (vllm/v1/spec_decode/metrics.py): verify rounds, draft
            # tokens proposed and accepted, and accepted tokens per draft position
            # (label "position"): the acceptance length distribution.
            "spec_drafts": "spec_decode_num_drafts_total",
            "spec_draft_tokens": "spec_decode_num_draft_tokens_total",
            "spec_accepted_tokens": "spec_decode_num_accepted_tokens_total",
            "spec_accepted_per_position": "spec_decode_num_accepted_tokens_per_pos_total",
        },
    )
    # Renamed in vLLM's V1 metrics (0.10-0.11): the old names still appear on older servers.
    metric_aliases: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "itl": ("time_per_output_token_seconds",),
        "kv_cache_usage": ("gpu_cache_usage_perc",),
    }
    model_label = "model_name"
    rank_labels = ("engine",)
    fatal_log_patterns = (
        CUDA_OOM,
        LogPattern(
            "engine-dead",
            r"(EngineDeadError|EngineCore encountered a fatal error"
            r"|Engine core proc \S+ died unexpectedly|AsyncEngineDeadError)",
        ),
        LogPattern("watchdog", r"(timed out after|Watchdog caught collective operation timeout)"),
        NCCL,
        TRACEBACK,
    )
    metrics_fix = "vLLM exports /metrics unless --disable-log-stats is set: remove that flag"
    argv_gate = "running-args"
    argv_gate_text = (
        "the engine's startup log line `non-default args: {...}` holds every rendered flag, "
        "and `/v1/models` (`max_model_len`) and the `vllm:cache_config_info` labels agree"
    )
    # What tierctl.sim.vllm_policy reads (decode-first with a token budget). Not the TP size:
    # a cost model is fitted for one parallel layout.
    token_budget_flag = "max-num-batched-tokens"
    max_running_flag = "max-num-seqs"
    sim_modelled_flags = frozenset(
        {
            "max-num-batched-tokens",
            "max-num-seqs",
            "enable-chunked-prefill",
            "long-prefill-token-threshold",
            "long-prefill-token-threshold-adaptive",
            "speculative-config",
            "scheduling-policy",
            "enable-prefix-caching",
            "max-model-len",
            "num-gpu-blocks-override",
            "block-size",
            "scheduler-reserve-full-isl",
            "watermark",
            "kv-transfer-config",
        }
    )
    false_default = "no-prefix"
    spec_position_label = "position"

    def sim_rules(self, version: str) -> SimRules:
        """vLLM's scheduler and start-up rules, read in the 0.32.0 (vllm-cpu) source:
        ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``: the threshold is 0 unless
        ``num_running + num_waiting > 1``, floored at ``max_num_batched_tokens //
        num_eligible`` when adaptive) and ``vllm/config/scheduler.py``
        (``verify_max_model_len``: the three start-up refusals). Other releases take these,
        marked assumed; 0.30 has no adaptive threshold (its catalog lacks the flag)."""
        return SimRules(
            engine=self.kind,
            release=version,
            read_from="vllm 0.32.0: v1/core/sched/scheduler.py, config/scheduler.py",
            assumed=version != "0.32.0",
            threshold_needs_company=True,
            threshold_adaptive=not version.startswith("0.30."),
            unchunked_budget_holds_model_len=True,
            budget_holds_max_seqs=True,
            threshold_within_model_len=True,
            metrics_preemption=self.metrics.extra["preemptions"],
            # platforms/cpu.py (check_and_update_config): block_size 128 unless given (16
            # for the reference MLA kernel, 256 for DeepSeek-V4); CUDA attention backends
            # default to 16.
            kv_block_tokens=(("cuda", 16), ("cpu", 128)),
            # config/scheduler.py: scheduler_reserve_full_isl = True; kv_cache_manager.py
            # allocate_slots(full_sequence_must_fit=...) for waiting and preempted requests.
            admission_reserves_prompt=True,
            disaggregation=DisaggregationRule(
                flag="kv-transfer-config",
                json_key="kv_role",
                prefill=("kv_producer",),
                decode=("kv_consumer",),
                either=("kv_both",),
                backend_key="kv_connector",
                backends=(
                    "NixlConnector",
                    "P2pNcclConnector",
                    "LMCacheConnectorV1",
                    "MooncakeConnector",
                    "SharedStorageConnector",
                    "MultiConnector",
                    "OffloadingConnector",
                    "DecodeBenchConnector",
                ),
                # NIXL transfers are asynchronous with no engine-side bound: stated, not read.
                default_transfer_slots=4,
                read_from="vllm 0.32.0: config/kv_transfer.py (kv_role, kv_connector), "
                "distributed/kv_transfer/kv_connector/factory.py",
            ),
            step_cost_flags=frozenset(
                {
                    "dtype",
                    "enforce-eager",
                    "compilation-config",
                    "kv-cache-dtype",
                    "quantization",
                    "attention-backend",
                    "data-parallel-size",
                    "enable-expert-parallel",
                    "cpu-offload-gb",
                    "async-scheduling",
                }
            ),
        )

    queue_full_text = "queue is full"

    #: A substring only the iteration detail lines hold (recognises such a log).
    iteration_log_marker = "iteration elapsed time"

    #: vllm/platforms/__init__.py at start-up: "Automatically detected platform cpu."
    device_log_line = re.compile(r"Automatically detected platform (\w+)\.")

    def iteration_log_steps(self, text: str) -> list[tuple[int, int, int, float]]:
        """(context requests, context tokens, generation requests, elapsed seconds) of every
        non-dummy ``Iteration(N): ...`` line (``--enable-logging-iteration-details``), in
        order."""
        return [
            (int(m.group(2)), int(m.group(3)), int(m.group(4)), float(m.group(6)) / 1e3)
            for m in _ITERATION_LINE.finditer(text)
        ]

    def prompt_logprobs_request(self, model: str, text: str) -> tuple[str, dict[str, Any]]:
        """``/v1/completions`` with vLLM's extra sampling parameter ``prompt_logprobs: 1``."""
        return "/v1/completions", {
            "model": model,
            "prompt": text,
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 1,
        }

    def parse_prompt_logprobs(self, body: Any) -> list[TokenScore]:
        """``choices[0].prompt_logprobs``: null, then per position ``{"<id>": {"logprob",
        "rank", "decoded_token"}}`` holding the prompt's token and the rank-1 token (one entry
        when they are the same)."""
        try:
            entries = body["choices"][0]["prompt_logprobs"]
            out = []
            for entry in entries[1:]:
                items = [(int(k), v) for k, v in entry.items()]
                best_id, best = next((k, v) for k, v in items if v.get("rank") == 1)
                others = [(k, v) for k, v in items if k != best_id]
                tok_id, tok = others[0] if others else (best_id, best)
                out.append(
                    TokenScore(tok_id, float(tok["logprob"]), best_id, float(best["logprob"]))
                )
            return out
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, StopIteration) as exc:
            raise LogprobShapeError(f"not vLLM's prompt_logprobs shape ({exc!r})") from None

    def _dest(self, flag: str, catalog: Catalog | None) -> tuple[str, bool]:
        """(dest, negated) of a rendered flag name: ``no-enable-x`` -> (enable_x, True)."""
        entry = catalog.lookup(f"--{flag}") if catalog is not None else None
        if entry is not None:
            return entry.dest, flag.startswith("no-") and not entry.name.startswith("--no-")
        if flag.startswith("no-"):
            return flag[3:].replace("-", "_"), True
        return flag.replace("-", "_"), False

    def verify_running_args(
        self,
        expected_argv: list[str],
        fetch: Fetch,
        log_text: str | None = None,
        catalog: Catalog | None = None,
    ) -> ArgvCheck:
        """The startup log's non-default args, where the log is readable, cross-checked with
        ``/v1/models`` and ``vllm:cache_config_info``; without a log, only what HTTP shows."""
        cmd = self.split_command(expected_argv)
        wanted: dict[str, str | bool | tuple[str, ...]] = dict(cmd.positional)
        wanted.update(flag_map(parse_flags(tuple(expected_argv), cmd.flags_start, catalog)))
        verified: list[str] = []
        bad: list[str] = []
        checked: set[str] = set()
        methods: list[str] = []

        logged = parse_non_default_args(log_text) if log_text is not None else None
        if logged is not None:
            methods.append("startup log")
            for flag, want in wanted.items():
                dest, negated = self._dest(flag, catalog)
                value: str | bool | tuple[str, ...] = (not want) if negated else want
                keys = [dest] + (["model_tag"] if dest == "model" else [])
                got = next((logged[k] for k in keys if k in logged), _ABSENT)
                checked.add(flag)
                if got is _ABSENT:
                    entry = catalog.lookup(f"--{flag}") if catalog is not None else None
                    if entry is not None and _is_default(value, entry.default):
                        verified.append(flag)
                    else:
                        bad.append(
                            f"--{flag}: rendered {format_flag_value(want)}, "
                            "not among the engine's non-default args"
                        )
                elif same_value(value, got):
                    verified.append(flag)
                else:
                    bad.append(
                        f"--{flag}: rendered {format_flag_value(want)}, engine parsed {got!r}"
                    )

        status, body = fetch(self.models_path)
        if status == 200:
            methods.append(self.models_path)
            try:
                data = json.loads(body).get("data") or []
                card = data[0] if data and isinstance(data[0], dict) else {}
            except (ValueError, AttributeError):
                card = {}
            if "max-model-len" in wanted and "max_model_len" in card:
                self._cross(wanted, "max-model-len", card["max_model_len"], verified, bad, checked)
            name_flag = "served-model-name" if "served-model-name" in wanted else "model"
            if name_flag in wanted and "id" in card:
                want = wanted[name_flag]
                first = want[0] if isinstance(want, tuple) else want
                self._cross({name_flag: first}, name_flag, card["id"], verified, bad, checked)
        elif status == 0:
            return ArgvCheck(
                " + ".join(methods) or self.models_path,
                error=f"{self.models_path} did not answer",
            )

        status, body = fetch(self.metrics_path)
        if status == 200:
            info = _cache_config_labels(body, self.metric_prefixes)
            if info is not None:
                methods.append(f"{self.prefix}{CACHE_CONFIG_INFO}")
                for flag, want in wanted.items():
                    dest, negated = self._dest(flag, catalog)
                    if dest in info:
                        value = (not want) if negated else want
                        self._cross(
                            {flag: value}, flag, info[dest], verified, bad, checked, label=dest
                        )

        unverifiable = tuple(f for f in wanted if f not in checked)
        return ArgvCheck(
            " + ".join(methods) or "nothing",
            verified=tuple(dict.fromkeys(f for f in verified if not _failed(f, bad))),
            mismatches=tuple(dict.fromkeys(bad)),
            unverifiable=unverifiable,
        )

    @staticmethod
    def _cross(
        wanted: dict[str, Any],
        flag: str,
        got: Any,
        verified: list[str],
        bad: list[str],
        checked: set[str],
        label: str | None = None,
    ) -> None:
        want = wanted[flag]
        checked.add(flag)
        if same_value(want, got) or (isinstance(got, str) and _loose_equal(want, got)):
            verified.append(flag)
        elif label is not None:
            bad.append(f"--{flag}: engine reports {label}={got!r}, rendered means {want!r}")
        else:
            bad.append(f"--{flag}: rendered {format_flag_value(want)}, engine reports {got!r}")


class _Absent:
    pass


_ABSENT: Any = _Absent()


def _failed(flag: str, bad: list[str]) -> bool:
    return any(b.startswith(f"--{flag}:") for b in bad)


def _is_default(value: Any, default: Any) -> bool:
    if default is None:
        return False
    return same_value(value, default) if isinstance(value, str | bool | tuple) else False


def _loose_equal(want: Any, got: str) -> bool:
    """``True`` == ``"True"``; ``0.9`` == ``"0.9"`` (labels are strings)."""
    if isinstance(want, bool):
        return got.lower() == str(want).lower()
    try:
        return float(str(want)) == float(got)
    except ValueError:
        return str(want) == got


def _cache_config_labels(text: str, prefixes: tuple[str, ...]) -> dict[str, str] | None:
    names = {f"{p}{CACHE_CONFIG_INFO}" for p in prefixes}
    return next((s.labels for s in parse_metrics(text) if s.name in names and s.labels), None)


PROFILE = VLLMProfile()
