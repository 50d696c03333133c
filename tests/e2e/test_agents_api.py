"""The agents' API and MCP server through the real server against the fake Perplexity, checked
with clients no one here wrote: the official `openai` SDK and the official `mcp` SDK's client."""

from __future__ import annotations

import asyncio
import json

import httpx
import httpx2
import openai
import pytest
from asgiref.sync import sync_to_async
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from websockets.asyncio.client import connect

from accounts.services import agent_tokens
from search.models import Entry, Thread
from tests.e2e.conftest import control, seen
from tests.e2e.test_search_journey import linked_owner
from tests.e2e.test_two_processes import receive_until, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)
ANSWER = "Paris is the **capital** of France [^1]. It has about two million people [^2]."


@sync_to_async
def token_for(user, name: str) -> str:
    return agent_tokens.create(user, name)


@sync_to_async
def entry(question: str) -> Entry:
    return Entry.objects.select_related("thread").get(question=question)


async def owner_has_tokens(owner) -> bool:
    return await owner.agent_tokens.aexists()


async def settled(question: str, timeout: float = 20) -> Entry:
    """The entry once its run ended (a client that went away does not wait for it)."""
    async with asyncio.timeout(timeout):
        while True:
            found = await Entry.objects.filter(question=question).exclude(status="running").afirst()
            if found is not None:
                return found
            await asyncio.sleep(0.1)


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
async def test_openai_sdk_asks_streams_and_continues(pplxweb_server, fake_perplexity):
    owner = await linked_owner()
    token = await token_for(owner, "laptop scripts")
    control(fake_perplexity, ask={"pace": 0.02}, requests=[])
    client = openai.AsyncOpenAI(base_url=f"{pplxweb_server}/v1", api_key=token, max_retries=0)

    models = {m.id: m.model_extra["name"] for m in (await client.models.list()).data}
    assert models["best"] == "Best" and models["deep-research"] == "Deep research"
    assert models["gpt56_sol"] == "GPT-5.6 Sol · Max"  # by id, named as the page names it for a Pro link

    # whole: the Markdown with footnotes, the sources' URLs, the conversation to continue
    raw = await client.chat.completions.with_raw_response.create(
        model="best", messages=[{"role": "user", "content": "What is the capital of France?"}]
    )
    reply = raw.parse()
    content = reply.choices[0].message.content
    assert (
        content.startswith(ANSWER)
        and "[^1]: [Paris - Wikipedia](https://en.wikipedia.org/wiki/Paris)" in content
    )
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model_extra["citations"] == [
        "https://en.wikipedia.org/wiki/Paris",
        "https://example.org/paris",
    ]
    first = await entry("What is the capital of France?")
    assert (
        raw.headers["X-Pplxweb-Conversation"] == reply.model_extra["conversation_id"] == str(first.thread_id)
    )
    assert (first.status, first.asked_by, first.model_asked) == ("completed", "laptop scripts", "pplx_pro")

    # streamed, continuing by the messages alone: several chunks, the last says stop, then [DONE]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "  " + content.replace("\n\n", "\n") + "\n"},  # whitespace aside
        {"role": "user", "content": "And how many people live there?"},
    ]
    chunks = [
        c async for c in await client.chat.completions.create(model="best", messages=messages, stream=True)
    ]
    assert len([c for c in chunks if c.choices[0].delta.content]) >= 3
    assert chunks[-1].choices[0].finish_reason == "stop"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed.startswith(ANSWER) and streamed.endswith(
        "[^2]: [Paris population](https://example.org/paris)"
    )
    second = await entry("And how many people live there?")
    assert second.thread_id == first.thread_id and second.asked_by == "laptop scripts"
    follow_up = json.loads(
        [r for r in seen(fake_perplexity) if r["path"] == "/rest/sse/perplexity_ask"][-1]["body"]
    )
    assert follow_up["params"]["last_backend_uuid"] == first.backend_uuid  # the same thread upstream

    # continuing by metadata.conversation_id
    third = await client.chat.completions.create(
        model="best",
        messages=[{"role": "user", "content": "Which river?"}],
        metadata={"conversation_id": str(first.thread_id)},
    )
    assert third.model_extra["conversation_id"] == str(first.thread_id)
    assert (await entry("Which river?")).thread_id == first.thread_id


async def test_openai_sdk_sees_refusals_in_openais_shape(pplxweb_server, fake_perplexity):
    owner = await linked_owner()
    token = await token_for(owner, "refusals")
    control(fake_perplexity, ask={"pace": 0.01}, requests=[])
    client = openai.AsyncOpenAI(base_url=f"{pplxweb_server}/v1", api_key=token, max_retries=0)
    question = [{"role": "user", "content": "q"}]

    with pytest.raises(openai.AuthenticationError) as refused:
        await openai.AsyncOpenAI(base_url=f"{pplxweb_server}/v1", api_key="pplxweb_" + "x" * 43).models.list()
    assert refused.value.response.headers["WWW-Authenticate"].startswith("Bearer")
    assert refused.value.body["type"] == "authentication_error"
    with pytest.raises(openai.NotFoundError) as missing:
        await client.chat.completions.create(model="gpt-4o", messages=question)
    assert (
        missing.value.body["type"] == "not_found_error" and "GET /v1/models" in missing.value.body["message"]
    )
    image = [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
              {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]  # fmt: skip
    with pytest.raises(openai.BadRequestError) as bad:
        await client.chat.completions.create(model="best", messages=image)
    assert "takes text only" in bad.value.body["message"]
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(
            model="best", messages=question, tools=[tool], tool_choice="required"
        )
    # offered tools are not called, and the reply says so
    answered = await client.chat.completions.create(
        model="best", messages=[{"role": "user", "content": "with tools"}], tools=[tool]
    )
    assert "does not call a client's tools" in answered.model_extra["notice"]
    assert answered.choices[0].message.content.startswith(ANSWER)
    assert await Entry.objects.filter(asked_by="refusals").acount() == 1  # refusals started nothing

    await sync_to_async(agent_tokens.revoke)(owner, "refusals")
    with pytest.raises(openai.AuthenticationError):
        await client.chat.completions.create(model="best", messages=question)


async def test_a_client_gone_mid_stream_leaves_the_answer_to_land(pplxweb_server, fake_perplexity):
    owner = await linked_owner()
    token = await token_for(owner, "flaky")
    control(fake_perplexity, ask={"pace": 0.3}, requests=[])
    body = {"model": "best", "stream": True, "messages": [{"role": "user", "content": "gone mid-stream"}]}
    async with (
        httpx.AsyncClient(timeout=10) as http,
        http.stream(
            "POST",
            f"{pplxweb_server}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        ) as response,
    ):
        async for line in response.aiter_lines():
            if '"content": "Paris' in line:
                break  # and the client goes away
    landed = await settled("gone mid-stream")
    assert landed.status == "completed" and landed.answer.endswith("It lies on the Seine.")


async def test_a_token_revoked_mid_stream_ends_the_stream_not_the_answer(pplxweb_server, fake_perplexity):
    owner = await linked_owner()
    token = await token_for(owner, "revoked later")
    words = [f"word{i} " for i in range(30)]  # 4.5 s of answer; the stream checks its token every 2 s
    control(fake_perplexity, ask={"pace": 0.15, "answer": words}, requests=[])
    client = openai.AsyncOpenAI(base_url=f"{pplxweb_server}/v1", api_key=token, max_retries=0)
    stream = await client.chat.completions.create(
        model="best", stream=True, messages=[{"role": "user", "content": "revoked mid-stream"}]
    )
    with pytest.raises(openai.APIError) as ended:
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content and await owner_has_tokens(owner):
                await sync_to_async(agent_tokens.revoke)(owner, "revoked later")
    assert ended.value.body["code"] == "token_revoked" and "revoked" in ended.value.message
    landed = await settled("revoked mid-stream")
    assert landed.status == "completed"  # the answer is the person's: it goes on


async def test_an_agents_answer_streams_into_the_open_conversation_page(pplxweb_server, fake_perplexity):
    owner = await linked_owner()
    token = await token_for(owner, "home assistant")
    control(fake_perplexity, ask={"pace": 0.05}, requests=[])
    thread = await Thread.objects.acreate(user=owner, title="Paris")
    cookie = await session_cookie(owner)
    url = pplxweb_server.replace("http://", "ws://") + f"/ws/search/?thread={thread.pk}"
    client = openai.AsyncOpenAI(base_url=f"{pplxweb_server}/v1", api_key=token, max_retries=0)
    async with connect(url, origin=pplxweb_server, additional_headers={"Cookie": cookie}) as ws:
        asked = asyncio.create_task(
            client.chat.completions.create(
                model="best",
                messages=[{"role": "user", "content": "Asked by an agent"}],
                metadata={"conversation_id": str(thread.pk)},
            )
        )
        page = await receive_until(ws, "asked by home assistant")
        page += await receive_until(ws, "status-completed", timeout=20)
        assert "Asked by an agent" in page and "It lies on the Seine." in page
        await asked


def mcp_client(base: str, token: str, mode: str = "auto") -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60)
    )
    return Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode)


@pytest.mark.journey  # also on PostgreSQL + Redis (tests/run.sh)
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the newer discovery, the initialize handshake
async def test_mcp_sdk_client_asks_researches_and_reads_history(pplxweb_server, fake_perplexity, mode):
    owner = await linked_owner()
    token = await token_for(owner, f"mcp {mode}")
    control(fake_perplexity, ask={"pace": 0.02}, requests=[])
    async with mcp_client(pplxweb_server, token, mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"ask", "research", "search_history", "read_conversation"}

        asked = await client.call_tool("ask", {"question": f"Capital of France, by MCP {mode}?"})
        assert not asked.is_error
        assert asked.content[0].text.startswith(ANSWER)
        found = asked.structured_content
        assert found["status"] == "completed" and found["sources"][0] == {
            "n": 1, "title": "Paris - Wikipedia", "url": "https://en.wikipedia.org/wiki/Paris"}  # fmt: skip
        saved = await entry(f"Capital of France, by MCP {mode}?")
        assert found["conversation_id"] == str(saved.thread_id) and saved.asked_by == f"mcp {mode}"

        control(fake_perplexity, ask={"stream": "research", "report_kb": 2, "replaces": 20, "pace": 0.05})
        notes = []

        async def progressed(progress, total, message) -> None:
            notes.append(message)

        report = await client.call_tool(
            "research", {"question": f"Research Paris {mode}"}, progress_callback=progressed
        )
        assert not report.is_error and report.structured_content["status"] == "completed"
        assert notes, "no progress notification while the research ran"
        assert (await entry(f"Research Paris {mode}")).report.strip()[:40] in report.content[0].text

        matches = (await client.call_tool("search_history", {"query": "Capital France"})).structured_content
        assert any(m["conversation_id"] == str(saved.thread_id) for m in matches["matches"]), matches
        read = (
            await client.call_tool("read_conversation", {"conversation_id": str(saved.thread_id)})
        ).structured_content
        assert read["turns"][0]["question"] == f"Capital of France, by MCP {mode}?"
        other = await client.call_tool("read_conversation", {"conversation_id": "999999"})
        assert other.is_error and "no conversation" in other.content[0].text


async def test_mcp_is_at_exactly_slash_mcp_and_refuses_without_a_token(pplxweb_server):
    async with httpx.AsyncClient() as http:
        refused = await http.post(f"{pplxweb_server}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert (
            await http.post(f"{pplxweb_server}/mcp/", json={})
        ).status_code == 404  # no redirect, no alias
