"""The tokenizer tierctl ships: a real Hugging Face ``tokenizers`` byte-level BPE.

``bundled_tokenizer.json`` (a 4K-vocabulary BPE trained on the docstrings of Python's standard
library by :func:`build_tokenizer`) travels in the package, so nothing is downloaded. The
simulated engine counts prompt tokens with it (:mod:`tierctl.sim.tokenizer`) and the load
client can size prompts with it (:mod:`tierctl.bench.prompts`), so a load test against
``tierctl sim serve`` sends exact-size prompts. It lives outside both packages because the
load client must not depend on the simulator. Needs the ``tokenizers`` package (the ``sim``
and ``bench`` extras).
"""

from __future__ import annotations

import contextlib
import functools
from importlib import resources
from pathlib import Path
from typing import Any

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

    text = resources.files("tierctl").joinpath("bundled_tokenizer.json").read_text(encoding="utf-8")
    return Tokenizer.from_str(text)


def build_tokenizer(out_path: str | Path, *, vocab_size: int = VOCAB_SIZE) -> None:
    """Train the bundled tokenizer again from the standard library's docstrings.

    Run by maintainers only (``python -c "from tierctl.bundled_tokenizer import build_tokenizer;
    build_tokenizer('src/tierctl/bundled_tokenizer.json')"``); the result is committed.
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


__all__ = ["VOCAB_SIZE", "build_tokenizer", "load_tokenizer"]
