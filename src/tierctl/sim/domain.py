"""The step shapes a cost model was fitted on, and those a simulation asks it about.

A fitted cost model is only known where its fit's steps were: a model fitted on steps of at
most 512 tokens says little about a 2,048-token step (on the real vLLM CPU engine it
under-estimated 1,800-3,600-token steps by ~26 %). ``sim fit`` records its domain (the largest
step, the deepest chunk, the largest decode batch and context), every simulation records the
same four figures for what it ran, and ``sim compare`` names each one that goes past what the
fit saw: "steps of 2,048 tokens; the fit saw <= 512".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

# How far past the fit's largest shape a prediction may go before it is called an
# extrapolation: a quarter beyond (the fits' own residuals are ~10-20 %).
_SLACK = 1.25

_WORDING = {
    "step_tokens": ("steps of {v:,} prompt tokens", "the fit saw <= {f:,}"),
    "position": ("chunks {v:,} tokens deep into a prompt", "the fit saw <= {f:,}"),
    "batch": ("{v:,} requests decoding in one step", "the fit saw <= {f:,}"),
    "context": ("{v:,} context tokens in one decode step", "the fit saw <= {f:,}"),
}


@dataclass(frozen=True)
class StepDomain:
    """The largest step shapes seen: prefill tokens in one step, the deepest position a chunk
    started at, the most requests decoding together and their context tokens in all."""

    step_tokens: int = 0
    position: int = 0
    batch: int = 0
    context: int = 0

    def widened(self, step_tokens: int, position: int, batch: int, context: int) -> StepDomain:
        """This domain grown to hold one more step's shape."""
        return StepDomain(
            max(self.step_tokens, step_tokens),
            max(self.position, position),
            max(self.batch, batch),
            max(self.context, context),
        )

    def union(self, other: StepDomain) -> StepDomain:
        """The domain holding both."""
        return self.widened(other.step_tokens, other.position, other.batch, other.context)

    def beyond(self, fit: StepDomain) -> list[str]:
        """Each shape of this domain past ``fit``'s (by more than a quarter), worded for an
        operator: "steps of 2,048 prompt tokens; the fit saw <= 512"."""
        out = []
        for key, (what, saw) in _WORDING.items():
            v, f = getattr(self, key), getattr(fit, key)
            if v > 0 and v > _SLACK * f:
                out.append(f"{what.format(v=v)}; {saw.format(f=f)}")
        return out

    def to_json(self) -> dict[str, int]:
        """A JSON-ready dict (the cost model file's ``provenance.domain``)."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any] | None) -> StepDomain | None:
        """The domain a cost model file recorded; None when it recorded none (or a bad one)."""
        if not isinstance(doc, Mapping):
            return None
        try:
            return cls(**{k: int(doc.get(k, 0)) for k in _WORDING})
        except (TypeError, ValueError):
            return None


def domain_of(
    steps: Iterable[tuple[tuple[tuple[int, int], ...], int, int]],
) -> StepDomain:
    """The domain of steps given as ``(chunks, decoders, decode context tokens)``, chunks
    being ``(new tokens, tokens already computed)`` pairs."""
    dom = StepDomain()
    for chunks, decoders, context in steps:
        tokens = sum(c for c, _ in chunks)
        deepest = max((p for _, p in chunks), default=0)
        dom = dom.widened(tokens, deepest, decoders, context)
    return dom
