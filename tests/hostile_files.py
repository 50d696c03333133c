"""Files that run script when a browser opens them as documents: PDFs whose script is an open
action, the same action hidden in a Flate-compressed object stream whose dictionary is padded past
4 KB (what got past the old text search), an XFA form's script, and a PNG that is also an HTML page.
Each script calls `alert(<marker>)`, which Chromium reports as a dialog."""

from __future__ import annotations

import base64
import struct
import zlib

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEklEQVR4nGNgYPiPhJA5DAwMAP/rB/mzYBJqAAAAAElFTkSuQmCC"
)
CATALOG_PAGES = [
    b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] >>",
]


def _objects(objects: dict[int, bytes]) -> tuple[bytes, dict[int, int]]:
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for n in sorted(objects):
        offsets[n] = len(out)
        out += b"%d 0 obj\n" % n + objects[n] + b"\nendobj\n"
    return bytes(out), offsets


def _pdf(objects: dict[int, bytes]) -> bytes:
    body, offsets = _objects(objects)
    size = max(objects) + 1
    table = b"".join(b"%010d 00000 n \n" % offsets[n] for n in range(1, size))
    return (
        body
        + b"xref\n0 %d\n0000000000 65535 f \n" % size
        + table
        + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, len(body))
    )


def _stream(data: bytes, entries: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), entries) + data + b"\nendstream"


def _alert(marker: str) -> bytes:
    return b'app.alert\\("' + marker.encode() + b'"\\)'


def open_action_pdf(marker: str) -> bytes:
    """A JavaScript action run when the document opens."""
    return _pdf(
        {
            1: b"<< /Type /Catalog /Pages 2 0 R /OpenAction 4 0 R >>",
            2: CATALOG_PAGES[0],
            3: CATALOG_PAGES[1],
            4: b"<< /Type /Action /S /JavaScript /JS (" + _alert(marker) + b") >>",
        }
    )


def object_stream_pdf(marker: str, padding: int = 5000) -> bytes:
    """The open action's JavaScript inside a compressed object stream whose dictionary is padded
    by `padding` spaces, found through a cross-reference stream."""
    member = b"<< /Type /Action /S /JavaScript /JS (" + _alert(marker) + b") >>"
    data = zlib.compress(b"4 0 " + member)
    objstm = (
        b"<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length %d" % len(data)
        + b" " * padding
        + b">>\nstream\n"
        + data
        + b"\nendstream"
    )
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R /OpenAction 4 0 R >>",
        2: CATALOG_PAGES[0],
        3: CATALOG_PAGES[1],
        5: objstm,
    }
    body, offsets = _objects(objects)
    rows = [(0, 0, 65535), (1, offsets[1], 0), (1, offsets[2], 0), (1, offsets[3], 0), (2, 5, 0),
            (1, offsets[5], 0), (1, len(body), 0)]  # fmt: skip
    table = b"".join(struct.pack(">BIH", *row) for row in rows)
    xref = b"6 0 obj\n<< /Type /XRef /Size 7 /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n" % len(table)
    return body + xref + table + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % len(body)


def xfa_pdf(marker: str) -> bytes:
    """An XFA form whose initialize and docReady events run script."""
    script = f'<script contentType="application/x-javascript">app.alert("{marker}");</script>'
    template = (
        '<xdp:xdp xmlns:xdp="http://ns.adobe.com/xdp/"><template xmlns="http://www.xfa.org/schema/'
        'xfa-template/3.3/"><subform name="form1" layout="tb"><pageSet><pageArea name="p1">'
        '<contentArea x="0" y="0" w="8in" h="10in"/></pageArea></pageSet>'
        f'<event activity="initialize">{script}</event>'
        f'<event activity="docReady" ref="$host">{script}</event></subform></template></xdp:xdp>'
    ).encode()
    return _pdf(
        {
            1: b"<< /Type /Catalog /Pages 2 0 R /AcroForm 4 0 R /NeedsRendering true >>",
            2: CATALOG_PAGES[0],
            3: CATALOG_PAGES[1],
            4: b"<< /Fields [] /XFA 5 0 R >>",
            5: _stream(template),
        }
    )


def png_html(marker: str) -> bytes:
    """A valid PNG whose bytes are also an HTML page with a script (HTML parsers skip the rest)."""
    return PNG + f"<html><body><script>alert('{marker}')</script></body></html>".encode()
