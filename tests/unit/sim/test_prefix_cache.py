"""The prefix cache's C-level loops (issue #40: the 24-hour simulation's largest cost) do
exactly what the plain per-block loops do: a law over random operation sequences."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from tierctl.sim.prefix_cache import PrefixCache


class Reference:
    """The per-block implementation the cache had, kept as the law's reference."""

    def __init__(self, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def match(self, hashes: tuple[int, ...], touch: bool) -> int:
        n = 0
        for h in hashes:
            if h not in self.blocks:
                break
            n += 1
        if touch:
            for h in reversed(hashes[:n]):
                self.blocks.move_to_end(h)
        return n * self.block_tokens

    def insert(self, hashes: tuple[int, ...]) -> None:
        for h in reversed(hashes):
            if h in self.blocks:
                self.blocks.move_to_end(h)
            else:
                self.blocks[h] = None

    def evict_to(self, max_tokens: int) -> int:
        freed = 0
        while self.blocks and len(self.blocks) * self.block_tokens > max_tokens:
            self.blocks.popitem(last=False)
            freed += self.block_tokens
        return freed


chains = st.lists(st.integers(0, 12), min_size=0, max_size=8).map(tuple)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("match"), chains, st.booleans()),
        st.tuples(st.just("insert"), chains),
        st.tuples(st.just("evict"), st.integers(-40, 200)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops, st.sampled_from([1, 16, 512]))
def test_the_cache_matches_the_per_block_reference(seq: list[tuple], block: int) -> None:
    fast, ref = PrefixCache(block), Reference(block)
    for op in seq:
        if op[0] == "match":
            assert fast.match(op[1], touch=op[2]) == ref.match(op[1], op[2])
        elif op[0] == "insert":
            fast.insert(op[1])
            ref.insert(op[1])
        else:
            limit = op[1] * block // 8
            assert fast.evict_to(limit) == ref.evict_to(limit)
        assert list(fast._blocks) == list(ref.blocks)
        assert fast.tokens == len(ref.blocks) * block
