"""The items the quality lane asks both arms: texts to score teacher-forced, and tasks.

Everything is generated locally from a seed (nothing is downloaded): word texts for
teacher-forced agreement, passkey haystacks at chosen context lengths, and an arithmetic set;
an operator can add task sets of their own as JSONL (``{"prompt", "answer"}`` per line, with
``"choices"`` for multiple choice) and texts to score (``{"text"}`` or ``{"prompt",
"reference"}``).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tierctl.bench.prompts import text_of_size
from tierctl.errors import InputError, Location
from tierctl.readers import Limits, read_text

Scoring = Literal["exact", "number", "choice"]

#: Characters per token of English prose under common BPE tokenizers, to size haystacks.
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class TextItem:
    """A text scored teacher-forced on both arms, token by token."""

    id: str
    text: str


@dataclass(frozen=True)
class TaskItem:
    """A prompt with one right answer, scored on the arm's greedy output."""

    lane: str
    id: str
    prompt: str
    answer: str
    scoring: Scoring


def generated_texts(count: int, tokens: int, seed: int) -> list[TextItem]:
    """``count`` word texts of about ``tokens`` tokens each."""
    return [
        TextItem(f"text-{i}", text_of_size(int(tokens * 6), seed * 100_003 + i))
        for i in range(count)
    ]


def arithmetic(count: int, seed: int) -> list[TaskItem]:
    """Two-operand integer arithmetic with a few-shot header (answers checked as numbers)."""
    rng = random.Random(seed)
    header = "Q: What is 3 + 4?\nA: 7\nQ: What is 9 - 5?\nA: 4\nQ: What is 6 * 7?\nA: 42\n"
    out = []
    for i in range(count):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        op = rng.choice("+-*")
        value = a + b if op == "+" else a - b if op == "-" else a * b
        out.append(
            TaskItem(
                "arithmetic",
                f"arith-{i}",
                f"{header}Q: What is {a} {op} {b}?\nA:",
                str(value),
                "number",
            )
        )
    return out


_FILLER = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
    "The river runs past the old mill and the road bends toward the town on the hill.",
    "A quiet morning settles over the harbour while the boats wait for the tide to turn.",
    "Every station on the line keeps a clock, and every clock is set by the one downtown.",
)


def passkey(lengths: list[int], per_length: int, seed: int) -> list[TaskItem]:
    """Passkey retrieval: a five-digit key hidden at a random depth of a filler haystack of
    about each length in tokens; the answer is the key, checked exactly."""
    out = []
    for length in lengths:
        rng = random.Random(seed * 1_000_003 + length)
        for i in range(per_length):
            key = str(rng.randint(10_000, 99_999))
            intro = (
                "There is a pass key hidden inside a lot of irrelevant text. Find it and "
                "memorize it. I will quiz you about the pass key.\n"
            )
            needle = f" The pass key is {key}. Remember it. {key} is the pass key. "
            question = "\nWhat is the pass key? The pass key is"
            budget = max(0, int(length * CHARS_PER_TOKEN) - len(intro + needle + question))
            filler: list[str] = []
            size = 0
            while size < budget:
                s = rng.choice(_FILLER)
                filler.append(s)
                size += len(s) + 1
            hay = " ".join(filler)[:budget]
            cut = int(len(hay) * rng.random())
            cut = hay.rfind(" ", 0, cut) + 1 if " " in hay[:cut] else 0
            prompt = intro + hay[:cut] + needle + hay[cut:] + question
            out.append(
                TaskItem(f"passkey@{length}", f"passkey-{length}-{i}", prompt, key, "number")
            )
    return out


def read_tasks(path: str | Path, scoring: Scoring, limit: int | None, name: str) -> list[TaskItem]:
    """A JSONL task set: one ``{"prompt": str, "answer": str, "choices"?: [str]}`` per line.

    With ``choices`` the prompt gets the lettered options appended and the answer may be the
    letter or the choice's text.

    Raises:
        InputError: an unreadable file or a line that is not such an object (file and line).
    """
    out: list[TaskItem] = []
    for lineno, obj in _jsonl(path):
        prompt, answer = obj.get("prompt"), obj.get("answer")
        if not isinstance(prompt, str) or not isinstance(answer, str | int):
            raise InputError(
                "a task line needs a string 'prompt' and an 'answer'",
                location=Location(file=str(path), line=lineno),
                rule='{"prompt": "...", "answer": "..."} per line',
                value=sorted(obj),
                fix="give each line a prompt and its answer",
            )
        answer = str(answer)
        choices = obj.get("choices")
        kind: Scoring = scoring
        if choices is not None:
            if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
                raise InputError(
                    "'choices' must be a list of strings",
                    location=Location(file=str(path), line=lineno, path="choices"),
                    value=choices,
                    fix='write "choices": ["first", "second", ...]',
                )
            letters = [chr(ord("A") + k) for k in range(len(choices))]
            if answer in choices:
                answer = letters[choices.index(answer)]
            prompt += "".join(f"\n{ltr}. {c}" for ltr, c in zip(letters, choices, strict=True))
            prompt += "\nAnswer:"
            kind = "choice"
        out.append(TaskItem(name, f"{name}-{len(out)}", prompt, answer, kind))
        if limit is not None and len(out) >= limit:
            break
    return out


def read_texts(path: str | Path, limit: int | None) -> list[TextItem]:
    """Texts to score: ``{"text"}`` or ``{"prompt", "reference"}`` (scored as one text)."""
    out: list[TextItem] = []
    for lineno, obj in _jsonl(path):
        text = obj.get("text")
        prompt = obj.get("prompt")
        if text is None and isinstance(prompt, str):
            text = prompt + str(obj.get("reference", ""))
        if not isinstance(text, str) or not text:
            raise InputError(
                "a text line needs 'text' or 'prompt' (+ 'reference')",
                location=Location(file=str(path), line=lineno),
                value=sorted(obj),
                fix='write {"text": "..."} or {"prompt": "...", "reference": "..."}',
            )
        out.append(TextItem(f"text-{len(out)}", text))
        if limit is not None and len(out) >= limit:
            break
    return out


def _jsonl(path: str | Path) -> list[tuple[int, dict[str, object]]]:
    raw = read_text(
        path,
        what="quality items",
        limits=Limits.trace(),
        missing=f"cannot read {path}: no such file",
        missing_fix="give a readable UTF-8 JSONL file",
    )
    rows = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise InputError(
                f"not JSON: {exc}",
                location=Location(file=str(path), line=lineno),
                rule="one JSON object per line",
                fix="fix the line or remove it",
            ) from None
        if not isinstance(obj, dict):
            raise InputError(
                "each line must be a JSON object",
                location=Location(file=str(path), line=lineno),
                value=type(obj).__name__,
                fix='write {"prompt": ..., "answer": ...}',
            )
        rows.append((lineno, obj))
    return rows


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LETTER = re.compile(r"\b([A-Z])\b")


def extract(output: str, scoring: Scoring) -> str | None:
    """The answer an output gives: its first number, its first option letter, or its first
    line (whitespace collapsed); None when there is none."""
    if scoring == "number":
        m = _NUMBER.search(output.replace(",", ""))
        return m.group(0) if m else None
    if scoring == "choice":
        m = _LETTER.search(output)
        return m.group(1) if m else None
    first = output.strip().splitlines()[0] if output.strip() else ""
    return " ".join(first.split()) or None


def correct(item: TaskItem, output: str | None) -> bool:
    """Whether an output answers the item right (exact match after extraction)."""
    if output is None:
        return False
    got = extract(output, item.scoring)
    if got is None:
        return False
    if item.scoring == "exact":
        return got.lower() == " ".join(item.answer.split()).lower()
    return got == item.answer.strip()
