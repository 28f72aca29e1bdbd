"""TC004's memo across replicas: a finding made for one flag use is reused only for a use with
the same token and the same values, against the same catalog; anything else is checked anew."""

from __future__ import annotations

from tierctl.catalog.store import load_catalog
from tierctl.compose.argv import FlagUse, parse_flags
from tierctl.contracts.flag_catalog import _Memo as Memo
from tierctl.contracts.flag_catalog import flag_findings


def _argv(**changes: str) -> tuple[str, ...]:
    flags = {"--tp-size": "4", "--port": "30001", "--mem-fraction-static": "0.8"}
    flags.update(changes)
    return ("python3", "-m", "sglang.launch_server", *(t for kv in flags.items() for t in kv))


def _findings(argvs: list[tuple[str, ...]], memo: Memo | None) -> list[list[tuple[str, str]]]:
    catalog = load_catalog("sglang", "0.5.23")
    out = []
    for argv in argvs:
        uses = parse_flags(argv, 3, catalog)
        out.append([(f.use.token, f.message) for f in flag_findings(catalog, uses, memo)])
    return out


def test_replicas_differing_in_one_value_each_get_their_own_finding() -> None:
    # Same flag, same catalog: only the value differs. With the memo filled by the good
    # replica first, the bad one must still be refused, and the other way round.
    good, bad = _argv(), _argv(**{"--tp-size": "four"})
    memo: Memo = {}
    assert _findings([good, bad, good], memo) == [
        [],
        [("--tp-size", "--tp-size: expects an integer, found 'four' (sglang==0.5.23)")],
        [],
    ]
    assert _findings([bad, good], {}) == _findings([bad, good], None)


def test_replicas_differing_in_one_token_each_get_their_own_finding() -> None:
    base = _argv()
    other = tuple("--tp-sizes" if t == "--tp-size" else t for t in base)
    memo: Memo = {}
    first, second = _findings([base, other], memo)
    assert first == []
    assert [token for token, _ in second] == ["--tp-sizes"]
    assert _findings([other, base], {}) == _findings([other, base], None)


def test_the_memo_keeps_each_use_its_own_position() -> None:
    catalog = load_catalog("sglang", "0.5.23")
    memo: Memo = {}
    a = FlagUse("--no-such-flag", (), 3)
    b = FlagUse("--no-such-flag", (), 9)
    assert [f.use.index for f in flag_findings(catalog, [a, b], memo)] == [3, 9]
