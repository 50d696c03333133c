"""The Settings page's socket: the library job's progress, live, for as long as the page's
session is signed in (pplxweb.signed_in: it closes on sign-out, a password change elsewhere,
removal from the household and an unlink, and checks the session before each update it sends)."""

from __future__ import annotations

import re

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.template.loader import render_to_string

from pplxweb import build, sockets
from pplxweb.signed_in import FollowsSignIn
from search.library import display
from search.library.runner import group

TOKEN = re.compile(r"[A-Za-z0-9]{32,64}")


def _csrf(scope) -> str:
    """This browser's own CSRF cookie, for the section's forms (one fragment goes to every tab)."""
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            for part in value.decode("latin-1").split(";"):
                key, _, token = part.strip().partition("=")
                if key == settings.CSRF_COOKIE_NAME and TOKEN.fullmatch(token):
                    return token
    return ""


class LibraryConsumer(FollowsSignIn, sockets.FollowsLayer, AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=sockets.SIGNED_OUT)
            return
        if build.stale(self.scope):  # a page of another build: it offers a reload
            await self.accept()
            await self.close(code=build.UPDATED)
            return
        self.group = group(user.pk)
        self.csrf = _csrf(self.scope)
        await self.follow_sign_in(user)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        # what the job did while the page loaded
        await self.send(text_data=self.with_csrf(await database_sync_to_async(display.fragment)(user)))

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await sockets.leave(self.channel_layer, [self.group, *self.sign_in_groups()], self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        return  # the page only listens

    async def library_fragment(self, event: dict) -> None:
        if self.opened and not await self.signed_out_now():  # thread titles are private
            await self.send(text_data=self.with_csrf(event["html"]))

    def closed_html(self, message: str, url_name: str, link: str) -> str:
        """Why the socket closed, in place of the library section (pplxweb.signed_in)."""
        context = {"message": message, "url_name": url_name, "link": link}
        return render_to_string("accounts/library_closed_fragment.html", context)

    def with_csrf(self, html: str) -> str:
        return html.replace(display.CSRF_SLOT, self.csrf)
