"""A prefix cache keyed by chained block hashes, with LRU eviction, sized in tokens.

SGLang's radix cache matches the longest cached token prefix. Traces carry chained block
hashes instead of tokens (equal hash = equal prefix up to that block), so matching the longest
run of cached leading blocks is the same question at block granularity.
"""

from __future__ import annotations

from collections import OrderedDict


class PrefixCache:
    """Cached blocks in LRU order. Not thread-safe; the scheduler owns it."""

    def __init__(self, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self._blocks: OrderedDict[int, None] = OrderedDict()

    @property
    def tokens(self) -> int:
        """Tokens the cache holds."""
        return len(self._blocks) * self.block_tokens

    def match(self, hashes: tuple[int, ...], *, touch: bool = True) -> int:
        """Tokens of the cached leading blocks of ``hashes``; touches them unless told not to."""
        n = 0
        blocks = self._blocks
        for h in hashes:
            if h not in blocks:
                break
            n += 1
        if touch:
            self._touch(hashes[:n])
        return n * self.block_tokens

    def insert(self, hashes: tuple[int, ...]) -> None:
        """Cache (or refresh) a finished prompt's blocks as most recently used."""
        blocks = self._blocks
        for h in reversed(hashes):
            if h in blocks:
                blocks.move_to_end(h)
            else:
                blocks[h] = None

    def _touch(self, hashes: tuple[int, ...]) -> None:
        # Deepest block first, so a prompt's leading blocks end up most recent and eviction
        # takes the tail of a chain first, as a radix tree evicts leaves before their parents.
        move = self._blocks.move_to_end
        for h in reversed(hashes):
            move(h)

    def clear(self) -> None:
        """Forget every cached block (``/flush_cache``)."""
        self._blocks.clear()

    def evict_to(self, max_tokens: int) -> int:
        """Drop least-recently-used blocks until at most ``max_tokens``; returns tokens freed."""
        freed = 0
        blocks = self._blocks
        while blocks and len(blocks) * self.block_tokens > max_tokens:
            blocks.popitem(last=False)
            freed += self.block_tokens
        return freed
