"""Workloads for the simulator: the request type and the built-in generators.

Generators take a seeded ``random.Random`` so the same seed gives the same workload. Traces are
read into workloads by :mod:`tierctl.sim.workload_traces`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

# The generators hash prompt blocks of the size Mooncake traces use (tierctl.traces).
from tierctl.traces import BLOCK_TOKENS


@dataclass(frozen=True)
class SimRequest:
    """One request as the scheduler sees it.

    ``block_hashes`` name the prompt's consecutive ``block_tokens``-sized blocks (chained, as
    Mooncake's ``hash_ids``: equal hashes mean an equal prefix up to that block); the prefix
    cache matches on them. Empty means the prompt shares nothing.
    """

    rid: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] = ()
    block_tokens: int = BLOCK_TOKENS
    # The request's priority under a priority scheduling policy (vLLM: smaller is served
    # first; SGLang: larger, unless --schedule-low-priority-values-first; ignored otherwise).
    priority: int = 0


@dataclass(frozen=True)
class Workload:
    """A named, arrival-ordered list of requests."""

    name: str
    requests: tuple[SimRequest, ...]

    @staticmethod
    def of(name: str, requests: list[SimRequest]) -> Workload:
        """Build a workload, sorting by arrival (stable, so ties keep their order)."""
        return Workload(name, tuple(sorted(requests, key=lambda r: r.arrival_s)))

    def merged(self, other: Workload) -> Workload:
        """Both workloads' requests in one, interleaved by arrival."""
        return Workload.of(f"{self.name}+{other.name}", [*self.requests, *other.requests])


def burst(
    rng: random.Random,
    *,
    count: int = 8,
    input_tokens: int = 720_000,
    output_tokens: int = 256,
    start_s: float = 1.0,
    spread_s: float = 0.5,
    jitter: float = 0.02,
    prefix: str = "burst",
) -> Workload:
    """``count`` long prompts arriving within ``spread_s`` of ``start_s``; sizes +/- jitter."""
    reqs = [
        SimRequest(
            rid=f"{prefix}-{i}",
            arrival_s=start_s + rng.uniform(0, spread_s),
            input_tokens=max(1, round(input_tokens * rng.uniform(1 - jitter, 1 + jitter))),
            output_tokens=output_tokens,
        )
        for i in range(count)
    ]
    return Workload.of(prefix, reqs)


def decoders(
    *, count: int = 3, input_tokens: int = 2_000, output_tokens: int = 4_000, prefix: str = "dec"
) -> Workload:
    """``count`` short prompts at t=0 with long outputs: the sequences that keep decoding."""
    reqs = [SimRequest(f"{prefix}-{i}", 0.0, input_tokens, output_tokens) for i in range(count)]
    return Workload.of(prefix, reqs)


def hammer(
    rng: random.Random,
    *,
    rate_per_s: float = 2.0,
    duration_s: float = 120.0,
    input_tokens: tuple[int, int] = (200, 2_000),
    output_tokens: tuple[int, int] = (50, 300),
    start_s: float = 0.0,
    prefix: str = "hammer",
) -> Workload:
    """Short requests with Poisson arrivals at ``rate_per_s`` for ``duration_s``."""
    reqs: list[SimRequest] = []
    t = start_s
    while True:
        t += rng.expovariate(rate_per_s)
        if t >= start_s + duration_s:
            break
        reqs.append(
            SimRequest(
                f"{prefix}-{len(reqs)}",
                t,
                rng.randint(*input_tokens),
                rng.randint(*output_tokens),
            )
        )
    return Workload.of(prefix, reqs)


def field_burst(
    rng: random.Random, *, with_hammer: bool = False, max_total_tokens: int | None = None
) -> Workload:
    """The field report's burst: 8 prompts of ~720K tokens while 3 short sequences decode.

    With ``with_hammer`` a short-request hammer (one request per 20 s for 600 s) runs too.
    ``max_total_tokens`` (a tier's context limit) caps every request's prompt plus output.
    """
    prompt, output = 720_000, 256
    if max_total_tokens is not None:
        # Below the limit by the size jitter too: no prompt may overflow it.
        prompt = max(1, min(prompt, int((max_total_tokens - output) / 1.02)))
    wl = decoders(output_tokens=300).merged(burst(rng, input_tokens=prompt, output_tokens=output))
    if with_hammer:
        wl = wl.merged(hammer(rng, rate_per_s=0.05, duration_s=600.0))
    return Workload(name="field-burst" + ("+hammer" if with_hammer else ""), requests=wl.requests)


def multi_turn_day(
    rng: random.Random,
    *,
    hours: float = 24.0,
    rate_per_h: float = 700.0,
    min_prompt_tokens: int = 10_000,
    max_prompt_tokens: int = 720_000,
    start_max_tokens: int = 300_000,
    turns: tuple[int, int] = (4, 10),
    growth: tuple[float, float] = (0.04, 0.15),
    output_tokens: tuple[int, int] = (100, 1_500),
) -> Workload:
    """A long-context multi-turn trace: conversations whose turns resend a growing prefix.

    Each conversation starts with a 10K-300K-token context (log-uniform) and each later turn
    adds that turn's output plus a new user message of 4-15% of the context, capped at
    ``max_prompt_tokens``, so most prompt tokens are a prefix the engine has seen. A turn
    arrives after the previous reply plus 20-90 s of thinking; conversations start as a
    Poisson process sized so the whole trace carries ``rate_per_h`` requests per hour.
    """
    import math

    mean_turns = (turns[0] + turns[1]) / 2
    conv_rate_per_s = rate_per_h / 3600.0 / mean_turns
    end_s = hours * 3600.0
    reqs: list[SimRequest] = []
    next_hash = 1
    t = 0.0
    conv = 0
    lo, hi = math.log(min_prompt_tokens), math.log(start_max_tokens)
    while True:
        t += rng.expovariate(conv_rate_per_s)
        if t >= end_s:
            break
        ctx = int(math.exp(rng.uniform(lo, hi)))
        hashes: list[int] = []
        at = t
        for turn in range(rng.randint(*turns)):
            out = rng.randint(*output_tokens)
            n_blocks = max(1, -(-ctx // BLOCK_TOKENS))
            while len(hashes) < n_blocks:
                hashes.append(next_hash)
                next_hash += 1
            del hashes[n_blocks:]
            reqs.append(SimRequest(f"c{conv}-t{turn}", at, ctx, out, tuple(hashes)))
            grown = ctx + out + int(ctx * rng.uniform(*growth))
            if grown > max_prompt_tokens:
                break
            # The next turn's prompt shares only whole blocks of this one's prompt.
            hashes = hashes[: ctx // BLOCK_TOKENS]
            # The user answers after the reply (estimated at ~40 ms per output token plus
            # the uncached prefill) and 20-90 s of thinking.
            at += out * 0.04 + (grown - ctx) / 20_000 + rng.uniform(20.0, 90.0)
            ctx = grown
        conv += 1
    return Workload.of(f"multi-turn-{hours:g}h", [r for r in reqs if r.arrival_s < end_s])


GENERATORS = ("burst", "hammer", "both", "field", "field+hammer", "day", "ingestion")

#: The size parameters each generator reads (every one takes ``seed``); the rest it ignores,
#: so the command line refuses them rather than drop them silently.
GENERATOR_PARAMS: dict[str, frozenset[str]] = {
    "burst": frozenset({"count", "input_tokens", "output_tokens"}),
    "hammer": frozenset({"rate_per_s", "duration_s"}),
    "both": frozenset({"count", "input_tokens", "output_tokens", "rate_per_s", "duration_s"}),
    "field": frozenset(),
    "field+hammer": frozenset(),
    "day": frozenset({"hours"}),
    "ingestion": frozenset({"duration_s"}),
}


def ingestion(rng: random.Random, *, minutes: float = 25.0) -> Workload:
    """The field report's ingestion incident, as one replica of two saw it: every 5 minutes
    ~50 prompts of 1.4-1.6 MB (350K-400K tokens at 4 bytes per token), arriving in clusters
    of 10 within 2 s, over a short-request background."""
    reqs: list[SimRequest] = []
    for k in range(max(1, int(minutes // 5))):
        for c in range(5):
            start = 300.0 * k + rng.uniform(0, 290)
            for i in range(10):
                reqs.append(
                    SimRequest(f"big-{k}-{c}-{i}", start + rng.uniform(0, 2),
                               rng.randint(350_000, 400_000), 64)
                )  # fmt: skip
    background = hammer(rng, rate_per_s=0.5, duration_s=minutes * 60, prefix="hammer")
    return Workload.of("ingestion", [*reqs, *background.requests])


#: The most requests a built-in generator makes (a hammer's rate x duration, a burst's count):
#: ``--duration-s 1e400`` read as inf and the hammer never ended.
MAX_GENERATED = 1_000_000

#: The longest ``day`` trace, in hours.
MAX_DAY_HOURS = 24.0 * 31


def _check_sizes(
    kind: str,
    count: int,
    input_tokens: int,
    output_tokens: int,
    rate_per_s: float,
    duration_s: float,
    hours: float,
) -> None:
    """Refuse generator parameters that are not finite or would make an unbounded workload."""
    from tierctl.errors import InputError

    def bad(option: str, value: object, rule: str) -> InputError:
        return InputError(
            f"{option} {value!r} is out of range", rule=rule, value=str(value)[:80],
            fix=f"pass {option} within the rule, or replay a trace file instead",
        )  # fmt: skip

    if not 1 <= count <= MAX_GENERATED:
        raise bad("--count", count, f"a burst has 1 to {MAX_GENERATED:,} requests")
    for option, tokens in (("--input-tokens", input_tokens), ("--output-tokens", output_tokens)):
        if not 1 <= tokens <= 2**31:
            raise bad(option, tokens, "a request has 1 to 2**31 tokens")
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise bad("--rate", rate_per_s, "a rate is a finite number of requests/s above 0")
    if not (math.isfinite(duration_s) and duration_s >= 0):
        raise bad("--duration-s", duration_s, "a duration is finite and >= 0")
    if kind in ("hammer", "both", "field+hammer") and rate_per_s * duration_s > MAX_GENERATED:
        raise bad(
            "--duration-s", duration_s,
            f"a hammer makes at most {MAX_GENERATED:,} requests (--rate x --duration-s)",
        )  # fmt: skip
    if kind == "ingestion" and duration_s != 600.0:
        # 50 multi-MB prompts every 5 minutes over a short-request hammer at 0.5/s.
        made = 50 * (duration_s // 300) + 0.5 * duration_s
        if made > MAX_GENERATED:
            raise bad(
                "--duration-s", duration_s,
                f"the ingestion workload makes at most {MAX_GENERATED:,} requests "
                f"(40 a minute: at most {MAX_GENERATED // 40:,} minutes)",
            )  # fmt: skip
    if not (math.isfinite(hours) and 0 < hours <= MAX_DAY_HOURS):
        raise bad(
            "--hours", hours, f"a day trace lasts more than 0 and at most {MAX_DAY_HOURS:g} h"
        )
    if kind == "day":
        # Refused before it is built (a 744-hour trace is 518,000 requests and 1.9 GB): its
        # requests alone, ~680 an hour, against the simulation's work bound.
        from tierctl.sim import budget

        budget.check(
            budget.WorkEstimate(requests=int(hours * 680)), what=f"a {hours:g}-hour day trace"
        )


def generate(
    kind: str,
    seed: int = 0,
    *,
    count: int = 8,
    input_tokens: int = 720_000,
    output_tokens: int = 256,
    rate_per_s: float = 2.0,
    duration_s: float = 600.0,
    hours: float = 24.0,
) -> Workload:
    """Build a built-in workload by name with a generator seeded by ``seed``.

    ``burst``: ``count`` prompts of ``input_tokens``; ``hammer``: short requests at
    ``rate_per_s`` for ``duration_s``; ``both``: the two at once; ``field``: the field report's
    burst (8 x ~720K while 3 short sequences decode); ``field+hammer``: with a hammer too;
    ``day``: the multi-turn long-context trace over ``hours``; ``ingestion``: the field
    report's multi-MB prompt bursts (25 minutes, or ``duration_s``).
    """
    from tierctl.errors import InputError

    _check_sizes(kind, count, input_tokens, output_tokens, rate_per_s, duration_s, hours)
    rng = random.Random(seed)
    if kind == "burst":
        return burst(rng, count=count, input_tokens=input_tokens, output_tokens=output_tokens)
    if kind == "hammer":
        return hammer(rng, rate_per_s=rate_per_s, duration_s=duration_s)
    if kind == "both":
        b = burst(rng, count=count, input_tokens=input_tokens, output_tokens=output_tokens)
        return b.merged(hammer(rng, rate_per_s=rate_per_s, duration_s=duration_s))
    if kind in ("field", "field+hammer"):
        return field_burst(rng, with_hammer=kind == "field+hammer")
    if kind == "ingestion":
        return ingestion(rng, minutes=duration_s / 60 if duration_s != 600.0 else 25.0)
    if kind == "day":
        return multi_turn_day(rng, hours=hours)
    raise InputError(
        f"unknown workload {kind!r}",
        rule="the workload is a trace file or one of the built-in generators",
        value=kind,
        fix="use one of: " + ", ".join(GENERATORS),
    )
