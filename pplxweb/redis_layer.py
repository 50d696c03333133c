"""The Redis channel layer: channels-redis's pub/sub layer, made to lose nothing silently.

channels-redis's core layer reads all sockets of a process through one shared blocking pop: when
a socket closed while its consumer held the pop and a reply was in flight, a message meant for
another socket was lost (issue 20; about 1 in 60 repeats of the people-at-the-same-moment test).
The pub/sub layer gives each process one subscribed Redis connection, read by one task, and each
channel a queue of its own: a closing socket takes nothing from the others. On top of it:

- Subscriptions are confirmed: new_channel() and group_add() return once Redis has confirmed the
  SUBSCRIBE, so a message published right after reaches the channel.
- One reader task per Redis connection blocks on its socket (no polling), and a PING every few
  seconds notices a Redis that stopped answering while its TCP connection stays (a stopped
  process, a dead network).
- Pub/sub keeps nothing for later: what is published while the connection is down is gone. So
  when it is lost, every channel of the process gets one `layer.lost` message; the sockets say so
  and close with code 4012, the page reopens and rejoins its running answer (which sends its whole
  state again). The reader reconnects by itself and subscribes everything again. A channel made
  while Redis is away is told at once (its socket says so instead of failing the handshake).
- Sends while Redis is away are dropped with a logged warning, never raised: every socket that
  could miss them has been told, and a run goes on and saves its answer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import uuid

from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer
from channels_redis.utils import _close_redis, _wrap_close, create_pool, decode_hosts
from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
LOST = "layer.lost"  # the message every channel gets when the connection to Redis is lost
LOST_CODE = 4012  # the websocket close code that makes the page reopen (static/pplxweb.js)
FAULTS = (RedisError, OSError, TimeoutError)


class RedisChannelLayer(RedisPubSubChannelLayer):
    """CONFIG as channels-redis's pub/sub layer ("hosts", "prefix"), plus "ping_every" (seconds
    between checks that Redis still answers; one unanswered for as long is a lost connection)."""

    def _get_layer(self) -> LoopLayer:
        loop = asyncio.get_running_loop()
        try:
            return self._layers[loop]
        except KeyError:
            layer = self._layers[loop] = LoopLayer(*self._args, **self._kwargs, channel_layer=self)
            _wrap_close(self, loop)
            return layer


class LoopLayer(RedisPubSubLoopLayer):
    """The layer of one event loop (channels-redis makes one per loop)."""

    def __init__(self, hosts=None, prefix="asgi", channel_layer=None, ping_every: float = 5.0, **kwargs):
        super().__init__(hosts=hosts, prefix=prefix, channel_layer=channel_layer, **kwargs)
        self._shards = [Shard(host, self, ping_every) for host in decode_hosts(hosts)]
        self.told: set[str] = set()  # channels told of the current outage

    async def _subscribe_to_channel(self, channel: str) -> None:
        self.channels[channel] = asyncio.Queue()
        if not await self._get_shard(channel).subscribe(channel):
            self.tell(channel)

    async def group_add(self, group: str, channel: str) -> None:
        if channel not in self.channels:
            raise RuntimeError("group_add() works only on channels of this process (new_channel())")
        group_channel = self._get_group_channel_name(group)
        self.groups.setdefault(group_channel, set()).add(channel)
        if not await self._get_shard(group_channel).subscribe(group_channel):
            self.tell(channel)

    def tell(self, channel: str) -> None:
        """Tell a channel (once per outage) that messages meant for it may have been lost."""
        queue = self.channels.get(channel)
        if queue is not None and channel not in self.told:
            self.told.add(channel)
            queue.put_nowait(self.channel_layer.serialize({"type": LOST}))

    def lost(self) -> None:
        for channel in list(self.channels):
            self.tell(channel)

    def back(self) -> None:
        self.told.clear()

    def deliver(self, name: str, data: bytes) -> None:
        if name in self.channels:
            self.channels[name].put_nowait(data)
        else:
            for channel in self.groups.get(name, ()):
                if channel in self.channels:
                    self.channels[channel].put_nowait(data)


class Shard:
    """One Redis server: a pool for publishing, and one subscribed connection with its reader."""

    CONNECT_WAIT = 5.0  # how long a first subscription waits for the first connection
    CONFIRM_WAIT = 5.0  # how long a SUBSCRIBE may stay unconfirmed before the connection is lost

    def __init__(self, host: dict, layer: LoopLayer, ping_every: float) -> None:
        self.host = host
        self.layer = layer
        self.ping_every = ping_every
        self.state = "starting"  # then "up" or "down"
        self.names: set[str] = set()  # what should be subscribed
        self.confirmed: set[str] = set()  # what Redis has subscribed, as of its last reply
        self.unsubscribing: collections.Counter[str] = collections.Counter()  # sent, unconfirmed
        self.waiting: dict[str, collections.deque[asyncio.Future]] = {}  # per SUBSCRIBE sent
        self.keepalive = f"{layer.prefix}__layer__{uuid.uuid4().hex}"  # always subscribed
        self.conn = None
        self.redis = None
        self.task: asyncio.Task | None = None
        self.changed = asyncio.Event()  # set at every change of state (then replaced)
        self.send_lock = asyncio.Lock()  # commands go out (and are counted) in order
        self.pong: asyncio.Future | None = None
        self.tidying: asyncio.Future | None = None
        self.dropped = 0  # sends dropped in the current outage
        self.pause = 0.25  # before the next attempt to connect

    def _client(self) -> aioredis.Redis:
        if self.redis is None:
            self.redis = aioredis.Redis(connection_pool=create_pool(self.host))
        return self.redis

    def _set_state(self, state: str) -> None:
        self.state = state
        self.changed.set()
        self.changed = asyncio.Event()

    # --- the layer's calls ----------------------------------------------------------------------

    async def publish(self, name: str, data: bytes) -> None:
        if self.state == "down":
            self._dropped()
            return
        try:
            await self._client().publish(name, data)
        except FAULTS as error:
            self._dropped(error)
            self._break(error)

    async def subscribe(self, name: str) -> bool:
        """Subscribe `name`; True once Redis confirmed it, False when Redis is away (the name is
        subscribed again when it comes back)."""
        self.names.add(name)
        if self.task is None:
            self.task = asyncio.ensure_future(self._run())
        if self.state == "starting":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), self.CONNECT_WAIT)
        conn = self.conn
        if self.state != "up" or conn is None:
            return False
        if name in self.confirmed and not self.unsubscribing[name]:
            return True
        try:
            async with self.send_lock:
                confirmed = asyncio.get_running_loop().create_future()
                self.waiting.setdefault(name, collections.deque()).append(confirmed)
                await conn.send_command("SUBSCRIBE", name, check_health=False)
            return await asyncio.wait_for(asyncio.shield(confirmed), self.CONFIRM_WAIT)
        except FAULTS as error:
            self._break(error, conn)
            return False

    async def unsubscribe(self, name: str) -> None:
        self.names.discard(name)
        conn = self.conn
        if self.state != "up" or conn is None:
            return
        try:
            async with self.send_lock:
                self.unsubscribing[name] += 1
                await conn.send_command("UNSUBSCRIBE", name, check_health=False)
        except FAULTS as error:
            self._break(error, conn)

    async def flush(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.redis is not None:
            await _close_redis(self.redis)
            self.redis = None
        self._forget()
        self.names.clear()
        self.state = "starting"

    # --- the reader -----------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            conn = self._client().connection_pool.make_connection()
            conn.retry = Retry(NoBackoff(), 0)  # a lost connection is ours to notice, not retried
            pinger = None
            try:
                await conn.connect()
                self.conn = conn
                async with self.send_lock:  # the keepalive last: once it is confirmed, all are
                    await conn.send_command("SUBSCRIBE", *self.names, self.keepalive, check_health=False)
                pinger = asyncio.ensure_future(self._ping(conn))
                while True:
                    # math.inf: wait as long as it takes (socket_timeout is for commands)
                    self._handle(conn, await conn.read_response(timeout=math.inf, push_request=True))
            except asyncio.CancelledError:
                raise
            except Exception as error:  # every fault of the connection is a lost connection
                self._lost(error)
            finally:
                if pinger is not None:
                    pinger.cancel()
                self.conn = None
                await conn.disconnect(nowait=True)
            await asyncio.sleep(self.pause)  # then try again: quickly at first, every 2 s later
            self.pause = min(self.pause * 2, 2.0)

    def _handle(self, conn, reply) -> None:
        if reply in (b"PONG", "PONG"):  # RESP3 answers a PING as usual while subscribed
            reply = [b"pong", b""]
        if not isinstance(reply, list) or len(reply) < 2:
            return
        kind = reply[0]
        name = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
        if kind == b"message" and len(reply) == 3:
            self.layer.deliver(name, reply[2])
        elif kind == b"subscribe":
            self.confirmed.add(name)
            waiting = self.waiting.get(name)
            if waiting:
                confirmed = waiting.popleft()
                if not confirmed.done():
                    confirmed.set_result(True)
                if not waiting:
                    del self.waiting[name]
            if name == self.keepalive and self.state != "up":
                self._up(conn)
        elif kind == b"unsubscribe":
            self.confirmed.discard(name)
            if self.unsubscribing[name] > 1:
                self.unsubscribing[name] -= 1
            else:
                self.unsubscribing.pop(name, None)
        elif kind == b"pong" and self.pong is not None and not self.pong.done():
            self.pong.set_result(True)

    def _up(self, conn) -> None:
        if self.state == "down":
            log.warning("the connection to Redis is back (%d message(s) not sent meanwhile)", self.dropped)
        self.dropped = 0
        self.pause = 0.25
        self.layer.back()
        self._set_state("up")
        # names given up while it reconnected were in the SUBSCRIBE: given up again
        stale = self.confirmed - self.names - {self.keepalive}
        if stale:
            self.tidying = asyncio.ensure_future(self._unsubscribe_stale(conn, stale))

    async def _unsubscribe_stale(self, conn, names: set[str]) -> None:
        with contextlib.suppress(*FAULTS):
            async with self.send_lock:
                self.unsubscribing.update(names)
                await conn.send_command("UNSUBSCRIBE", *names, check_health=False)

    async def _ping(self, conn) -> None:
        """A Redis that stops answering (a stopped process) keeps its TCP connection: ask it."""
        while True:
            await asyncio.sleep(self.ping_every)
            self.pong = asyncio.get_running_loop().create_future()
            try:
                async with self.send_lock:
                    await conn.send_command("PING", check_health=False)
                await asyncio.wait_for(self.pong, self.ping_every)
            except FAULTS as error:
                self._break(error, conn)
                return

    def _break(self, error: BaseException, conn=None) -> None:
        """The connection failed under a command: drop it (the reader notices and reconnects)."""
        conn = conn or self.conn
        writer = getattr(conn, "_writer", None)
        if writer is not None and conn is self.conn:
            log.warning("the connection to Redis failed (%s); reconnecting", error.__class__.__name__)
            writer.transport.abort()

    def _forget(self) -> None:
        """The connection is gone: nothing is subscribed, nothing will be confirmed."""
        for waiting in self.waiting.values():
            for confirmed in waiting:
                if not confirmed.done():
                    confirmed.set_result(False)
        self.waiting.clear()
        self.confirmed.clear()
        self.unsubscribing.clear()

    def _lost(self, error: BaseException) -> None:
        self._forget()
        if self.state == "starting":
            log.warning("pplxweb cannot reach Redis (%s); trying again", error)
        elif self.state == "up":
            log.warning("the connection to Redis is lost (%s); every socket of this process is told", error)
        if self.state != "down":
            self._set_state("down")
        self.layer.lost()

    def _dropped(self, error: BaseException | None = None) -> None:
        self.dropped += 1
        if self.dropped == 1 or error is not None:
            log.warning("Redis is away: a channel message was not sent (%s)", error or "connection lost")
