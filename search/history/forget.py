"""Deleting conversations on Perplexity too, when someone asks for it while deleting them here.

Each goes with DELETE /rest/thread/delete_thread_by_entry_uuid (docs/protocol.md §9.3), named by its
first answer's id and the thread's token, and sent with the session of the account it was asked
with: the person's own link, or the owner's shared one. Answers asked with an API key made no
conversation on Perplexity. A conversation is deleted there only when all of it goes here.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from django.db.models import QuerySet

from accounts.fields import UNREADABLE, DecryptionError
from accounts.models import PerplexityAccount
from accounts.services import keep_rotated_cookies, make_client
from accounts.services.link import mark_auth_problem
from pplxweb.perplexity.errors import AuthError, ChallengeError, PerplexityError
from search.models import Entry

MAX = 200  # conversations Perplexity may be asked to delete at once (one request each, 4 at a time)
AT_ONCE = 4
log = logging.getLogger(__name__)
ON_PERPLEXITY = ("session", "shared")  # the credentials whose answers live in a Perplexity thread
TOO_MANY = f"Perplexity can be asked to delete at most {MAX} conversations at a time; nothing was deleted."


@dataclass(frozen=True)
class Upstream:
    """A conversation as Perplexity knows it."""

    entry_uuid: str
    kind: str  # "session" or "shared": whose account it is in
    read_write_token: str = ""


def count(entries: QuerySet[Entry]) -> int:
    """How many conversations these entries are in on Perplexity (those asked with a session)."""
    return (
        entries.filter(credential__in=ON_PERPLEXITY)
        .exclude(backend_uuid="")
        .values("thread_id")
        .distinct()
        .count()
    )


def first_answers(threads: QuerySet) -> dict[int, list[Upstream]]:
    """Before deleting: by thread, the first answer Perplexity knows in each of its threads there
    (a conversation goes on in a new one when Perplexity's is gone, and a redo of its first
    question starts one: search/live/upstream.py, search/live/redo.py), with that thread's token
    when the answer kept it ("": the conversation's)."""
    found: dict[int, dict[str, Upstream]] = {}
    rows = (
        Entry.objects.filter(thread__in=threads, credential__in=ON_PERPLEXITY)
        .exclude(backend_uuid="")
        .order_by("thread_id", "created", "pk")
        .values_list("thread_id", "backend_uuid", "credential", "context_uuid", "read_write_token")
    )
    for thread_id, entry_uuid, kind, context, token in rows.iterator():
        found.setdefault(thread_id, {}).setdefault(context or token, Upstream(entry_uuid, kind, token))
    return {thread_id: list(upstream.values()) for thread_id, upstream in found.items()}


def forget(user, conversations: list[Upstream]) -> tuple[bool, str]:
    """Ask Perplexity to delete them: (all deleted?, a sentence saying how it went)."""
    accounts = {
        "session": _account(PerplexityAccount.objects.filter(user=user, session__isnull=False)),
        "shared": _account(
            PerplexityAccount.objects.filter(
                shared=True, user__is_superuser=True, session__isnull=False
            ).order_by("pk")
        ),
    }
    failures: list[str] = []
    jobs: dict[int, tuple[PerplexityAccount, list[Upstream]]] = {}
    for conversation in conversations:
        account = accounts.get(conversation.kind)
        if isinstance(account, DecryptionError):
            failures.append(UNREADABLE)
        elif account is None or not account.linked:
            failures.append("The Perplexity account it was asked with is no longer linked here.")
        else:
            jobs.setdefault(account.pk, (account, []))[1].append(conversation)
    outcomes = async_to_sync(_delete_all)(list(jobs.values())) if jobs else []
    for account, before, after, errors in outcomes:
        keep_rotated_cookies(account, before, after)
        refused = next((e for e in errors if isinstance(e, AuthError | ChallengeError)), None)
        if refused is not None:  # as after a search: the link needs attention
            mark_auth_problem(account, refused)
        failures += [e.message for e in errors if e is not None]
    if len(conversations) == 1:
        said = (
            f"It was not deleted on Perplexity: {failures[0]}"
            if failures
            else "It was deleted on Perplexity too."
        )
        return not failures, said
    total, deleted = len(conversations), len(conversations) - len(failures)
    said = f"{deleted} of the {total} conversations were deleted on Perplexity too."
    return not failures, f"{said} The others were not: {failures[0]}" if failures else said


def _account(accounts: QuerySet) -> PerplexityAccount | DecryptionError | None:
    """The first of these accounts, or the error if its stored sign-in does not open."""
    try:
        return accounts.first()
    except DecryptionError as exc:
        log.error("deleting on Perplexity: %s", exc)
        return exc


async def _delete_all(jobs: list[tuple[PerplexityAccount, list[Upstream]]]) -> list:
    """Per account: (account, its cookies before, after, the error or None per conversation)."""
    limit = asyncio.Semaphore(AT_ONCE)

    async def one(client, conversation: Upstream) -> PerplexityError | None:
        async with limit:
            try:
                await client.delete_thread(conversation.entry_uuid, conversation.read_write_token)
            except PerplexityError as exc:
                return exc
            return None

    async def per_account(account: PerplexityAccount, conversations: list[Upstream]):
        session = account.session_data()
        cookies = dict(session.get("cookies") or {})
        async with make_client(
            cookies=cookies, user_agent=session.get("user_agent", ""), account_id=account.account_id
        ) as client:
            errors = await asyncio.gather(*(one(client, c) for c in conversations))
            return account, cookies, dict(client.cookies), errors

    return await asyncio.gather(*(per_account(account, conversations) for account, conversations in jobs))
