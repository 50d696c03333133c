"""A websocket that closes with its session, for every socket a page opens (the search socket
and the Settings library socket alike).

The socket joins its person's channel group at connect (pplxweb.sockets.group); whatever ends or
changes a sign-in tells that group (pplxweb.sockets.tell: signing out, a password change, removal
from the household, an unlink). The socket then checks its own session and, when it no longer
opens as that person, sends the page a sentence saying why (where the page shows it:
`closed_html`) and closes with 4401 (signed out) or 4403 (unlinked). A consumer also calls
`signed_out_now()` before it sends anything private, so a sign-out whose word was lost (another
process, a channel layer that dropped it) still closes it at the next message.
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from pplxweb import sockets

SIGNED_OUT_TEXT = "You were signed out (here or in another window), so this page no longer updates."
UNLINKED_TEXT = "Your Perplexity link was removed, so this page no longer updates; reload it to go on."


class FollowsSignIn:
    """Mixin for an AsyncWebsocketConsumer; it defines `closed_html(message, url_name, link)`."""

    user = None
    session_key: str | None = None
    closed_for_sign_in = False  # said why and closed: nothing more goes out

    def closed_html(self, message: str, url_name: str, link: str) -> str:
        raise NotImplementedError

    async def follow_sign_in(self, user) -> None:
        """At connect, for a signed-in person: their group, and this socket's session."""
        self.user = user
        self.session_key = self.scope["session"].session_key
        await self.channel_layer.group_add(sockets.group(user.pk), self.channel_name)

    def sign_in_groups(self) -> list[str]:
        """The groups a closing socket leaves (sockets.leave) for its sign-in."""
        return [sockets.group(self.user.pk)] if self.user is not None else []

    async def signed_out_now(self) -> bool:
        """Whether the session is over; if it is, the socket has said so and closed."""
        if self.closed_for_sign_in:
            return True
        if await database_sync_to_async(sockets.still_signed_in)(self.session_key, self.user.pk):
            return False
        await self.close_signed_out()
        return True

    async def person_changed(self, event: dict) -> None:
        """The person's sign-in changed somewhere (pplxweb.sockets.tell)."""
        if self.closed_for_sign_in:
            return
        if event.get("what") == "unlinked":
            self.closed_for_sign_in = True
            await self.send(text_data=self.closed_html(UNLINKED_TEXT, "accounts:settings", "Settings"))
            await self.close(code=sockets.UNLINKED)
            return
        renamed = event.get("renamed") or ()
        if len(renamed) == 2 and renamed[0] == self.session_key:  # the same browser, a new key
            self.session_key = renamed[1]
        if event.get("ended") and event["ended"] == self.session_key:
            await self.close_signed_out()
        else:
            await self.signed_out_now()

    async def close_signed_out(self) -> None:
        self.closed_for_sign_in = True
        await self.send(text_data=self.closed_html(SIGNED_OUT_TEXT, "accounts:login", "Sign in again"))
        await self.close(code=sockets.SIGNED_OUT)
