"""The in-memory channel layer: channels' behaviour, without a walk over every socket per message."""

from __future__ import annotations

import asyncio
import os

import pytest
from channels.layers import InMemoryChannelLayer as ChannelsLayer

from pplxweb.layers import InMemoryChannelLayer


async def test_a_group_send_reaches_every_member_and_only_them():
    layer = InMemoryChannelLayer()
    a, b, other = [await layer.new_channel() for _ in range(3)]
    await layer.group_add("entry-1", a)
    await layer.group_add("entry-1", b)
    await layer.group_add("entry-2", other)
    await layer.group_send("entry-1", {"type": "entry.fragment", "html": "<p>1</p>"})
    assert (await layer.receive(a))["html"] == "<p>1</p>"
    assert (await layer.receive(b))["html"] == "<p>1</p>"
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await layer.receive(other)
    await layer.group_discard("entry-1", b)
    await layer.group_send("entry-1", {"type": "entry.fragment", "html": "<p>2</p>"})
    assert (await layer.receive(a))["html"] == "<p>2</p>"
    assert not layer.channels.get(b)


async def test_a_full_member_misses_the_message_and_the_others_get_it():
    layer = InMemoryChannelLayer(capacity=1)
    full, free = await layer.new_channel(), await layer.new_channel()
    for channel in (full, free):
        await layer.group_add("entry-1", channel)
    await layer.send(full, {"type": "x"})
    await layer.group_send("entry-1", {"type": "entry.fragment"})  # no ChannelFull raised
    assert (await layer.receive(free))["type"] == "entry.fragment"
    assert (await layer.receive(full))["type"] == "x" and not layer.channels.get(full)


async def test_expired_messages_and_memberships_are_swept_at_most_once_a_second(monkeypatch):
    layer = InMemoryChannelLayer(expiry=0.01, group_expiry=1)
    sweeps = []
    walk = ChannelsLayer._clean_expired
    monkeypatch.setattr(ChannelsLayer, "_clean_expired", lambda self: sweeps.append(1) or walk(self))
    gone, alive = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("entry-1", gone)
    await layer.group_add("entry-2", alive)
    await layer.send(gone, {"type": "never read"})
    for _ in range(200):  # many messages, one walk
        await layer.group_send("entry-2", {"type": "entry.fragment"})
        await layer.receive(alive)
    assert len(sweeps) == 1
    assert gone in layer.channels  # expired meanwhile, but the next walk is not due yet
    await asyncio.sleep(0.02)  # the message has expired
    layer._next_sweep = 0.0  # and a second has passed
    await layer.group_send("entry-2", {"type": "entry.fragment"})
    assert len(sweeps) == 2
    assert gone not in layer.channels and gone not in layer.groups.get("entry-1", {})
    assert (await layer.receive(alive))["type"] == "entry.fragment"


def test_the_server_uses_it_without_redis(settings):
    from channels.layers import get_channel_layer

    from pplxweb.settings import CHANNEL_LAYERS

    if "REDIS_URL" in os.environ:
        pytest.skip("Redis is configured: pplxweb.redis_layer is the layer")
    assert CHANNEL_LAYERS["default"]["BACKEND"] == "pplxweb.layers.InMemoryChannelLayer"
    assert isinstance(get_channel_layer(), InMemoryChannelLayer)
