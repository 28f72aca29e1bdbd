"""A secret is masked in the journal in every form it is written: raw, JSON-escaped, quoted."""

from __future__ import annotations

import json
from pathlib import Path

from tierctl.credentials import mask
from tierctl.rollout.journal import Journal

SECRET = 'pa"ss\\wörd-Ω'


def test_a_secret_with_quotes_backslashes_and_non_ascii_never_reaches_the_journal(
    tmp_path: Path,
) -> None:
    j = Journal(tmp_path / "j.jsonl", "digest", secrets=(SECRET,))
    j.write("failed", "01-x", error=f"agent echoed env HF_TOKEN={SECRET} and {json.dumps(SECRET)}")
    text = (tmp_path / "j.jsonl").read_text(encoding="utf-8")
    for form in (SECRET, json.dumps(SECRET)[1:-1], json.dumps(SECRET, ensure_ascii=False)[1:-1]):
        assert form not in text
    assert "***" in text
    assert "wörd" not in text
    assert "w\\u00f6rd" not in text


def test_mask_covers_repr_and_json_forms() -> None:
    out = mask(f"{SECRET!r} {json.dumps(SECRET)} {SECRET}", [SECRET])
    assert "ss" not in out.replace("***", "")
