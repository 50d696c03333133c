from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer


class SearchConsumer(AsyncWebsocketConsumer):
    """The live search socket. Only signed-in people get in; the origin was checked in asgi.py."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # Searching over the socket arrives with the live-search work; until then messages are
        # accepted and dropped.
        return
