"""Small builders shared by the simulator tests."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import signal
from collections.abc import Iterator

from tierctl.results import MeasuredRequest
from tierctl.sim.config import EngineConfig
from tierctl.sim.cost import CostModel
from tierctl.sim.engine import Round
from tierctl.sim.iteration_fit import IterationSample
from tierctl.sim.simulate import simulate
from tierctl.sim.workload import SimRequest, Workload

# Round numbers so expected times can be worked out by hand.
FLAT = CostModel(
    name="flat",
    prefill_base_s=0.0,
    prefill_per_token_s=1e-4,  # a 1000-token chunk takes 0.1 s
    prefill_attn_pair_s=0.0,
    decode_base_s=0.01,  # a decode step takes 10 ms
    decode_per_seq_s=0.0,
    decode_per_ctx_token_s=0.0,
    round_overhead_s=0.0,
    kv_pool_tokens=1_000_000,
    max_running_requests=64,
    chunked_prefill_size=1000,
)


def cfg(*argv: str) -> EngineConfig:
    """An EngineConfig from flag tokens."""
    return EngineConfig.from_argv(list(argv))


def decoders_and_prompt(
    prompt_tokens: int = 10_000, n_decoders: int = 3, decode_out: int = 5_000
) -> Workload:
    """``n_decoders`` short requests decoding from t=0, then one long prompt at t=1 s."""
    reqs = [SimRequest(f"dec-{i}", 0.0, 100, decode_out) for i in range(n_decoders)]
    reqs.append(SimRequest("long", 1.0, prompt_tokens, 2))
    return Workload.of("decoders+prompt", reqs)


#: The log-replay tests' vLLM engine (budget 512) and the cost model that wrote its logs.
LOG_BUDGET = 512
LOG_CONFIG = EngineConfig.from_argv(
    ["vllm", "serve", "m", "--max-num-seqs", "8", "--max-num-batched-tokens", str(LOG_BUDGET),
     "--num-gpu-blocks-override", "65536"]
)  # fmt: skip
LOG_TRUTH = dataclasses.replace(
    FLAT, prefill_base_s=0.011, prefill_per_token_s=9e-5, prefill_attn_pair_s=1.4e-7,
    decode_base_s=0.005, decode_per_seq_s=4e-4, decode_per_ctx_token_s=1.2e-6,
    round_overhead_s=0.0, kv_pool_tokens=1_000_000,
)  # fmt: skip


def logged_sample(cost: CostModel, r: Round) -> IterationSample:
    """One simulated round as vLLM logs it: counts and the model's time."""
    decoders = r.batch_size - len(r.chunks)
    if r.chunks:
        t = cost.prefill_s(r.chunks) + cost.decode_marginal_s(decoders, r.context_tokens)
    else:
        t = cost.decode_s(decoders, r.context_tokens)
    return IterationSample(len(r.chunks), sum(c for c, _ in r.chunks), decoders, t)


def logged_run(
    truth: CostModel, seed: int, config: EngineConfig = LOG_CONFIG, count: int = 30
) -> tuple[list[Round], list[IterationSample], list[MeasuredRequest]]:
    """A seeded Poisson run of ``count`` requests simulated under ``truth``: its busy rounds,
    their log lines (:func:`logged_sample`) and the requests as a bench measured them."""
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(count):
        reqs.append(SimRequest(f"r{i}", t, rng.randint(20, 2500), rng.randint(2, 120)))
        t += rng.expovariate(3.0)
    rounds: list[Round] = []
    simulate(config, Workload.of("w", reqs), truth, steps=rounds)
    rounds = [r for r in rounds if r.kind != "idle"]
    measured = [MeasuredRequest(r.arrival_s, r.input_tokens, r.output_tokens, 0.0, None, ())
                for r in reqs]  # fmt: skip
    return rounds, [logged_sample(truth, r) for r in rounds], measured


@contextlib.contextmanager
def cpu_budget(seconds: float) -> Iterator[None]:
    """Fail (not hang) when the block runs past ``seconds`` of this process's CPU: a
    reproducer of a hang must fail on the old code, never run for ever."""

    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"still running after {seconds} s of CPU")

    old = signal.signal(signal.SIGVTALRM, expired)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)
