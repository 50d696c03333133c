"""How pplxweb sends the files it keeps (attached files, kept images) and the files it makes of
upstream text (exports): none of them is ever a document that runs script from pplxweb's origin.

The rule, one for every such file:

- it is sent as a download (`Content-Disposition: attachment`, `application/octet-stream`), so a
  browser saves it instead of opening it: no inline PDF (Chromium's PDF viewer runs a PDF's
  JavaScript, and a `sandbox` CSP does not stop it: measured with Chromium 156), no HTML, no SVG;
- except an image the page shows (`inline`), and only when its bytes, read as it is sent, are a
  PNG, JPEG, GIF or WebP (never its name, its stored kind or what an upload declared): it goes
  with that image's own type, which a browser renders as an image and nothing else;
- every one carries `Content-Security-Policy: sandbox; default-src 'none'` (opened anyway, it is
  a unique origin that may load nothing), `X-Content-Type-Options: nosniff` (its type is never
  guessed from its bytes: a PNG that is also HTML stays a PNG), and `Cross-Origin-Resource-Policy:
  same-origin` (another site's page cannot embed it).

So no file needs a script check: pplxweb keeps a PDF with JavaScript or an XFA form as the person
sent it, and it only ever leaves as a download.
"""

from __future__ import annotations

from pathlib import Path

from django.http import FileResponse, HttpResponseBase
from django.utils.http import content_disposition_header

from search.images import kind_of

SANDBOX = "sandbox; default-src 'none'"
DOWNLOAD = "application/octet-stream"


def hardened(response: HttpResponseBase) -> HttpResponseBase:
    """The headers every file pplxweb sends carries (see the module's docstring)."""
    response["Content-Security-Policy"] = SANDBOX
    response["X-Content-Type-Options"] = "nosniff"
    response["Cross-Origin-Resource-Policy"] = "same-origin"
    return response


def stored_file(
    path: Path, name: str, inline: bool = False, cache: str = "private, max-age=3600"
) -> FileResponse:
    """A kept file as a download; shown in the page (`inline`) only when its bytes are an image."""
    handle = path.open("rb")
    kind = kind_of(handle.read(12)) if inline else None
    handle.seek(0)
    response = FileResponse(
        handle, content_type=kind[1] if kind else DOWNLOAD, as_attachment=kind is None, filename=name
    )
    response["Cache-Control"] = cache
    return hardened(response)


def download(response: HttpResponseBase, filename: str) -> HttpResponseBase:
    """A file pplxweb made (an export) as a download named `filename` (any characters: Django
    writes the `filename*` form a browser needs for them)."""
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return hardened(response)
