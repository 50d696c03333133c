"""Redo in place (search/live/redo.py, search/versions.py): Ask again, Retry and Edit question answer
a turn again inside its conversation, with its context upstream; the earlier answer stays as a
version, switchable, on the socket and without JavaScript; follow-ups go on from the version
shown; history, exports and imports keep every version."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from search import versions
from search.history import export, imports
from search.models import Entry, Thread
from tests.search.conftest import Paced, answer_stream, serve
from tests.search.test_consumer import connect, receive_until
from tests.search.test_pages import client_for, wait_done

pytestmark = pytest.mark.django_db(transaction=True)


def stream(parts: list[str], uuid: str, context: str = "c-1", token: str = "rw-1", **kwargs) -> Paced:  # noqa: S107 - an id
    """An answer whose run Perplexity names `uuid`, in thread `context` with `token`."""
    events = answer_stream(parts, **kwargs)
    events[0].update(backend_uuid=uuid, context_uuid=context, read_write_token=token)
    return Paced(events, pause=0.005)


def params(route, n: int = -1) -> dict:
    return json.loads(route.calls[n].request.content)["params"]


def body(route, n: int = -1) -> dict:
    return json.loads(route.calls[n].request.content)


async def conversation(owner, route_streams, upstream):
    """Two turns asked on a socket: (socket, route, first, second)."""
    route = serve(upstream, *route_streams)
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "What is sourdough?"}))
    await receive_until(comm, "status-completed")
    first = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"q": "And what about rye?", "thread": str(first.thread_id)}))
    await receive_until(comm, "status-completed")
    second = await Entry.objects.exclude(pk=first.pk).aget()
    return comm, route, first, second


async def test_ask_again_under_a_follow_up_goes_on_from_the_turn_before(owner, alinked, upstream):
    comm, route, first, second = await conversation(
        owner,
        [
            stream(["Bread from a starter."], "b-1"),
            stream(["Rye is sour."], "b-2"),
            stream(["Rye, again."], "b-3"),
        ],
        upstream,
    )
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": second.pk}))
    messages = await receive_until(comm, "status-completed")
    sent = params(route)
    # the same thread, going on from the turn before: not a new conversation
    assert sent["query_source"] == "followup" and sent["last_backend_uuid"] == "b-1"
    assert sent["read_write_token"] == "rw-1" and body(route)["query_str"] == "And what about rye?"
    again = await Entry.objects.aget(backend_uuid="b-3")
    second = await Entry.objects.aget(pk=second.pk)
    assert again.thread_id == first.thread_id and again.turn == second.pk == second.turn
    assert again.shown and not second.shown and again.answer == "Rye, again."
    assert await Thread.objects.acount() == 1
    # in the place of the answer it redoes, then streaming as any answer does
    assert f'id="entry-{again.pk}" hx-swap-oob="outerHTML:#entry-{second.pk}"' in messages[0]
    assert f'id="shown-version" name="version" value="{again.pk}"' in messages[0]
    assert "2 of 2" in messages[-1] and "Previous version" in messages[-1]
    await comm.disconnect()


async def test_a_redo_of_the_first_question_starts_a_new_thread_and_follow_ups_go_on_there(
    owner, alinked, upstream
):
    comm, route, first, second = await conversation(
        owner,
        [
            stream(["one"], "b-1"),
            stream(["two"], "b-2"),
            stream(["one again"], "b-9", context="c-9", token="rw-9"),
            stream(["three"], "b-10"),
        ],
        upstream,
    )
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": first.pk}))
    await receive_until(comm, "status-completed")
    assert params(route)["query_source"] == "home" and "last_backend_uuid" not in params(route)
    again = await Entry.objects.aget(backend_uuid="b-9")
    assert again.read_write_token == "rw-9" and again.context_uuid == "c-9"
    # the later turn is still there; a follow-up goes on from the last turn (b-2, its own thread)
    await comm.send_to(text_data=json.dumps({"q": "And then?", "thread": str(first.thread_id)}))
    await receive_until(comm, "status-completed")
    assert params(route)["last_backend_uuid"] == "b-2" and params(route)["read_write_token"] == "rw-1"
    page = (
        await (await client_for(owner)).get(reverse("search:thread", args=[first.thread_id]))
    ).content.decode()
    assert page.index(f'id="entry-{again.pk}"') < page.index(f'id="entry-{second.pk}"')  # its turn's place
    assert f'id="entry-{first.pk}"' not in page and "1 of 2" not in page and "2 of 2" in page
    await comm.disconnect()


async def test_versions_switch_in_place_and_follow_ups_go_on_from_the_one_shown(owner, alinked, upstream):
    comm, route, first, second = await conversation(
        owner,
        [
            stream(["one"], "b-1"),
            stream(["two"], "b-2"),
            stream(["two again"], "b-3"),
            stream(["three"], "b-4"),
            stream(["four"], "b-5"),
        ],
        upstream,
    )
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": second.pk}))
    await receive_until(comm, "status-completed")
    again = await Entry.objects.aget(backend_uuid="b-3")
    # back to the first version, in place of the one shown
    await comm.send_to(text_data=json.dumps({"action": "show", "entry": second.pk, "instead": again.pk}))
    shown = await comm.receive_from(timeout=5)
    assert f'id="entry-{second.pk}" hx-swap-oob="outerHTML:#entry-{again.pk}"' in shown
    assert "1 of 2" in shown and "Next version" in shown and "<p>two</p>" in shown
    assert (await Entry.objects.aget(pk=second.pk)).shown and not (
        await Entry.objects.aget(pk=again.pk)
    ).shown
    await comm.send_to(text_data=json.dumps({"q": "And then?", "thread": str(first.thread_id)}))
    await receive_until(comm, "status-completed")
    assert params(route)["last_backend_uuid"] == "b-2"
    # a page that shows the other version of the last turn goes on from it (another tab chose it)
    third = await Entry.objects.aget(backend_uuid="b-4")
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": third.pk}))
    await receive_until(comm, "status-completed")
    assert params(route)["last_backend_uuid"] == "b-2"
    await comm.disconnect()
    client = await client_for(owner)
    response = await client.post(reverse("search:show_version", args=[third.pk]))
    assert response.status_code == 302 and response["Location"].endswith(f"#entry-{third.pk}")
    page = (await client.get(reverse("search:thread", args=[first.thread_id]))).content.decode()
    assert f'id="entry-{third.pk}"' in page and f'name="version" value="{third.pk}"' in page


async def test_a_follow_up_goes_on_from_the_version_its_page_shows(owner, alinked, upstream):
    comm, route, first, second = await conversation(
        owner,
        [stream(["one"], "b-1"), stream(["two"], "b-2"), stream(["two again"], "b-3"), stream(["x"], "b-4")],
        upstream,
    )
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": second.pk}))
    await receive_until(comm, "status-completed")
    # a history link shows version 1 in its place, for this view only
    client = await client_for(owner)
    page = (
        await client.get(reverse("search:thread", args=[first.thread_id]), {"version": second.pk})
    ).content
    assert (
        f'id="entry-{second.pk}"'.encode() in page and f'name="version" value="{second.pk}"'.encode() in page
    )
    assert not (await Entry.objects.aget(pk=second.pk)).shown
    # a follow-up asked from that page (its hidden field) goes on from version 1, which now shows
    await comm.send_to(text_data=json.dumps({"q": "More?", "thread": first.thread_id, "version": second.pk}))
    await receive_until(comm, "status-completed")
    assert params(route)["last_backend_uuid"] == "b-2"
    assert (await Entry.objects.aget(pk=second.pk)).shown
    await comm.disconnect()


async def test_edit_question_asks_the_edited_question_with_another_model_in_place(owner, alinked, upstream):
    models = {
        "pplx_pro": {"label": "Best", "mode": "search"},
        "gpt56_terra": {"label": "Terra", "mode": "search"},
    }
    config = [{"label": "Terra", "non_reasoning_model": "gpt56_terra"}]
    upstream.get("/rest/models/config").respond(json={"models": models, "config": config})
    route = serve(upstream, stream(["one"], "b-1"), stream(["edited"], "b-2", model="gpt56_terra"))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "Is $5 a lot for $$bread$$?", "mode": "auto"}))
    await receive_until(comm, "status-completed")
    first = await Entry.objects.aget()
    client = await client_for(owner)
    panel = await client.get(
        reverse("search:edit", args=[first.pk]), {"model": "1"}, headers={"HX-Request": "true"}
    )
    html = panel.content.decode()
    assert "Is $5 a lot for $$bread$$?</textarea>" in html and f'id="edit{first.pk}-model"' in html
    assert "<html" not in html and re.search(r'<select name="model"[^>]*autofocus', html)  # in place
    assert (
        await client.get(
            reverse("search:edit", args=[first.pk]), {"cancel": "1"}, headers={"HX-Request": "true"}
        )
    ).content == b""
    page = (await client.get(reverse("search:edit", args=[first.pk]))).content.decode()
    assert (
        "<html" in page and f'action="/entry/{first.pk}/redo/"' in page
    )  # a page of its own without JavaScript
    question = "Is $5 a lot for $$bread$$ in Paris?"
    await comm.send_to(
        text_data=json.dumps(
            {"action": "redo", "entry": first.pk, "q": question, "model": "gpt56_terra", "mode": ""}
        )
    )
    await receive_until(comm, "status-completed")
    sent = body(route)
    assert sent["query_str"] == question and sent["params"]["model_preference"] == "gpt56_terra"
    assert sent["params"]["mode"] == "concise"  # the turn's own mode, kept
    again = await Entry.objects.aget(backend_uuid="b-2")
    assert again.question == question and again.turn == first.pk and again.options["model"] == "gpt56_terra"
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": again.pk, "q": " ", "model": "nope"}))
    refused = await comm.receive_from(timeout=5)
    assert f'id="entry-{again.pk}-redo"' in refused and "not one of the available choices" in refused
    assert await Entry.objects.acount() == 2
    await comm.disconnect()


async def test_a_second_ask_again_while_one_runs_is_refused_and_nothing_is_sent_twice(
    owner, alinked, upstream
):
    route = serve(upstream, stream(["one"], "b-1"), Paced(answer_stream(["slow "] * 40), pause=0.05))
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "first"}))
    await receive_until(comm, "status-completed")
    first = await Entry.objects.aget()
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": first.pk}))
    await receive_until(comm, "outerHTML")
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": first.pk}))  # a double click
    refused = await receive_until(comm, f"entry-{first.pk}-redo")
    assert "still arriving" in refused[-1]
    client = await client_for(owner)
    response = await client.post(reverse("search:redo", args=[first.pk]), follow=True)
    assert b"still arriving" in response.content
    # switching while it runs is refused too
    running = await Entry.objects.exclude(pk=first.pk).aget()
    await comm.send_to(text_data=json.dumps({"action": "show", "entry": first.pk, "instead": running.pk}))
    await receive_until(comm, "its versions can be switched once it ends")
    # Stop during the redo: it stops, and both versions stay
    await comm.send_to(text_data=json.dumps({"action": "stop", "entry": running.pk}))
    await receive_until(comm, "status-stopped")
    running = await wait_done(running.pk)
    assert running.status == "stopped" and running.shown and running.turn == first.pk
    assert route.call_count == 2 and await Entry.objects.acount() == 2
    await comm.disconnect()


async def test_twenty_redos_of_one_turn_are_twenty_one_versions_then_a_sentence(
    owner, alinked, upstream, monkeypatch
):
    monkeypatch.setattr(versions, "MAX_VERSIONS", 21)
    monkeypatch.setattr(versions.TooMany, "message", "21 versions already.")
    from search.live import asking

    monkeypatch.setattr(asking, "PER_MINUTE", 100)
    route = serve(upstream, *[stream([f"answer {n}"], f"b-{n}") for n in range(22)])
    comm = await connect(owner)
    await comm.send_to(text_data=json.dumps({"q": "again and again"}))
    await receive_until(comm, "status-completed")
    shown = await Entry.objects.aget()
    for _ in range(20):
        await comm.send_to(text_data=json.dumps({"action": "redo", "entry": shown.pk}))
        await receive_until(comm, "status-completed")
        shown = await Entry.objects.aget(shown=True)
    assert await Entry.objects.acount() == 21 and route.call_count == 21
    page = (
        await (await client_for(owner)).get(reverse("search:thread", args=[shown.thread_id]))
    ).content.decode()
    assert page.count('<article class="entry"') == 1 and "21 of 21" in page
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": shown.pk}))
    assert "21 versions already." in await comm.receive_from(timeout=5)
    assert route.call_count == 21
    await comm.disconnect()


async def test_without_javascript_ask_again_is_a_version_in_place(owner, alinked, upstream, member):
    serve(upstream, stream(["one"], "b-1"), stream(["again"], "b-2"))
    client = await client_for(owner)
    await client.post(reverse("search:ask"), {"q": "plain"})
    first = await wait_done((await Entry.objects.aget()).pk)
    response = await client.post(reverse("search:redo", args=[first.pk]), {"q": "plain, edited"})
    again = await Entry.objects.exclude(pk=first.pk).aget()
    assert response["Location"] == f"/thread/{first.thread_id}/#entry-{again.pk}"
    again = await wait_done(again.pk)
    assert again.question == "plain, edited" and again.turn == first.pk
    page = (await client.get(response["Location"])).content.decode()
    assert "2 of 2" in page and f'action="/entry/{first.pk}/show/"' in page
    other = await client_for(member)
    assert (await other.post(reverse("search:redo", args=[first.pk]))).status_code == 302
    assert (await other.post(reverse("search:show_version", args=[first.pk]))).status_code == 404
    assert (await other.get(reverse("search:edit", args=[first.pk]))).status_code == 404
    assert await Entry.objects.acount() == 2


async def test_history_exports_and_imports_keep_every_version(owner, alinked, upstream, member):
    comm, _route, first, second = await conversation(
        owner,
        [
            stream(["Starter bread."], "b-1"),
            stream(["Rye is sour."], "b-2"),
            stream(["Rye is dense."], "b-3"),
        ],
        upstream,
    )
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": second.pk}))
    await receive_until(comm, "status-completed")
    await comm.disconnect()
    client = await client_for(owner)
    listed = (await client.get(reverse("search:history"))).content.decode()
    assert "version 2 of 2" in listed and "version 1 of 2, not the one shown" in listed
    assert f"/thread/{first.thread_id}/?version={second.pk}#entry-{second.pk}" in listed
    found = (await client.get(reverse("search:history"), {"q": "sour"})).content.decode()
    assert "version 1 of 2, not the one shown" in found  # a version not shown is found too
    thread = await Thread.objects.aget()
    markdown = await sync_to_async(export.thread_markdown)(thread)
    assert "Rye is sour." in markdown and "Rye is dense." in markdown
    assert "version 1 of 2, not the one shown" in markdown and "· version 2 of 2*" in markdown
    data = await sync_to_async(export.thread_json)(thread)
    assert [(e["turn"], e["shown"]) for e in data["entries"]] == [(1, True), (2, False), (2, True)]
    assert data["entries"][2]["read_write_token"] == "rw-1" and data["entries"][2]["context_uuid"] == "c-1"
    imported, _ = await sync_to_async(imports.import_history)(member, json.dumps(data).encode())
    assert imported == 1
    rows = [e async for e in Entry.objects.filter(user=member).order_by("pk")]
    assert [r.turn for r in rows] == [None, rows[1].pk, rows[1].pk] and [r.shown for r in rows] == [
        True,
        False,
        True,
    ]
    assert rows[2].read_write_token == "rw-1"


async def test_deleting_a_version_keeps_the_others_files_and_shows_another(
    owner, alinked, upstream, settings, tmp_path
):
    from search import attachments, storage
    from search.models import Attachment
    from tests.search.test_attachments import storage_routes

    comm, _route, _first, second = await conversation(
        owner, [stream(["one"], "b-1"), stream(["two"], "b-2"), stream(["two again"], "b-3")], upstream
    )
    settings.UPLOAD_HOSTS = ("files.perplexity.test",)
    settings.DATA_DIR = tmp_path  # its own attachments folder
    stored = storage_routes(upstream)
    (attachments.folder() / ("0" * 32 + ".txt")).write_bytes(b"words\n")
    await Attachment.objects.acreate(
        user=owner, entry=second, name="a.txt", stored="0" * 32 + ".txt", size=6, kind="text"
    )
    await comm.send_to(text_data=json.dumps({"action": "redo", "entry": second.pk}))
    await receive_until(comm, "status-completed")
    await comm.disconnect()
    again = await Entry.objects.aget(backend_uuid="b-3")
    assert [a.name for a in await sync_to_async(versions.files)(again)] == ["a.txt"]
    assert stored.call_count == 1 and await Attachment.objects.acount() == 1  # sent again, not copied
    kept = await sync_to_async(storage.usage)(owner.pk)
    assert (kept.files, kept.file_count) == (6, 1)  # the turn's file counts once, whatever its versions
    assert [p.name for p in attachments.folder().iterdir()] == ["0" * 32 + ".txt"]
    client = await client_for(owner)
    await client.post(reverse("search:delete"), {"entry": [str(again.pk)], "confirm": "1"})
    second = await Entry.objects.aget(pk=second.pk)
    assert second.shown and await Attachment.objects.filter(entry=second).aexists()
    assert (await sync_to_async(storage.usage)(owner.pk)).files == 6
    assert (attachments.folder() / ("0" * 32 + ".txt")).exists()  # the version left holds it
    await client.post(reverse("search:delete"), {"entry": [str(second.pk)], "confirm": "1"})
    assert not await Attachment.objects.aexists() and await Entry.objects.acount() == 1
    assert (await sync_to_async(storage.usage)(owner.pk)).files == 0
    assert not list(attachments.folder().iterdir())  # gone with the last version that named it
