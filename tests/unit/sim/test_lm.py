"""The simulated language model: deterministic, self-consistent, perturbable."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.bench.prompts import text_of_size
from tierctl.sim.lm import WINDOW, SimLM, model_seed
from tierctl.sim.tokenizer import load_tokenizer


def _ids(text: str) -> list[int]:
    return list(load_tokenizer().encode(text, add_special_tokens=False).ids)


PROMPT = _ids("The scheduler decodes a token while prefill chunks wait in the queue.")


def test_same_seed_same_tokens_other_seed_other_tokens() -> None:
    a, b, c = SimLM(7), SimLM(7), SimLM(8)
    assert a.generate(PROMPT, 40) == b.generate(PROMPT, 40)
    assert a.generate(PROMPT, 40) != c.generate(PROMPT, 40)


def test_model_seed_follows_the_model_path() -> None:
    assert model_seed("/models/tiny") == model_seed("/models/tiny")
    assert model_seed("/models/tiny") != model_seed("/models/other")


def test_generation_is_the_teacher_forced_argmax() -> None:
    lm = SimLM(3)
    gen = lm.generate(PROMPT, 30)
    positions = lm.teacher_forced([*PROMPT, *gen])
    for j, tok in enumerate(gen):
        pos = positions[len(PROMPT) + j]
        assert pos is not None
        assert pos.top == tok
        assert lm.rank(pos, tok) == 1


def test_distribution_sums_to_one_and_top_is_likeliest() -> None:
    lm = SimLM(5)
    for pos in lm.teacher_forced(PROMPT)[1:]:
        assert pos is not None
        total = (
            math.exp(pos.top_logprob)
            + math.exp(pos.runner_up_logprob)
            + (lm.vocab_size - 2) * math.exp(pos.tail_logprob)
        )
        assert total == pytest.approx(1.0, abs=1e-9)
        assert pos.top_logprob > pos.runner_up_logprob > pos.tail_logprob
        assert pos.top != pos.runner_up


def test_prediction_depends_only_on_the_window() -> None:
    lm = SimLM(11)
    tail = PROMPT[-WINDOW:]
    assert lm.predict([1, 2, 3, *tail]) == lm.predict(tail)


def test_perturbation_swaps_top_two_at_about_the_fraction() -> None:
    base, pert = SimLM(2), SimLM(2, perturb_fraction=0.25)
    ids = _ids(text_of_size(12_000, seed=4))
    flipped: dict[tuple[int, ...], bool] = {}  # per distinct context window
    for i, (p, q) in enumerate(
        zip(base.teacher_forced(ids)[1:], pert.teacher_forced(ids)[1:], strict=True), start=1
    ):
        assert p is not None
        assert q is not None
        if q.perturbed:
            assert (q.top, q.runner_up) == (p.runner_up, p.top)
        else:
            assert q == p
        flipped[tuple(ids[max(0, i - WINDOW) : i])] = q.perturbed
    n = len(flipped)
    flips = sum(flipped.values())
    # a binomial(n, 0.25) count: 5 standard deviations either side
    sd = math.sqrt(n * 0.25 * 0.75)
    assert abs(flips - 0.25 * n) < 5 * sd


def test_fraction_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="perturb_fraction"):
        SimLM(1, perturb_fraction=1.5)


@given(st.lists(st.integers(0, 4095), min_size=1, max_size=3 * WINDOW + 5))
def test_rolled_teacher_forcing_equals_predicting_each_prefix(ids: list[int]) -> None:
    lm = SimLM(9, perturb_fraction=0.3)
    positions = lm.teacher_forced(ids)
    assert len(positions) == len(ids)
    assert positions[0] is None
    for i in range(1, len(ids)):
        assert positions[i] == lm.predict(ids[:i])
