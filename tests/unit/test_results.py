"""The bench results file: what the bench writes is what sim fit and the real demo read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tierctl.errors import InputError
from tierctl.results import looks_like_results, read_results, results_document

_REQUEST = {
    "outcome": "completed",
    "sent_s": 0.5,
    "input_tokens": 10,
    "output_tokens": 4,
    "ttft_s": 0.1,
    "tpot_s": 0.02,
    "itl_s": [0.02, 0.02, 0.02],
}


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_run_document_reads_back_its_counts_and_completed_requests(tmp_path: Path) -> None:
    failed = {**_REQUEST, "outcome": "failed", "ttft_s": None}
    run = {"sent": 2, "completed": 1, "failed": 1, "timed_out": 0, "requests": [_REQUEST, failed]}
    doc = results_document("run", "tierctl test", {"name": "w"}, {"run": run})
    assert (doc["schema_version"], doc["kind"], doc["workload"]) == (1, "run", {"name": "w"})
    path = _write(tmp_path, doc)
    assert looks_like_results(path)
    results = read_results(path)
    (only,) = results.runs
    assert (only.sent, only.completed, only.failed, only.timed_out) == (2, 1, 1, 0)
    (req,) = only.completed_requests(results.source)
    assert (req.sent_s, req.input_tokens, req.output_tokens, req.tpot_s) == (0.5, 10, 4, 0.02)
    assert req.itl_s == (0.02, 0.02, 0.02)


def test_an_ab_document_reads_one_run_per_block(tmp_path: Path) -> None:
    blocks = [{"arm": arm, "requests": [_REQUEST]} for arm in "ABBA"]
    path = _write(tmp_path, results_document("ab", "t", {}, {"blocks": blocks}))
    assert [len(r.requests) for r in read_results(path).runs] == [1, 1, 1, 1]


def test_other_files_are_not_results(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"kind": "run"}\n{"kind": "run"}\n')
    other = _write(tmp_path, {"kind": "tierctl-cost-model"})
    assert not looks_like_results(log)
    assert not looks_like_results(other)
    assert not looks_like_results(tmp_path / "missing.json")
    with pytest.raises(InputError, match="not a tierctl bench results file"):
        read_results(other)


def test_a_malformed_sample_is_named(tmp_path: Path) -> None:
    bad = {k: v for k, v in _REQUEST.items() if k != "input_tokens"}
    results = read_results(
        _write(tmp_path, results_document("run", "t", {}, {"run": {"requests": [bad]}}))
    )
    with pytest.raises(InputError, match="malformed request sample") as err:
        results.runs[0].completed_requests(results.source)
    assert err.value.location is not None
    assert err.value.location.path == "requests[0]"


def test_a_fifo_is_neither_sniffed_nor_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert not looks_like_results(fifo)  # returns at once: nothing opens it blocking
    with pytest.raises(InputError, match="not a regular file"):
        read_results(fifo)
