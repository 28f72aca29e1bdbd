"""SGLang (0.5.x): ``python3 -m sglang.launch_server --model-path M ...``.

Facts this profile encodes, checked against SGLang's source:

- every server arg is a flag (no positional arguments); ``store_true`` booleans are bare, a
  few are ``BooleanOptionalAction`` (``--x`` / ``--no-x``, per the catalog);
- ``/health`` answers 200 once up; ``/health_generate`` runs a one-token generation (503 while
  starting, draining or stuck). In 0.5.23 both are one handler, and ``/health`` runs the
  one-token generation too unless ``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0`` (its default
  is on): seen on the real engine as a ``Prefill batch, #new-seq: 1, #new-token: 1`` line per
  probe of an idle server. It then sleeps in 1 s steps until the scheduler has sent anything
  since the probe began, so it answers in 1 s at the soonest, 2 s or more during a long
  prefill (a 3 s probe has little margin on a busy replica). ``/server_info`` (alias
  ``/get_server_info``) returns every server arg as a top-level key, so the running argv is
  verified flag by flag;
- metrics are ``sglang:<name>``, often rewritten to ``sglang_<name>`` by pipelines, labelled
  ``model_name`` and split by ``tp_rank`` / ``pp_rank`` / ``dp_rank`` where enabled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tierctl.compose.argv import first_flag, flag_map, format_flag_value, parse_flags
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

SERVER_INFO_PATHS = ("/server_info", "/get_server_info")

# Shared by the engines that run on PyTorch/CUDA.
CUDA_OOM = LogPattern("cuda-oom", r"(CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError)")
TRACEBACK = LogPattern("traceback", r"^Traceback \(most recent call last\):", fatal=False)
NCCL = LogPattern("nccl", r"(NCCL error|ncclInternalError|ncclSystemError)")

# The scheduler's decode statistics line (every --decode-log-interval rounds).
_DECODE_LINE = re.compile(
    r"Decode batch[.,].*?#running-req: (\d+), #token: (\d+),.*?gen throughput \(token/s\): "
    r"([\d.]+)"
)


#: The module the launchers run (``python -m sglang.launch_server``).
LAUNCH_MODULE = "sglang.launch_server"

#: What SGLang 0.5.23 needs to serve on a host without a GPU (measured on x86 with AVX-512 and
#: no AMX): ``SGLANG_USE_CPU_ENGINE=1`` selects its CPU platform (``is_cpu()`` is false without
#: it, whatever ``--device`` says), ``--device cpu`` puts the model and KV cache in host memory,
#: and ``torch_native`` is the attention backend that runs on any CPU (``intel_amx`` needs
#: AMX and sgl-kernel's CPU build). CUDA graphs are off by themselves on CPU.
CPU_HOST_ENV: Mapping[str, str] = MappingProxyType({"SGLANG_USE_CPU_ENGINE": "1"})
CPU_HOST_FLAGS: tuple[str, ...] = ("--device", "cpu", "--attention-backend", "torch_native")


class SGLangProfile(EngineProfile):
    """SGLang's launch, HTTP surface, metrics and logs."""

    kind = "sglang"
    title = "SGLang"
    distributions = ("sglang",)
    launchers = (
        ("python3", "-m", "sglang.launch_server"),
        ("python", "-m", "sglang.launch_server"),
        # The `sglang` console script's server command: the same ServerArgs parser.
        ("sglang", "serve"),
    )
    command_markers = ("sglang.launch_server",)
    # NVIDIA Dynamo's worker: this engine's parser beside Dynamo's own flags (engines/dynamo.py).
    wrapper_launchers = dynamo.worker_launchers(dynamo.SGLANG_WORKER_MODULES)
    wrapper_flags = dynamo.SGLANG_WORKER_FLAGS
    wrapper_title = dynamo.TITLE
    images = ("lmsysorg/sglang", "sglang")
    # NGC's builds are tagged YY.MM (NVIDIA's container release), not with sglang's release.
    dated_images = ("nvidia/sglang",)
    image_launcher = ()  # the image has no entrypoint: the command starts the server
    # --dp-size (without --enable-dp-attention) runs that many TP groups side by side.
    parallel_flags = (
        ("tp", ("tp-size", "tensor-parallel-size", "tp")),
        ("pp", ("pp-size", "pipeline-parallel-size", "pp")),
        ("dp", ("dp-size", "data-parallel-size", "dp")),
    )
    dp_inside_tp_flags = ("enable-dp-attention",)
    nodes_flags = ("nnodes",)
    node_rank_flag = "node-rank"
    leader_address_flag = "dist-init-addr"
    leader_address_has_port = True
    default_port = 30000
    memory_fraction_flag = "mem-fraction-static"
    health_path = "/health"
    readiness_path = "/health_generate"
    metric_prefixes = ("sglang:", "sglang_")
    flush_cache_path = "/flush_cache"
    identity_paths = ("/server_info",)
    flush_cache_needs = "SGLang refuses it (400) while requests are running or waiting"
    # python/sglang/srt/entrypoints/openai/protocol.py's StreamOptions; a release without
    # the field ignores it, and its streams carry usage only at the end.
    per_chunk_usage = MappingProxyType({"continuous_usage_stats": True})
    metrics = EngineMetrics(
        running="num_running_reqs",
        waiting="num_queue_reqs",
        ttft="time_to_first_token_seconds",
        itl="inter_token_latency_seconds",
        e2e="e2e_request_latency_seconds",
        prompt_tokens="prompt_tokens_total",
        generation_tokens="generation_tokens_total",
        finished=MetricRef("e2e_request_latency_seconds_count"),
        aborted=MetricRef("num_aborted_requests_total"),
        extra={
            "token_usage": "token_usage",
            "cache_hit_rate": "cache_hit_rate",
            "requests": "num_requests_total",
            "cached_tokens": "cached_tokens_total",
            # Retraction under KV pressure (retract_decode): a counter, and the gauge of the
            # last batch's retractions (reset after each publish; not a total).
            "retractions": "num_retracted_requests_total",
            "retracted_reqs": "num_retracted_reqs",
            # Speculative decoding: gauges of the last batches' mean acceptance length
            # (accepted drafts + the bonus token per verify) and rate (accepted / proposed).
            "spec_accept_length": "spec_accept_length",
            "spec_accept_rate": "spec_accept_rate",
        },
    )
    model_label = "model_name"
    rank_labels = ("tp_rank", "pp_rank", "dp_rank")
    fatal_log_patterns = (
        CUDA_OOM,
        LogPattern("watchdog", r"(watchdog timeout|Watchdog timeout|watchdog_timeout)"),
        LogPattern(
            "engine-dead",
            r"(Received sigquit from a child process|Child process unexpectedly failed"
            r"|Scheduler hit an exception|DetokenizerManager hit an exception)",
        ),
        NCCL,
        TRACEBACK,
    )
    metrics_fix = "render the engine with --enable-metrics"
    argv_gate = "server-info"
    argv_gate_text = "`GET /server_info` reports exactly the rendered flags"
    token_budget_flag = "chunked-prefill-size"
    max_running_flag = "max-running-requests"
    sim_modelled_flags = frozenset(
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
            "speculative-algorithm",
            "speculative-num-steps",
            "speculative-num-draft-tokens",
            "speculative-eagle-topk",
            "enable-dp-attention",
            "dp-size",
            "enable-priority-scheduling",
            "schedule-low-priority-values-first",
            "schedule-conservativeness",
            "disaggregation-mode",
            "disaggregation-transfer-backend",
        }
    )
    false_default = "omit"

    def sim_rules(self, version: str) -> SimRules:
        """SGLang's rules, read in the 0.5.23 wheel (``managers/scheduler.py``: the interval is
        armed from the batch's forward mode, which under DP attention is the ranks' global
        one). Other releases take these, marked assumed."""
        return SimRules(
            engine=self.kind,
            release=version,
            read_from="sglang 0.5.23: srt/managers/scheduler.py",
            assumed=version != "0.5.23",
            interval_global_under_dp=True,
            # scheduler.py update_running_batch / schedule_batch.py retract_decode; the ratio's
            # constants are environ.py's SGLANG_INIT_NEW_TOKEN_RATIO (0.7),
            # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR (0.14), SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
            # (600), SGLANG_RETRACT_DECODE_STEPS (20), SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
            # (4096).
            retract_decode=True,
            # scheduler.py event_loop_overlap: the last batch's results are processed after
            # the next batch is launched; measured round by round against the real scheduler
            # (benchmarks/sglang_scheduler_steps.py).
            overlap_frees_late=True,
            new_token_ratio=(0.7, 0.14, 600),
            retract_decode_steps=20,
            clip_max_new_tokens=4096,
            metrics_preemption=self.metrics.extra["retractions"],
            # disaggregation/decode.py _allocatable_tokens: SGLANG_NUM_RESERVED_DECODE_TOKENS.
            decode_reserved_tokens=512,
            disaggregation=DisaggregationRule(
                flag="disaggregation-mode",
                prefill=("prefill",),
                decode=("decode",),
                colocated=("null",),
                backend_flag="disaggregation-transfer-backend",
                backends=("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp"),
                # environ.py SGLANG_DISAGGREGATION_QUEUE_SIZE: 4 transfer queues per prefill
                # server.
                default_transfer_slots=4,
                read_from="sglang 0.5.23: srt/arg_groups/fields (disaggregation_mode, "
                "disaggregation_transfer_backend), srt/environ.py",
            ),
            step_cost_flags=frozenset(
                {
                    "dtype",
                    "quantization",
                    "kv-cache-dtype",
                    "disable-cuda-graph",
                    "enable-torch-compile",
                    "attention-backend",
                    "moe-a2a-backend",
                    "ep-size",
                    "enable-eplb",
                    "cpu-offload-gb",
                }
            ),
        )

    queue_full_text = "The request queue is full."

    #: A substring only the scheduler's decode statistics lines hold (recognises its log).
    decode_log_marker = "Decode batch"

    def decode_log_stats(self, text: str) -> list[tuple[int, int, float]]:
        """(running requests, tokens in use, generation throughput in token/s) of every
        ``Decode batch`` line of a scheduler log, in order."""
        return [
            (int(m.group(1)), int(m.group(2)), float(m.group(3)))
            for m in _DECODE_LINE.finditer(text)
        ]

    def prompt_logprobs_request(self, model: str, text: str) -> tuple[str, dict[str, Any]]:
        """Native ``/generate`` with ``return_logprob``, ``logprob_start_len: 0`` and
        ``top_logprobs_num: 1``: ``meta_info.input_token_logprobs`` and ``input_top_logprobs``."""
        return "/generate", {
            "text": text,
            "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
            "return_logprob": True,
            "logprob_start_len": 0,
            "top_logprobs_num": 1,
        }

    def parse_prompt_logprobs(self, body: Any) -> list[TokenScore]:
        """``input_token_logprobs`` ``[logprob, id, text]`` triples beside ``input_top_logprobs``
        (a list of such triples per position; the first position's logprob is null)."""
        try:
            meta = body["meta_info"]
            tokens, tops = meta["input_token_logprobs"], meta["input_top_logprobs"]
            out = []
            for tok, top in list(zip(tokens, tops, strict=True))[1:]:
                best = top[0]
                out.append(TokenScore(int(tok[1]), float(tok[0]), int(best[1]), float(best[0])))
            return out
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LogprobShapeError(f"not SGLang's input_token_logprobs shape ({exc!r})") from None

    def server_info_mismatches(
        self, expected_argv: list[str], info: Mapping[str, Any]
    ) -> list[str]:
        """Rendered flags ``/server_info`` reports differently (or not at all).

        Args:
            expected_argv: The rendered command.
            info: The ``/server_info`` body: one top-level key per server arg.

        Returns:
            One line per mismatching flag; empty when the engine runs exactly the rendered flags.
        """
        out: list[str] = []
        for flag, want in flag_map(
            parse_flags(tuple(expected_argv), first_flag(expected_argv), None)
        ).items():
            key = flag.replace("-", "_")
            if key not in info:
                out.append(f"--{flag}: rendered {format_flag_value(want)}, not reported")
            elif not same_value(want, info[key]):
                out.append(
                    f"--{flag}: rendered {format_flag_value(want)}, engine reports {info[key]!r}"
                )
        return out

    def verify_running_args(
        self,
        expected_argv: list[str],
        fetch: Fetch,
        log_text: str | None = None,
        catalog: Catalog | None = None,
    ) -> ArgvCheck:
        """``/server_info`` (or ``/get_server_info``) must report every rendered flag."""
        status, body = 0, ""
        for path in SERVER_INFO_PATHS:
            status, body = fetch(path)
            if status == 0:
                return ArgvCheck("/server_info", error=f"{path} did not answer")
            if status != 404:
                break
        if status != 200:
            return ArgvCheck("/server_info", error=f"/server_info answered HTTP {status}")
        try:
            info = json.loads(body)
        except ValueError:
            # Often an HTML page from something else on the port (a proxy's error page, a
            # gateway): show how it begins so the operator can tell which.
            start = " ".join(body[:80].split())
            return ArgvCheck(
                "/server_info", error=f"/server_info did not answer JSON (it began {start!r})"
            )
        if not isinstance(info, dict):
            return ArgvCheck("/server_info", error="/server_info did not answer a JSON object")
        flags = flag_map(parse_flags(tuple(expected_argv), first_flag(expected_argv), None))
        bad = self.server_info_mismatches(expected_argv, info)
        return ArgvCheck(
            "/server_info",
            verified=tuple(f for f in flags if not any(b.startswith(f"--{f}:") for b in bad)),
            mismatches=tuple(bad),
        )


PROFILE = SGLangProfile()
