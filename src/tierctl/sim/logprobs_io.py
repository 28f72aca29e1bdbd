"""Logprobs in the shapes the real engines return them, computed by :class:`~tierctl.sim.lm.SimLM`.

- OpenAI completions (``logprobs: k``, ``echo``): ``{"tokens", "token_logprobs",
  "top_logprobs", "text_offset"}``, prompt tokens first when echoed (the first has ``null``);
- OpenAI chat (``logprobs: true``, ``top_logprobs: k``): ``{"content": [{"token", "logprob",
  "bytes", "top_logprobs"}]}``;
- vLLM ``prompt_logprobs: k``: one entry per prompt token, ``null`` for the first, else
  ``{"<token id>": {"logprob", "rank", "decoded_token"}}`` holding the prompt token and the top
  k (one entry when the prompt token is the top one);
- SGLang ``/generate`` with ``return_logprob``: ``meta_info.input_token_logprobs`` /
  ``output_token_logprobs`` as ``[logprob, token_id, text]`` triples (``null`` logprob for the
  first prompt token) and ``input_top_logprobs`` / ``output_top_logprobs`` as lists of triples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tierctl.sim.lm import Position, SimLM


def _positions(lm: SimLM, prompt: Sequence[int], generated: Sequence[int]) -> list[Position | None]:
    return lm.teacher_forced([*prompt, *generated])


def completion_logprobs(
    lm: SimLM,
    prompt: Sequence[int],
    generated: Sequence[int],
    top_k: int,
    *,
    echo: bool,
) -> dict[str, Any]:
    """The OpenAI completions ``logprobs`` object (prompt tokens first when ``echo``)."""
    ids = [*prompt, *generated]
    pos = _positions(lm, prompt, generated)
    first = 0 if echo else len(prompt)
    tokens, lps, tops, offsets = [], [], [], []
    offset = 0
    for i in range(first, len(ids)):
        text = lm.text(ids[i])
        tokens.append(text)
        offsets.append(offset)
        offset += len(text)
        p = pos[i]
        lps.append(None if p is None else lm.logprob(p, ids[i]))
        tops.append(None if p is None else {lm.text(t): lp for t, lp in lm.top_k(p, max(top_k, 1))})
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}


def chat_logprobs(
    lm: SimLM, prompt: Sequence[int], generated: Sequence[int], top_k: int
) -> dict[str, Any]:
    """The OpenAI chat ``logprobs`` object of the generated tokens."""
    pos = _positions(lm, prompt, generated)
    content = []
    for j, tok in enumerate(generated):
        p = pos[len(prompt) + j]
        assert p is not None
        text = lm.text(tok)
        content.append(
            {
                "token": text,
                "logprob": lm.logprob(p, tok),
                "bytes": list(text.encode()),
                "top_logprobs": [
                    {"token": lm.text(t), "logprob": lp, "bytes": list(lm.text(t).encode())}
                    for t, lp in lm.top_k(p, top_k)
                ],
            }
        )
    return {"content": content}


def vllm_prompt_logprobs(lm: SimLM, prompt: Sequence[int], top_k: int) -> list[Any]:
    """vLLM's ``prompt_logprobs``: ``null``, then per token the token and the top ``k``."""
    out: list[Any] = []
    for i, p in enumerate(lm.teacher_forced(prompt)):
        if p is None:
            out.append(None)
            continue
        tok = prompt[i]
        entry = {
            str(tok): {
                "logprob": lm.logprob(p, tok),
                "rank": lm.rank(p, tok),
                "decoded_token": lm.text(tok),
            }
        }
        for rank, (t, lp) in enumerate(lm.top_k(p, top_k), start=1):
            entry.setdefault(
                str(t), {"logprob": lp, "rank": min(rank, 3), "decoded_token": lm.text(t)}
            )
        out.append(entry)
    return out


def sglang_meta_logprobs(
    lm: SimLM,
    prompt: Sequence[int],
    generated: Sequence[int],
    top_k: int,
    *,
    start: int,
    with_input: bool,
) -> dict[str, Any]:
    """SGLang's ``meta_info`` logprob fields for ``/generate``."""
    pos = _positions(lm, prompt, generated)
    ids = [*prompt, *generated]

    def triple(i: int) -> list[Any]:
        p = pos[i]
        return [None if p is None else lm.logprob(p, ids[i]), ids[i], None]

    def tops(i: int) -> list[list[Any]] | None:
        p = pos[i]
        if p is None or top_k == 0:
            return None
        return [[lp, t, None] for t, lp in lm.top_k(p, top_k)]

    n = len(prompt)
    out: dict[str, Any] = {
        "output_token_logprobs": [triple(i) for i in range(n, len(ids))],
        "output_top_logprobs": [tops(i) for i in range(n, len(ids))],
    }
    if with_input:
        out["input_token_logprobs"] = [triple(i) for i in range(min(start, n), n)]
        out["input_top_logprobs"] = [tops(i) for i in range(min(start, n), n)]
    return out
