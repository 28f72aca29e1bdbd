"""Prometheus metrics of the simulated engine, named and labelled as SGLang 0.5.23 does.

Names, label sets and histogram buckets follow ``sglang/srt/observability/metrics_collector.py``
of the pinned release: scheduler gauges carry ``model_name, engine_type, tp_rank, pp_rank,
moe_ep_rank``; tokenizer-side counters and histograms carry ``model_name, engine_type`` (plus
``is_streaming`` where SGLang adds it). Each server has its own registry so several simulated
engines can live in one process (tests, the demo).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS_S = (*TTFT_BUCKETS_S, 600, 1200, 1800, 2400)
ITL_BUCKETS_S = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip


class EngineMetrics:
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

        self.num_running_reqs = gauge("sglang:num_running_reqs", "The number of running requests.")
        self.num_queue_reqs = gauge(
            "sglang:num_queue_reqs", "The number of requests in the waiting queue."
        )
        self.token_usage = gauge("sglang:token_usage", "The token usage.")
        self.num_used_tokens = gauge("sglang:num_used_tokens", "The number of used tokens.")
        self.gen_throughput = gauge("sglang:gen_throughput", "The generation throughput (token/s).")
        self.cache_hit_rate = gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.decode_sum_seq_lens = gauge(
            "sglang:decode_sum_seq_lens", "The sum of all sequence lengths in decode."
        )
        stream = [*tok, "is_streaming"]
        self.prompt_tokens = Counter(
            "sglang:prompt_tokens_total",
            "Number of prefill tokens processed.",
            stream,
            registry=reg,
        )
        self.generation_tokens = Counter(
            "sglang:generation_tokens_total",
            "Number of generation tokens processed.",
            stream,
            registry=reg,
        )
        self.cached_tokens = Counter(
            "sglang:cached_tokens_total",
            "Number of cached prompt tokens by source (device/host/storage).",
            [*tok, "cache_source"],
            registry=reg,
        )
        self.num_requests = Counter(
            "sglang:num_requests_total", "Number of requests processed.", stream, registry=reg
        )
        self.num_aborted = Counter(
            "sglang:num_aborted_requests_total", "Number of requests aborted.", tok, registry=reg
        )
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            stream,
            buckets=TTFT_BUCKETS_S,
            registry=reg,
        )
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            tok,
            buckets=ITL_BUCKETS_S,
            registry=reg,
        )
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            stream,
            buckets=E2E_BUCKETS_S,
            registry=reg,
        )
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

    def aborted(self) -> None:
        """Count one aborted request."""
        self.num_aborted.labels(**self.tok_labels).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition of this engine's registry."""
        return bytes(generate_latest(self.registry))
