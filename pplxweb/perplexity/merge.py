"""Stream events into one snapshot of the answer (docs/protocol.md §7).

`merge(snapshot, event)` returns a new Snapshot and leaves the old one as it was: top-level
fields and the block table are copied shallowly (their size is fixed by the protocol, not by
the answer), blocks are replaced or patched along the changed path only, and markdown chunk
lists share an append-only store, so one event costs time in proportion to its own size.

Rules:
- top level: a later value wins, except the first `read_write_token` and `thread_url_slug`;
- blocks are keyed by `intended_usage`; a direct block replaces the stored one;
- `diff_block` applies an RFC 6902 patch (add / remove / replace; path "" is the whole
  document; patches.py) to the stored `<field>`; a patch that fails is skipped and counted;
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

from dataclasses import dataclass, field, replace
from typing import Any

from pplxweb.perplexity.chunks import ChunkView
from pplxweb.perplexity.patches import PatchError, apply_costed, apply_patch
from pplxweb.perplexity.sse import Event
from pplxweb.perplexity.values import MAX_TEXT, cost

KEEP_FIRST = ("read_write_token", "thread_url_slug")
TERMINAL_STATUS = "COMPLETED"
MAX_HELD = 16 * 1024 * 1024  # bytes one answer may hold (a real one: a few MB at most, docs/protocol.md §5.1)
MAX_FIELDS = 500  # top-level fields, and blocks, of one answer (a real one has about 40 and 30)
MAX_PATCHES = 5000  # patches in one event (a research report's whole run sends about a thousand)
OVER = (
    "Perplexity's answer grew larger than pplxweb keeps ({}); pplxweb stopped reading it there "
    "and kept what had arrived."
)


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
            doc, change = apply_costed(doc, patch)
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


def merge_all(events: list[Event]) -> Snapshot:
    snapshot = Snapshot()
    for event in events:
        snapshot = merge(snapshot, event)
    return snapshot


__all__ = [
    "MAX_HELD",
    "Block",
    "ChunkView",
    "PatchError",
    "Snapshot",
    "apply_patch",
    "cost",
    "is_terminal",
    "merge",
    "merge_all",
]
