"""Prompts synthesised to a requested token count.

With a tokenizer (a Hugging Face ``tokenizer.json``, e.g. the target model's) the prompt is
cut from a token sequence and decoded, so its length matches the target's count closely.
Without one, a bundled vocabulary of short common English words is used, one word per token —
what BPE tokenizers give for such words with a leading space, to within a few percent; the
server's ``usage.prompt_tokens`` is recorded either way.

Each prompt starts with a unique tag (the request's index and the seed) so no two requests of
one run share a cached prefix. A paired A/B runs the same plan in every block; each block's
prompts are :func:`scoped` to it (the tag leads with the block and arm), so no block is
served from the prefix cache another block filled, while the k-th request of every block has
the same body and length.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Protocol

from tierctl.errors import InputError, Location
from tierctl.readers import Limits, read_text

_WORDS_TEXT = (
    "the of and to in is was for on that with as by at from his it an were are which this be "
    "or had not but first one their its new after who they two her she been other when there "
    "all into more also time over most only can would about some years may then these such "
    "city made used many year where later three state during him being under both world early "
    "long river part work between people through before known same since war first water school "
    "north south east west small large found well while each name house town film album game "
    "team season family number song group life area village line music began left became "
    "county high until including member third several around public along following late four "
    "called local based against another built second still great open book station church road "
    "major five land general near island without city power field light night air stone garden "
    "story market bridge summer winter paper table window letter engine signal measure report"
)
_WORDS = tuple(_WORDS_TEXT.split())


def text_of_size(n_bytes: int, seed: int) -> str:
    """About ``n_bytes`` of English-like text from the bundled words (multi-MB prompt tests)."""
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < n_bytes:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:n_bytes]


class PromptSource(Protocol):
    """Makes the prompt text for one request."""

    name: str

    def prompt(self, tokens: int, salt: int, scope: str = "") -> str:
        """A prompt of about ``tokens`` tokens, unique per ``salt`` (and per ``scope``, which
        leads it)."""


class ScopedPrompts:
    """A source whose every prompt leads with ``scope`` (one A/B block's own leading tokens)."""

    def __init__(self, source: PromptSource, scope: str) -> None:
        self._source = source
        self.scope = scope
        self.name = source.name

    def prompt(self, tokens: int, salt: int, scope: str = "") -> str:
        """The source's prompt, under this scope (then ``scope``)."""
        return self._source.prompt(tokens, salt, self.scope + scope)


def scoped(source: PromptSource, scope: str) -> PromptSource:
    """``source`` with ``scope`` leading every prompt: its first tokens differ from every other
    scope's, so an engine's prefix cache (vLLM's hashes blocks from the first token on, SGLang's
    radix tree from the root) shares nothing between scopes."""
    return ScopedPrompts(source, scope)


class WordPrompts:
    """Prompts from the bundled word list; one word ~ one token."""

    name = "bundled-words"

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._seed = seed
        self._base: list[str] = []

    def _ensure(self, n: int) -> None:
        if len(self._base) < n:
            extra = n - len(self._base) + 4096
            self._base.extend(self._rng.choices(_WORDS, k=extra))

    def prompt(self, tokens: int, salt: int, scope: str = "") -> str:
        """Tag plus ``tokens - 4`` words (fewer by the scope's) at a salt-dependent offset."""
        tag = f"{scope}Request {salt} seed {self._seed}:"
        body = max(0, tokens - 4 - len(scope.split()))
        self._ensure(body + 1024)
        start = (salt * 7919) % 1024
        return tag + " " + " ".join(self._base[start : start + body])


class TokenizerPrompts:
    """Prompts cut from a tokenizer's own token sequence and decoded."""

    def __init__(self, tokenizer: Any, *, name: str = "tokenizer", seed: int = 0) -> None:
        self._tok = tokenizer
        self.name = name
        self._seed = seed
        self._words = WordPrompts(seed)
        self._ids: list[int] = []

    @classmethod
    def from_file(cls, path: str | Path, *, seed: int = 0) -> TokenizerPrompts:
        """Load a Hugging Face ``tokenizer.json``.

        Raises:
            InputError: the file is missing or not a tokenizer.
        """
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - the bench extra ships it
            raise InputError(
                "the `tokenizers` package is needed to load a tokenizer.json",
                fix="in the tierctl checkout: pip install -e '.[bench]'",
            ) from exc
        # Read through the bounded reader, not Tokenizer.from_file: that reads whatever the path
        # is (a FIFO, /dev/zero) to the end, gigabytes before any error (fuzz seed 90210817
        # input 12715: `--tokenizer /dev/full` took 4.2 GB).
        text = read_text(path, what="tokenizer", limits=Limits.tokenizer())
        try:
            tok = Tokenizer.from_str(text)
        except Exception as exc:
            raise InputError(
                f"cannot load tokenizer: {exc}",
                location=Location(file=str(path)),
                fix="pass a Hugging Face tokenizer.json",
            ) from exc
        return cls(tok, name=f"tokenizer:{Path(path).name}", seed=seed)

    def _ensure(self, n: int) -> None:
        if len(self._ids) < n:
            text = self._words.prompt(int(n * 1.2) + 2048, salt=-1)
            self._ids = list(self._tok.encode(text, add_special_tokens=False).ids)

    def prompt(self, tokens: int, salt: int, scope: str = "") -> str:
        """Tag plus ``tokens`` minus the tag's length, decoded from the token sequence."""
        tag = f"{scope}Request {salt} seed {self._seed}:"
        tag_len = len(self._tok.encode(tag, add_special_tokens=False).ids)
        body = max(0, tokens - tag_len)
        self._ensure(body + 1024)
        start = (salt * 7919) % 1024
        text: str = self._tok.decode(self._ids[start : start + body])
        return tag + " " + text.lstrip()


def make_prompt_source(tokenizer_path: str | None, seed: int) -> PromptSource:
    """A tokenizer-based source when a ``tokenizer.json`` is given, else bundled words.

    ``"sim"`` selects :mod:`tierctl.bundled_tokenizer`, the one ``tierctl sim serve`` counts
    with (exact counts there).
    """
    if tokenizer_path == "sim":
        try:
            from tierctl.bundled_tokenizer import load_tokenizer

            tok = load_tokenizer()
        except ImportError as exc:
            raise InputError(
                "the bundled (simulator's) tokenizer needs the `tokenizers` package",
                fix="in the tierctl checkout: pip install -e '.[bench]', or pass a tokenizer.json path",
            ) from exc
        return TokenizerPrompts(tok, name="tokenizer:sim", seed=seed)
    if tokenizer_path:
        return TokenizerPrompts.from_file(tokenizer_path, seed=seed)
    return WordPrompts(seed)
