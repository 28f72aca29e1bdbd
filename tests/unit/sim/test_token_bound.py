"""The cheap bound the simulated engine refuses huge prompts with holds for every text: the
bundled BPE never encodes a text into fewer than ``ceil(bytes / max_token_bytes())`` tokens."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.tokenizer import encode_prompt, max_token_bytes, min_tokens


def test_the_bundled_tokenizer_has_a_provable_bound() -> None:
    per = max_token_bytes()
    assert per is not None
    assert 1 < per < 64


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=400),
        # Runs of one character: the longest merges the vocabulary has.
        st.builds(
            lambda c, n: c * n,
            st.sampled_from([" ", "\n", "=", "-", "a", "0"]),
            st.integers(1, 2000),
        ),
        st.lists(st.sampled_from(["the", " and", "ing", "tion", "\n\n", "    "]), max_size=300).map(
            "".join
        ),
    )
)
def test_no_text_has_fewer_tokens_than_the_bound(text: str) -> None:
    try:
        count, _ = encode_prompt(text)
    except Exception:  # a lone surrogate: the server refuses it as untokenizable anyway
        return
    assert count >= min_tokens(text)
