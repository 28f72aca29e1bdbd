"""The step cost model: how long one scheduler round takes on the modelled GPUs.

A prefill (extend) batch of requests, each adding ``c`` new tokens on ``p`` already-cached
ones, costs ``a + sum(b*c + g*c*(p + c/2))``: a fixed launch cost, a linear (GEMM) term and
the causal attention term over the token pairs the chunk attends to. A decode step of batch
``B`` with ``K`` context tokens in total costs ``a_d + d*B + k*K``. Every round adds a
scheduler overhead. The presets and their derivations are in docs/sim.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tierctl.errors import InputError
from tierctl.sim.lstsq import nnls


@dataclass(frozen=True)
class CostModel:
    """Coefficients of the step cost model, in seconds, plus the engine's memory sizes."""

    name: str
    prefill_base_s: float
    prefill_per_token_s: float
    prefill_attn_pair_s: float
    decode_base_s: float
    decode_per_seq_s: float
    decode_per_ctx_token_s: float
    round_overhead_s: float
    kv_pool_tokens: int
    max_running_requests: int
    chunked_prefill_size: int
    # Host side (tierctl.sim.host): loop time per request, tokenization per prompt byte, and
    # the bytes a prompt token stands for when a workload gives tokens only.
    request_overhead_s: float = 0.0
    tokenize_per_byte_s: float = 0.0
    bytes_per_token: float = 4.0
    # Host time per token a step streams out (detokenize, format the chunk, send it), charged
    # to the step that emits it: the engine's next step waits for the outputs to be handed
    # on. Zero in the GPU presets (where it hides under the step); a CPU host's fit sees it.
    detokenize_per_token_s: float = 0.0
    # A prefill chunk's read of its already-computed context: each chunk ``c`` tokens deep at
    # ``p`` costs this times ``p`` besides the attended pairs (the KV of ``p`` tokens read once
    # per chunk, whatever its size, as a decode row reads its context). Small chunks deep in
    # a prompt pay it once each (``--long-prefill-token-threshold``). 0 in the presets; an
    # iteration-log fit whose chunks vary in size at depth measures it.
    prefill_per_ctx_token_s: float = 0.0
    # A step's own variability: its time is the model's times exp(sigma * z), z standard
    # normal, drawn per step from the run's seed (the median step is the model's). 0 (the
    # presets) keeps the simulator deterministic; a fit on a real engine's step log measures
    # it (~0.2 on a shared CPU host), and it is what widens simulated tails (TTFT and ITL p90)
    # to the measured ones.
    step_jitter: float = 0.0
    # Slow stretches: on a shared host a step's speed also drifts, in stretches of many steps
    # (the fit's log residuals of consecutive steps are correlated: same-shape steps 2-4x
    # slower for seconds). The simulator multiplies every step by exp(step_jitter_slow * z),
    # z standard normal, redrawn every step_jitter_block working steps (0: never), on top of
    # the per-step jitter. This is the run-to-run noise one real run carries and independent
    # per-step jitter averages away; an iteration-log fit measures it (block means of the
    # residuals beyond what the per-step spread explains).
    step_jitter_slow: float = 0.0
    step_jitter_block: int = 0
    # Speculative decoding (EAGLE/MTP/NGRAM; 0 = the cost model has no speculative terms and
    # a speculative argv decodes one token per round). A round of S draft steps and a verify
    # of N draft tokens per sequence costs the decode step, plus S * spec_draft_step_s, plus
    # spec_verify_per_token_s for each of the (N - 1) extra verified tokens of each sequence;
    # each draft token is accepted with probability spec_accept_rate if all before it were
    # (a chain: the tokens per round are 1 + a truncated geometric count). An extend step
    # also runs the draft model over its chunk: spec_draft_extend_frac of the prefill's cost.
    spec_accept_rate: float = 0.0
    spec_draft_step_s: float = 0.0
    spec_verify_per_token_s: float = 0.0
    spec_draft_extend_frac: float = 0.0
    # The conditional acceptance of each draft position (position k accepted given every one
    # before it was), fitted from an engine's per-position counters (tierctl.sim.accept_fit);
    # positions past the tuple take spec_accept_rate. Empty: spec_accept_rate everywhere.
    spec_accept_by_position: tuple[float, ...] = ()
    # Prefill/decode disaggregation (tierctl.sim.disagg): one prompt's KV crosses from the
    # prefill replica to the decode replica in kv_transfer_base_s plus its bytes
    # (kv_bytes_per_token a token) over kv_transfer_gb_per_s. 0 bandwidth: transfer is free
    # (said so). Stated per preset (the link and the model's KV layout), never fitted: the
    # engines export no per-transfer timing this tree reads.
    kv_bytes_per_token: float = 0.0
    kv_transfer_gb_per_s: float = 0.0
    kv_transfer_base_s: float = 0.0
    # The device the coefficients were measured or derived on ("cuda", "cpu"; "" unknown):
    # it gives the engine's defaults that depend on it (vLLM's KV block: 16 tokens on CUDA,
    # 128 on CPU), and is said when unknown.
    device: str = ""

    def kv_transfer_s(self, tokens: int) -> float:
        """How long one prompt's KV of ``tokens`` takes to cross to the decode replica."""
        if self.kv_transfer_gb_per_s <= 0:
            return self.kv_transfer_base_s
        return self.kv_transfer_base_s + tokens * self.kv_bytes_per_token / (
            self.kv_transfer_gb_per_s * 1e9
        )

    def spec_round_s(self, batch_size: int, draft_steps: int, draft_tokens: int) -> float:
        """What a speculative round adds to a decode step of ``batch_size`` sequences."""
        extra = max(0, draft_tokens - 1) * batch_size
        return draft_steps * self.spec_draft_step_s + self.spec_verify_per_token_s * extra

    def prefill_s(self, chunks: Iterable[tuple[int, int]]) -> float:
        """Time of one extend batch; ``chunks`` are ``(new_tokens, cached_tokens)`` pairs."""
        total = self.prefill_base_s
        for c, p in chunks:
            total += self.prefill_per_token_s * c + self.prefill_attn_pair_s * c * (p + c / 2)
            total += self.prefill_per_ctx_token_s * p
        return total

    @property
    def jittery(self) -> bool:
        """Whether steps are drawn (per-step jitter or slow stretches): no closed form."""
        return self.step_jitter > 0 or self.step_jitter_slow > 0

    def decode_s(self, batch_size: int, context_tokens: int) -> float:
        """Time of one decode step for ``batch_size`` sequences over ``context_tokens``."""
        return self.decode_base_s + self.decode_marginal_s(batch_size, context_tokens)

    def decode_marginal_s(self, batch_size: int, context_tokens: int) -> float:
        """What decodes riding in a mixed chunk add to the chunk's time (no launch cost),
        including streaming each one's token out."""
        return (
            self.decode_per_seq_s + self.detokenize_per_token_s
        ) * batch_size + self.decode_per_ctx_token_s * context_tokens


# GLM-5.3 Flash W4AFP8 on 4 x H200 (TP4). Derived from published numbers, not a profile (see
# docs/sim.md, "Deriving the GLM-5.3 preset"): a 720K-token prompt prefills in ~80 s at chunk
# 16384 (linear ~36 s + attention ~45 s), which also puts 8 x 256K at chunk 8192 at the public
# measurement's ~97 s mean TTFT; a decode step is ~1 % of a deep 8192-token chunk (8 ms + 0.2 ms
# per sequence + 1 ns per context token), which is what makes an interval of 4-8 rounds cost
# <= 10 % TTFT there while keeping the field report's TPOT 0.53-0.72x; the KV pool holds ~3M
# tokens (MLA-compressed KV replicated per TP rank, ~60 GB free per GPU after 4-bit weights).
GLM53_FLASH_W4AFP8_TP4_H200 = CostModel(
    name="glm53-flash-w4afp8-tp4-h200",
    prefill_base_s=0.020,
    prefill_per_token_s=5.0e-5,
    prefill_attn_pair_s=1.7e-10,
    decode_base_s=0.008,
    decode_per_seq_s=2.0e-4,
    decode_per_ctx_token_s=1.0e-9,
    round_overhead_s=5.0e-4,
    kv_pool_tokens=3_000_000,
    max_running_requests=64,
    chunked_prefill_size=8192,
    # Disaggregation, stated: MLA-compressed KV of ~576 values x 61 layers in FP8 (~35 KB a
    # token), over 4 x 400 Gb/s RDMA NICs (one per GPU of the TP4 replica) at ~80 %: 160 GB/s;
    # 2 ms per transfer for the bootstrap handshake and the completion poll.
    kv_bytes_per_token=35_000.0,
    kv_transfer_gb_per_s=160.0,
    kv_transfer_base_s=0.002,
    device="cuda",
)

# The same GPUs plus the host side the ingestion incident was about (tierctl.sim.host): the
# field report measured tokenization as linear, 0.3 MB in <= 0.7 s (2.3 us per byte) on the
# tokenizer manager's event loop; 1 ms of loop time per request besides. A separate preset so
# GPU-only what-ifs (the scheduler canary) keep their inputs arriving when they arrive.
GLM53_FLASH_W4AFP8_TP4_H200_HOST = replace(
    GLM53_FLASH_W4AFP8_TP4_H200,
    name="glm53-flash-w4afp8-tp4-h200-host",
    request_overhead_s=1e-3,
    tokenize_per_byte_s=2.3e-6,
    bytes_per_token=4.0,
)

# A small dense model (8B class, one 80 GB H100, bf16). From first principles: ~16 GFLOP per
# token at ~600 TFLOP/s effective -> b ~ 2.7e-5 s; attention ~0.5 MFLOP per token pair ->
# g ~ 9e-10 s; decode reads 16 GB of weights at ~3.3 TB/s -> ~6 ms, plus 128 KB of KV per
# context token -> k ~ 4e-8 s; ~60 GB free for KV at 128 KB/token -> ~460K tokens.
DENSE_8B_H100 = CostModel(
    name="dense-8b-h100",
    prefill_base_s=0.005,
    prefill_per_token_s=2.7e-5,
    prefill_attn_pair_s=9.0e-10,
    decode_base_s=0.006,
    decode_per_seq_s=5.0e-5,
    decode_per_ctx_token_s=4.0e-8,
    round_overhead_s=3.0e-4,
    kv_pool_tokens=460_000,
    max_running_requests=256,
    chunked_prefill_size=8192,
    # Disaggregation, stated: 128 KB of KV a token (above) over one 400 Gb/s RDMA NIC at
    # ~80 %: 40 GB/s; 2 ms per transfer.
    kv_bytes_per_token=131_072.0,
    kv_transfer_gb_per_s=40.0,
    kv_transfer_base_s=0.002,
    device="cuda",
)

# DeepSeek-V4.1 with MTP speculative decoding on 4 x H200 (TP4), stated for sglang PR #40443's
# cell (8 x 256K prompts, chunk 8192, max running 8, speculative decoding on), from that
# measurement rather than a profile (docs/sim.md, "Speculative decoding and #40443"):
# * prefill: one 256K prompt takes ~21.5 s (the cell's mean TTFT of 96.7 s is ~4.5 prompts
#   queued FCFS): 3e-5 s/token linear (7.7 s) + 4.2e-10 s per attended pair (13.8 s);
# * a speculative round (3 draft steps, 4 draft tokens verified per sequence) is ~0.5 % of a
#   deep chunk: +3.4 % TTFT at interval 8 means 8 rounds cost ~3.4 % of the chunks they sit
#   between, i.e. ~3.7 ms a round (decode 2.5 ms + 0.02 ms per sequence, 3 x 0.25 ms draft,
#   0.01 ms per extra verified token);
# * acceptance 0.78 per draft token: 1 + 0.78 + 0.61 + 0.47 = 2.86 tokens per round, which
#   with the above gives the cell's ~32 tok/s per request at interval 8;
# * the MTP draft runs over each chunk too: ~2 % of the prefill (one of ~61 layers);
# * KV: MLA-compressed, ~60 GB per GPU free after FP8 weights -> ~2.4M tokens.
DEEPSEEK_V41_MTP_TP4_H200 = CostModel(
    name="deepseek-v41-mtp-tp4-h200",
    prefill_base_s=0.020,
    prefill_per_token_s=3.0e-5,
    prefill_attn_pair_s=4.2e-10,
    decode_base_s=0.0025,
    decode_per_seq_s=2.0e-5,
    decode_per_ctx_token_s=1.0e-11,
    round_overhead_s=2.0e-4,
    kv_pool_tokens=2_400_000,
    max_running_requests=64,
    chunked_prefill_size=8192,
    spec_accept_rate=0.78,
    spec_draft_step_s=2.5e-4,
    spec_verify_per_token_s=1.0e-5,
    spec_draft_extend_frac=0.02,
    # Disaggregation, stated as for the GLM preset: MLA KV ~35 KB a token in FP8, 160 GB/s.
    kv_bytes_per_token=35_000.0,
    kv_transfer_gb_per_s=160.0,
    kv_transfer_base_s=0.002,
    device="cuda",
)

PRESETS: dict[str, CostModel] = {
    m.name: m
    for m in (
        GLM53_FLASH_W4AFP8_TP4_H200,
        GLM53_FLASH_W4AFP8_TP4_H200_HOST,
        DENSE_8B_H100,
        DEEPSEEK_V41_MTP_TP4_H200,
    )
}
DEFAULT_PRESET = GLM53_FLASH_W4AFP8_TP4_H200.name


def preset(name: str) -> CostModel:
    """The named preset.

    Raises:
        InputError: no preset has that name.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise InputError(
            f"unknown cost-model preset {name!r}",
            rule="the preset must be one of the bundled ones",
            value=name,
            fix=f"use one of: {', '.join(sorted(PRESETS))}",
        ) from None


@dataclass(frozen=True)
class PrefillSample:
    """One logged extend step: its chunks and how long it took."""

    chunks: tuple[tuple[int, int], ...]
    duration_s: float


@dataclass(frozen=True)
class DecodeSample:
    """One logged decode step."""

    batch_size: int
    context_tokens: int
    duration_s: float


def fit(
    prefill: Sequence[PrefillSample],
    decode: Sequence[DecodeSample],
    *,
    base: CostModel = GLM53_FLASH_W4AFP8_TP4_H200,
    name: str = "fitted",
) -> CostModel:
    """Fit the step coefficients to logged step times by non-negative least squares.

    The round overhead cannot be told apart from the launch costs in step logs, so it is
    kept from ``base`` (as are the memory sizes) and subtracted before fitting.

    Raises:
        InputError: fewer samples than coefficients for either step kind.
    """
    import numpy as np

    if len(prefill) < 3 or len(decode) < 3:
        raise InputError(
            "not enough step samples to fit the cost model",
            rule="at least 3 prefill and 3 decode steps are needed (3 coefficients each)",
            value={"prefill": len(prefill), "decode": len(decode)},
            fix="log more steps, with varied chunk sizes, cached lengths and batch sizes",
        )
    oh = base.round_overhead_s
    xp = np.array(
        [
            [
                1.0,
                float(sum(c for c, _ in s.chunks)),
                float(sum(c * (p + c / 2) for c, p in s.chunks)),
            ]
            for s in prefill
        ]
    )
    yp = np.array([s.duration_s - oh for s in prefill])
    xd = np.array([[1.0, float(s.batch_size), float(s.context_tokens)] for s in decode])
    yd = np.array([s.duration_s - oh for s in decode])
    a, b, g = nnls(xp, yp)
    ad, d, k = nnls(xd, yd)
    return replace(
        base,
        name=name,
        prefill_base_s=a,
        prefill_per_token_s=b,
        prefill_attn_pair_s=g,
        decode_base_s=ad,
        decode_per_seq_s=d,
        decode_per_ctx_token_s=k,
    )
