"""Stream events into one snapshot of the answer (docs/protocol.md §7).

`merge(snapshot, event)` returns a new Snapshot and leaves the old one as it was: top-level
fields and the block table are copied shallowly (their size is fixed by the protocol, not by
the answer), blocks are replaced or patched along the changed path only, and markdown chunk
lists share an append-only store, so one event costs time in proportion to its own size.

Rules:
- top level: a later value wins, except the first `read_write_token` and `thread_url_slug`;
- blocks are keyed by `intended_usage`; a direct block replaces the stored one;
- `diff_block` applies an RFC 6902 patch (add / remove / replace; path "" is the whole
  document) to the stored `<field>`; a patch that fails is skipped and counted;
- `markdown_block.chunks` are spliced at `chunk_starting_offset` (a missing offset appends,
  an offset past the end appends, so text already shown never vanishes);
- the terminal frame (COMPLETED + final) is a full snapshot: its blocks replace what the diffs
  built, and its markdown `answer` is the answer even when shorter (docs/protocol.md §7.5).

What an answer holds is bounded (a hostile upstream could otherwise send 100 MB of it): each
value, block and chunk is costed as it arrives (`held`, in bytes, about what Python holds for
it; a value replaced or removed gives its cost back), and an event that would take the answer
past MAX_HELD, past MAX_FIELDS fields or blocks, or that carries more than MAX_PATCHES patches,
is not merged: the snapshot before it is kept with `over` set to the sentence, and it merges
nothing more. Costing an event is proportional to the event (a replaced value's cost is walked
once, when it goes).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Any

from pplxweb.perplexity.sse import Event
from pplxweb.perplexity.values import MAX_TEXT

KEEP_FIRST = ("read_write_token", "thread_url_slug")
TERMINAL_STATUS = "COMPLETED"
MAX_HELD = 32 * 1024 * 1024  # bytes one answer may hold (a real one: a few MB at most, docs/protocol.md §5.1)
MAX_FIELDS = 500  # top-level fields, and blocks, of one answer (a real one has about 40 and 30)
MAX_PATCHES = 5000  # patches in one event (a research report's whole run sends about a thousand)
OVER = (
    "Perplexity's answer grew larger than pplxweb keeps ({}); pplxweb stopped reading it there "
    "and kept what had arrived."
)


def cost(value: Any) -> int:
    """About the bytes Python holds for a parsed JSON value (walked without recursion: a value
    may be nested as deep as the parser allows)."""
    if not isinstance(value, dict | list):
        return sys.getsizeof(value)
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total


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


@dataclass(frozen=True)
class Block:
    """One block: `kind` is its field name (`markdown_block`, `web_result_block`, ...)."""

    kind: str
    doc: Any
    chunks: ChunkView | None = None  # markdown blocks only; `doc` then holds the other fields


@dataclass(frozen=True)
class Snapshot:
    top: dict = field(default_factory=dict)
    blocks: dict[str, Block] = field(default_factory=dict)
    block_order: tuple[str, ...] = ()
    events: int = 0
    patch_failures: int = 0
    completed: bool = False
    failed: bool = False
    held: int = 0  # what it holds, in bytes (see the module's docstring)
    # a top-level field's cost by its name, a block's by ("block", usage)
    costs: dict = field(default_factory=dict)
    over: str = ""  # why it stopped growing: an event would have taken it past a cap

    def block(self, usage: str) -> Block | None:
        return self.blocks.get(usage)

    def markdown(self, usage: str) -> str | None:
        block = self.blocks.get(usage)
        if block is None or block.kind != "markdown_block":
            return None
        answer = block.doc.get("answer") if isinstance(block.doc, dict) else None
        text = block.chunks.text(MAX_TEXT + 1) if block.chunks is not None else ""  # more is cut anyway
        # The terminal frame's `answer` wins even when shorter (docs/protocol.md §7.5: a thinking
        # model renumbers its citations there); before it, whichever is further along.
        if isinstance(answer, str) and answer and (self.completed or len(answer) >= len(text)):
            return answer
        return text


def is_terminal(data: dict) -> bool:
    """Only COMPLETED with final or final_sse_message ends an answer (PENDING+final is a trap)."""
    status = str(data.get("status") or "").upper()
    return status == TERMINAL_STATUS and bool(data.get("final") or data.get("final_sse_message"))


def is_failure(data: dict) -> bool:
    return str(data.get("status") or "").upper() == "FAILED" or bool(data.get("error_code"))


def merge(snapshot: Snapshot, event: Event | dict) -> Snapshot:
    """The snapshot after one event. Never raises on odd input: odd parts are ignored. A snapshot
    that is `over` a cap merges nothing more."""
    data = event.data if isinstance(event, Event) else event
    if not isinstance(data, dict) or snapshot.over:
        return snapshot
    top, costs, held = dict(snapshot.top), dict(snapshot.costs), snapshot.held
    for key, value in data.items():
        if key == "blocks" or (key in KEEP_FIRST and top.get(key)):
            continue
        top[key] = value
        if isinstance(value, str | dict | list):  # other values cost a few dozen bytes apiece
            worth = cost(value)
            held += worth - costs.get(key, 0)
            costs[key] = worth
        elif key in costs:
            held -= costs.pop(key)
    blocks, order, failures, patches = snapshot.blocks, snapshot.block_order, snapshot.patch_failures, 0
    incoming = data.get("blocks")
    terminal = is_terminal(data)
    if isinstance(incoming, list) and incoming:
        blocks, order = dict(blocks), list(order)
        for raw in incoming:
            failed, change, count = _merge_block(blocks, order, costs, raw, terminal)
            failures += failed
            held += change
            patches += count
        order = tuple(order)
    over = _over(held, len(top), len(blocks), patches)
    if over:
        return replace(snapshot, over=over)
    return Snapshot(
        top=top,
        blocks=blocks,
        block_order=order,
        events=snapshot.events + 1,
        patch_failures=failures,
        completed=snapshot.completed or terminal,
        failed=snapshot.failed or is_failure(data),
        held=held,
        costs=costs,
    )


def _over(held: int, fields: int, blocks: int, patches: int) -> str:
    if held > MAX_HELD:
        return OVER.format(f"{MAX_HELD // (1024 * 1024)} MB")
    if fields > MAX_FIELDS or blocks > MAX_FIELDS:
        return OVER.format(f"{MAX_FIELDS} fields or blocks")
    if patches > MAX_PATCHES:
        return OVER.format(f"{MAX_PATCHES} changes in one update")
    return ""


def _block_cost(block: Block, doc_cost: int) -> int:
    return doc_cost + (block.chunks.size if block.chunks is not None else 0)


def _merge_block(
    blocks: dict[str, Block], order: list[str], costs: dict, raw: Any, terminal: bool = False
) -> tuple[int, int, int]:
    """Merge one block into `blocks` (a fresh dict) and its cost into `costs` (one too); return
    the number of failed patches, how much more the answer holds, and how many patches it had
    (merge refuses too many: each copies its path). The terminal frame's blocks are a full
    snapshot (docs/protocol.md §7.5): they replace, never append."""
    if not isinstance(raw, dict):
        return 1, 0, 0
    usage = raw.get("intended_usage")
    if not isinstance(usage, str) or not usage:
        return 1, 0, 0
    if usage not in blocks:
        order.append(usage)
    key = ("block", usage)
    old = blocks.get(usage)
    before = _block_cost(old, costs.get(key, 0)) if old is not None else 0
    diff = raw.get("diff_block")
    patches = 0
    if isinstance(diff, dict):
        patches = len(diff["patches"]) if isinstance(diff.get("patches"), list) else 0
        if patches > MAX_PATCHES:
            return 0, 0, patches
        failures, doc_cost = _apply_diff(blocks, usage, diff, costs.get(key, 0))
    else:
        for kind, doc in raw.items():
            if kind.endswith("_block") and kind != "diff_block":
                blocks[usage] = _direct(old, kind, doc, terminal)
                break
        else:
            return 0, 0, 0
        failures, doc_cost = 0, cost(blocks[usage].doc)
    costs[key] = doc_cost
    return failures, _block_cost(blocks[usage], doc_cost) - before, patches


def _direct(old: Block | None, kind: str, doc: Any, terminal: bool = False) -> Block:
    if kind != "markdown_block" or not isinstance(doc, dict):
        return Block(kind, doc)
    chunks = doc.get("chunks")
    rest = {k: v for k, v in doc.items() if k not in ("chunks", "chunk_starting_offset")}
    view = old.chunks if old is not None and old.chunks is not None else ChunkView()
    if isinstance(chunks, list):
        offset = doc.get("chunk_starting_offset")
        offset = offset if isinstance(offset, int) and offset >= 0 else (0 if terminal else None)
        view = view.splice(offset, [c for c in chunks if isinstance(c, str)])
    return Block(kind, rest, view)


def _apply_diff(blocks: dict[str, Block], usage: str, diff: dict, doc_cost: int) -> tuple[int, int]:
    """Apply a diff_block's patches; returns (failed patches, the cost of the block's doc after)."""
    kind = diff.get("field")
    patches = diff.get("patches")
    if not isinstance(kind, str) or not isinstance(patches, list):
        return 1, doc_cost
    old = blocks.get(usage)
    if old is not None and old.kind == kind and old.chunks is not None:
        doc: Any = {**old.doc, "chunks": old.chunks}  # a markdown block: patch around its chunks
    elif old is not None and old.kind == kind:
        doc = old.doc
    else:
        doc, doc_cost = {}, 0
    failures = 0
    for patch in patches:
        try:
            doc, change = _apply_costed(doc, patch)
        except PatchError:
            failures += 1
            continue
        doc_cost += change
    if kind == "markdown_block" and isinstance(doc, dict):
        view = doc.get("chunks")
        if isinstance(view, ChunkView):
            rest = {k: v for k, v in doc.items() if k != "chunks"}
            blocks[usage] = Block(kind, rest, view)
            return failures, doc_cost
        blocks[usage] = _direct(None, kind, doc)
        return failures, doc_cost
    blocks[usage] = Block(kind, doc)
    return failures, doc_cost


class PatchError(Exception):
    pass


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError("path is not a string")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("path must start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def apply_patch(doc: Any, patch: Any) -> Any:
    """One JSON Patch operation, copying only along its path; PatchError when it cannot apply."""
    return _apply_costed(doc, patch)[0]


def _apply_costed(doc: Any, patch: Any) -> tuple[Any, int]:
    """apply_patch(), and how much more the document holds after it (a value in, a value out;
    what goes through a markdown block's chunks is their view's to count)."""
    if not isinstance(patch, dict):
        raise PatchError("patch is not an object")
    op = patch.get("op")
    if op not in ("add", "remove", "replace"):
        raise PatchError(f"unsupported op {op!r}")
    parts = _pointer(patch.get("path"))
    if not parts:
        if op == "remove":
            raise PatchError("cannot remove the whole document")
        if "value" not in patch:
            raise PatchError("no value")
        return patch["value"], cost(patch["value"]) - cost(doc)
    if op != "remove" and "value" not in patch:
        raise PatchError("no value")
    freed: list[int] = []
    new = _patch_at(doc, parts, op, patch.get("value"), freed)
    added = 0 if op == "remove" or _in_chunks(doc, parts) else cost(patch["value"])
    return new, added - sum(freed)


def _in_chunks(doc: Any, parts: list[str]) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get(parts[0]), ChunkView)


def _patch_at(node: Any, parts: list[str], op: str, value: Any, freed: list[int]) -> Any:
    key, rest = parts[0], parts[1:]
    if isinstance(node, ChunkView):
        return _patch_chunks(node, key, rest, op, value)
    if isinstance(node, dict):
        if rest:
            if key not in node:
                raise PatchError("missing key")
            return {**node, key: _patch_at(node[key], rest, op, value, freed)}
        if op == "remove":
            if key not in node:
                raise PatchError("missing key")
            freed.append(_gone(node[key]))
            return {k: v for k, v in node.items() if k != key}
        if op == "replace" and key not in node:
            raise PatchError("missing key")
        if key in node:
            freed.append(_gone(node[key]))
        return {**node, key: value}
    if isinstance(node, list):
        index = _index(key, len(node), allow_end=(op == "add" and not rest))
        if rest:
            copy = list(node)
            copy[index] = _patch_at(node[index], rest, op, value, freed)
            return copy
        copy = list(node)
        if op == "add":
            copy.insert(index, value)
        elif op == "remove":
            freed.append(_gone(copy.pop(index)))
        else:
            freed.append(_gone(copy[index]))
            copy[index] = value
        return copy
    raise PatchError("path goes through a value that is not a container")


def _gone(value: Any) -> int:
    """The cost a replaced or removed value gives back (a chunk view's is its own)."""
    return 0 if isinstance(value, ChunkView) else cost(value)


def _index(key: str, size: int, allow_end: bool) -> int:
    if key == "-" and allow_end:
        return size
    if not key.isdigit() or (len(key) > 1 and key[0] == "0"):
        raise PatchError("bad list index")
    index = int(key)
    if index > size or (index == size and not allow_end):
        raise PatchError("list index out of range")
    return index


def _patch_chunks(view: ChunkView, key: str, rest: list[str], op: str, value: Any) -> ChunkView:
    """Patches on markdown chunks go through the shared store (appends stay O(1))."""
    if rest:
        raise PatchError("chunks hold strings")
    index = _index(key, len(view), allow_end=(op == "add"))
    if op == "add" and isinstance(value, str):
        if index == len(view):
            return view.splice(index, [value])
        items = view.store.items[: view.length]
        return ChunkView.of([*items[:index], value, *items[index:]])
    items = view.store.items[: view.length]
    if op == "remove":
        del items[index]
    elif isinstance(value, str):
        items[index] = value
    else:
        raise PatchError("chunks hold strings")
    return ChunkView.of(items)


def merge_all(events: list[Event]) -> Snapshot:
    snapshot = Snapshot()
    for event in events:
        snapshot = merge(snapshot, event)
    return snapshot


__all__ = [
    "MAX_HELD",
    "Block",
    "ChunkView",
    "Snapshot",
    "apply_patch",
    "cost",
    "is_terminal",
    "merge",
    "merge_all",
]
