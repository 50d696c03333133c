"""The agents' API against the page, on the fake Perplexity over TLS (the default transport):

    .venv/bin/python -m tests.benchmarks.agents [--one-core]

1. The same answer (300 events, ~10 KB) asked by a page and by an agent (/v1/chat/completions,
   streamed), one at a time: the API path's added time over the page path's, to its first words
   and to its whole answer.
2. Ten agents and two people on pages asking at once (twelve people of a household): each
   update's added latency over the floor (bare clients reading the fake at once), p50/p95 against
   the 50 ms target; errors; answers saved.

Prints figures beside their floor. `--one-core` pins the server to one CPU (as tests.benchmarks.e2e
does). The machine's load is printed with the figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from tests.benchmarks.e2e import (
    DATA,
    PART,
    ROUNDS,
    Timeline,
    answer,
    control,
    fake_port,
    figures,
    find_leads,
    floor,
    percentile,
    pin,
    serve_fake,
    serve_pplxweb,
    stop,
    through_pplxweb,
    typical,
)
from tests.benchmarks.servers import end_cleanly_on_sigterm
from tests.e2e.conftest import ROOT

AGENTS, PAGES = 10, 2
CROWDS = int(os.environ.get("BENCH_CROWDS", 3))
TARGET_MS = 50


async def through_api(
    server: str, token: str, question: str, ready: asyncio.Barrier | None = None
) -> Timeline:
    """Each streamed chunk that brings new answer text: its arrival and the newest part in it."""
    import httpx

    seen = Timeline(name=question)
    body = {"model": "best", "stream": True, "messages": [{"role": "user", "content": question}]}
    async with httpx.AsyncClient(timeout=60) as client:
        if ready is not None:
            await ready.wait()
        started = seen.asked = time.monotonic()
        async with client.stream(
            "POST", f"{server}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {token}"}
        ) as response:
            async for line in response.aiter_lines():
                now = time.monotonic() - started
                newest = max((int(m.group(1)) for m in PART.finditer(line)), default=-1)
                if newest > max((part for _, part in seen.updates), default=-1):
                    seen.updates.append((now, newest))
                if '"finish_reason": "stop"' in line:
                    seen.ok = True
    return seen


def household() -> tuple[list[str], list[str]]:
    """Page people's session cookies and agents' tokens, each a person of their own (the page's
    limit is two answers at once per person)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.models import PerplexityAccount
    from accounts.services import agent_tokens
    from tests.fake_perplexity.app import TOKEN

    cookies, tokens = [], []
    for n in range(PAGES + AGENTS + 1):
        user = get_user_model().objects.create_user(username=f"a{n}", password="x" * 12)
        PerplexityAccount.objects.create(
            user=user,
            session=json.dumps({"cookies": {"__Secure-next-auth.session-token": TOKEN}}),
            account_id=f"account-{n}",
        )
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        cookies.append(f"pplxweb_sessionid={client.cookies['pplxweb_sessionid'].value}")
        tokens.append(agent_tokens.create(user, "bench"))
    return cookies, tokens


def ends(run: Timeline) -> tuple[float, float]:
    """(first words, whole answer) in seconds from the fake starting the stream."""
    return run.updates[0][0] - run.lead, run.updates[-1][0] - run.lead


def side_by_side(fake: str, server: str, cookie: str, token: str) -> dict:
    pages, apis = [], []
    for round_ in range(ROUNDS):
        pages.append(asyncio.run(through_pplxweb(server, cookie, f"page {round_}")))
        apis.append(asyncio.run(through_api(server, token, f"agent {round_}")))
    if not all(r.ok for r in pages + apis):
        raise SystemExit(f"a single answer did not complete (server log: {DATA / 'server.log'})")
    find_leads(fake, pages + apis)
    first = [ends(a)[0] - ends(p)[0] for a, p in zip(apis, pages, strict=True)]
    whole = [ends(a)[1] - ends(p)[1] for a, p in zip(apis, pages, strict=True)]
    return {
        "page first words s p50": percentile([ends(p)[0] for p in pages], 0.5),
        "page whole answer s p50": percentile([ends(p)[1] for p in pages], 0.5),
        "API over page, first words ms p50": percentile(first, 0.5) * 1000,
        "API over page, whole answer ms p50": percentile(whole, 0.5) * 1000,
    }


def crowd(fake: str, server: str, cookies: list[str], tokens: list[str], round_: int) -> tuple[list, int]:
    async def floors():
        ready = asyncio.Barrier(PAGES + AGENTS)
        return await asyncio.gather(*(floor(fake, "chrome", ready) for _ in range(PAGES + AGENTS)))

    async def everyone():
        ready = asyncio.Barrier(PAGES + AGENTS)
        asks = [through_pplxweb(server, c, f"crowd {round_} page {i}", ready) for i, c in enumerate(cookies)]
        asks += [through_api(server, t, f"crowd {round_} agent {i}", ready) for i, t in enumerate(tokens)]
        return await asyncio.gather(*asks, return_exceptions=True)

    base_runs = asyncio.run(floors())
    results = asyncio.run(everyone())
    done = [r for r in results if not isinstance(r, BaseException) and r.ok]
    find_leads(fake, base_runs + done)
    base = typical(base_runs)
    return [(r, base) for r in done], len(results) - len(done)


def main() -> None:
    end_cleanly_on_sigterm()
    notes: list[str] = []
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], check=True, cwd=ROOT)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], check=True, cwd=ROOT)
    cookies, tokens = household()
    port = fake_port(None, notes)
    fake_proc = serve_fake({**os.environ}, DATA / "fake.log", port)
    fake = f"https://127.0.0.1:{port}"
    server_proc, server_port = serve_pplxweb(
        {**os.environ, "PPLXWEB_PERPLEXITY_URL": fake}, DATA / "server.log"
    )
    server = f"http://127.0.0.1:{server_port}"
    pinned = pin(server_proc.pid, notes) if "--one-core" in sys.argv else False
    try:
        control(fake, ask={"answer": answer(), "pace": float(os.environ.get("BENCH_PACE", 0.02))})
        asyncio.run(through_pplxweb(server, cookies[0], "cold page"))  # loading code: not counted
        asyncio.run(through_api(server, tokens[0], "cold agent"))
        single = side_by_side(fake, server, cookies[0], tokens[0])
        pairs, errors = [], 0
        for round_ in range(CROWDS):
            got, failed = crowd(fake, server, cookies[1 : 1 + PAGES], tokens[1 + PAGES :], round_)
            pairs += got
            errors += failed
        import django  # noqa: F401 - set up in household()

        from search.models import Entry

        saved = Entry.objects.filter(question__startswith="crowd", status="completed").count()
        agents = figures([p for p in pairs if "agent" in p[0].name])
        pages = figures([p for p in pairs if "page" in p[0].name])
    finally:
        stop(server_proc)
        stop(fake_proc)
    for note in notes:
        print(note)
    print(
        f"server pinned to one CPU: {'yes' if pinned else 'no'}; load average (1 min): {os.getloadavg()[0]:.2f}"
    )
    print(f"one at a time ({ROUNDS} rounds each), the page's floor and the API over it:")
    for name, value in single.items():
        print(f"  {name:<40} {value:8.2f}")
    print(
        f"{AGENTS} agents and {PAGES} pages at once ({CROWDS} rounds), over the floor (bare clients at once):"
    )
    for who, figs in (("agents", agents), ("pages", pages)):
        p95 = percentile(figs["adds"], 0.95)
        verdict = "within" if p95 <= TARGET_MS else "OVER"
        print(
            f"  {who}: added latency per update p50 {percentile(figs['adds'], 0.5):.1f} ms, "
            f"p95 {p95:.1f} ms ({verdict} the {TARGET_MS} ms target); first update p95 "
            f"{percentile(figs['firsts'], 0.95):.1f} ms"
        )
    print(f"  errors {errors}; saved completed {saved} of {CROWDS * (AGENTS + PAGES)}")


if __name__ == "__main__":
    main()
