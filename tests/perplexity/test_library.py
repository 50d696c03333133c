"""pplxweb.perplexity.library against the fake's library (tests/fake_perplexity/library.py),
in-process through httpx's ASGI transport."""

from __future__ import annotations

import httpx
import pytest

from pplxweb.perplexity import cookies as jar
from pplxweb.perplexity import library
from pplxweb.perplexity.client import PerplexityClient
from pplxweb.perplexity.errors import AuthError, ChallengeError, RateLimited, ThreadGone
from tests.fake_perplexity import app as fake
from tests.fake_perplexity import library as fake_library

BASE = "https://fake.perplexity.test"


@pytest.fixture(autouse=True)
def fresh_library():
    fake_library.lib.update(threads=[], faults={}, calls={})
    yield
    fake_library.lib.update(threads=[], faults={}, calls={})


def client() -> PerplexityClient:
    cookies = jar.with_session({}, fake.TOKEN)
    return PerplexityClient(BASE, BASE, transport=httpx.ASGITransport(app=fake.application), cookies=cookies)


async def test_listing_pages_by_offset_and_needs_the_account_header():
    fake_library.lib["threads"] = fake_library.generate(150, 2)
    async with client() as c:
        assert await library.list_threads(c, 0) == []  # no x-pplx-account yet: Perplexity's 200 []
        assert await library.library_account(c) == "fake-account"
        first = await library.list_threads(c, 0)
        second = await library.list_threads(c, len(first))
    assert len(first) == 100 and len(second) == 50
    items = [library.parse_listed(i) for i in first + second]
    assert len({i.key for i in items}) == 150 and all(i.count == 2 for i in items)


async def test_a_long_thread_pages_by_cursor_not_offset():
    fake_library.lib["threads"] = fake_library.generate(1, 230)
    slug = fake_library.lib["threads"][0]["slug"]
    async with client() as c:
        await library.library_account(c)
        pages, cursor = [], ""
        while True:
            page = await library.thread_page(c, slug, cursor)
            pages.append(page)
            if not page.has_next:
                break
            cursor = page.next_cursor
    assert [len(p.entries) for p in pages] == [100, 100, 30]
    turns = [library.parse_turn(e) for p in pages for e in p.entries]
    assert len({t.backend_uuid for t in turns}) == 230
    assert turns[0].question == "Question 1 of library thread 0"
    assert turns[0].answer.startswith("Answer 1 of library thread 0")
    assert turns[0].sources[0].url.startswith("https://example.org/")
    assert turns[0].related and turns[0].created is not None and turns[0].read_write_token


@pytest.mark.parametrize("shape", ["blocks", "text", "structured"])
async def test_every_answer_shape_is_read(shape):
    fake_library.lib["threads"] = [
        fake_library._thread(
            {"turns": [{"a": "The shaped answer.", "shape": shape}]}, 0, fake_library.BASE_TIME
        )
    ]
    async with client() as c:
        await library.library_account(c)
        page = await library.thread_page(c, fake_library.lib["threads"][0]["slug"])
    turn = library.parse_turn(page.entries[0])
    assert turn.answer == "The shaped answer." and turn.status == "completed"
    assert turn.sources  # blocks, the FINAL step's web_results, or the structured answer's


async def test_a_turn_without_an_answer_is_failed_not_dropped():
    fake_library.lib["threads"] = [
        fake_library._thread({"turns": [{"shape": "none"}]}, 0, fake_library.BASE_TIME)
    ]
    async with client() as c:
        await library.library_account(c)
        page = await library.thread_page(c, fake_library.lib["threads"][0]["slug"])
    turn = library.parse_turn(page.entries[0])
    assert turn.status == "failed" and turn.question and not turn.answer


@pytest.mark.parametrize("code", ["ENTRY_DELETED", "ENTRY_EXPIRED", "VIEW_THREAD_NOT_ALLOWED"])
async def test_refused_threads_raise_thread_gone(code):
    fake_library.lib["threads"] = [fake_library._thread({"gone": code}, 0, fake_library.BASE_TIME)]
    async with client() as c:
        await library.library_account(c)
        with pytest.raises(ThreadGone) as raised:
            await library.thread_page(c, fake_library.lib["threads"][0]["slug"])
    assert raised.value.code == code


async def test_unknown_slug_is_gone_and_faults_map_to_their_errors():
    async with client() as c:
        await library.library_account(c)
        with pytest.raises(ThreadGone):
            await library.thread_page(c, "no-such-thread/../x")
        fake_library.lib["faults"] = {"rate_every": 1, "retry_after": 3}
        with pytest.raises(RateLimited) as limited:
            await library.list_threads(c, 0)
        assert limited.value.retry_after == 3
        fake_library.lib["faults"] = {"challenge": True}
        with pytest.raises(ChallengeError):
            await library.list_threads(c, 0)
        fake_library.lib["faults"] = {"unauthorized": True}
        with pytest.raises(AuthError):
            await library.list_threads(c, 0)


async def test_a_session_without_an_account_id_is_refused_before_listing():
    fake_library.lib["faults"] = {"no_account": True}
    async with client() as c:
        with pytest.raises(AuthError, match="names no account"):
            await library.library_account(c)


async def test_an_expired_report_link_is_refreshed():
    fake_library.lib["threads"] = [
        fake_library._thread({"turns": [{"report": "# Report\n\nDeep text."}]}, 0, fake_library.BASE_TIME)
    ]
    async with client() as c:
        await library.library_account(c)
        page = await library.thread_page(c, fake_library.lib["threads"][0]["slug"])
        turn = library.parse_turn(page.entries[0])
        assert turn.report_asset is not None
        uuid, url = turn.report_asset
        assert await library.fetch_report(c, url) is None  # the stored link has expired
        fresh = await library.fresh_asset_url(c, uuid)
        assert await library.fetch_report(c, fresh) == "# Report\n\nDeep text."


async def test_bytes_that_are_not_utf8_are_read_with_replacement_characters():
    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/auth/session":
            return httpx.Response(200, json={"user": {"id": "acc"}})
        body = b'[{"slug": "s-1", "context_uuid": "c-1", "title": "caf\xe9 \xff\xfe", "last_query_datetime": "x"}]'
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    cookies = jar.with_session({}, fake.TOKEN)
    async with PerplexityClient(BASE, BASE, transport=httpx.MockTransport(reply), cookies=cookies) as c:
        await library.library_account(c)
        page = await library.list_threads(c, 0)
    item = library.parse_listed(page[0])
    assert item.title == "caf\ufffd \ufffd\ufffd" and item.key == "c-1"


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://d2z0o16i8xm8ak.cloudfront.net/report/abc.md?Expires=1&Signature=x&Key-Pair-Id=k", True),
        ("https://d2z0o16i8xm8ak.cloudfront.net:443/report/abc.md", True),
        ("https://www.perplexity.ai/rest/file/report.md", True),  # Perplexity's own address
        ("https://d1234attacker.cloudfront.net/report.md", False),  # anybody's distribution
        ("https://evil.example/d2z0o16i8xm8ak.cloudfront.net/report.md", False),
        ("https://d2z0o16i8xm8ak.cloudfront.net.evil.example/report.md", False),
        ("http://d2z0o16i8xm8ak.cloudfront.net/report.md", False),
        ("https://d2z0o16i8xm8ak.cloudfront.net:8443/report.md", False),
        ("https://user:pw@d2z0o16i8xm8ak.cloudfront.net/report.md", False),
        ("https://[::1/report.md", False),
    ],
)
def test_reports_are_fetched_only_from_perplexitys_cdn_host(url, allowed):
    assert library.report_url_allowed(url, "https://www.perplexity.ai") is allowed
