"""The runner's GC tuning: young-generation passes happen in pacing gaps, survivors frozen."""

from __future__ import annotations

import gc

from tierctl.bench import runner


def test_a_gap_collects_and_freezes_the_young_generation_only_while_tuned() -> None:
    old = runner._gc_quiet()
    try:
        keep = [[i] for i in range(runner.GC_YOUNG_OBJECTS * 2)]  # young, tracked survivors
        frozen = gc.get_freeze_count()
        runner.collect_in_gap(runner.GC_SLACK_S / 2)  # too short a gap: nothing happens
        assert gc.get_freeze_count() == frozen
        runner.collect_in_gap(runner.GC_SLACK_S)
        assert gc.get_freeze_count() >= frozen + len(keep)
        assert gc.get_count()[0] < runner.GC_YOUNG_OBJECTS
        assert gc.get_threshold()[0] > runner.GC_YOUNG_OBJECTS  # the automatic pass: a backstop
    finally:
        runner._gc_restore(old)
    assert gc.get_threshold() == old
    assert gc.get_freeze_count() == 0
    more = [[i] for i in range(runner.GC_YOUNG_OBJECTS * 2)]
    runner.collect_in_gap(1.0)  # tuning off: the interpreter's own GC decides
    assert gc.get_freeze_count() == 0
    del keep, more
