from __future__ import annotations

from django.urls import path

from search.consumers import SearchConsumer

websocket_urlpatterns = [
    path("ws/search/", SearchConsumer.as_asgi()),
]
