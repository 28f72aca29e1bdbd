"""The simulated engine's language model: deterministic next-token distributions and logprobs.

It is not a neural network. The distribution at a position is a pure function of the model's
"weights" (a seed; by default derived from ``--model-path``, so two engines serving the same
model agree exactly) and the last :data:`WINDOW` token ids: the top token and a runner-up are
drawn from the bundled tokenizer's plain-word tokens by hashing that window, with
probabilities in ``[0.5, 0.95]`` and a share of the rest; every other token splits what is
left evenly. That is enough to make the quality lane testable offline:

- greedy generation continues the prompt deterministically, and is self-consistent with the
  teacher-forced view (the greedy token after a prefix is the argmax its prompt logprobs show);
- a *perturbation* (``perturb_fraction``) swaps the top and runner-up at a hash-chosen fraction
  of positions, the way a numerics change flips near-ties, so an A/B verdict has something real
  to find and a known set of positions where it should find it.
"""

from __future__ import annotations

import functools
import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

#: Token ids of context the distribution depends on: enough to tell apart prompts that share
#: a long common ending (a few-shot header's last question, a passkey's question).
WINDOW = 16
_MASK = (1 << 64) - 1
_BASE = 0x100000001B3  # the window's polynomial hash base (FNV's 64-bit prime)
_BASE_TOP = pow(_BASE, WINDOW - 1, 1 << 64)


def _mix(x: int) -> int:
    """splitmix64's finaliser: a cheap, well-spread 64-bit hash of an integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _unit(x: int) -> float:
    """A hash mapped to [0, 1)."""
    return (x >> 11) / float(1 << 53)


@functools.cache
def _vocab() -> tuple[int, tuple[int, ...], tuple[str, ...]]:
    """(vocabulary size, ids of plain lower-case word tokens, decoded text of every id)."""
    from tierctl.sim.tokenizer import load_tokenizer

    tok = load_tokenizer()
    size = int(tok.get_vocab_size())
    texts = tuple(tok.decode([i]) for i in range(size))
    words = tuple(i for i, t in enumerate(texts) if re.fullmatch(r" [a-z]{2,}", t))
    return size, words, texts


def model_seed(model_path: str) -> int:
    """The default weights seed of a model path: the same model gives the same tokens."""
    return zlib.crc32(model_path.encode())


@dataclass(frozen=True)
class Position:
    """The model's prediction at one position: the top token, the runner-up, their logprobs."""

    top: int
    top_logprob: float
    runner_up: int
    runner_up_logprob: float
    tail_logprob: float  # every other token's logprob
    perturbed: bool


class SimLM:
    """A deterministic language model over the bundled tokenizer's vocabulary."""

    def __init__(self, seed: int, *, perturb_fraction: float = 0.0, perturb_seed: int = 1) -> None:
        if not 0.0 <= perturb_fraction <= 1.0:
            raise ValueError(f"perturb_fraction must be in [0, 1], got {perturb_fraction}")
        self.seed = seed
        self.perturb_fraction = perturb_fraction
        self.perturb_seed = perturb_seed
        self.vocab_size, self._words, self._texts = _vocab()
        self._seed_mix = _mix(seed)
        self._perturb_mix = _mix(perturb_seed)

    def _state(self, poly: int) -> int:
        return _mix(poly ^ self._seed_mix)

    def predict(self, context: Sequence[int]) -> Position:
        """The distribution of the token that follows ``context``."""
        poly = 0
        for t in context[-WINDOW:]:
            poly = (poly * _BASE + t + 1) & _MASK
        return self._at(self._state(poly))

    def _at(self, h: int) -> Position:
        words = self._words
        top = words[_mix(h ^ 1) % len(words)]
        runner = words[_mix(h ^ 2) % len(words)]
        if runner == top:
            runner = words[(words.index(top) + 1) % len(words)]
        p_top = 0.5 + 0.45 * _unit(_mix(h ^ 3))
        p_run = (1.0 - p_top) * (0.3 + 0.5 * _unit(_mix(h ^ 4)))
        p_tail = (1.0 - p_top - p_run) / (self.vocab_size - 2)
        perturbed = (
            self.perturb_fraction > 0.0
            and _unit(_mix(h ^ self._perturb_mix)) < self.perturb_fraction
        )
        if perturbed:
            # A numerics change: the two likeliest swap, and some mass moves to the tail.
            top, runner = runner, top
            p_top, p_run = 0.95 * p_top, 0.95 * p_run
            p_tail = (1.0 - p_top - p_run) / (self.vocab_size - 2)
        return Position(top, math.log(p_top), runner, math.log(p_run), math.log(p_tail), perturbed)

    def logprob(self, pos: Position, token: int) -> float:
        """log P(token) at a position."""
        if token == pos.top:
            return pos.top_logprob
        if token == pos.runner_up:
            return pos.runner_up_logprob
        return pos.tail_logprob

    def rank(self, pos: Position, token: int) -> int:
        """1-based rank of ``token`` (tail tokens share rank 3)."""
        return 1 if token == pos.top else 2 if token == pos.runner_up else 3

    def top_k(self, pos: Position, k: int) -> list[tuple[int, float]]:
        """The ``k`` most likely (token, logprob) pairs; past the runner-up, lowest ids first."""
        out = [(pos.top, pos.top_logprob), (pos.runner_up, pos.runner_up_logprob)][:k]
        t = 0
        while len(out) < k and t < self.vocab_size:
            if t not in (pos.top, pos.runner_up):
                out.append((t, pos.tail_logprob))
            t += 1
        return out

    def text(self, token: int) -> str:
        """The decoded text of one token."""
        return self._texts[token]

    def generate(self, context: Sequence[int], n: int) -> list[int]:
        """``n`` greedy tokens after ``context``."""
        ctx = list(context[-WINDOW:])
        out: list[int] = []
        for _ in range(n):
            tok = self.predict(ctx).top
            out.append(tok)
            ctx = [*ctx, tok][-WINDOW:]
        return out

    def teacher_forced(self, ids: Sequence[int]) -> list[Position | None]:
        """The prediction at every position of ``ids`` (``None`` for the first: no context).

        The window's hash is rolled along (one multiply per token), so this is linear in the
        text, and equal position by position to :meth:`predict` on each prefix.
        """
        out: list[Position | None] = [None] if ids else []
        poly = 0
        for i in range(1, len(ids)):
            if i > WINDOW:
                poly = (poly - (ids[i - 1 - WINDOW] + 1) * _BASE_TOP) & _MASK
            poly = (poly * _BASE + ids[i - 1] + 1) & _MASK
            out.append(self._at(self._state(poly)))
        return out
