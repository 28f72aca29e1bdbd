"""CLI misuse: exit code 2, a located message, never a traceback."""

from __future__ import annotations

import pytest

from tierctl.cli.main import main

URL = "http://127.0.0.1:9"  # nothing is sent: every case fails before the run starts


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "run", "--url", URL], "no load given"),
        (["bench", "run", "--url", URL, "--burst", "eight"], "--burst must be COUNTxTOKENS"),
        (["bench", "run", "--url", "ftp://x", "--burst", "1x5"], "--url must be an http(s)"),
        (["bench", "run", "--url", URL, "--burst", "1x5", "--probe", "health"], "--probe path"),
        (["bench", "run", "--url", URL, "--workload", "missing.yaml"], "cannot read workload"),
        (
            ["bench", "run", "--url", URL, "--hammer-rate", "5", "--hammer-tokens", "5"],
            "INPUT:OUTPUT",
        ),
        (["bench", "run", "--url", URL, "--trace", "nope.jsonl"], "cannot read trace file"),
        (
            ["bench", "ab", "--a", URL, "--b", URL, "--burst", "1x5", "--order", "AAC"],
            "bad --order",
        ),
        (["bench", "ab", "--a", URL, "--b", URL, "--burst", "1x5", "--order", "AA"], "bad --order"),
        (["bench", "ab", "--a", URL, "--b", URL, "--burst", "1x5", "--repeat", "0"], "--repeat"),
    ],
)
def test_bad_usage_exits_2_without_traceback(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert message in err
    assert "Traceback" not in err


def test_bad_workload_file_is_located(tmp_path, capsys):
    wl = tmp_path / "w.yaml"
    wl.write_text(
        "lanes:\n  - kind: burst\n    count: -1\n    input_tokens: 5\n    output_tokens: 1\n"
    )
    with pytest.raises(SystemExit) as info:
        main(["bench", "run", "--url", URL, "--workload", str(wl)])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert "w.yaml:3: lanes.0.count" in err
