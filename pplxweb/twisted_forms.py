"""Under daphne, Twisted must not parse form bodies itself.

Twisted's `Request.requestReceived` reads a whole multipart/form-data (or url-encoded) POST into
memory and parses it into `request.args` (`parsePOSTFormSubmission`, on by default), which daphne
never reads: Django parses the body again, streaming it to a temporary file. For a 25 MB file
that parse cost the server about 240 MB at its peak (tests/benchmarks/attachments.py). This
turns it off for daphne's requests; nothing else changes.
"""

from __future__ import annotations


def configure() -> None:
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # another ASGI server
        return
    if getattr(WebRequest, "_pplxweb_no_form_parsing", False):
        return
    original = WebRequest.__init__

    def __init__(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        self._parsePOSTFormSubmission = False

    WebRequest.__init__ = __init__
    WebRequest._pplxweb_no_form_parsing = True
