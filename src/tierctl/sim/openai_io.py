"""Parsing OpenAI-style request bodies and shaping responses and errors.

Everything a client can get wrong is reported as an :class:`ApiError` (HTTP 400 with an
OpenAI-style ``{"error": {...}}`` body), never as a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# SGLang's default max_new_tokens when a request gives none.
DEFAULT_MAX_TOKENS = 128


class ApiError(Exception):
    """A request the server refuses; carries the HTTP status and OpenAI error fields."""

    def __init__(
        self, message: str, *, status: int = 400, param: str | None = None, kind: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.kind = kind or ("invalid_request_error" if status == 400 else "server_error")

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.status,
            }
        }


@dataclass(frozen=True)
class GenRequest:
    """A parsed generation request: either prompt text to tokenize, or token ids."""

    chat: bool
    text: str | None
    token_ids: tuple[int, ...] | None
    max_tokens: int
    stream: bool
    include_usage: bool
    model: str | None


def parse(body: object, *, chat: bool) -> GenRequest:
    """Validate a decoded JSON body of ``/v1/chat/completions`` or ``/v1/completions``."""
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError("'model' must be a string", param="model")
    max_tokens: Any = body.get("max_completion_tokens", body.get("max_tokens", DEFAULT_MAX_TOKENS))
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ApiError("'max_tokens' must be a positive integer", param="max_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError("'stream' must be a boolean", param="stream")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise ApiError("'stream_options' must be an object", param="stream_options")
    n = body.get("n", 1)
    if n != 1:
        raise ApiError("only n=1 is supported", param="n")
    text: str | None = None
    ids: tuple[int, ...] | None = None
    if chat:
        text = _chat_text(body.get("messages"))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            text = prompt
        elif (
            isinstance(prompt, list)
            and prompt
            and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
        ):
            ids = tuple(prompt)
        else:
            raise ApiError(
                "'prompt' must be a string, a one-string list or a list of token ids",
                param="prompt",
            )
    return GenRequest(
        chat=chat,
        text=text,
        token_ids=ids,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=bool(opts.get("include_usage", False)),
        model=model,
    )


def _chat_text(messages: object) -> str:
    if not isinstance(messages, list) or not messages:
        raise ApiError("'messages' must be a non-empty list", param="messages")
    parts: list[str] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(f"messages[{i}] must be an object with a 'role'", param="messages")
        content = m.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            texts = [
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            ]
            if len(texts) != len(content) or not all(isinstance(t, str) for t in texts):
                raise ApiError(f"messages[{i}].content parts must be text parts", param="messages")
            text = "".join(texts)
        elif content is None:
            text = ""
        else:
            raise ApiError(f"messages[{i}].content must be a string or parts", param="messages")
        # A plain chat template: role header, content, turn end.
        parts.append(f"<|{m['role']}|>\n{text}<|end|>\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


_WORDS = (
    "the", "scheduler", "decodes", "a", "token", "while", "prefill", "chunks", "wait", "in",
    "queue", "and", "cache", "hits", "serve", "long", "prompts", "from", "memory", "quickly",
)  # fmt: skip


def token_text(rid_seed: int, index: int) -> str:
    """The text of a generated token: a word picked deterministically per request and index."""
    return " " + _WORDS[(rid_seed * 7 + index * 13) % len(_WORDS)]
