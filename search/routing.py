from __future__ import annotations

from django.urls import path

from search.library.consumers import LibraryConsumer
from search.live.consumers import SearchConsumer

websocket_urlpatterns = [
    path("ws/search/", SearchConsumer.as_asgi()),
    path("ws/library/", LibraryConsumer.as_asgi()),
]
