"""parsed_size() never says much less than json.loads really holds, whatever the shape: the cost
figures are measured here, on the shapes a hostile document would use to make a few bytes cost
many (empty objects, short strings, keys, nested lists, wide characters)."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from pplxweb.perplexity.values import parsed_size

N = 100_000


def joined(item: bytes, n: int = N) -> bytes:
    return b"[" + b",".join([item] * n) + b"]"


SHAPES = {
    "empty objects": joined(b"{}"),
    "small objects": joined(b'{"a":1}'),
    "objects of eight keys": b"["
    + b",".join(b"{" + b",".join(b'"k%d_%d":%d' % (j, i, i) for j in range(8)) + b"}" for i in range(N // 4))
    + b"]",
    "short strings": joined(b'"ab"'),
    "distinct strings": b"[" + b",".join(b'"%d"' % i for i in range(N)) + b"]",
    "wide strings": b"[" + b",".join(f'"\u00e9{i}"'.encode() for i in range(N)) + b"]",
    "floats": joined(b"0.5"),
    "large integers": b"[" + b",".join(b"%d" % (10**9 + i) for i in range(N)) + b"]",
    "empty lists": joined(b"[]"),
    "nested lists": joined(b"[[1]]"),
    "keys": b"{" + b",".join(b'"k%d":1' % i for i in range(N)) + b"}",
    "keys with strings": b"{" + b",".join(b'"k%d":"v%d"' % (i, i) for i in range(N)) + b"}",
    "one emoji in ASCII": json.dumps(["x" * 1_000_000 + "\U0001f600"], ensure_ascii=False).encode(),
    "prose": json.dumps({"answer": "Paris lies on the Seine, in France. " * 30_000}).encode(),
}


@pytest.mark.parametrize("name", SHAPES)
def test_the_estimate_covers_what_parsing_holds(name):
    raw = SHAPES[name]
    tracemalloc.start()
    try:
        value = json.loads(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del value
    held = peak + len(raw)  # the bytes themselves are held while they are parsed
    assert parsed_size(raw) >= held * 0.9, (parsed_size(raw), held)
    # and it is not wildly more for the shapes real documents have
    if name in ("prose", "distinct strings", "short strings", "keys with strings"):
        assert parsed_size(raw) <= held * 4
