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
    #: Top-k logprobs per generated token (0 = the chosen token's only); ``None``: not asked.
    output_logprobs: int | None = None
    #: Top-k logprobs per prompt token (vLLM ``prompt_logprobs``, SGLang ``logprob_start_len``,
    #: OpenAI ``echo`` with ``logprobs``); ``None``: not asked.
    prompt_logprobs: int | None = None
    #: Completions ``echo``: the prompt is returned in front of the generated text.
    echo: bool = False
    #: SGLang ``logprob_start_len``: the first prompt position whose logprob is returned.
    logprob_start: int = 0


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
    output_lp, prompt_lp, echo = _logprob_options(body, chat=chat)
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
        output_logprobs=output_lp,
        prompt_logprobs=prompt_lp,
        echo=echo,
    )


def _count(body: dict[str, Any], key: str, limit: int = 20) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= limit:
        raise ApiError(f"'{key}' must be an integer from 0 to {limit}", param=key)
    return v


def _logprob_options(body: dict[str, Any], *, chat: bool) -> tuple[int | None, int | None, bool]:
    """(output top-k, prompt top-k, echo) from the OpenAI and vLLM logprob fields."""
    prompt_lp = _count(body, "prompt_logprobs")  # vLLM's extra sampling parameter
    if chat:
        wanted = body.get("logprobs", False)
        if not isinstance(wanted, bool):
            raise ApiError("'logprobs' must be a boolean", param="logprobs")
        top = _count(body, "top_logprobs")
        return ((top or 0) if wanted else None), prompt_lp, False
    echo = body.get("echo", False)
    if not isinstance(echo, bool):
        raise ApiError("'echo' must be a boolean", param="echo")
    output_lp = _count(body, "logprobs", 5)
    if echo and output_lp is not None and prompt_lp is None:
        prompt_lp = output_lp  # OpenAI: echo + logprobs scores the prompt tokens too
    return output_lp, prompt_lp, echo


def parse_generate(body: object) -> GenRequest:
    """Validate a body of SGLang's native ``POST /generate`` (one prompt; streamed as SGLang
    streams it, each event carrying the text so far, when ``stream`` is true)."""
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise ApiError("'sampling_params' must be an object", param="sampling_params")
    max_tokens: Any = params.get("max_new_tokens", DEFAULT_MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ApiError("'max_new_tokens' must be a positive integer", param="max_new_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError("'stream' must be a boolean", param="stream")
    if stream and body.get("return_logprob", False):
        raise ApiError("the simulator streams /generate without logprobs", param="return_logprob")
    text, ids = body.get("text"), body.get("input_ids")
    if isinstance(text, str) and ids is None:
        token_ids = None
    elif (
        text is None
        and isinstance(ids, list)
        and ids
        and all(isinstance(t, int) and not isinstance(t, bool) for t in ids)
    ):
        token_ids = tuple(ids)
    else:
        raise ApiError("give 'text' (a string) or 'input_ids' (a list of ints)", param="text")
    output_lp = prompt_lp = None
    start = 0
    if body.get("return_logprob", False):
        top = _count(body, "top_logprobs_num") or 0
        output_lp = top
        start = body.get("logprob_start_len", -1)
        if isinstance(start, bool) or not isinstance(start, int):
            raise ApiError("'logprob_start_len' must be an integer", param="logprob_start_len")
        if start >= 0:
            prompt_lp = top
        start = max(start, 0)
    return GenRequest(
        chat=False,
        text=text if token_ids is None else None,
        token_ids=token_ids,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=False,
        model=None,
        output_logprobs=output_lp,
        prompt_logprobs=prompt_lp,
        logprob_start=start,
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
