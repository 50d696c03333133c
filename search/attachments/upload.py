"""Handing kept files to Perplexity for a question (pplxweb.perplexity.uploads), with the
credential the person's questions use and the per-person upload limit."""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.conf import settings

from accounts.fields import UNREADABLE, DecryptionError
from accounts.services import NoCredential, credentials_for, keep_rotated_cookies, make_client
from accounts.services.link import mark_auth_problem
from pplxweb.perplexity import uploads
from pplxweb.perplexity.errors import AuthError, ChallengeError, PerplexityError
from search.attachments import KINDS, Refused, path_of, take_uploads, upstream_name
from search.models import Attachment


async def send_upstream(user, attachments: list[Attachment]) -> None:
    """Upload the files not yet on Perplexity with the credential the person's questions use;
    their URLs are saved on them. Refused (with Perplexity's sentence) when that fails."""
    waiting = [a for a in attachments if not a.remote_url]
    if not waiting:
        return
    files = []
    for attachment in waiting:
        path = path_of(attachment)
        if path is None:
            raise Refused(f"“{attachment.name}” is no longer on this server; attach it again.")
        files.append(
            uploads.LocalFile(path, upstream_name(attachment), KINDS[attachment.kind][1], attachment.size)
        )
    credential = await database_sync_to_async(_credential)(user, len(waiting))
    try:
        async with make_client(
            cookies=credential.cookies,
            user_agent=credential.user_agent,
            account_id=credential.account.account_id,
        ) as client:
            done = await uploads.upload(client, files, settings.UPLOAD_HOSTS)
            cookies = dict(client.cookies)
    except (AuthError, ChallengeError) as exc:
        await database_sync_to_async(_auth_problem)(credential, exc)
        raise Refused(f"{exc.message} The files were not sent; nothing was asked.") from None
    except PerplexityError as exc:
        raise Refused(exc.message) from None
    await database_sync_to_async(_uploaded)(waiting, [d.url for d in done], credential, cookies)


def _credential(user, count: int):
    try:
        credential = credentials_for(user)
    except NoCredential as exc:
        raise Refused(exc.message) from None
    except DecryptionError:
        raise Refused(f"{UNREADABLE} Nothing was sent.") from None
    if credential.kind == "api_key":
        raise Refused("Asking about files needs a linked Perplexity account: the API key cannot send files.")
    take_uploads(user, count)
    return credential


def _auth_problem(credential, exc) -> None:
    if credential.kind != "api_key":
        mark_auth_problem(credential.account, exc)


def _uploaded(attachments: list[Attachment], urls: list[str], credential, cookies: dict) -> None:
    for attachment, url in zip(attachments, urls, strict=True):
        attachment.remote_url = url
        Attachment.objects.filter(pk=attachment.pk).update(remote_url=url)
    keep_rotated_cookies(credential.account, credential.cookies, cookies)
