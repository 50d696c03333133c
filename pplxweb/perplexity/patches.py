"""JSON Patch (RFC 6902: add, remove, replace; path "" is the whole document) applied copying only
along the path, and costed: what the document holds more after a patch (a value in, the value it
replaced or removed out), walked once for each value, so a patch costs time in proportion to its
own size and its path's containers. Patches on a markdown block's chunks go through its view."""

from __future__ import annotations

from typing import Any

from pplxweb.perplexity.chunks import ChunkView
from pplxweb.perplexity.values import cost


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
    return apply_costed(doc, patch)[0]


def apply_costed(doc: Any, patch: Any) -> tuple[Any, int]:
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
