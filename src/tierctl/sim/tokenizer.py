"""The simulated engine's tokenizer: a real Hugging Face ``tokenizers`` byte-level BPE.

The package ships ``tokenizer.json`` (a 4K-vocabulary BPE trained on the docstrings of
Python's standard library by :func:`build_tokenizer`), so nothing is downloaded. Its cost is
the point: encoding a 1.4 MB prompt takes real CPU time, as the production tokenizer does, so
tokenizing on the event loop stalls ``/health`` exactly like the field report describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

from tierctl.traces import BLOCK_TOKENS

Encoded = tuple[int, tuple[int, ...]]

VOCAB_SIZE = 4096

# Side-effect-free standard library modules whose docstrings make the training corpus.
_CORPUS_MODULES = (
    "argparse",
    "asyncio",
    "collections",
    "concurrent.futures",
    "contextlib",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "email",
    "enum",
    "fractions",
    "functools",
    "glob",
    "gzip",
    "heapq",
    "http.client",
    "http.server",
    "inspect",
    "io",
    "itertools",
    "json",
    "logging",
    "math",
    "os",
    "pathlib",
    "pickle",
    "random",
    "re",
    "shutil",
    "socket",
    "sqlite3",
    "statistics",
    "string",
    "subprocess",
    "tarfile",
    "textwrap",
    "threading",
    "typing",
    "unittest",
    "urllib.parse",
    "uuid",
    "zipfile",
)


@functools.cache
def load_tokenizer() -> Any:
    """The bundled tokenizer (loaded once per process)."""
    from tokenizers import Tokenizer

    text = resources.files("tierctl.sim").joinpath("tokenizer.json").read_text(encoding="utf-8")
    return Tokenizer.from_str(text)


def build_tokenizer(out_path: str | Path, *, vocab_size: int = VOCAB_SIZE) -> None:
    """Train the bundled tokenizer again from the standard library's docstrings.

    Run by maintainers only (``python -c "from tierctl.sim.tokenizer import build_tokenizer;
    build_tokenizer('src/tierctl/sim/tokenizer.json')"``); the result is committed.
    """
    import importlib

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts: list[str] = []
    for mod in _CORPUS_MODULES:
        with contextlib.suppress(ImportError):
            module = importlib.import_module(mod)
            for obj in [module, *vars(module).values()]:
                doc = getattr(obj, "__doc__", None)
                if isinstance(doc, str) and len(doc) > 40:
                    texts.append(doc)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    Path(out_path).write_text(tok.to_str(), encoding="utf-8")


def block_hashes(ids: Sequence[int]) -> tuple[int, ...]:
    """Chained hashes of the prompt's whole ``BLOCK_TOKENS`` blocks (the prefix-cache keys)."""
    out: list[int] = []
    prev = 0
    for start in range(0, len(ids) - BLOCK_TOKENS + 1, BLOCK_TOKENS):
        prev = hash((prev, tuple(ids[start : start + BLOCK_TOKENS])))
        out.append(prev)
    return tuple(out)


def encode_prompt(text: str) -> tuple[int, tuple[int, ...]]:
    """Tokenize ``text`` on the calling thread: its token count and block hashes."""
    ids = load_tokenizer().encode(text, add_special_tokens=False).ids
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
    encs = load_tokenizer().encode_batch(texts, add_special_tokens=False)
    return [(len(e.ids), block_hashes(e.ids)) for e in encs]
