"""The streaming HTTP client: one OpenAI-style request in, one :class:`RequestSample` out.

Plain-http requests go through :mod:`tierctl.bench.http1` (a lean HTTP/1.1 client whose
protocol callback timestamps and parses each read); https endpoints and streamed bodies go
through aiohttp, which costs a fraction of httpx's CPU per streamed request (see
``benchmarks/client_overhead.py``). Bodies are encoded with orjson; prompts above
:data:`STREAM_BODY_BYTES` are streamed to the socket chunk by chunk so that encoding a
100 MB body neither blocks the event loop nor holds a second full copy. Reads use a 1 MiB
buffer so that the client, not the server, is never the bottleneck of a long stream.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import orjson

from tierctl.bench import http1
from tierctl.bench.clientcheck import ReadBacklog
from tierctl.bench.http1 import Http1Pool
from tierctl.bench.samples import RequestSample
from tierctl.bench.sse import MalformedStream, SSEDecoder, summarize
from tierctl.errors import InputError

#: Prompts longer than this (characters) are sent as a streamed body.
STREAM_BODY_BYTES = 1 << 20
#: Size of each streamed body piece and of the response read buffer.
CHUNK_BYTES = 1 << 20
_PROMPT_MARK = "\x00__tierctl_prompt__"
#: The request headers of every streamed request.
HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}

#: A prompt: text, or (completions API only) the token ids themselves, so that its length in
#: tokens is exact whatever the engine's tokenizer.
Prompt = str | Sequence[int]


@dataclass(frozen=True)
class RequestShape:
    """What every request of a run looks like apart from its prompt and max_tokens.

    ``per_chunk_usage``: ``stream_options`` entries that make the engine put its running usage
    on every chunk (an engine profile's
    :attr:`~tierctl.engines.base.EngineProfile.per_chunk_usage`). When set they are sent, and
    output tokens are counted (and timestamped) from each chunk's ``completion_tokens``
    rather than one per text chunk: an engine that merged several tokens into one chunk
    still yields one timestamp per token.
    """

    api: Literal["chat", "completions"]
    model: str
    ignore_eos: bool
    timeout_s: float
    per_chunk_usage: Mapping[str, bool] | None = None


@dataclass
class _Progress:
    """Mutable state of one in-flight request (so an interruption can still be recorded)."""

    sent: float
    first: float | None = None
    last: float | None = None
    gaps: list[float] | None = None
    chunks: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int | None = None
    #: Count tokens from each chunk's usage (the shape asked for per-chunk usage).
    usage_counts: bool = False


def build_body(shape: RequestShape, prompt: Prompt, max_tokens: int) -> dict[str, Any]:
    """The JSON request object (prompt included) for the chat or completions API.

    Raises:
        InputError: a prompt of token ids for the chat API (which takes only text).
    """
    body: dict[str, Any] = {"model": shape.model}
    if shape.api == "chat":
        if not isinstance(prompt, str):
            raise InputError(
                "a prompt given as token ids needs the completions API",
                value=shape.api,
                fix="send it with `api` completions, or give the prompt as text",
                params=("api",),
            )
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else list(prompt)
    body.update(
        max_tokens=max_tokens,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True, **(shape.per_chunk_usage or {})},
    )
    if shape.ignore_eos:
        # SGLang and vLLM accept these sampling extras; OpenAI-strict servers ignore them.
        body["ignore_eos"] = True
        body["min_tokens"] = max_tokens
    return body


def encode_body(shape: RequestShape, prompt: Prompt, max_tokens: int) -> bytes:
    """The whole request body as bytes (small prompts)."""
    return orjson.dumps(build_body(shape, prompt, max_tokens))


async def stream_body(
    shape: RequestShape, prompt: str, max_tokens: int, chunk_chars: int = CHUNK_BYTES
) -> AsyncIterator[bytes]:
    """The request body in pieces: JSON head, the prompt escaped piece by piece, JSON tail."""
    skeleton = orjson.dumps(build_body(shape, _PROMPT_MARK, max_tokens))
    mark = orjson.dumps(_PROMPT_MARK)
    head, _, tail = skeleton.partition(mark)
    yield head + b'"'
    for i in range(0, len(prompt), chunk_chars):
        yield orjson.dumps(prompt[i : i + chunk_chars])[1:-1]
        await asyncio.sleep(0)  # let the loop serve other streams between pieces
    yield b'"' + tail


def lean_pool(url: str, lean_http: bool | None = None) -> Http1Pool | None:
    """The lean HTTP/1.1 pool for the endpoint ``url``, or ``None`` (aiohttp serves it): https
    always goes through aiohttp; ``lean_http`` defaults to on unless
    ``TIERCTL_BENCH_HTTP=aiohttp``. The caller closes the pool."""
    if lean_http is None:
        lean_http = os.environ.get("TIERCTL_BENCH_HTTP", "lean") != "aiohttp"
    return Http1Pool(url, headers=HEADERS) if lean_http and http1.supports(url) else None


def make_session(*, read_bufsize: int = CHUNK_BYTES) -> aiohttp.ClientSession:
    """An aiohttp session with no connection cap (caps are the workload's job)."""
    connector = aiohttp.TCPConnector(limit=0, enable_cleanup_closed=False)
    return aiohttp.ClientSession(
        connector=connector,
        read_bufsize=read_bufsize,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        auto_decompress=False,
    )


async def send_request(
    session: aiohttp.ClientSession,
    url: str,
    shape: RequestShape,
    *,
    index: int,
    lane: str,
    prompt: Prompt,
    planned_input_tokens: int,
    max_tokens: int,
    scheduled_s: float,
    t0: float,
    on_done: Callable[[RequestSample], None],
    clock: Callable[[], float] = time.monotonic,
    backlog: ReadBacklog | None = None,
    pool: Http1Pool | None = None,
    body: bytes | None = None,
) -> None:
    """Send one streaming request and hand exactly one sample to ``on_done``.

    ``on_done`` is called on every path, including cancellation (error class
    ``interrupted``), which is what keeps ``sent = completed + failed + timed_out``. With a
    ``pool`` (an :class:`~tierctl.bench.http1.Http1Pool` for ``url``) a request whose body is
    one bytes object goes through the lean HTTP/1.1 client; streamed bodies and requests
    without a pool go through ``session`` (aiohttp). ``body``: ``encode_body(shape, prompt,
    max_tokens)`` when the caller built it ahead (a paced sender, before its wait), so that
    encoding is not between the send's due time and its stamp. ``prompt``: text, or token ids
    (completions API); a long text prompt is streamed to the socket.
    """
    data: bytes | AsyncIterator[bytes]
    if body is not None:
        data = body
    elif isinstance(prompt, str) and len(prompt) > STREAM_BODY_BYTES:
        data = stream_body(shape, prompt, max_tokens)
    else:
        data = encode_body(shape, prompt, max_tokens)
    p = _Progress(sent=clock(), gaps=[], usage_counts=shape.per_chunk_usage is not None)

    def finish(outcome: Any, error_class: str | None, error: str | None) -> None:
        end = clock()
        on_done(
            RequestSample(
                index=index,
                lane=lane,
                scheduled_s=scheduled_s,
                sent_s=p.sent - t0,
                queue_s=max(0.0, p.sent - t0 - scheduled_s),
                ttft_s=None if p.first is None else p.first - p.sent,
                e2e_s=end - p.sent,
                itl_s=tuple(p.gaps or ()),
                input_tokens=p.prompt_tokens or planned_input_tokens,
                output_tokens=p.completion_tokens if p.completion_tokens is not None else p.chunks,
                planned_input_tokens=planned_input_tokens,
                outcome=outcome,
                error_class=error_class,
                http_status=p.status,
                error=error,
            )
        )

    try:
        async with asyncio.timeout(shape.timeout_s):
            if pool is not None and isinstance(data, bytes):
                error = await _exchange_lean(pool, data, p, clock, backlog)
            else:
                error = await _exchange(session, url, data, p, clock, backlog)
    except TimeoutError:
        finish("timed_out", "timeout", f"no complete answer within {shape.timeout_s:g} s")
        return
    except asyncio.CancelledError:
        finish("failed", "interrupted", "run stopped while the request was in flight")
        raise
    except MalformedStream as exc:
        finish("failed", "malformed_stream", str(exc))
        return
    except (aiohttp.ClientError, OSError) as exc:
        finish("failed", "connection", f"{type(exc).__name__}: {exc}"[:300])
        return
    if error is None:
        finish("completed", None, None)
    else:
        finish("failed", error[0], error[1])


class _Stream:
    """What the reads of one SSE response body add up to, read by read (both HTTP paths)."""

    __slots__ = ("backlog", "decoder", "done", "error", "gaps", "p", "sock")

    def __init__(self, p: _Progress, backlog: ReadBacklog | None, sock: Any) -> None:
        self.p = p
        self.decoder = SSEDecoder()
        self.done = False
        self.error: str | None = None
        self.gaps = p.gaps if p.gaps is not None else []
        self.backlog = backlog
        self.sock = sock

    def read(self, chunk: bytes, now: float) -> None:
        """One socket read of the body, arrived at ``now``.

        Raises:
            MalformedStream: the bytes are not an OpenAI SSE stream.
        """
        p = self.p
        if self.backlog is not None:
            self.backlog.observe(len(chunk), self.sock)
        # One summary per read: every text event of it arrived at `now` (the first opens
        # the stream or closes the gap since the previous read; the rest are 0 s apart).
        read = self.decoder.feed_summary(chunk)
        if read.error is not None:
            self.error = self.error or read.error
        tokens = read.texts
        if p.usage_counts and read.completion_tokens is not None:
            # The chunk's running usage says how many tokens arrived, however many chunks
            # (or none: a usage-only chunk that completes the count) carried them.
            tokens = max(0, read.completion_tokens - p.chunks)
        if tokens:
            if p.first is None:
                p.first = now
            elif p.last is not None:
                self.gaps.append(now - p.last)
            if tokens > 1:
                self.gaps.extend(itertools.repeat(0.0, tokens - 1))
            p.last = now
            p.chunks += tokens
        if read.prompt_tokens is not None:
            p.prompt_tokens = read.prompt_tokens
        if read.completion_tokens is not None:
            p.completion_tokens = read.completion_tokens
        self.done = self.done or read.done

    def end(self) -> tuple[str, str] | None:
        """The stream's verdict once the body ended: ``None``, or (error class, detail)."""
        self.done = summarize(self.decoder.close()).done or self.done
        if self.error is not None:
            return "stream_error", self.error[:300]
        if not self.done:
            return "connection", "stream ended before [DONE]"
        return None


async def _exchange(
    session: aiohttp.ClientSession,
    url: str,
    data: bytes | AsyncIterator[bytes],
    p: _Progress,
    clock: Callable[[], float],
    backlog: ReadBacklog | None = None,
) -> tuple[str, str] | None:
    async with session.post(url, data=data, headers=HEADERS) as resp:
        p.status = resp.status
        if resp.status >= 300:
            text = (await resp.content.read(512)).decode("utf-8", "replace")
            return _status_error(resp.status, text)
        sock = None
        if backlog is not None and resp.connection is not None:
            transport = resp.connection.transport
            sock = transport.get_extra_info("socket") if transport is not None else None
        stream = _Stream(p, backlog, sock)
        async for chunk in resp.content.iter_any():
            stream.read(chunk, clock())
        return stream.end()


def _status_error(status: int, text: str) -> tuple[str, str]:
    return "http_status", f"HTTP {status}: {text.strip()[:200]}"


class _LeanSink:
    """The lean client's sink: each read goes to the stream as it arrives, in the callback."""

    __slots__ = ("backlog", "clock", "error_body", "p", "stream")

    def __init__(
        self,
        p: _Progress,
        clock: Callable[[], float],
        backlog: ReadBacklog | None,
    ) -> None:
        self.p = p
        self.clock = clock
        self.backlog = backlog
        self.stream: _Stream | None = None
        self.error_body: bytearray | None = None

    def on_head(self, status: int, sock: Any) -> None:
        self.p.status = status
        if status >= 300:
            self.error_body = bytearray()
        else:
            self.stream = _Stream(self.p, self.backlog, sock)

    def on_data(self, data: bytes) -> bool:
        if self.stream is not None:
            self.stream.read(data, self.clock())
            return True
        assert self.error_body is not None
        self.error_body += data
        return len(self.error_body) < 512


async def _exchange_lean(
    pool: Http1Pool,
    body: bytes,
    p: _Progress,
    clock: Callable[[], float],
    backlog: ReadBacklog | None = None,
) -> tuple[str, str] | None:
    sink = _LeanSink(p, clock, backlog)
    await pool.exchange(body, sink)
    if sink.error_body is not None:
        assert p.status is not None
        return _status_error(p.status, bytes(sink.error_body[:512]).decode("utf-8", "replace"))
    assert sink.stream is not None
    return sink.stream.end()
