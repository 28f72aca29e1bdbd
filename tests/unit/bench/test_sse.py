"""SSE decoding and OpenAI stream events."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierctl.bench.sse import MalformedStream, SSEDecoder, parse_event, parse_events

STREAM = (
    b": keep-alive\r\n\r\n"
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    b"event: ping\nid: 3\n\n"
    b'data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}\r\n\r\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)


def _decode(chunks: list[bytes]) -> list[bytes]:
    dec = SSEDecoder()
    out: list[bytes] = []
    for c in chunks:
        out += dec.feed(c)
    return out + dec.close()


def test_payloads_of_a_whole_stream():
    payloads = _decode([STREAM])
    assert len(payloads) == 5
    assert payloads[-1] == b"[DONE]"
    events = [parse_event(p) for p in payloads]
    assert "".join(e.text for e in events) == "Hello"
    assert events[3].prompt_tokens == 7
    assert events[3].completion_tokens == 2
    assert events[-1].done


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_of_the_bytes_gives_the_same_payloads(cuts):
    bounds = [0, *sorted(cuts), len(STREAM)]
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert _decode(chunks) == _decode([STREAM])


def test_last_line_without_newline_still_counts():
    assert _decode([b"data: [DONE]"]) == [b"[DONE]"]


@pytest.mark.parametrize("line", [b"hello world\n", b"<html>\n", b"foo: bar\n"])
def test_non_sse_lines_are_malformed(line):
    with pytest.raises(MalformedStream):
        SSEDecoder().feed(line)


def test_completions_text_and_errors():
    assert parse_event(b'{"choices":[{"text":"abc","index":0}]}').text == "abc"
    assert parse_event(b'{"error":{"message":"boom","code":500}}').error == "boom"
    assert parse_event(b'{"object":"error","message":"queue full"}').error == "queue full"


@pytest.mark.parametrize("payload", [b"{not json", b"[1, 2]", b'"text"'])
def test_payload_that_is_not_an_object_is_malformed(payload):
    with pytest.raises(MalformedStream):
        parse_event(payload)


def test_batch_parse_equals_one_by_one():
    payloads = _decode([STREAM])
    assert parse_events(payloads) == [parse_event(p) for p in payloads]
    assert parse_events(payloads[:1]) == [parse_event(payloads[0])]
    assert parse_events([]) == []


@pytest.mark.parametrize(
    "bad",
    [b"{not json", b'{"a": 1},{"b": 2}', b"[1]", b"42"],
)
def test_batch_with_a_bad_payload_is_malformed(bad):
    good = b'{"choices":[{"index":0,"delta":{"content":"x"}}]}'
    with pytest.raises(MalformedStream):
        parse_events([good, bad, good])


def test_reasoning_tokens_count_as_generated_text():
    ev = parse_event(b'{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}')
    assert ev.text == "hmm"


_PAYLOADS = [
    b'{"choices":[{"index":0,"delta":{"role":"assistant"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":"Hel"}}]}',
    b'{"choices":[{"index":0,"delta":{"content":""}}]}',
    b'{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}',
    b'{"choices":[{"index":0,"delta":{"reasoning":"so","content":7}}]}',
    b'{"choices":[{"text":"abc","index":0}]}',
    b'{"choices":[{"text":"","index":0}]}',
    b'{"choices":[{"text":"x","delta":"odd"}]}',
    b'{"choices":[{"text":"a"},{"text":"b"}]}',
    b'{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2}}',
    b'{"choices":[{"delta":{"content":"u"}}],"usage":{"prompt_tokens":9,"completion_tokens":3}}',
    b'{"usage":{"prompt_tokens":true}}',
    b'{"error":{"message":"boom","code":500}}',
    b'{"object":"error","message":"queue full"}',
    b'{"error":null,"choices":[{"text":"t"}]}',
    b'{"object":"error","choices":[{"text":"t"}]}',
    b"{}",
    b"[DONE]",
    b" [DONE] ",
    b"[1, 2]",
    b"{not json",
]


@given(st.lists(st.sampled_from(_PAYLOADS), max_size=12))
def test_summarize_is_the_fold_of_the_parsed_events(payloads):
    from tierctl.bench.sse import fold, summarize

    try:
        want = fold(parse_events(payloads))
    except MalformedStream:
        with pytest.raises(MalformedStream):
            summarize(payloads)
        return
    assert summarize(payloads) == want


def test_a_read_of_many_chunks_counts_each_and_keeps_the_last_usage():
    from tierctl.bench.sse import ReadSummary, summarize

    chunk = b'{"choices":[{"index":0,"delta":{"content":"t"}}]}'
    usage = b'{"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":16}}'
    assert summarize([chunk] * 16 + [usage, b"[DONE]"]) == ReadSummary(16, True, 8, 16, None)
    assert summarize([]) == ReadSummary()
    assert summarize([b"[DONE]"]) == ReadSummary(done=True)


_EVENTS = [b"data: " + p + b"\n\n" for p in _PAYLOADS if p.strip() == p and b"\n" not in p] + [
    b": keep-alive\n\n",
    b"data: [DONE]\n\n",
    b'data:{"choices":[{"delta":{"content":"x"}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"r"}}]}\r\n\r\n',
    b"event: ping\n\n",
    b"data: \n\n",
    b"data: 1,2\n\n",
    b'data: ["a\n\n',
    b'data: "b"]\n\n',
    b"bogus\n\n",
]


@given(
    st.lists(st.sampled_from(_EVENTS), max_size=14),
    st.lists(st.integers(min_value=0, max_value=4000), max_size=6),
)
def test_the_read_shortcut_equals_feed_then_summarize(events, cuts):
    """feed_summary per read == summarize(feed(read)) per read, errors included, for any cut."""
    from tierctl.bench.sse import summarize

    wire = b"".join(events)
    bounds = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    reads = [wire[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    fast, slow = SSEDecoder(), SSEDecoder()
    for read in reads:
        try:
            want = summarize(slow.feed(read))
        except MalformedStream:
            with pytest.raises(MalformedStream):
                fast.feed_summary(read)
            return
        assert fast.feed_summary(read) == want
    assert fast.close() == slow.close()


def test_the_read_shortcut_on_a_whole_response_in_one_read():
    from tierctl.bench.sse import ReadSummary

    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"t"}}]}\n\n'
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":16}}\n\n'
    read = chunk * 16 + usage + b"data: [DONE]\n\n"
    assert SSEDecoder().feed_summary(read) == ReadSummary(16, True, 8, 16, None)
    assert SSEDecoder().feed_summary(b"data: [DONE]\n\n") == ReadSummary(done=True)
    assert SSEDecoder().feed_summary(chunk) == ReadSummary(1, False)
    with pytest.raises(MalformedStream, match="not a JSON object"):
        SSEDecoder().feed_summary(chunk + b"data: [1]\n\n")
