"""The simulated engine's tokenization: prompt token counts, prefix-cache block hashes and
SGLang's dynamic batch tokenizer, all with the bundled tokenizer
(:mod:`tierctl.bundled_tokenizer`, shared with the load client's prompt sizing).

Its cost is the point: encoding a 1.4 MB prompt takes real CPU time, as the production
tokenizer does, so tokenizing on the event loop stalls ``/health`` exactly like the field
report describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from array import array
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from tierctl.bundled_tokenizer import load_tokenizer
from tierctl.traces import BLOCK_TOKENS

Encoded = tuple[int, tuple[int, ...]]

__all__ = [
    "DynamicBatchTokenizer",
    "Encoded",
    "block_hashes",
    "encode_prompt",
    "load_tokenizer",
    "max_token_bytes",
    "min_tokens",
]


def block_hashes(ids: Sequence[int]) -> tuple[int, ...]:
    """Chained hashes of the prompt's whole ``BLOCK_TOKENS`` blocks (the prefix-cache keys)."""
    out: list[int] = []
    prev = 0
    for start in range(0, len(ids) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        prev = hash((prev, tuple(ids[start : start + BLOCK_TOKENS])))
        out.append(prev)
    return tuple(out)


#: Prompts longer than this many characters are encoded piece by piece: one ``Encoding`` of
#: the whole text costs ~140 bytes per character (offsets, tokens, masks), so a 100 MB prompt
#: took 16 GB; pieces keep that to one piece's worth plus 8 bytes per token id.
PIECE_CHARS = 1 << 20


_CUT_AT = frozenset(" \t\n\r\f\v")


def _cut(text: str, lo: int, hi: int, start: int = 0) -> int:
    """A split point in ``text`` that the byte-level pre-tokenizer also splits at: the start
    of a whitespace run (an ASCII whitespace character after a non-whitespace one). No
    pre-token runs from a non-space character into the whitespace after it, and the run's
    own pre-tokens (``\\s+(?!\\S)``, `` ?word``) are the same whether the text starts there or
    not; BPE merges never cross pre-tokens, so piecewise encoding gives the same ids. The
    rightmost one in ``(lo, hi]`` is taken, else the rightmost after ``start``; without any (a
    whitespace-free run of a whole piece), ``hi``: only such a pathological prompt may count a
    token differently.
    """
    for a, b in ((lo, hi), (start, lo)):
        for i in range(min(b, len(text) - 1), a, -1):
            if text[i] in _CUT_AT and not text[i - 1].isspace():
                return i
    return hi


def _pieces(text: str) -> Iterator[str]:
    start = 0
    while len(text) - start > PIECE_CHARS:
        cut = _cut(text, start + PIECE_CHARS // 2, start + PIECE_CHARS, start)
        yield text[start:cut]
        start = cut
    yield text[start:]


def _encode_ids(text: str) -> Sequence[int]:
    tok = load_tokenizer()
    if len(text) <= PIECE_CHARS:
        ids: list[int] = tok.encode(text, add_special_tokens=False).ids
        return ids
    out = array("l")  # 8 bytes a token, not a Python int object each
    for piece in _pieces(text):
        # encode_batch, unlike encode, releases the GIL while it works: on the dynamic batch
        # tokenizer's thread the event loop keeps answering (/health) meanwhile.
        (enc,) = tok.encode_batch([piece], add_special_tokens=False)
        out.extend(enc.ids)
    return out


@functools.cache
def max_token_bytes() -> int | None:
    """The most UTF-8 bytes one token of the tokenizer covers, or None when no such bound
    can be proved from its definition.

    With a byte-level BPE and no normalizer, every token is a string of the vocabulary (each
    of its characters stands for one byte) or an added token, and the encoding is a sequence
    of tokens whose bytes, joined, are the text's: so a text of B bytes has at least
    ``ceil(B / max_token_bytes())`` tokens. A normalizer (which may shrink a text) or another
    model type voids the argument.
    """
    tok = load_tokenizer()
    doc = json.loads(tok.to_str())
    pre = doc.get("pre_tokenizer") or {}
    if doc.get("normalizer") is not None or doc["model"].get("type") != "BPE":
        return None
    if pre.get("type") != "ByteLevel":
        return None
    longest = max((len(t) for t in doc["model"]["vocab"]), default=0)
    added = [len(a["content"].encode()) for a in doc.get("added_tokens") or []]
    return max([longest, *added]) or None


def min_tokens(text: str) -> int:
    """A lower bound on ``text``'s token count, at the cost of counting its UTF-8 bytes (0
    when :func:`max_token_bytes` proves none)."""
    per = max_token_bytes()
    if per is None:
        return 0
    return -(-len(text.encode("utf-8", "surrogatepass")) // per)


def encode_prompt(text: str) -> tuple[int, tuple[int, ...]]:
    """Tokenize ``text`` on the calling thread: its token count and block hashes (memory
    bounded by :data:`PIECE_CHARS` per piece for long prompts, same ids)."""
    ids = _encode_ids(text)
    return len(ids), block_hashes(ids)


class DynamicBatchTokenizer:
    """SGLang's ``--enable-dynamic-batch-tokenizer``: an asyncio queue of single prompts,
    drained in batches of up to ``batch_size`` (waiting up to ``batch_timeout_s`` for more
    once one is pending) and encoded on ONE worker thread (``tokenizers`` releases the GIL).
    """

    def __init__(self, batch_size: int = 32, batch_timeout_s: float = 0.002) -> None:
        self.batch_size = batch_size
        self.batch_timeout_s = batch_timeout_s
        self._queue: asyncio.Queue[tuple[str, asyncio.Future[Encoded]]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dyntok")
        self.batches = 0

    async def encode(self, text: str) -> Encoded:
        """Queue ``text`` for the worker and await its token count and block hashes."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.create_task(self._loop())
        fut: asyncio.Future[Encoded] = asyncio.get_running_loop().create_future()
        await self._queue.put((text, fut))
        return await fut

    async def _loop(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            first = await queue.get()
            batch = [first]
            if not queue.empty():
                deadline = loop.time() + self.batch_timeout_s
                while len(batch) < self.batch_size:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        batch.append(await asyncio.wait_for(queue.get(), remaining))
                    except TimeoutError:
                        break
            texts = [t for t, _ in batch]
            self.batches += 1
            try:
                counts = await loop.run_in_executor(self._executor, _encode_batch, texts)
            except Exception as exc:  # a tokenizer failure fails those requests, not the loop
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, fut), n in zip(batch, counts, strict=True):
                if not fut.done():
                    fut.set_result(n)

    async def close(self) -> None:
        """Stop the batching task and the worker thread."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._executor.shutdown(wait=False, cancel_futures=True)


def _encode_batch(texts: list[str]) -> list[Encoded]:
    if any(len(t) > PIECE_CHARS for t in texts):  # one huge prompt: bounded, piece by piece
        return [encode_prompt(t) for t in texts]
    encs = load_tokenizer().encode_batch(texts, add_special_tokens=False)
    return [(len(e.ids), block_hashes(e.ids)) for e in encs]
