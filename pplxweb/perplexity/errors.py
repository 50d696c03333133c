"""Errors that carry the sentence a person sees (ARCHITECTURE.md, "Errors a person can act on")."""

from __future__ import annotations


class PerplexityError(Exception):
    """Base class; `message` is one sentence for a person, never containing a credential."""

    message = "Perplexity did not answer as expected."
    link_status = "unchanged"  # what the linked account's status becomes

    def __init__(self, message: str | None = None, *, detail: str = "") -> None:
        self.message = message or self.message
        self.detail = detail  # for logs; already free of secrets
        super().__init__(self.message)


class AuthError(PerplexityError):
    message = "Perplexity did not accept the linked session. Re-link in Settings."
    link_status = "needs_attention"


class FollowUpRefused(AuthError):
    """A follow-up answered 403 with an empty JSON body (`{}`): the thread may be gone there, as
    the reconnect endpoint answers for a deleted run, or the session may be; the session check
    says which (docs/protocol.md §12.4). Left unchecked, it is the AuthError it looks like."""


class ChallengeError(PerplexityError):
    message = (
        "Perplexity's Cloudflare check blocked this server. Paste your browser's cookies in "
        "Settings (the Cloudflare fallback) or try again later."
    )
    link_status = "blocked"


class RunGone(PerplexityError):
    """A rejoin answered 403 `{}`: Perplexity no longer has the run (docs/protocol.md §9.1)."""

    message = (
        "Perplexity no longer has this answer's run (its conversation was deleted there); "
        "what had arrived is kept."
    )


class RateLimited(PerplexityError):
    def __init__(self, retry_after: int | None = None, message: str | None = None) -> None:
        self.retry_after = retry_after
        if message is None:
            message = (
                f"Perplexity's rate limit: try again in {retry_after} s."
                if retry_after
                else "Perplexity's rate limit: try again in a minute."
            )
        super().__init__(message)


class RequestRejected(PerplexityError):
    message = "Perplexity rejected the request format; pplxweb may need an update."


class UpstreamError(PerplexityError):
    message = "Perplexity had a server error. Try again in a moment."


class NetworkError(PerplexityError):
    message = "pplxweb could not reach Perplexity. Check this server's internet connection."


class Timeout(PerplexityError):
    message = "Perplexity stopped sending the answer (no data for too long)."


class ProtocolError(PerplexityError):
    """The stream itself is malformed beyond what the parser can skip."""

    message = "Perplexity sent a stream pplxweb cannot read."


class SignInError(PerplexityError):
    """A sign-in step was refused; the message says which and what to do."""

    message = "Perplexity refused the sign-in."


GONE = {  # Perplexity's codes for a thread it will not show or continue, and what that means
    "ENTRY_DELETED": "deleted on Perplexity",
    "ENTRY_EXPIRED": "expired on Perplexity (it purges threads after about three months)",
    "VIEW_THREAD_NOT_ALLOWED": "not viewable with this account on Perplexity",
    "THREAD_NOT_FOUND": "not found on Perplexity",
}


class ThreadGone(PerplexityError):
    """Perplexity refuses one conversation for good (deleted, expired, not viewable)."""

    def __init__(self, code: str) -> None:
        self.code = code
        super().__init__(
            f"Perplexity no longer has this conversation: it is {GONE.get(code, GONE['THREAD_NOT_FOUND'])}."
        )
