"""The schema's uniqueItems on ports as Compose's validator applies it (see unique_items.py).

The rules were read off the real binary (fixtures 002 and 010-016 replay them against it):
a later number equals an earlier string holding it, never the other way round, and lists over
20 items are grouped by a hash that keeps strings and numbers apart.
"""

from __future__ import annotations

from tierctl.compose.unique_items import UniqueLists, duplicates, go_equal


def test_a_later_number_equals_an_earlier_string_holding_it_and_not_the_reverse() -> None:
    assert go_equal(8000, "8000")
    assert go_equal(8000, "8e3")
    assert not go_equal("8000", 8000)
    assert not go_equal(8000, " 8000")
    assert go_equal({"target": 80, "published": 8000}, {"published": "8000", "target": 80})
    assert not go_equal({"target": 80, "published": "8000"}, {"target": 80, "published": 8000})
    assert go_equal(8000.0, 8000)
    assert not go_equal(True, 1)
    assert not go_equal(1, True)


def test_duplicates_names_the_first_pair_in_the_validators_order() -> None:
    a, b = {"target": 80, "published": "8000"}, {"target": 80, "published": 8000}
    assert duplicates([a, b]) == (0, 1)
    assert duplicates([b, a]) is None
    assert duplicates([{"target": 1}, a, {"target": 2}, b]) == (1, 3)


def test_over_twenty_items_only_same_kind_values_meet() -> None:
    filler = [{"target": n} for n in range(100, 120)]
    a, b = {"target": 80, "published": "8000"}, {"target": 80, "published": 8000}
    assert duplicates([a, *filler, b]) is None
    assert duplicates([{"target": 1}, *filler, {"target": 1.0}]) == (0, 21)


def test_a_later_file_revalidates_the_long_forms_of_the_earlier_ones() -> None:
    lists = UniqueLists()
    base = {
        "s": {
            "ports": [
                "8000:80",
                {"target": 80, "published": 8000, "protocol": "tcp", "mode": "ingress"},
            ]
        }
    }
    assert list(lists.add_file(base)) == []  # a short string and a mapping never meet
    assert list(lists.add_file({"t": {"image": "x"}})) == [("s", "ports", 0, 1)]


def test_reset_and_override_replace_what_came_before() -> None:
    lists = UniqueLists()
    assert list(lists.add_file({"s": {"ports": [{"target": 80, "published": "8000"}]}})) == []
    from tierctl.compose.tags import Override, Reset

    over = {"s": {"ports": Override([{"target": 80, "published": 8000}])}}
    assert list(lists.add_file(over)) == []
    assert list(lists.add_file({"s": {"ports": Reset()}})) == []
