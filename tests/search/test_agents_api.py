"""The agents' API refusals and rules, through Django's test client (the answers themselves:
tests/e2e/test_agents_api.py, with the official clients against the real server)."""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient
from django.utils import timezone

from accounts.services import agent_tokens
from search.api import conversations
from search.api.answers import _joinable
from search.models import Entry, Thread

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/v1/chat/completions"


def ask(text: str = "What is the capital of France?", **extra) -> dict:
    return {"model": "best", "messages": [{"role": "user", "content": text}], **extra}


async def post(token: str | None, body, **headers):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    raw = body if isinstance(body, bytes | str) else json.dumps(body)
    return await AsyncClient().post(URL, raw, content_type="application/json", headers=headers)


@pytest.fixture
async def token(owner):
    return await sync_to_async(agent_tokens.create)(owner, "tests")


def error(response) -> dict:
    return json.loads(response.content)["error"]


async def test_no_token_a_wrong_one_and_a_revoked_one_are_401_with_www_authenticate(owner, token):
    for given in (None, "pplxweb_" + "A" * 43, "not even the shape"):
        response = await post(given, ask())
        assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
        assert error(response)["type"] == "authentication_error"
    await sync_to_async(agent_tokens.revoke)(owner, "tests")
    assert (await post(token, ask())).status_code == 401
    assert (
        await AsyncClient().get("/v1/models", headers={"Authorization": f"Bearer {token}"})
    ).status_code == 401


async def test_failed_tokens_are_limited_per_address(owner, token, settings):
    settings.LOGIN_RATE_PER_IP = 3
    for _ in range(3):
        assert (await post("pplxweb_" + "B" * 43, ask())).status_code == 401
    refused = await post(token, ask())  # even a good token, from that address, until a try is back
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert error(refused)["type"] == "rate_limit_error"


async def test_a_browser_origin_is_refused_unless_the_owner_allows_it(owner, token, settings):
    refused = await post(token, ask(), Origin="https://evil.example")
    assert refused.status_code == 403 and error(refused)["code"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in refused
    preflight = await AsyncClient().options(URL, headers={"Origin": "https://evil.example"})
    assert preflight.status_code == 403 and "Access-Control-Allow-Origin" not in preflight
    settings.API_ORIGINS = ["https://chat.home.arpa"]
    allowed = await AsyncClient().options(
        URL, headers={"Origin": "https://chat.home.arpa", "Access-Control-Request-Method": "POST"}
    )
    assert allowed["Access-Control-Allow-Origin"] == "https://chat.home.arpa"
    assert "Authorization" in allowed["Access-Control-Allow-Headers"]
    models = await AsyncClient().get(
        "/v1/models", headers={"Origin": "https://chat.home.arpa", "Authorization": f"Bearer {token}"}
    )
    assert models.status_code == 200 and models["Access-Control-Allow-Origin"] == "https://chat.home.arpa"


@pytest.mark.parametrize(
    ("body", "status", "sentence"),
    [
        (b"{not json", 400, "must be JSON"),
        ([1, 2], 400, "must be a JSON object"),
        ({"messages": []}, 400, "messages must be a list"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}, 400, "last message"),
        ({"messages": [{"role": "wizard", "content": "q"}]}, 400, "needs a role"),
        (ask("x" * 8001), 400, "at most 8,000 characters"),  # a question longer than the page takes
        (ask(model="gpt-4o"), 404, "There is no model “gpt-4o”"),
        (ask(stream="yes"), 400, "stream must be true or false"),
        (ask(n=3), 400, "one answer per request"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}, 400, "text only"),
        (ask(tools=[{"type": "function"}], tool_choice={"type": "function", "function": {"name": "f"}}), 400,
         "cannot call your tools"),
        ({"messages": [{"role": "user", "content": "q"}] * 2001}, 400, "At most 2000 messages"),
    ],
)  # fmt: skip
async def test_bad_input_is_a_sentence_in_openais_shape_and_starts_nothing(
    owner, alinked, token, body, status, sentence
):
    response = await post(token, body)
    assert response.status_code == status, response.content
    assert sentence in error(response)["message"]
    assert error(response)["type"] in ("invalid_request_error", "not_found_error")
    assert await Entry.objects.acount() == 0


async def test_a_request_too_large_is_413_not_a_server_error(owner, token):
    huge = ask("q") | {"padding": "x" * (3 * 1024 * 1024)}
    response = await post(token, huge)
    assert response.status_code == 413 and "too large" in error(response)["message"]


async def test_get_on_chat_completions_is_405_in_openais_shape(owner, token):
    response = await AsyncClient().get(URL, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 405 and error(response)["code"] == "method_not_allowed"


async def test_the_pages_limits_hold_running_searches_are_429_with_retry_after(owner, alinked, token):
    thread = await Thread.objects.acreate(user=owner, title="t")
    for n in range(2):
        await Entry.objects.acreate(thread=thread, user=owner, question=f"running {n}", status="running")
    refused = await post(token, ask("a third one"))
    assert refused.status_code == 429 and refused["Retry-After"]
    assert "2 searches running" in error(refused)["message"] and error(refused)["type"] == "rate_limit_error"


async def test_two_requests_continuing_one_conversation_at_once_the_second_is_refused(owner, alinked, token):
    thread = await Thread.objects.acreate(user=owner, title="t")
    await Entry.objects.acreate(thread=thread, user=owner, question="first", status="running")
    busy = await post(token, ask("second", metadata={"conversation_id": str(thread.pk)}))
    assert busy.status_code == 409 and busy["Retry-After"] == "5"
    assert "still answering another question" in error(busy)["message"]
    assert await Entry.objects.acount() == 1


@pytest.mark.parametrize("bad", ["\ud800", "a\x00b"], ids=["lone surrogate", "NUL"])
async def test_earlier_messages_no_database_can_hold_are_no_conversation_not_a_server_error(
    owner, token, bad
):
    body = {"model": "best", "messages": [{"role": "user", "content": bad}, {"role": "assistant", "content": "a"},
                                          {"role": "user", "content": "q"}]}  # fmt: skip
    response = await post(token, body)  # compared with nothing, then the owner is not linked here
    assert response.status_code == 403 and "Link your Perplexity account" in error(response)["message"]


async def test_someone_without_a_link_is_told_to_link(member, owner):
    token = await sync_to_async(agent_tokens.create)(member, "mine")
    refused = await post(token, ask())
    assert refused.status_code == 403 and "Link your Perplexity account" in error(refused)["message"]


async def test_the_token_never_reaches_the_log(owner, token, caplog):
    caplog.set_level(logging.DEBUG)
    await post(token, ask(model="nope"))
    await post(token + "x", ask())
    assert token not in caplog.text


@pytest.mark.django_db
def test_a_conversation_is_continued_only_when_the_messages_are_exactly_its_turns(owner, member):
    thread = Thread.objects.create(user=owner, title="Paris")
    sources = [{"title": "Paris - Wikipedia", "url": "https://en.wikipedia.org/wiki/Paris"}]
    first = Entry.objects.create(thread=thread, user=owner, question="Capital?", answer="Paris [1].",
                                 sources=sources, status="completed")  # fmt: skip
    given = conversations.reply_text(first)
    assert given == "Paris [^1].\n\n[^1]: [Paris - Wikipedia](https://en.wikipedia.org/wiki/Paris)"
    turns = [("system", "Be brief."), ("user", " Capital? "), ("assistant", given.replace("\n\n", "\n  "))]
    assert conversations.matching(owner, turns) == thread.pk  # whitespace aside
    spaced = [("user", "Capital?"), ("assistant", given)]
    Entry.objects.filter(pk=first.pk).update(question="Capital  of\tFrance?")
    spaced[0] = ("user", "Capital of France?")  # the spaces inside changed too
    assert conversations.matching(owner, spaced) == thread.pk
    Entry.objects.filter(pk=first.pk).update(question="Capital?")
    assert conversations.matching(owner, [("user", "  "), ("assistant", given)]) is None
    assert conversations.matching(owner, [("user", "Capital?"), ("assistant", "Paris [1].")]) == thread.pk
    assert conversations.matching(owner, [("user", "Capital?"), ("assistant", "Lyon.")]) is None
    assert conversations.matching(member, turns) is None  # never anyone else's
    assert (
        conversations.named(member, str(thread.pk)) is None
        and conversations.named(owner, thread.pk) == thread.pk
    )
    assert conversations.named(owner, "1e3") is None and conversations.named(owner, "9" * 30) is None
    many = [("user", "Capital?"), ("assistant", given)] * 250  # 500 messages: compared, bounded, no match
    assert conversations.matching(owner, many) is None
    Entry.objects.create(thread=thread, user=owner, question="River?", answer="Seine.", status="completed")
    assert conversations.matching(owner, turns) is None  # the conversation went on: not exactly it


@pytest.mark.django_db
def test_a_retry_of_the_same_question_joins_the_answer_instead_of_asking_again(owner):
    token = agent_tokens.authenticate(agent_tokens.create(owner, "retrying"))
    thread = Thread.objects.create(user=owner, title="Deep")
    running = Entry.objects.create(thread=thread, user=owner, question="Deep?", status="running",
                                   asked_by="retrying", heartbeat=timezone.now())  # fmt: skip
    joined = _joinable(token, "Deep?", None)
    assert joined is not None and joined.entry_id == running.pk and joined.joined
    assert _joinable(token, "Deep?", thread.pk + 1) is None  # another conversation: asked anew
    assert _joinable(token, "Other?", None) is None
    other = agent_tokens.authenticate(agent_tokens.create(owner, "another agent"))
    assert _joinable(other, "Deep?", None) is None
