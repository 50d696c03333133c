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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pplxweb.perplexity.sse import Event

KEEP_FIRST = ("read_write_token", "thread_url_slug")
TERMINAL_STATUS = "COMPLETED"


class Chunks:
    """An append-only chunk store shared by snapshots; each snapshot sees its own prefix."""

    __slots__ = ("items",)

    def __init__(self, items: list[str] | None = None) -> None:
        self.items: list[str] = items if items is not None else []


@dataclass(frozen=True)
class ChunkView:
    store: Chunks = field(default_factory=Chunks)
    length: int = 0

    def splice(self, offset: int | None, incoming: list[str]) -> ChunkView:
        if offset is None or offset > self.length:
            offset = self.length
        if offset == 0:
            return ChunkView(Chunks(list(incoming)), len(incoming))
        if offset == self.length == len(self.store.items):
            self.store.items.extend(incoming)  # older views stop at their own length
            return ChunkView(self.store, self.length + len(incoming))
        items = self.store.items[:offset] + incoming
        return ChunkView(Chunks(items), len(items))

    def text(self) -> str:
        return "".join(self.store.items[: self.length])

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

    def block(self, usage: str) -> Block | None:
        return self.blocks.get(usage)

    def markdown(self, usage: str) -> str | None:
        block = self.blocks.get(usage)
        if block is None or block.kind != "markdown_block":
            return None
        answer = block.doc.get("answer") if isinstance(block.doc, dict) else None
        text = block.chunks.text() if block.chunks is not None else ""
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
    """The snapshot after one event. Never raises on odd input: odd parts are ignored."""
    data = event.data if isinstance(event, Event) else event
    if not isinstance(data, dict):
        return snapshot
    top = dict(snapshot.top)
    for key, value in data.items():
        if key == "blocks":
            continue
        if key in KEEP_FIRST and top.get(key):
            continue
        top[key] = value
    blocks, order, failures = snapshot.blocks, snapshot.block_order, snapshot.patch_failures
    incoming = data.get("blocks")
    terminal = is_terminal(data)
    if isinstance(incoming, list) and incoming:
        blocks, order = dict(blocks), list(order)
        for raw in incoming:
            failures += _merge_block(blocks, order, raw, terminal)
        order = tuple(order)
    return Snapshot(
        top=top,
        blocks=blocks,
        block_order=order,
        events=snapshot.events + 1,
        patch_failures=failures,
        completed=snapshot.completed or terminal,
        failed=snapshot.failed or is_failure(data),
    )


def _merge_block(blocks: dict[str, Block], order: list[str], raw: Any, terminal: bool = False) -> int:
    """Merge one block into `blocks` (a fresh dict); return the number of failed patches. The
    terminal frame's blocks are a full snapshot (docs/protocol.md §7.5): they replace, never append."""
    if not isinstance(raw, dict):
        return 1
    usage = raw.get("intended_usage")
    if not isinstance(usage, str) or not usage:
        return 1
    if usage not in blocks:
        order.append(usage)
    diff = raw.get("diff_block")
    if isinstance(diff, dict):
        return _apply_diff(blocks, usage, diff)
    for kind, doc in raw.items():
        if kind.endswith("_block") and kind != "diff_block":
            blocks[usage] = _direct(blocks.get(usage), kind, doc, terminal)
            return 0
    return 0


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


def _apply_diff(blocks: dict[str, Block], usage: str, diff: dict) -> int:
    kind = diff.get("field")
    patches = diff.get("patches")
    if not isinstance(kind, str) or not isinstance(patches, list):
        return 1
    old = blocks.get(usage)
    if old is not None and old.kind == kind and old.chunks is not None:
        doc: Any = {**old.doc, "chunks": old.chunks}  # a markdown block: patch around its chunks
    else:
        doc = old.doc if old is not None and old.kind == kind else {}
    failures = 0
    for patch in patches:
        try:
            doc = apply_patch(doc, patch)
        except PatchError:
            failures += 1
    if kind == "markdown_block" and isinstance(doc, dict):
        view = doc.get("chunks")
        if isinstance(view, ChunkView):
            rest = {k: v for k, v in doc.items() if k != "chunks"}
            blocks[usage] = Block(kind, rest, view)
            return failures
        blocks[usage] = _direct(None, kind, doc)
        return failures
    blocks[usage] = Block(kind, doc)
    return failures


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
        return patch["value"]
    if op != "remove" and "value" not in patch:
        raise PatchError("no value")
    return _patch_at(doc, parts, op, patch.get("value"))


def _patch_at(node: Any, parts: list[str], op: str, value: Any) -> Any:
    key, rest = parts[0], parts[1:]
    if isinstance(node, ChunkView):
        return _patch_chunks(node, key, rest, op, value)
    if isinstance(node, dict):
        if rest:
            if key not in node:
                raise PatchError("missing key")
            return {**node, key: _patch_at(node[key], rest, op, value)}
        if op == "remove":
            if key not in node:
                raise PatchError("missing key")
            return {k: v for k, v in node.items() if k != key}
        if op == "replace" and key not in node:
            raise PatchError("missing key")
        return {**node, key: value}
    if isinstance(node, list):
        index = _index(key, len(node), allow_end=(op == "add" and not rest))
        if rest:
            copy = list(node)
            copy[index] = _patch_at(node[index], rest, op, value)
            return copy
        copy = list(node)
        if op == "add":
            copy.insert(index, value)
        elif op == "remove":
            del copy[index]
        else:
            copy[index] = value
        return copy
    raise PatchError("path goes through a value that is not a container")


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
        return ChunkView(Chunks([*items[:index], value, *items[index:]]), view.length + 1)
    items = view.store.items[: view.length]
    if op == "remove":
        del items[index]
    elif isinstance(value, str):
        items[index] = value
    else:
        raise PatchError("chunks hold strings")
    return ChunkView(Chunks(items), len(items))


def merge_all(events: list[Event]) -> Snapshot:
    snapshot = Snapshot()
    for event in events:
        snapshot = merge(snapshot, event)
    return snapshot


__all__ = [
    "Block",
    "ChunkView",
    "Snapshot",
    "apply_patch",
    "is_terminal",
    "merge",
    "merge_all",
]
