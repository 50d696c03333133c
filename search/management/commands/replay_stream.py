"""Replay captured Perplexity answers offline: how captures sent in by users get debugged.

    python manage.py replay_stream PATH [PATH ...] [--format json|html]

Either framing (server-sent events or JSON Lines, bare or as {"event", "data"}), `-` for
standard input. The JSON has `answer` (a Deep Research run's cover note) and `report` (its
report's Markdown, "" when there is none). Exit 0 when every
file was read, whatever the stream said; exit 2 with one line when a file cannot be read.
"""

from __future__ import annotations

import json
import sys
from typing import BinaryIO

from django.core.management.base import BaseCommand, CommandError

from pplxweb.perplexity.errors import ProtocolError
from pplxweb.perplexity.extract import Result, extract
from pplxweb.perplexity.merge import Snapshot, merge
from pplxweb.perplexity.sse import StreamParser
from search.render import render_answer, render_report, render_sources

CHUNK = 64 * 1024


def replay(handle: BinaryIO) -> Result:
    """Feed the bytes as the network would (in chunks) and extract the result at the end."""
    parser = StreamParser()
    snapshot = Snapshot()
    head = b""
    try:
        while chunk := handle.read(CHUNK):
            head = head or chunk[:512]
            for event in parser.feed(chunk):
                snapshot = merge(snapshot, event)
            if parser.ended or snapshot.over:
                break
        for event in parser.close():
            snapshot = merge(snapshot, event)
    except ProtocolError as exc:
        result = extract(snapshot, ended=True)
        return Result(**{**result.__dict__, "status": "failed", "error": exc.message})
    result = extract(snapshot, ended=True)
    if snapshot.over:
        return Result(**{**result.__dict__, "error": snapshot.over})
    if snapshot.events == 0 and head.lstrip()[:1] == b"<":
        page = "a Cloudflare challenge" if b"cdn-cgi" in head or b"Just a moment" in head else "a web page"
        message = f"This is {page}, not an answer stream."
        return Result(**{**result.__dict__, "status": "failed", "error": message})
    return result


def as_json(result: Result) -> dict:
    return {
        "status": "truncated" if result.status == "running" else result.status,
        "answer": result.answer,
        "report": result.report,
        "sources": [s.as_dict() for s in result.sources],
        "related": result.related,
        "images": [
            {"url": i.url, "caption": i.caption, "width": i.width, "height": i.height} for i in result.images
        ],
        "model": result.model,
        "backend_uuid": result.backend_uuid,
        "read_write_token": result.read_write_token,
        "thread_url_slug": result.thread_url_slug,
        "error": result.error,
    }


class Command(BaseCommand):
    help = "Print what pplxweb reads from captured Perplexity answer streams."

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help="capture files; - for stdin")
        parser.add_argument("--format", choices=("json", "html"), default="json")

    def handle(self, *args, **options) -> None:
        for path in options["paths"]:
            result = self._read(path)
            if options["format"] == "json":
                self.stdout.write(json.dumps(as_json(result), ensure_ascii=False))
            else:
                self.stdout.write(f"<!-- {path.replace('--', '- -')} -->")
                self.stdout.write(render_answer(result.answer, result.sources))
                if result.report:
                    self.stdout.write(render_report(result.report)[0])
                self.stdout.write(render_sources(result.sources))

    def _read(self, path: str) -> Result:
        if path == "-":
            return replay(sys.stdin.buffer)
        try:
            with open(path, "rb") as handle:
                return replay(handle)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}", returncode=2) from None
