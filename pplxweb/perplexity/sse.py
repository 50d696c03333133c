"""Bytes, split anywhere, into Perplexity stream events.

Two framings arrive: the wire's server-sent events (`event:` / `data:` lines, CRLF or LF, a
blank line ends a frame) and JSON Lines (one event object per line, as saved captures are).
The framing is chosen from the first non-blank line. A frame whose data is not a JSON object
is skipped and counted; `[DONE]` is ignored; `event: end_of_stream` ends the stream.

Hostile bytes cost a bounded amount: a frame larger than MAX_FRAME is an error (so a body with no
line ends can never fill memory), and so is one whose parsing would hold more than MAX_PARSED
(values.parsed_size: a few bytes of `{}` or `"a",` cost a hundred once parsed). Each byte is
looked at a bounded number of times, however the body is split.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import NamedTuple

from pplxweb.perplexity.errors import ProtocolError
from pplxweb.perplexity.values import MAX_DOCUMENT, MAX_PARSED, parsed_size

MAX_FRAME = MAX_DOCUMENT
TOO_LARGE = (
    "Perplexity sent a frame larger than {} MB, more than any answer needs; pplxweb stopped "
    "reading this answer there."
)
TOO_COSTLY = (
    "Perplexity sent a frame that would take more than {} MB to read (a very large number of "
    "small parts); pplxweb stopped reading this answer there."
)


def _mb(size: int) -> int:
    return size // (1024 * 1024)


class Event(NamedTuple):
    name: str
    data: dict


@dataclass
class StreamParser:
    """Feed chunks with feed(); call close() at EOF. Each returns the events completed."""

    max_frame: int = MAX_FRAME
    skipped: int = 0  # frames whose data was not a JSON object
    ended: bool = False  # end_of_stream seen
    _buffer: bytearray = field(default_factory=bytearray)
    _scan: int = 0  # where to look for the next line end (never rescans old bytes)
    _mode: str = ""  # "", "sse" or "jsonl"
    _event: str = ""
    _data: list[bytes] = field(default_factory=list)
    _data_size: int = 0

    def feed(self, chunk: bytes) -> list[Event]:
        if self.ended or not chunk:
            return []
        # what was left by the last feed has no LF in it: look for one in the new bytes only
        fresh = len(self._buffer)
        self._buffer += chunk
        events: list[Event] = []
        buffer = self._buffer
        # The usual case, all line ends LF or CRLF: split every complete line at once (in C).
        last = buffer.rfind(b"\n", fresh)
        if last >= 0:
            with memoryview(buffer) as view:  # one copy of the lines, not two
                lines = bytes(view[: last + 1])
            if b"\r" in lines:
                lines = lines.replace(b"\r\n", b"\n")
            if b"\r" not in lines:  # else a lone CR ends a line: the scan below handles it
                del buffer[: last + 1]
                self._scan = 0
                for line in lines.split(b"\n")[:-1]:
                    self._line(line, events)
                    if self.ended:
                        buffer.clear()
                        return events
        # What is left (lines ended by a lone CR, or all of it) goes line by line.
        start = 0
        while True:
            end = self._line_end(buffer, max(start, self._scan))
            if end is None:
                break
            line_stop, next_start = end
            self._line(bytes(buffer[start:line_stop]), events)
            start = next_start
            self._scan = start
            if self.ended:
                break
        del buffer[:start]
        self._scan = max(0, self._scan - start)
        if len(buffer) + self._data_size > self.max_frame:
            raise ProtocolError(TOO_LARGE.format(_mb(self.max_frame)))
        if self.ended:
            buffer.clear()
        return events

    def close(self) -> list[Event]:
        """End of input: a last line without its line end, a last frame without its blank line."""
        events: list[Event] = []
        if not self.ended and self._buffer:
            line = bytes(self._buffer.rstrip(b"\r"))
            self._buffer.clear()
            self._line(line, events)
        if not self.ended:
            self._dispatch(events)
        return events

    @staticmethod
    def _line_end(buffer: bytearray, scan: int) -> tuple[int, int] | None:
        """(end of line, start of next line) for the first CR, LF or CRLF at/after scan."""
        lf = buffer.find(b"\n", scan)
        cr = buffer.find(b"\r", scan, lf if lf >= 0 else len(buffer))
        if cr >= 0:
            if cr + 1 == len(buffer):
                return None  # a CR at the end may be half of a CRLF: wait for the next byte
            return cr, cr + (2 if buffer[cr + 1 : cr + 2] == b"\n" else 1)
        if lf >= 0:
            return lf, lf + 1
        return None

    def _line(self, line: bytes, events: list[Event]) -> None:
        if not self._mode:
            stripped = line.strip()
            if not stripped:
                return
            self._mode = "jsonl" if stripped[:1] in (b"{", b"[") else "sse"
        if self._mode == "jsonl":
            if len(line) > self.max_frame:
                raise ProtocolError(TOO_LARGE.format(_mb(self.max_frame)))
            if line.strip():
                self._emit("message", line, events)
            return
        if not line:
            self._dispatch(events)
            return
        if line.startswith(b":"):
            return  # comment
        colon = line.find(b":")
        name = line if colon < 0 else line[:colon]
        start = colon + 2 if line[colon + 1 : colon + 2] == b" " else colon + 1
        if name == b"data":
            value = line[start:] if colon >= 0 else b""  # one copy of a large frame, not two
            self._data.append(value)
            self._data_size += len(value) + 1
            if self._data_size > self.max_frame:
                raise ProtocolError(TOO_LARGE.format(_mb(self.max_frame)))
        elif name == b"event":
            self._event = line[start:].decode("utf-8", "replace").strip() if colon >= 0 else ""
        # id:, retry: and unknown fields are ignored

    def _dispatch(self, events: list[Event]) -> None:
        name = self._event or "message"
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        had_data = bool(self._data)
        self._event, self._data, self._data_size = "", [], 0
        if name == "end_of_stream":
            self.ended = True
            return
        if had_data:
            self._emit(name, data, events)

    def _emit(self, name: str, data: bytes, events: list[Event]) -> None:
        if data.strip() == b"[DONE]":
            return
        if parsed_size(data) > MAX_PARSED:
            raise ProtocolError(TOO_COSTLY.format(_mb(MAX_PARSED)))
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):  # invalid UTF-8 too; nested deeper than Python goes
            self.skipped += 1
            return
        if not isinstance(value, dict):
            self.skipped += 1
            return
        if self._mode == "jsonl" and isinstance(value.get("data"), dict) and set(value) <= {"event", "data"}:
            # some tools write JSON lines as {"event": ..., "data": {...}} (fixtures README)
            name = value["event"] if isinstance(value.get("event"), str) else name
            if name == "end_of_stream":
                self.ended = True
                return
            value = value["data"]
        events.append(Event(name, value))


def parse_all(data: bytes) -> tuple[list[Event], StreamParser]:
    """Every event of a complete body (for replaying captures)."""
    parser = StreamParser()
    events = parser.feed(data)
    events += parser.close()
    return events, parser
