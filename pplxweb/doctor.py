"""`manage.py doctor`: is Perplexity still speaking what pplxweb reads? (docs/protocol.md §14)

Checks, in plain sentences: the linked session (`/api/auth/session`), the model table (v2;
what was added and removed since the cached one), and with `probe` one cheap ask (it spends a
search) with the shapes of its stream pplxweb does not know. `capture_report` does the shape
report offline on a saved stream. The last result is kept in DATA_DIR/doctor.json for Settings.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from pplxweb.datadir import private_file
from pplxweb.perplexity import drift
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import AuthError, ChallengeError, PerplexityError, RequestRejected
from pplxweb.perplexity.extract import ANSWER_USAGES, extract
from pplxweb.perplexity.merge import Snapshot, merge
from pplxweb.perplexity.request import API_VERSION, AskOptions, AskRequest
from pplxweb.perplexity.sse import StreamParser

PROBE_QUESTION = "Reply with exactly OK"
CHUNK = 64 * 1024


@dataclass
class Report:
    lines: list[tuple[str, str]] = field(default_factory=list)  # (level "ok"|"warn"|"fail", sentence)
    ran_at: str = ""

    def add(self, level: str, sentence: str) -> None:
        self.lines.append((level, sentence))

    @property
    def ok(self) -> bool:
        return all(level != "fail" for level, _ in self.lines)


def _refusal(exc: PerplexityError) -> str:
    if isinstance(exc, ChallengeError):
        return "Perplexity's Cloudflare check blocked this server (a challenge page came back)."
    if isinstance(exc, RequestRejected):
        return (
            f"Perplexity refused pplxweb's request (headers or client version {API_VERSION}): "
            "pplxweb may need an update."
        )
    return exc.message


async def check_session(client: PerplexityClient, report: Report) -> bool:
    try:
        info = await client.session_info()
    except AuthError:
        report.add("fail", "Perplexity says the linked session is signed out. Re-link in Settings.")
        return False
    except PerplexityError as exc:
        report.add("fail", f"The session check failed: {_refusal(exc)}")
        return False
    tier = f" ({info.tier})" if info.tier else ""
    until = f", valid until {info.expires[:10]}" if info.expires else ""
    report.add("ok", f"The linked session is signed in as {info.email or 'the linked account'}{tier}{until}.")
    return True


async def check_models(client: PerplexityClient, report: Report, cached: dict) -> None:
    try:
        table = await client.models_v2()
    except PerplexityError as exc:
        report.add("warn", f"The model table (v2) could not be read: {_refusal(exc)}")
        return
    models = table.get("models") if isinstance(table.get("models"), dict) else {}
    known = set(cached.get("models") or {}) if isinstance(cached.get("models"), dict) else set()
    added, removed = sorted(set(models) - known), sorted(known - set(models))
    defaults = table.get("default_models") if isinstance(table.get("default_models"), dict) else {}
    sentence = f"The model table lists {len(models)} models"
    if defaults:
        sentence += (
            " (defaults: " + ", ".join(f"{mode} {slug}" for mode, slug in sorted(defaults.items())[:6]) + ")"
        )
    report.add("ok", sentence + ".")
    if known and (added or removed):
        report.add(
            "warn",
            "Since the cached table: "
            + "; ".join(
                part
                for part in (
                    f"added {', '.join(added[:10])}{' …' if len(added) > 10 else ''}" if added else "",
                    f"removed {', '.join(removed[:10])}{' …' if len(removed) > 10 else ''}"
                    if removed
                    else "",
                )
                if part
            )
            + ".",
        )


def shape_lines(snapshot: Snapshot, report: Report, ended: bool = True) -> None:
    """What pplxweb reads of a stream, and what it does not know."""
    result = extract(snapshot, ended=ended)
    carriers = [u for u in snapshot.block_order if ANSWER_USAGES.match(u)] or (
        ["workflow_root"] if "workflow_root" in snapshot.blocks else []
    )
    level = "ok" if result.answer and result.status == "completed" else "fail"
    report.add(
        level,
        f"The stream reads as {result.status}: {len(result.answer)} characters of answer"
        f"{' in ' + ', '.join(carriers) if carriers else ''}, {len(result.sources)} sources"
        f"{f', a {len(result.report)}-character report' if result.report else ''}.",
    )
    if result.error:
        report.add("warn", f"It said: {result.error}")
    for kind, names in drift.unknown(snapshot).items():
        report.add("warn", f"Unknown {kind} in the stream: {', '.join(names)}.")


async def probe(client: PerplexityClient, report: Report) -> None:
    stream = client.ask(AskRequest(PROBE_QUESTION, AskOptions(mode="auto", sources=(), incognito=True)))
    try:
        async with stream:
            async for _ in stream:
                pass
    except PerplexityError as exc:
        report.add("fail", f"The probe ask failed: {_refusal(exc)}")
        return
    shape_lines(stream.snapshot, report, ended=stream.ended)


def capture_report(handle: BinaryIO) -> Report:
    """The shape report of a saved answer stream (any framing), offline."""
    parser, snapshot, report = StreamParser(), Snapshot(), Report()
    while chunk := handle.read(CHUNK):
        for event in parser.feed(chunk):
            snapshot = merge(snapshot, event)
    for event in parser.close():
        snapshot = merge(snapshot, event)
    if snapshot.events == 0:
        report.add("fail", "No answer events could be read from that file.")
        return report
    shape_lines(snapshot, report)
    if parser.skipped:
        report.add("warn", f"{parser.skipped} frame(s) could not be read as JSON.")
    return report


def results_path() -> Path:
    return Path(settings.DATA_DIR) / "doctor.json"


def save(report: Report) -> None:
    report.ran_at = datetime.now(UTC).isoformat(timespec="seconds")
    path = results_path()
    tmp = path.with_suffix(".tmp")
    with private_file(tmp) as out:
        out.write(json.dumps(asdict(report)).encode())
    tmp.replace(path)


def last() -> dict | None:
    """The last saved result: {"ran_at", "ok", "lines": [(level, sentence)]}, or None."""
    try:
        data = json.loads(results_path().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("lines"), list):
        return None
    lines = [(str(x[0]), str(x[1])) for x in data["lines"] if isinstance(x, list) and len(x) == 2]
    try:
        ran_at = datetime.fromisoformat(str(data.get("ran_at")))
    except ValueError:
        ran_at = None
    return {"ran_at": ran_at, "ok": all(level != "fail" for level, _ in lines), "lines": lines}
