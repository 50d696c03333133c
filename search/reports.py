"""A Deep Research report as people keep it (Copy report, Download): its Markdown with the
numbered list of sources its `[n]` refer to, in a file named after its title.

The report's numbers count the run's final source list, the same list as the cover note's
(docs/protocol.md §6.4, §8.1): Entry.sources. Every source is listed, in that order, so the n-th
item of the list is what `[n]` names, whatever a Markdown reader does with list numbers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from search.chips import safe_url

TITLE = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.M)  # the first level-1 heading
LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")  # [text](url) -> text
CITED = re.compile(r"\[\d{1,3}\]")
UNSAFE = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]+')  # not allowed in a file name somewhere
WINDOWS = re.compile(r"^(con|prn|aux|nul|com\d|lpt\d)(\..*)?$", re.I)  # names Windows keeps for devices
MAX_NAME = 150  # bytes of UTF-8 before ".md" (file systems allow 255)


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _item(n: int, source: Any) -> str:
    """`n. [title](url)`, or the title alone for a source without an http(s) link."""
    source = source if isinstance(source, dict) else {}
    url = safe_url(source.get("url"))
    title = _one_line(source.get("title"))[:300] or url or f"Source {n}"
    if not url:
        return f"{n}. {title}"
    label = re.sub(r"([\\\[\]])", r"\\\1", title)
    target = re.sub(r"[ ()<>]", lambda m: f"%{ord(m.group()):02X}", url)
    return f"{n}. [{label}]({target})"


def report_markdown(report: str, sources: Sequence[Any]) -> str:
    """The report, then "## Sources": every source numbered as the report's `[n]` count them."""
    text = report.strip()
    if not sources:
        return text + "\n"
    listed = "\n".join(_item(n, source) for n, source in enumerate(sources, start=1))
    return f"{text}\n\n## Sources\n\n{listed}\n"


def _safe_name(text: str) -> str:
    """`text` as a file name any system takes: no path or reserved characters, no control or
    direction marks, no trailing dot or space, not a device name, at most MAX_NAME bytes."""
    text = CITED.sub("", LINK.sub(r"\1", text))
    text = "".join(c for c in unicodedata.normalize("NFC", text) if unicodedata.category(c)[0] != "C")
    text = " ".join(UNSAFE.sub(" ", text.replace("*", " ").replace("`", "")).split())
    text = text.encode()[:MAX_NAME].decode(errors="ignore").strip(" .")
    return f"Report {text}" if WINDOWS.match(text) else text


def report_filename(report: str, question: str = "") -> str:
    """The report's file name: its title (its first `# ` heading), else the question."""
    title = TITLE.search(report[:100_000])
    name = _safe_name(title.group(1)) if title else ""
    return f"{name or _safe_name(question) or 'Report'}.md"
