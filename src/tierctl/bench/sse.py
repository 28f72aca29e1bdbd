"""Incremental parsing of OpenAI-style server-sent events (``data: {...}`` lines).

The decoder is fed raw byte chunks as they arrive and yields the payload of each ``data:``
line; comments (``:`` lines, keep-alives) and the other SSE fields are skipped. A line that is
not SSE at all raises :class:`MalformedStream`, so a broken server is reported as such rather
than as an empty answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import orjson

DONE = b"[DONE]"
_SSE_FIELDS = (b"event", b"id", b"retry")
#: The longest SSE line accepted: a token chunk is a few hundred bytes; 64 MiB leaves room for
#: a huge final chunk (logprobs of a long completion) and stops a server that never ends one.
MAX_LINE_BYTES = 64 * 1024 * 1024


class MalformedStream(Exception):
    """The response body is not an OpenAI SSE stream."""


class SSEDecoder:
    """Split a byte stream into SSE ``data`` payloads."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buffer = bytearray()
        self._max_line = max_line_bytes

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add bytes; return the payloads of every complete ``data:`` line.

        Linear in the bytes fed: a chunk without a newline is only appended (a long line
        arriving in many chunks is joined once, not once per chunk).

        Raises:
            MalformedStream: a line longer than ``max_line_bytes``.
        """
        if b"\n" not in chunk:
            self._buffer += chunk
            if len(self._buffer) > self._max_line:
                size = len(self._buffer)
                self._buffer.clear()
                raise MalformedStream(
                    f"an SSE line is over {self._max_line:,} bytes ({size:,} so far)"
                )
            return []
        if self._buffer:
            self._buffer += chunk
            data = bytes(self._buffer)
            self._buffer.clear()
        else:
            data = chunk
        lines = data.split(b"\n")
        tail = lines.pop()  # the part after the last newline (usually b"")
        if tail:
            self._buffer += tail
        # No line is longer than the read: only a read over the limit needs the per-line scan.
        if len(data) > self._max_line and any(len(line) > self._max_line for line in lines):
            raise MalformedStream(f"an SSE line is over {self._max_line:,} bytes")
        out: list[bytes] = []
        for line in lines:
            if not line:
                continue  # event separator
            # Fast path: the OpenAI servers write exactly "data: <json>".
            if line.startswith(b"data: "):
                out.append(line[6:].rstrip(b"\r"))
                continue
            payload = _payload(line.rstrip(b"\r"))
            if payload is not None:
                out.append(payload)
        return out

    def feed_summary(self, chunk: bytes) -> ReadSummary:
        """``summarize(self.feed(chunk))``, with a shortcut for the usual read.

        A read that is exactly whole ``data: <payload>\n\n`` events (no carried-over partial
        line, no ``\r``, no other line) is turned into one JSON array by a single byte
        replace, without splitting it into lines and payloads first; any other read, and any
        read whose array does not parse into one value per event, takes the general path.

        Raises:
            MalformedStream: as :meth:`feed` and :func:`summarize`.
        """
        if (
            not self._buffer
            and chunk.startswith(b"data: ")
            and chunk.endswith(b"\n\n")
            and len(chunk) <= self._max_line
            and b"\r" not in chunk
        ):
            events = chunk.count(b"\n\ndata: ") + 1
            # Two newlines per event and no others: every line is "data: ..." or empty.
            if chunk.count(b"\n") == 2 * events:
                inner = chunk[6:-2]
                done = inner == DONE or inner.endswith(b"\n\ndata: [DONE]")
                if done:
                    inner = inner[: -len(DONE) - 8] if events > 1 else b""
                    events -= 1
                if not events:
                    return ReadSummary(done=True)
                try:
                    objs = orjson.loads(b"[" + inner.replace(b"\n\ndata: ", b",") + b"]")
                except orjson.JSONDecodeError:
                    objs = None
                if isinstance(objs, list) and len(objs) == events:
                    payloads: list[bytes] = []

                    def payload_of(i: int) -> bytes:
                        if not payloads:
                            payloads.extend(inner.split(b"\n\ndata: "))
                        return payloads[i]

                    return _tally(objs, done, payload_of)
        return summarize(self.feed(chunk))

    def close(self) -> list[bytes]:
        """End of stream: a final line without a newline still counts."""
        rest = bytes(self._buffer).strip()
        self._buffer.clear()
        if not rest:
            return []
        payload = _payload(rest)
        return [] if payload is None else [payload]


def _payload(line: bytes) -> bytes | None:
    if not line or line.startswith(b":"):
        return None
    name, sep, value = line.partition(b":")
    if not sep:
        raise MalformedStream(f"not an SSE line: {line[:80]!r}")
    if name == b"data":
        return value[1:] if value.startswith(b" ") else value
    if name in _SSE_FIELDS:
        return None
    raise MalformedStream(f"unknown SSE field: {line[:80]!r}")


class StreamEvent(NamedTuple):
    """What one ``data:`` payload of an OpenAI stream carries.

    Attributes:
        text: generated text in this chunk (empty for role/usage-only chunks).
        done: the ``[DONE]`` sentinel.
        prompt_tokens: ``usage.prompt_tokens`` when the chunk carries usage.
        completion_tokens: ``usage.completion_tokens`` when the chunk carries usage.
        error: the message of an in-stream error object.
    """

    text: str = ""
    done: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None


_DONE_EVENT = StreamEvent(done=True)
_EMPTY_EVENT = StreamEvent()


def parse_event(payload: bytes) -> StreamEvent:
    """Interpret one payload of a chat or completions stream.

    Raises:
        MalformedStream: the payload is not JSON or not an object.
    """
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        if payload.strip() == DONE:
            return _DONE_EVENT
        raise MalformedStream(f"data is not JSON: {payload[:80]!r}") from exc
    return _interpret(obj, payload)


def parse_events(payloads: list[bytes]) -> list[StreamEvent]:
    """:func:`parse_event` over the payloads of one socket read, with one JSON parse.

    One ``orjson.loads`` of ``[p1,p2,...]`` costs far less than one call per payload; when the
    batch does not parse cleanly, each payload is parsed alone so the bad one is named.

    Raises:
        MalformedStream: a payload is not JSON or not an object.
    """
    if len(payloads) < 2:
        return [parse_event(p) for p in payloads]
    done = payloads[-1].strip() == DONE
    body = payloads[:-1] if done else payloads
    try:
        objs = orjson.loads(b"[" + b",".join(body) + b"]")
    except orjson.JSONDecodeError:
        objs = None
    if not isinstance(objs, list) or len(objs) != len(body):
        return [parse_event(p) for p in payloads]
    events = [_interpret(obj, p) for obj, p in zip(objs, body, strict=True)]
    if done:
        events.append(_DONE_EVENT)
    return events


class ReadSummary(NamedTuple):
    """The events of one socket read folded into what the client records per read.

    Attributes:
        texts: how many events carried generated text (each is one chunk, one ITL sample).
        done: the ``[DONE]`` sentinel was among them.
        prompt_tokens: the last ``usage.prompt_tokens`` seen.
        completion_tokens: the last ``usage.completion_tokens`` seen.
        error: the first in-stream error message.
    """

    texts: int = 0
    done: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None


_NOTHING = ReadSummary()


def fold(events: list[StreamEvent]) -> ReadSummary:
    """:class:`ReadSummary` of parsed events (the definition :func:`summarize` keeps)."""
    texts, done = 0, False
    prompt: int | None = None
    completion: int | None = None
    error: str | None = None
    for ev in events:
        if ev.text:
            texts += 1
        done = done or ev.done
        if ev.prompt_tokens is not None:
            prompt = ev.prompt_tokens
        if ev.completion_tokens is not None:
            completion = ev.completion_tokens
        if error is None:
            error = ev.error
    return ReadSummary(texts, done, prompt, completion, error)


def summarize(payloads: list[bytes]) -> ReadSummary:
    """``fold(parse_events(payloads))`` without building an event per payload.

    The load client calls this once per socket read: a token chunk of the usual shape (one
    choice, a ``delta`` or a ``text``, no usage, no error) costs a few dict lookups; anything
    else goes through :func:`parse_events`' own interpretation, so both give the same answer
    (property-tested).

    Raises:
        MalformedStream: a payload is not JSON or not an object.
    """
    if not payloads:
        return _NOTHING
    done = payloads[-1].strip() == DONE
    body = payloads[:-1] if done else payloads
    if not body:
        return ReadSummary(done=True)
    try:
        objs = orjson.loads(b"[" + b",".join(body) + b"]")
    except orjson.JSONDecodeError:
        objs = None
    if not isinstance(objs, list) or len(objs) != len(body):
        return fold(parse_events(payloads))
    return _tally(objs, done, body.__getitem__)


def _tally(objs: list[Any], done: bool, payload_of: Callable[[int], bytes]) -> ReadSummary:
    """:class:`ReadSummary` of the parsed objects of one read (``payload_of(i)``: the bytes of
    object ``i``, only fetched for the rare object that is not a plain token chunk)."""
    texts = 0
    slow: list[StreamEvent] = []
    for i, obj in enumerate(objs):
        if type(obj) is dict:
            choices = obj.get("choices")
            if type(choices) is list and len(choices) == 1:
                choice = choices[0]
                if (
                    type(choice) is dict
                    and "usage" not in obj
                    and "error" not in obj
                    and obj.get("object") != "error"
                ):
                    delta = choice.get("delta")
                    if type(delta) is dict:
                        piece = delta.get("content")
                        if (piece and type(piece) is str) or _reasoning_text(delta):
                            texts += 1
                        continue
                    if delta is None:
                        piece = choice.get("text")
                        if piece and type(piece) is str:
                            texts += 1
                        continue
        slow.append(_interpret(obj, payload_of(i)))
    if not slow:
        return ReadSummary(texts, done) if texts or done else _NOTHING
    rest = fold(slow)
    return ReadSummary(
        texts + rest.texts,
        done or rest.done,
        rest.prompt_tokens,
        rest.completion_tokens,
        rest.error,
    )


def _reasoning_text(delta: dict[str, Any]) -> bool:
    for name in _TEXT_FIELDS[1:]:
        piece = delta.get(name)
        if piece and type(piece) is str:
            return True
    return False


#: Delta fields that carry generated text; reasoning models stream their thinking tokens in
#: ``reasoning_content`` (vLLM, SGLang) before any ``content``, and those are output tokens too.
_TEXT_FIELDS = ("content", "reasoning_content", "reasoning")


def _interpret(obj: Any, payload: bytes) -> StreamEvent:
    if not isinstance(obj, dict):
        raise MalformedStream(f"data is not a JSON object: {payload[:80]!r}")
    if "error" in obj or obj.get("object") == "error":
        error = _error_message(obj)
        if error is not None:
            return StreamEvent(error=error)
    text = ""
    choices = obj.get("choices")
    # Fast path: one choice with a delta, the shape of nearly every chat chunk.
    if type(choices) is list and len(choices) == 1 and type(choices[0]) is dict:
        delta = choices[0].get("delta")
        if type(delta) is dict and "usage" not in obj:
            for name in _TEXT_FIELDS:
                piece = delta.get(name)
                if piece and type(piece) is str:
                    text += piece
            return StreamEvent(text=text) if text else _EMPTY_EVENT
    if choices and isinstance(choices, list):
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                for name in _TEXT_FIELDS:
                    piece = delta.get(name)
                    if piece and isinstance(piece, str):
                        text += piece
            else:
                piece = choice.get("text")
                if piece and isinstance(piece, str):
                    text += piece
    usage = obj.get("usage")
    if usage and isinstance(usage, dict):
        return StreamEvent(
            text=text,
            prompt_tokens=_as_int(usage.get("prompt_tokens")),
            completion_tokens=_as_int(usage.get("completion_tokens")),
        )
    return StreamEvent(text=text) if text else _EMPTY_EVENT


def _error_message(obj: dict[str, Any]) -> str | None:
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message", err))
    if isinstance(err, str):
        return err
    if obj.get("object") == "error":
        return str(obj.get("message", "error"))
    return None


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
