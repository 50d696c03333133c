"""A log filter that keeps credentials out of every log line."""

from __future__ import annotations

import logging
import re

# A NextAuth session token is a compact JWE; cookies and bearer values follow their names.
PATTERNS = [
    re.compile(r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-.]*"),
    re.compile(r"(?i)(session-token[^=\s]*=)[^;\s\"']+"),
    re.compile(r"(?i)(cf_clearance=)[^;\s\"']+"),
    re.compile(r"(?i)(authorization:\s*bearer\s+)\S+"),
    re.compile(r"(?i)(pplx-)[A-Za-z0-9]{8,}"),
    re.compile(r"(pplxweb_)[A-Za-z0-9_\-]{16,}"),  # an agent token (accounts.services.agent_tokens)
]


def redact(text: str) -> str:
    for pattern in PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "[redacted]", text)
    return text


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class RedisAway(logging.Filter):
    """channels-redis logs every failed reconnect of its pub/sub reader with a traceback, once a
    second while Redis is away; pplxweb/sockets.py says once that the connection to Redis is lost
    and once that it is back. Those records (a connection fault, from channels-redis) are
    dropped; everything else stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("channels_redis") or not record.exc_info:
            return True
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        return not isinstance(record.exc_info[1], RedisConnectionError | RedisTimeoutError | OSError)
