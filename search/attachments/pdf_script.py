"""Whether a PDF carries script: a JavaScript or launch action in its dictionaries, written
plainly or hidden in a Flate-compressed object stream (`/Type /ObjStm`, PDF 1.5+).

The file is read through a memory map (memory stays flat whatever its size) as text between
streams and the streams' data:

- the text (the dictionaries outside object streams) may name none of `/JS`, `/JavaScript`,
  `/Launch`;
- a stream's data is bytes, not dictionaries: images, fonts, page contents. Three bytes of a
  scanned page's image are `/JS` about once in 20 MB, so stream data is only searched for the
  long names (`/JavaScript`, which every JavaScript action needs as its `/S`, and `/Launch`),
  which no image carries by chance;
- an object stream's data are dictionaries: it is inflated (FlateDecode, the one filter object
  streams use) and searched like the text. Inflating is bounded, so a zip bomb costs nothing:
  PER_STREAM inflated bytes each, IN_ALL together, at most MAX_STREAMS of them; an object stream
  beyond those bounds, damaged, or compressed some other way cannot be checked, and the file is
  refused for that (its own sentence). Image streams are never inflated.

Names are matched with their `#xx` escapes too (`/J#53` is `/JS` to a PDF reader).
"""

from __future__ import annotations

import mmap
import re
import zlib
from pathlib import Path

PER_STREAM = 8 * 1024 * 1024  # inflated bytes of one object stream
IN_ALL = 32 * 1024 * 1024  # inflated bytes of all of a file's object streams
MAX_STREAMS = 10_000  # object streams in one file
PIECE = 256 * 1024  # bytes inflated (or read) at a time
OVERLAP = 64  # bytes kept between pieces, so a name across two pieces is found
DICTIONARY = 4096  # how far before `stream` its dictionary is looked for

SCRIPT = "is a PDF with JavaScript or a launch action; pplxweb does not keep those."
UNCHECKED = (
    "is a PDF whose compressed object streams pplxweb cannot check (damaged, compressed in an "
    "unusual way, or over 8 MB each, 32 MB in all or 10,000 of them); it was not attached."
)


def _name(word: str) -> bytes:
    """A regex for the PDF name `/word`, each character written plainly or as `#xx`."""
    parts = []
    for char in word:
        code = f"{ord(char):02x}"
        escaped = f"#{re.escape(code[0])}[{code[1]}{code[1].upper()}]" if code[1].isalpha() else f"#{code}"
        parts.append(f"(?:{re.escape(char)}|{escaped})")
    return ("/" + "".join(parts)).encode()


def _names(*words: str) -> re.Pattern[bytes]:
    # not followed by another regular name character: `/JSON` is not `/JS`
    return re.compile(b"(?:" + b"|".join(_name(w) for w in words) + rb")(?![A-Za-z0-9#._-])")


ANY_SCRIPT = _names("JavaScript", "JS", "Launch")
LONG_SCRIPT = _names("JavaScript", "Launch")
OBJECT_STREAM = _names("ObjStm")
FLATE = re.compile(rb"\s*(?:/FlateDecode|\[\s*/FlateDecode\s*\])\s*(?:/|>>|$)")
FILTER = _names("Filter")
DECODE_PARMS = _names("DecodeParms")
STREAM = re.compile(rb"stream[ \t]*(?:\r\n|\n|\r)")  # the keyword, not `endstream` (see _next_stream)
END = b"endstream"
OBJ = re.compile(rb"\bobj\b")


class Unchecked(Exception):
    """An object stream that cannot be read within the bounds."""


def problem(path: Path) -> str | None:
    """None when the PDF at `path` shows no script; else what is wrong, as the end of a sentence
    that starts with its name (SCRIPT or UNCHECKED)."""
    if path.stat().st_size == 0:
        return None
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            return SCRIPT if _has_script(data) else None
        except Unchecked:
            return UNCHECKED


def _has_script(data) -> bool:
    budget = [IN_ALL]
    streams = 0
    position = 0
    while True:
        found = _next_stream(data, position)
        text_end = found.start() if found else len(data)
        if ANY_SCRIPT.search(data, position, text_end):
            return True
        if found is None:
            return False
        start = found.end()
        stop = data.find(END, start)
        stop = len(data) if stop == -1 else stop
        if LONG_SCRIPT.search(data, start, stop):
            return True
        dictionary = _dictionary(data, found.start(), position)
        if OBJECT_STREAM.search(dictionary):
            streams += 1
            if streams > MAX_STREAMS:
                raise Unchecked
            if _object_stream_has_script(data, start, stop, dictionary, budget):
                return True
        position = stop + len(END)


def _next_stream(data, position: int) -> re.Match[bytes] | None:
    """The next `stream` keyword (a literal search: a look-behind made it 50 times slower)."""
    while (found := STREAM.search(data, position)) is not None:
        if found.start() == 0 or not data[found.start() - 1 : found.start()].isalpha():
            return found
        position = found.end()
    return None


def _dictionary(data, keyword: int, floor: int) -> bytes:
    """The stream's dictionary: from its `obj` keyword (at most DICTIONARY bytes back) to `stream`."""
    lowest = max(floor, keyword - DICTIONARY)
    before = data[lowest:keyword]
    objs = list(OBJ.finditer(before))
    return before[objs[-1].end() :] if objs else before


def _object_stream_has_script(data, start: int, stop: int, dictionary: bytes, budget: list[int]) -> bool:
    filters = FILTER.search(dictionary)
    if filters is None:  # stored plainly: its dictionaries are right there
        return bool(ANY_SCRIPT.search(data, start, stop))
    if not FLATE.match(dictionary, filters.end()) or DECODE_PARMS.search(dictionary):
        raise Unchecked  # a predictor or another filter would hide the names from this search
    inflater = zlib.decompressobj()
    inflated, tail = 0, b""
    try:
        for offset in range(start, stop, PIECE):
            pending = data[offset : min(offset + PIECE, stop)]
            while pending and not inflater.eof:
                out = inflater.decompress(pending, PIECE)
                inflated += len(out)
                budget[0] -= len(out)
                if inflated > PER_STREAM or budget[0] < 0:
                    raise Unchecked
                if ANY_SCRIPT.search(tail + out):
                    return True
                tail = (tail + out)[-OVERLAP:]
                pending = inflater.unconsumed_tail
            if inflater.eof:
                return False
    except zlib.error:
        raise Unchecked from None
    raise Unchecked  # the compressed data ended before its end: damaged
