"""Inference servers tierctl has no profile for, recognised so that ``import`` can say which
one a file runs instead of "no engine found".

Only names are known here (image repositories, the programs that start them): nothing of
their flags, endpoints or metrics. An image matches by its repository's last name or its
whole name under any registry; a command by its program's name anywhere in the argv or in a
shell script the argv runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ForeignEngine:
    """An inference server without a tierctl profile."""

    title: str
    images: tuple[str, ...]
    programs: tuple[str, ...]


FOREIGN_ENGINES: tuple[ForeignEngine, ...] = (
    ForeignEngine(
        "Hugging Face Text Generation Inference (TGI)",
        ("huggingface/text-generation-inference", "text-generation-inference", "tgi-gaudi"),
        ("text-generation-launcher",),
    ),
    ForeignEngine(
        "NVIDIA TensorRT-LLM",
        ("nvidia/tensorrt-llm", "tensorrt-llm", "tensorrt-llm/release", "tensorrt_llm"),
        ("trtllm-serve", "trtllm-build", "trtllm-llmapi-launch"),
    ),
    ForeignEngine(
        "NVIDIA Triton Inference Server",
        ("nvidia/tritonserver", "tritonserver"),
        ("tritonserver",),
    ),
    ForeignEngine(
        "llama.cpp (llama-server)",
        ("ggerganov/llama.cpp", "ggml-org/llama.cpp", "llama.cpp", "llama-cpp-python"),
        ("llama-server", "llama.cpp/server", "llama_cpp.server"),
    ),
    ForeignEngine("Ollama", ("ollama/ollama", "ollama"), ("ollama",)),
    ForeignEngine("LocalAI", ("localai/localai", "go-skynet/local-ai", "local-ai"), ("local-ai",)),
)

_WORD = re.compile(r"[^\s;&|()\"'`]+")


def _repository(image: str) -> str:
    """``registry/org/name:tag@digest`` without the tag and digest."""
    repo = image.split("@", 1)[0]
    head, _, last = repo.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def foreign_engine(image: str | None, argv: Iterable[str]) -> ForeignEngine | None:
    """The profile-less inference server a service runs (by image or program), or None."""
    repo = _repository(image or "").lower()
    for engine in FOREIGN_ENGINES:
        if repo and any(repo == k or repo.endswith("/" + k) for k in engine.images):
            return engine
    words = [w for token in argv for w in _WORD.findall(str(token))]
    for engine in FOREIGN_ENGINES:
        for word in words:
            program = word.rsplit("/", 1)[-1]
            if program in engine.programs or any(
                word.endswith("/" + p) or word == p for p in engine.programs
            ):
                return engine
    return None
