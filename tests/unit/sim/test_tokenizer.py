"""The bundled tokenizer and the dynamic batch tokenizer."""

from __future__ import annotations

import asyncio
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

import tierctl.sim.tokenizer as tokenizer_mod
from tierctl.bundled_tokenizer import load_tokenizer
from tierctl.sim.tokenizer import (
    DynamicBatchTokenizer,
    block_hashes,
    encode_prompt,
)


def test_bundled_tokenizer_round_trips_text() -> None:
    tok = load_tokenizer()
    text = "The scheduler decodes 3 tokens, then prefills a chunk. Ünïcode ok?"
    assert tok.decode(tok.encode(text).ids) == text
    assert 5 < len(tok.encode(text).ids) < len(text)


def test_block_hashes_chain_so_equal_prefixes_share_leading_blocks() -> None:
    a = list(range(2000))
    b = [*range(1536), *range(9000, 9464)]
    ha, hb = block_hashes(a), block_hashes(b)
    assert len(ha) == len(hb) == 3  # whole 512-token blocks only
    assert ha[:3] == hb[:3]
    c = [7, *range(1, 2000)]
    assert block_hashes(c)[0] != ha[0]
    assert block_hashes(c)[1] != ha[1]  # a different first block changes every later hash


async def test_dynamic_batch_tokenizer_batches_onto_one_thread() -> None:
    texts = [f"prompt number {i} " * (50 + i) for i in range(12)]
    dyn = DynamicBatchTokenizer(batch_size=8, batch_timeout_s=0.05)
    seen_threads: set[int] = set()
    import tierctl.sim.tokenizer as mod

    real = mod._encode_batch

    def spy(batch: list[str]) -> list[tuple[int, tuple[int, ...]]]:
        seen_threads.add(threading.get_ident())
        return real(batch)

    mod._encode_batch = spy  # type: ignore[assignment]
    try:
        got = await asyncio.gather(*(dyn.encode(t) for t in texts))
    finally:
        mod._encode_batch = real  # type: ignore[assignment]
        await dyn.close()
    assert list(got) == [encode_prompt(t) for t in texts]
    assert len(seen_threads) == 1
    assert threading.get_ident() not in seen_threads
    assert 2 <= dyn.batches < len(texts)  # 12 prompts, batches of at most 8


_WORDS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc")),
    min_size=1,
    max_size=12,
)
_SEPS = st.sampled_from([" ", " ", " ", ", ", ". ", "\n ", " \t "])


@given(words=st.lists(st.tuples(_WORDS, _SEPS), min_size=1, max_size=200))
@settings(max_examples=60, deadline=None)
def test_a_long_prompt_encoded_piece_by_piece_gives_the_same_ids(
    words: list[tuple[str, str]],
) -> None:
    # Pieces of 64 characters stand in for the 1 MiB ones (the cut rule is the same).
    text = "".join(w + sep for w, sep in words)
    whole = load_tokenizer().encode(text, add_special_tokens=False).ids
    original = tokenizer_mod.PIECE_CHARS
    tokenizer_mod.PIECE_CHARS = 64
    try:
        assert list(tokenizer_mod._encode_ids(text)) == whole
        assert encode_prompt(text) == (len(whole), block_hashes(whole))
    finally:
        tokenizer_mod.PIECE_CHARS = original
