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


def test_a_secret_the_text_already_holds_escaped_is_masked_before_it_is_escaped_again(
    tmp_path: Path,
) -> None:
    # An agent's echoed request body holds the value JSON-escaped; writing that text into a
    # JSON line escapes it twice, a form no mask of the serialised line recognises.
    secret = 'core-7f3a"q\\é'
    j = Journal(tmp_path / "j.jsonl", "digest", secrets=(secret,))
    echoed = json.dumps({"env": {"HF_TOKEN": secret}})
    j.write("failed", "01-x", error=f"rejected (400): {echoed}", notes=[echoed, {"k": echoed}])
    text = (tmp_path / "j.jsonl").read_text(encoding="utf-8")
    assert "7f3a" not in text
    rec = json.loads(text)
    assert rec["error"] == 'rejected (400): {"env": {"HF_TOKEN": "***"}}'
    assert rec["notes"] == ['{"env": {"HF_TOKEN": "***"}}', {"k": '{"env": {"HF_TOKEN": "***"}}'}]
