"""Prompt synthesis: length, uniqueness per request, identity across arms."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tierctl.bench.prompts import _WORDS, TokenizerPrompts, WordPrompts, make_prompt_source
from tierctl.errors import InputError


def test_word_prompts_have_one_word_per_token_and_are_reproducible():
    a, b = WordPrompts(5), WordPrompts(5)
    p = a.prompt(300, salt=12)
    assert len(p.split()) == 300
    assert p == b.prompt(300, salt=12)
    assert p != a.prompt(300, salt=13)
    assert p.startswith("Request 12 seed 5:")


def _body(prompt: str) -> list[str]:
    """The words after the ``Request N seed S:`` tag."""
    tag, _, body = prompt.partition(": ")
    assert tag.startswith("Request ")
    return body.split()


def _common_prefix(a: list[str], b: list[str]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def test_prompts_of_other_requests_do_not_share_a_prefix():
    w = WordPrompts(0)
    p1, p2 = w.prompt(50, 1), w.prompt(50, 2)
    common = next(i for i, (x, y) in enumerate(zip(p1, p2, strict=False)) if x != y)
    assert common < 12
    # Not only the tag: each request's body is its own (a salt-dependent window), so a cache
    # or a server-side dedupe cannot share anything beyond the first words.
    bodies = [_body(w.prompt(200, salt)) for salt in range(8)]
    for i, a in enumerate(bodies):
        assert len(a) == 196  # 200 tokens minus the 4-word tag
        for b in bodies[i + 1 :]:
            assert _common_prefix(a, b) < 3
            assert a != b


def test_tokenizer_prompt_bodies_differ_per_request():
    tok = _word_level_tokenizer()
    src = TokenizerPrompts(tok, seed=2)
    bodies = [_body(src.prompt(120, salt)) for salt in range(6)]
    for i, a in enumerate(bodies):
        for b in bodies[i + 1 :]:
            assert _common_prefix(a, b) < 3
    assert _body(TokenizerPrompts(tok, seed=2).prompt(120, 3)) == bodies[3]  # same in both arms


def _word_level_tokenizer() -> Tokenizer:
    vocab = {w: i for i, w in enumerate(sorted({*_WORDS, "Request", "seed", ":", "[UNK]"}))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


def test_tokenizer_prompts_hit_the_requested_count():
    tok = _word_level_tokenizer()
    src = TokenizerPrompts(tok, seed=2)
    for n in (20, 100, 1000):
        prompt = src.prompt(n, salt=7)
        assert len(tok.encode(prompt, add_special_tokens=False).ids) == n


def test_tokenizer_file_errors(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(InputError, match="cannot load tokenizer"):
        make_prompt_source(str(bad), 0)
    good = tmp_path / "good.json"
    _word_level_tokenizer().save(str(good))
    assert make_prompt_source(str(good), 0).name == "tokenizer:good.json"
    assert make_prompt_source(None, 0).name == "bundled-words"


def test_scoped_prompts_lead_with_their_scope_and_keep_body_and_length():
    from tierctl.bench.prompts import scoped
    from tierctl.bundled_tokenizer import load_tokenizer

    tok = make_prompt_source("sim", 4)
    count = load_tokenizer()

    def ids(text: str) -> list[int]:
        return list(count.encode(text, add_special_tokens=False).ids)

    blocks = [scoped(tok, f"Run r block 0.{pos} arm {arm}. ") for pos, arm in enumerate("ABBA")]
    for salt in (0, 5):
        prompts = [b.prompt(300, salt) for b in blocks]
        # The k-th request of every block: its own first tokens (no cached prefix shared,
        # vLLM's block hashes chain from the first token)...
        firsts = {tuple(ids(p)[:8]) for p in prompts}
        assert len(firsts) == len(blocks)
        # ...the same body, and the requested length (within the tag's tokenisation).
        assert len({p.split(": ", 1)[1] for p in prompts}) == 1
        assert all(abs(len(ids(p)) - 300) <= 2 for p in prompts)
    words = WordPrompts(4)
    scoped_words = scoped(words, "Run r block 0.1 arm B. ")
    assert len(scoped_words.prompt(200, 3).split()) == 200
    body = scoped_words.prompt(200, 3).split(": ", 1)[1].split()
    assert body == words.prompt(200, 3).split(": ", 1)[1].split()[: len(body)]
