"""Prometheus metrics of the simulated engine, named and labelled as SGLang 0.5.23 (or vLLM) does.

Family names come from the engine profiles (:mod:`tierctl.engines`) where they name them.

Names, label sets and histogram buckets follow ``sglang/srt/observability/metrics_collector.py``
of the pinned release: scheduler gauges carry ``model_name, engine_type, tp_rank, pp_rank,
moe_ep_rank``; tokenizer-side counters and histograms carry ``model_name, engine_type`` (plus
``is_streaming`` where SGLang adds it). Each server has its own registry so several simulated
engines can live in one process (tests, the demo).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tierctl.engines import profile_for

_SG = profile_for("sglang")
_SGM = _SG.metrics


def _sg(name: str) -> str:
    """An SGLang family name: the profile's prefix on the profile's (or SGLang's) name."""
    return _SG.prefix + name


TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS_S = (*TTFT_BUCKETS_S, 600, 1200, 1800, 2400)
ITL_BUCKETS_S = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip


class SimMetrics:
    """The metric families one simulated engine exports."""

    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        sched = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
        tok = ["model_name", "engine_type"]
        self.sched_labels = {
            "model_name": model_name,
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        self.tok_labels = {"model_name": model_name, "engine_type": "unified"}

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, sched, registry=reg)

        self.num_running_reqs = gauge(_sg(_SGM.running), "The number of running requests.")
        self.num_queue_reqs = gauge(
            _sg(_SGM.waiting), "The number of requests in the waiting queue."
        )
        self.token_usage = gauge(_sg(_SGM.extra["token_usage"]), "The token usage.")
        self.num_used_tokens = gauge(_sg("num_used_tokens"), "The number of used tokens.")
        self.gen_throughput = gauge(_sg("gen_throughput"), "The generation throughput (token/s).")
        self.cache_hit_rate = gauge(_sg(_SGM.extra["cache_hit_rate"]), "The prefix cache hit rate.")
        self.decode_sum_seq_lens = gauge(
            _sg("decode_sum_seq_lens"), "The sum of all sequence lengths in decode."
        )
        stream = [*tok, "is_streaming"]
        self.prompt_tokens = Counter(
            _sg(_SGM.prompt_tokens),
            "Number of prefill tokens processed.",
            stream,
            registry=reg,
        )
        self.generation_tokens = Counter(
            _sg(_SGM.generation_tokens),
            "Number of generation tokens processed.",
            stream,
            registry=reg,
        )
        self.cached_tokens = Counter(
            _sg(_SGM.extra["cached_tokens"]),
            "Number of cached prompt tokens by source (device/host/storage).",
            [*tok, "cache_source"],
            registry=reg,
        )
        self.num_requests = Counter(
            _sg(_SGM.extra["requests"]), "Number of requests processed.", stream, registry=reg
        )
        self.num_aborted = Counter(
            _sg(_SGM.aborted.name), "Number of requests aborted.", tok, registry=reg
        )
        self.ttft = Histogram(
            _sg(_SGM.ttft),
            "Histogram of time to first token in seconds.",
            stream,
            buckets=TTFT_BUCKETS_S,
            registry=reg,
        )
        self.itl = Histogram(
            _sg(_SGM.itl),
            "Histogram of inter-token latency in seconds.",
            tok,
            buckets=ITL_BUCKETS_S,
            registry=reg,
        )
        self.e2e = Histogram(
            _sg(_SGM.e2e),
            "Histogram of End-to-end request latency in seconds",
            stream,
            buckets=E2E_BUCKETS_S,
            registry=reg,
        )
        # Retraction under KV pressure (retract_decode), as the profile names it.
        self.num_retracted = Counter(
            _sg(_SGM.extra["retractions"]),
            "Number of retracted requests.",
            sched,
            registry=reg,
        )
        self._retracted = 0
        self.spec_accept_length = gauge(
            _sg(_SGM.extra["spec_accept_length"]),
            "The average acceptance length of speculative decoding.",
        )
        self._spec_seen = (0, 0)
        for g in (self.num_running_reqs, self.num_queue_reqs, self.token_usage):
            g.labels(**self.sched_labels).set(0)

    def set_scheduler(
        self, running: int, queued: int, used_tokens: int, pool_tokens: int, ctx_tokens: int
    ) -> None:
        """Refresh the scheduler gauges after a round."""
        lab = self.sched_labels
        self.num_running_reqs.labels(**lab).set(running)
        self.num_queue_reqs.labels(**lab).set(queued)
        self.num_used_tokens.labels(**lab).set(used_tokens)
        self.token_usage.labels(**lab).set(used_tokens / pool_tokens if pool_tokens else 0.0)
        self.decode_sum_seq_lens.labels(**lab).set(ctx_tokens)

    def set_rates(self, gen_tokens_per_s: float, cache_hit_rate: float) -> None:
        """Refresh the throughput and prefix-cache hit-rate gauges."""
        self.gen_throughput.labels(**self.sched_labels).set(gen_tokens_per_s)
        self.cache_hit_rate.labels(**self.sched_labels).set(cache_hit_rate)

    def finished(
        self,
        *,
        streaming: bool,
        prompt_tokens: int,
        cached_tokens: int,
        generation_tokens: int,
        ttft_s: float | None,
        e2e_s: float,
        itl_s: list[float],
    ) -> None:
        """Record one finished request, as SGLang's tokenizer-side collector does."""
        lab = {**self.tok_labels, "is_streaming": "true" if streaming else "false"}
        self.prompt_tokens.labels(**lab).inc(prompt_tokens)
        self.generation_tokens.labels(**lab).inc(generation_tokens)
        self.cached_tokens.labels(**self.tok_labels, cache_source="device").inc(cached_tokens)
        self.num_requests.labels(**lab).inc()
        if ttft_s is not None:
            self.ttft.labels(**lab).observe(ttft_s)
        self.e2e.labels(**lab).observe(e2e_s)
        itl = self.itl.labels(**self.tok_labels)
        for gap in itl_s:
            itl.observe(gap)

    def started(self, epoch_s: float) -> None:
        """Export the server's start time as prometheus_client's process collector names it
        (``process_start_time_seconds``), so arm health can see a restart as on a real engine."""
        Gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            registry=self.registry,
        ).set(epoch_s)

    def set_preemptions(self, total: int) -> None:
        """Bring SGLang's retraction counter up to the scheduler's total."""
        if total > self._retracted:
            self.num_retracted.labels(**self.sched_labels).inc(total - self._retracted)
            self._retracted = total

    def set_spec(self, drafts: int, accepted_by_position: list[int]) -> None:
        """SGLang's acceptance gauge: the mean tokens per verify round (accepted drafts plus
        the bonus token) since the last update, as its scheduler logs it per batch."""
        accepted = sum(accepted_by_position)
        d0, a0 = self._spec_seen
        if drafts > d0:
            value = 1.0 + (accepted - a0) / (drafts - d0)
            self.spec_accept_length.labels(**self.sched_labels).set(value)
            self._spec_seen = (drafts, accepted)

    def aborted(self) -> None:
        """Count one aborted request."""
        self.num_aborted.labels(**self.tok_labels).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of this engine's registry."""
        return bytes(generate_latest(self.registry))


# vLLM v1's histogram buckets (vllm/v1/metrics/loggers.py).
VLLM_TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
VLLM_ITL_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
VLLM_E2E_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


class VllmMetrics(SimMetrics):
    """The families a vLLM (v1 engine) server exports, labelled ``model_name, engine``.

    Names come from the vLLM engine profile; aborts are ``request_success_total`` with
    ``finished_reason="abort"``, as vLLM counts them. ``cache_config_info`` carries the cache
    settings as labels (what rollout gates read back).
    """

    def __init__(self, model_name: str, cache_info: dict[str, str] | None = None) -> None:
        prof = profile_for("vllm")
        m = prof.metrics
        self.prefix = prof.prefix
        self.registry = CollectorRegistry()
        reg = self.registry
        labels = ["model_name", "engine"]
        self.lab = {"model_name": model_name, "engine": "0"}

        def name(n: str) -> str:
            return prof.prefix + n

        self.running = Gauge(name(m.running), "Number of requests in model execution batches.",
                             labels, registry=reg)  # fmt: skip
        self.waiting = Gauge(name(m.waiting), "Number of requests waiting to be processed.",
                             labels, registry=reg)  # fmt: skip
        self.kv_usage = Gauge(name(m.extra["kv_cache_usage"]),
                              "KV-cache usage. 1 means 100 percent usage.", labels, registry=reg)  # fmt: skip
        self.prompt_tokens = Counter(name(m.prompt_tokens), "Number of prefill tokens processed.",
                                     labels, registry=reg)  # fmt: skip
        self.generation_tokens = Counter(name(m.generation_tokens),
                                         "Number of generation tokens processed.", labels,
                                         registry=reg)  # fmt: skip
        self.preemptions = Counter(name(m.extra["preemptions"]),
                                   "Cumulative number of preemption from the engine.", labels,
                                   registry=reg)  # fmt: skip
        self.success = Counter(name(m.finished.name), "Count of successfully processed requests.",
                               [*labels, "finished_reason"], registry=reg)  # fmt: skip
        self.prefix_queries = Counter(name("prefix_cache_queries"),
                                      "Prefix cache queries, in terms of number of queried tokens.",
                                      labels, registry=reg)  # fmt: skip
        self.prefix_hits = Counter(name("prefix_cache_hits"),
                                   "Prefix cache hits, in terms of number of cached tokens.",
                                   labels, registry=reg)  # fmt: skip
        self.ttft = Histogram(name(m.ttft), "Histogram of time to first token in seconds.",
                              labels, buckets=VLLM_TTFT_BUCKETS_S, registry=reg)  # fmt: skip
        self.itl = Histogram(name(m.itl), "Histogram of inter-token latency in seconds.",
                             labels, buckets=VLLM_ITL_BUCKETS_S, registry=reg)  # fmt: skip
        self.e2e = Histogram(name(m.e2e), "Histogram of e2e request latency in seconds.",
                             labels, buckets=VLLM_E2E_BUCKETS_S, registry=reg)  # fmt: skip
        self.spec_drafts = Counter(name(m.extra["spec_drafts"]),
                                   "Number of spec decoding drafts.", labels, registry=reg)  # fmt: skip
        self.spec_draft_tokens = Counter(name(m.extra["spec_draft_tokens"]),
                                         "Number of draft tokens.", labels, registry=reg)  # fmt: skip
        self.spec_accepted = Counter(name(m.extra["spec_accepted_tokens"]),
                                     "Number of accepted tokens.", labels, registry=reg)  # fmt: skip
        self.spec_per_pos = Counter(name(m.extra["spec_accepted_per_position"]),
                                    "Accepted tokens per draft position.",
                                    [*labels, prof.spec_position_label], registry=reg)  # fmt: skip
        self._spec_counted: tuple[int, list[int]] = (0, [])
        info = dict(cache_info or {})
        Gauge(name(m.extra["cache_config_info"]), "Information of the LLMEngine CacheConfig",
              sorted(info), registry=reg).labels(**info).set(1)  # fmt: skip
        for g in (self.running, self.waiting, self.kv_usage):
            g.labels(**self.lab).set(0)
        self._preempted = 0

    def set_scheduler(
        self, running: int, queued: int, used_tokens: int, pool_tokens: int, ctx_tokens: int
    ) -> None:
        """Refresh the scheduler gauges after a step."""
        self.running.labels(**self.lab).set(running)
        self.waiting.labels(**self.lab).set(queued)
        self.kv_usage.labels(**self.lab).set(used_tokens / pool_tokens if pool_tokens else 0.0)

    def set_rates(self, gen_tokens_per_s: float, cache_hit_rate: float) -> None:
        """vLLM exports no throughput gauges (it logs them)."""

    def set_spec(self, drafts: int, accepted_by_position: list[int]) -> None:
        """Bring the speculative decoding counters up to the scheduler's totals (vLLM counts
        a draft of ``len(accepted_by_position)`` tokens per verify round)."""
        d0, pos0 = self._spec_counted
        if drafts <= d0:
            return
        lab = self.lab
        width = len(accepted_by_position)
        self.spec_drafts.labels(**lab).inc(drafts - d0)
        self.spec_draft_tokens.labels(**lab).inc((drafts - d0) * width)
        prev = pos0 + [0] * (width - len(pos0))
        for k, (now, before) in enumerate(zip(accepted_by_position, prev, strict=True)):
            self.spec_per_pos.labels(**lab, position=str(k))  # every position, 0 included
            if now > before:
                self.spec_per_pos.labels(**lab, position=str(k)).inc(now - before)
                self.spec_accepted.labels(**lab).inc(now - before)
        self._spec_counted = (drafts, list(accepted_by_position))

    def set_preemptions(self, total: int) -> None:
        """Bring the preemption counter up to the scheduler's total."""
        if total > self._preempted:
            self.preemptions.labels(**self.lab).inc(total - self._preempted)
            self._preempted = total

    def finished(
        self,
        *,
        streaming: bool,
        prompt_tokens: int,
        cached_tokens: int,
        generation_tokens: int,
        ttft_s: float | None,
        e2e_s: float,
        itl_s: list[float],
    ) -> None:
        """Record one finished request (every simulated request stops at its length)."""
        lab = self.lab
        self.prompt_tokens.labels(**lab).inc(prompt_tokens)
        self.generation_tokens.labels(**lab).inc(generation_tokens)
        self.prefix_queries.labels(**lab).inc(prompt_tokens)
        self.prefix_hits.labels(**lab).inc(cached_tokens)
        self.success.labels(**lab, finished_reason="length").inc()
        if ttft_s is not None:
            self.ttft.labels(**lab).observe(ttft_s)
        self.e2e.labels(**lab).observe(e2e_s)
        itl = self.itl.labels(**lab)
        for gap in itl_s:
            itl.observe(gap)

    def aborted(self) -> None:
        """Count one aborted request."""
        self.success.labels(**self.lab, finished_reason="abort").inc()


def metrics_for(engine: str, model_name: str, **kw: Any) -> SimMetrics:
    """The metric families of a simulated ``engine`` replica."""
    if engine == "vllm":
        return VllmMetrics(model_name, **kw)
    return SimMetrics(model_name)
