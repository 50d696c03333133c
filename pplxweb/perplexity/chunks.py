"""A markdown block's chunks (docs/protocol.md §7.4): an append-only store shared by snapshots,
each snapshot seeing its own prefix, so appending a chunk costs the chunk, not the answer so far.
A view knows what its chunks cost to hold (merge counts it against MAX_HELD) and their length."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field


def _slot_cost(items: list[str]) -> int:
    return sum(sys.getsizeof(item) + 8 for item in items)


class Chunks:
    """An append-only chunk store shared by snapshots; each snapshot sees its own prefix."""

    __slots__ = ("items",)

    def __init__(self, items: list[str] | None = None) -> None:
        self.items: list[str] = items if items is not None else []


@dataclass(frozen=True)
class ChunkView:
    store: Chunks = field(default_factory=Chunks)
    length: int = 0
    size: int = 0  # what its chunks cost (cost() of each, and its slot)
    chars: int = 0  # the length of its text

    @classmethod
    def of(cls, items: list[str]) -> ChunkView:
        return cls(Chunks(items), len(items), _slot_cost(items), sum(map(len, items)))

    def splice(self, offset: int | None, incoming: list[str]) -> ChunkView:
        if offset is None or offset > self.length:
            offset = self.length
        if offset == 0:
            return ChunkView.of(list(incoming))
        if offset == self.length == len(self.store.items):
            self.store.items.extend(incoming)  # older views stop at their own length
            return ChunkView(
                self.store,
                self.length + len(incoming),
                self.size + _slot_cost(incoming),
                self.chars + sum(map(len, incoming)),
            )
        return ChunkView.of(self.store.items[:offset] + incoming)

    def text(self, limit: int | None = None) -> str:
        """Its text; with `limit`, only the chunks that reach that length (an answer of millions
        of characters is never joined whole to keep its first MAX_TEXT)."""
        items = self.store.items
        if limit is None or self.chars <= limit:
            return "".join(items[: self.length])
        end = taken = 0
        while end < self.length and taken <= limit:
            taken += len(items[end])
            end += 1
        return "".join(items[:end])

    def __len__(self) -> int:
        return self.length
