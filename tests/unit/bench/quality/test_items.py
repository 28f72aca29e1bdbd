"""Quality items: generated sets are seeded, passkeys hold their key, task files are checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierctl.bench.quality.items import (
    CHARS_PER_TOKEN,
    arithmetic,
    correct,
    extract,
    generated_texts,
    passkey,
    read_tasks,
    read_texts,
)
from tierctl.errors import InputError


def test_generated_sets_are_seeded() -> None:
    assert generated_texts(3, 50, 1) == generated_texts(3, 50, 1)
    assert generated_texts(3, 50, 1) != generated_texts(3, 50, 2)
    assert arithmetic(10, 4) == arithmetic(10, 4)
    assert passkey([300], 2, 7) == passkey([300], 2, 7)


def test_arithmetic_answers_are_right() -> None:
    for item in arithmetic(50, 3):
        q = item.prompt.rsplit("Q: What is ", 1)[1].split("?")[0]
        a, op, b = q.split()
        want = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        assert item.answer == str(want)
        assert correct(item, f" {want}\nQ: next")
        assert not correct(item, f" {want + 1}")


def test_passkey_holds_its_key_once_and_has_the_length() -> None:
    for length in (256, 2048):
        for item in passkey([length], 4, 11):
            assert item.lane == f"passkey@{length}"
            assert item.prompt.count(f"The pass key is {item.answer}.") == 1
            assert item.prompt.endswith("What is the pass key? The pass key is")
            assert abs(len(item.prompt) - length * CHARS_PER_TOKEN) <= 100
            assert correct(item, f" {item.answer}. Remember it.")
            assert not correct(item, " 12")


def test_extraction_per_scoring() -> None:
    assert extract(" 1,234 apples", "number") == "1234"
    assert extract(" -7", "number") == "-7"
    assert extract(" The answer is C.", "choice") == "C"
    assert extract("  Paris  is\nnext", "exact") == "Paris is"
    assert extract("   ", "exact") is None


def test_task_file_with_choices(tmp_path: Path) -> None:
    f = tmp_path / "mc.jsonl"
    f.write_text(
        '{"prompt": "2+2?", "answer": "4", "choices": ["3", "4", "5"]}\n'
        "\n"
        '{"prompt": "Capital of France?", "answer": "B", "choices": ["Rome", "Paris"]}\n'
    )
    items = read_tasks(f, "exact", None, "mc")
    assert [i.answer for i in items] == ["B", "B"]
    assert items[0].scoring == "choice"
    assert items[0].prompt.endswith("\nA. 3\nB. 4\nC. 5\nAnswer:")
    assert correct(items[0], " B")
    assert not correct(items[0], " A")


@pytest.mark.parametrize(
    ("line", "message", "lineno"),
    [
        ("not json", "not JSON", 2),
        ("[1, 2]", "must be a JSON object", 2),
        ('{"prompt": "x"}', "needs a string 'prompt' and an 'answer'", 2),
        ('{"prompt": "x", "answer": "y", "choices": "abc"}', "'choices' must be a list", 2),
    ],
)
def test_bad_task_lines_name_the_file_and_line(
    tmp_path: Path, line: str, message: str, lineno: int
) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"prompt": "ok", "answer": "1"}\n' + line + "\n")
    with pytest.raises(InputError) as exc:
        read_tasks(f, "exact", None, "t")
    assert message in exc.value.message
    assert exc.value.location is not None
    assert exc.value.location.line == lineno
    assert exc.value.exit_code == 2


def test_texts_file_and_limit(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_text('{"text": "a b c"}\n{"prompt": "p ", "reference": "r"}\n{"text": "z"}\n')
    assert [t.text for t in read_texts(f, 2)] == ["a b c", "p r"]
    with pytest.raises(InputError, match="cannot read"):
        read_texts(tmp_path / "missing.jsonl", None)
