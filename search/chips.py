"""Sources as a page shows them, and the citations `[n]` that link them (chips).

What is shown of a source is cleaned upstream text: lone surrogates replaced, bidirectional
controls removed, only http(s) links (`source_info`). In an answer's Markdown, `[n]` becomes a
chip linking the n-th source (search/render.py runs `citations` as a core rule): with a card of
its source (an answer), light (a report, which cites hundreds of times: static/report.js makes
it a chip from the entry's list), or a plain number (Copy's HTML, for a mail or a document).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from django.utils.html import escape
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from pplxweb.perplexity.values import scrub  # lone surrogates out (the one place it is written)

BIDI = dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F])
CITATION = re.compile(r"\[(\d{1,3})\]")
PUNCTUATION = re.compile(r"[.,;:!?)\]\u2019\u201d\u00bb]+")  # what follows a citation on its line


def safe_url(url: Any) -> str:
    """The URL when it is http(s) with a host, else ""."""
    if not isinstance(url, str):
        return ""
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return url if parts.scheme.lower() in ("http", "https") and parts.netloc else ""


def source_url(source: Any) -> str:
    url = source.get("url") if isinstance(source, dict) else getattr(source, "url", "")
    return safe_url(url)


SECOND_LEVEL = {"co", "com", "org", "net", "gov", "ac", "edu", "ne", "or", "go"}  # bbc.co.uk


def _host(url: str) -> str:
    """The URL's host for people: IDN decoded, without "www."."""
    host = urlsplit(url).hostname or "" if url else ""
    if "xn--" in host:
        with contextlib.suppress(UnicodeError):
            host = host.encode("ascii").decode("idna")
    return host.removeprefix("www.")


def _site(host: str) -> str:
    """A short site name: "en.wikipedia.org" -> "wikipedia", "bbc.co.uk" -> "bbc"; an address
    stays whole."""
    labels = host.split(".")
    if len(labels) < 2 or host.replace(".", "").isdigit() or ":" in host:
        return host
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in SECOND_LEVEL:
        return labels[-3]
    return labels[-2]


def source_info(n: int, source: Any) -> dict:
    """What the page shows of source `n` (1-based): cleaned, cut to size, only http(s) links."""
    get = source.get if isinstance(source, dict) else lambda k, s=source: getattr(s, k, "")
    url = safe_url(get("url"))
    host = _host(url)
    titled = " ".join(scrub(str(get("title") or "")).translate(BIDI).split())
    title = titled or host or f"Source {n}"  # an untitled source is named by its host, once
    site = _site(host)[:40] or f"source {n}"
    return {
        "n": n, "url": url, "title": title[:300], "titled": bool(titled), "host": host, "site": site,
        "letter": site[:1].upper() or str(n),
        "snippet": " ".join(scrub(str(get("snippet") or "")).translate(BIDI).split())[:600],
    }  # fmt: skip


def citations(state: StateCore) -> None:
    """Text `[n]` -> a link to the n-th source (1-based), at the token level, never in code."""
    sources: Sequence[Any] = state.env.get("sources") or ()
    if not sources:
        return
    cards, refs = state.env.get("cards", True), state.env.get("refs", "")
    if refs:  # a report's light chips
        chip = lambda infos: _ref_chip(infos, refs)  # noqa: E731
    elif state.env.get("copy"):  # the clipboard's numbers
        chip = _numbered
    else:
        chip = lambda infos: _chip(infos, cards)  # noqa: E731
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        in_link = 0
        for token in block.children:
            in_link += token.type == "link_open"
            in_link -= token.type == "link_close"
            if token.type != "text" or in_link or "[" not in token.content:
                children.append(token)
                continue
            children += _split_citations(token, sources, chip, hold=not refs)
        block.children = children


def _split_citations(token: Token, sources: Sequence[Any], chip: Callable, hold: bool = True) -> list[Token]:
    """Each `[n]` with an http(s) source becomes a chip: the site's name, and a card with the
    title, site and snippet shown on hover or focus. Several standing together ("[1][2]") are
    one chip, as on Perplexity: the first site's name and "+1", linking the first, its card
    listing each. The link's own name is what a screen reader says: "source 3: title, site".
    Chips followed by punctuation ("Paris[1].") are held together with it (`cite-run`), so a
    line never starts with the lone "." (`refs`: a report's light chips, _ref_chip, which need no
    such hold)."""
    out: list[Token] = []
    last = 0
    matches = [m for m in CITATION.finditer(token.content) if _cited(sources, int(m.group(1)))]
    runs: list[list[re.Match]] = []  # chips standing together, "[1][2]"
    for match in matches:
        if runs and runs[-1][-1].end() == match.start():
            runs[-1].append(match)
        else:
            runs.append([match])
    for run in runs:
        if run[0].start() > last:
            out.append(_text(token.content[last : run[0].start()]))
        numbers = list(dict.fromkeys(int(m.group(1)) for m in run))  # "[1][1]" is one
        chips = chip([source_info(n, sources[n - 1]) for n in numbers])
        last = run[-1].end()
        punctuation = PUNCTUATION.match(token.content, last) if hold else None
        if punctuation:
            chips = [_html('<span class="cite-run">'), *chips, _text(punctuation.group()), _html("</span>")]
            last = punctuation.end()
        out += chips
    if last == 0:
        return [token]
    if last < len(token.content):
        out.append(_text(token.content[last:]))
    return out


def _cited(sources: Sequence[Any], n: int) -> bool:
    return 1 <= n <= len(sources) and bool(source_url(sources[n - 1]))


def _chip(infos: list[dict], cards: bool = True) -> list[Token]:
    """One chip for the sources `infos` cited together (source_info each). A lone source's card
    is part of its link; sources cited together are a group (`cite-group`): the chip links the
    first, and its card, beside the chip rather than in it, links each."""
    first, more = infos[0], len(infos) - 1
    link = Token("link_open", "a", 1)
    named = "; ".join(f"{i['title']}, {i['host']}" if i["titled"] else i["title"] for i in infos)
    label = (
        f"source {first['n']}: {named}"
        if not more
        else f"sources {', '.join(str(i['n']) for i in infos)}: {named}"
    )
    link.attrs = {"href": first["url"], "class": "cite", "aria-label": label[:400]}
    plus = f'<span class="cite-more">+{more}</span>' if more else ""
    site = f'<span class="cite-site">{escape(first["site"])}</span>{plus}'
    close = Token("link_close", "a", -1)
    if not more:
        card = f'<span class="cite-item">{_card_item(first, 220)}</span>'
        return [link, _html(site + (f'<span class="cite-card">{card}</span>' if cards else "")), close]
    card = "".join(f'<a href="{escape(i["url"])}" class="cite-item">{_card_item(i, 120)}</a>' for i in infos)
    card = f'<span class="cite-card">{card}</span>' if cards else ""
    return [_html('<span class="cite-group">'), link, _html(site), close, _html(f"{card}</span>")]


def _ref_chip(infos: list[dict], refs: str) -> list[Token]:
    """A report's chip, light (a report cites hundreds of times): the first site's name (and "+1"
    for more cited with it) linking that source in the entry's list (`#<refs><n>`, render_sources),
    the numbers in `data-cite`. static/report.js makes it a chip as an answer's, from that list."""
    link = Token("link_open", "a", 1)
    link.attrs = {"href": f"#{refs}{infos[0]['n']}", "class": "cite"}
    if len(infos) > 1:
        link.attrs["data-cite"] = " ".join(str(info["n"]) for info in infos)
    plus = f'<span class="cite-more">+{len(infos) - 1}</span>' if len(infos) > 1 else ""
    return [link, _html(escape(infos[0]["site"]) + plus), Token("link_close", "a", -1)]


def _numbered(infos: list[dict]) -> list[Token]:
    """Copied citations: "[1][2]" as superscript numbers linking their sources (a mail or a
    document has no hover cards), numbered like the list of sources under the answer."""
    out = [_html("<sup>")]
    for info in infos:
        link = Token("link_open", "a", 1)
        link.attrs = {"href": info["url"]}
        out += [link, _text(f"[{info['n']}]"), Token("link_close", "a", -1)]
    return [*out, _html("</sup>")]


def _card_item(info: dict, snippet: int) -> str:
    """A source in a citation's card: its title, host and the start of its snippet."""
    text = f'<span class="cite-title">{escape(info["title"][:160])}</span>' + (
        f'<span class="cite-host">{escape(info["host"])}</span>' if info["titled"] else ""
    )
    if info["snippet"]:
        text += f'<span class="cite-snippet">{escape(info["snippet"][:snippet])}</span>'
    return text


def _html(content: str) -> Token:
    token = Token("html_inline", "", 0)
    token.content = content
    return token


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token
