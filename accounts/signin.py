"""Sign-in throttling that slows guessing down and never locks out the right person.

Three counts of failed tries in the last hour, token buckets in the database (ratelimit.py). A
try takes its tokens before the password is checked, so tries sent in parallel cannot slip past
a count, and a right password gives them back: only failures count.

- Per address, every user name together (LOGIN_RATE_PER_IP): an address that keeps failing is
  refused, whatever name it tries next.
- Per user name and address (LOGIN_RATE_PER_USER): an address that keeps failing at one name is
  refused for that name.
- Per user name, from every address together (LOGIN_RATE_PER_USER): this count refuses nobody.
  While it is used up (the name is being guessed at from many addresses), a try at that name
  costs SLOWED tokens of its address's count for the name instead of one, so each address gets a
  fifth of its guesses. An address that has not been failing still has its whole count: the
  right password from it gets in at the first try, however many other addresses failed.

An IPv6 address is counted by its /64 network, which one host or household holds whole (a
guesser could take a new address in it for every try).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from accounts import ratelimit

HOUR = timedelta(hours=1)
SLOWED = 5  # what a try at a name being guessed at costs its address's count for that name


class Refused(Exception):
    def __init__(self, verdict: ratelimit.Verdict) -> None:
        super().__init__(verdict.wait_text)
        self.verdict = verdict


@dataclass(frozen=True)
class Try:
    """The tokens one sign-in try took, to give back if its password is right."""

    address: str
    name: str  # "" when the form named nobody
    cost: float  # taken from the name-and-address count
    named: bool  # whether a token was taken from the name's own count


def address_of(ip: str) -> str:
    """The address a try is counted under: an IPv4 address, or an IPv6 address's /64."""
    try:
        parsed = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if parsed.version == 6 and parsed.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(getattr(parsed, "ipv4_mapped", None) or parsed)


def begin(ip: str, username: str) -> Try:
    """Take the tokens of a try at `username` from `ip`; Refused (with the wait) when its
    address, or its address for that name, has been failing too often."""
    address, name = address_of(ip), username.strip().lower()[:150]
    per_ip, per_user = settings.LOGIN_RATE_PER_IP, settings.LOGIN_RATE_PER_USER
    verdict = ratelimit.take("login-ip", address, per_ip, HOUR)
    if not verdict.allowed:
        raise Refused(verdict)
    if not name:
        return Try(address, "", 0, False)
    guessed_at = not ratelimit.peek("login-user", name, per_user, HOUR).allowed
    cost = float(min(SLOWED, per_user)) if guessed_at else 1.0
    verdict = ratelimit.take("login-user-ip", _pair(name, address), per_user, HOUR, cost)
    if not verdict.allowed:
        ratelimit.give_back("login-ip", address, per_ip, HOUR)
        raise Refused(verdict)
    named = ratelimit.take("login-user", name, per_user, HOUR).allowed
    return Try(address, name, cost, named)


def succeeded(attempt: Try) -> None:
    """The password was right: the try's tokens go back (the name's count keeps the failures
    other addresses made, so a guesser is not let off by the owner signing in)."""
    ratelimit.give_back("login-ip", attempt.address, settings.LOGIN_RATE_PER_IP, HOUR)
    if attempt.name:
        ratelimit.reset("login-user-ip", _pair(attempt.name, attempt.address))
        if attempt.named:
            ratelimit.give_back("login-user", attempt.name, settings.LOGIN_RATE_PER_USER, HOUR)


def _pair(name: str, address: str) -> str:
    return f"{name}\n{address}"
