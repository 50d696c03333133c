"""The PDF script check: names in plain dictionaries and in Flate-compressed object streams are
found (escaped too), image data is never taken for script, and a zip bomb is bounded."""

from __future__ import annotations

import random
import time
import tracemalloc
import zlib

import pytest

from search.attachments import pdf_script
from search.attachments.pdf_script import SCRIPT, UNCHECKED, problem

JS_ACTION = b"<< /S /JavaScript /JS (app.alert(1)) >>"


def obj(number: int, dictionary: bytes, data: bytes | None = None) -> bytes:
    if data is None:
        return b"%d 0 obj\n%s\nendobj\n" % (number, dictionary)
    return b"%d 0 obj\n%s\nstream\r\n%s\r\nendstream\nendobj\n" % (number, dictionary, data)


def object_stream(number: int, objects: bytes, flate: bool = True, extra: bytes = b"") -> bytes:
    data = zlib.compress(objects) if flate else objects
    header = b"/Type /ObjStm /N 1 /First 4 /Length %d" % len(data)
    if flate:
        header += b" /Filter /FlateDecode"
    return obj(number, b"<< " + header + extra + b" >>", data)


def pdf(*parts: bytes) -> bytes:
    body = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + obj(1, b"<< /Type /Catalog /Pages 2 0 R >>") + b"".join(parts)
    return body + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


def image(number: int, data: bytes) -> bytes:
    dictionary = b"<< /Type /XObject /Subtype /Image /Width 100 /Height 100 /BitsPerComponent 8"
    return obj(number, dictionary + b" /Filter /DCTDecode /Length %d >>" % len(data), data)


def check(tmp_path, data: bytes) -> str | None:
    path = tmp_path / "file.pdf"
    path.write_bytes(data)
    return problem(path)


@pytest.mark.parametrize(
    "hidden",
    [
        b"3 0 " + JS_ACTION,
        b"3 0 << /Type /Action /S /Launch /F (calc.exe) >>",
        b"3 0 << /OpenAction << /J#53 (app.alert(1)) >> >>",  # only the short name, escaped
        b"3 0 << /Names << /J#61vaScript 9 0 R >> >>",
        b"3 0 " + b"<< /Filler (" + b"x" * 300_000 + b") >> " + JS_ACTION,  # past the first piece
    ],
    ids=["javascript", "launch", "escaped-js", "escaped-javascript", "deep"],
)
def test_script_hidden_in_an_object_stream_is_refused(tmp_path, hidden):
    assert check(tmp_path, pdf(object_stream(4, hidden))) == SCRIPT


def test_script_in_plain_dictionaries_and_in_an_uncompressed_object_stream(tmp_path):
    assert check(tmp_path, pdf(obj(3, JS_ACTION))) == SCRIPT
    assert check(tmp_path, pdf(obj(3, b"<< /AA << /O << /J#53 (x) >> >> >>"))) == SCRIPT
    assert check(tmp_path, pdf(object_stream(4, b"3 0 << /JS (x) >>", flate=False))) == SCRIPT
    assert check(tmp_path, pdf(obj(3, b"<< /Type /Action /S /Launch >>"))) == SCRIPT


def test_clean_files_pass(tmp_path):
    clean = pdf(
        object_stream(4, b"3 0 << /Type /Page /Parent 2 0 R /JSON (not a script name) >>"),
        obj(5, b"<< /Length 12 >>", b"BT (JS) Tj ET"),  # words of a page, in its content stream
    )
    assert check(tmp_path, clean) is None


def test_a_big_scanned_pdf_with_many_image_streams_passes_quickly(tmp_path):
    """Image bytes hold `/JS` by chance (about once in 20 MB of random data): never a refusal,
    and image streams are not inflated."""
    rng = random.Random(23)
    parts = []
    for n in range(200):  # 200 pages of 125 KB scans: 25 MB
        data = rng.randbytes(125 * 1024)
        if n % 40 == 0:
            data = data[:5000] + b"/JS " + data[5004:]  # what chance puts in image bytes
        parts.append(image(10 + n, data))
    parts.append(object_stream(4, b"3 0 << /Type /Pages /Count 200 >>"))
    started = time.perf_counter()
    assert check(tmp_path, pdf(*parts)) is None
    assert time.perf_counter() - started < 2.0


def bomb(megabytes: int) -> bytes:
    """A zlib stream of that many MB of zeros, a thousandth of that in size: one MB deflated after
    a full flush is the same bytes each time, so it is made once and repeated."""
    block = bytes(1024 * 1024)
    deflater = zlib.compressobj(9)
    head = deflater.compress(block) + deflater.flush(zlib.Z_FULL_FLUSH)
    again = deflater.compress(block) + deflater.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(megabytes):
        checksum = zlib.adler32(block, checksum)
    return head[:2] + again * megabytes + b"\x03\x00" + checksum.to_bytes(4, "big")


def test_a_zip_bomb_is_bounded_in_time_and_memory(tmp_path):
    data = bomb(256)  # 256 MB inflated, 260 KB in the file
    assert len(zlib.decompressobj().decompress(data, 16 << 20)) == 16 << 20  # a real bomb
    header = b"<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length %d >>" % len(data)
    path = tmp_path / "bomb.pdf"
    path.write_bytes(pdf(obj(4, header, data)))
    tracemalloc.start()
    started = time.perf_counter()
    try:
        assert problem(path) == UNCHECKED
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0 and peak < 4 * 1024 * 1024, (elapsed, peak)


def test_the_bounds_in_all_and_in_number(tmp_path, monkeypatch):
    # each stream under its own bound, together over IN_ALL
    streams = [object_stream(10 + n, b"3 0 << >>" + b" " * (7 * 1024 * 1024)) for n in range(5)]
    assert check(tmp_path, pdf(*streams)) == UNCHECKED
    assert check(tmp_path, pdf(*streams[:4])) is None  # 28 MB: within
    monkeypatch.setattr(pdf_script, "MAX_STREAMS", 3)
    assert check(tmp_path, pdf(*[object_stream(10 + n, b"3 0 << >>") for n in range(4)])) == UNCHECKED
    assert check(tmp_path, pdf(*[object_stream(10 + n, b"3 0 << >>") for n in range(3)])) is None


@pytest.mark.parametrize(
    "stream",
    [
        object_stream(4, b"3 0 << >>", extra=b" /DecodeParms << /Predictor 12 /Columns 5 >>"),
        obj(4, b"<< /Type /ObjStm /N 1 /First 4 /Filter /LZWDecode /Length 5 >>", b"\x80\x0b\x60\x50\x22"),
        obj(4, b"<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length 9 >>", b"not flate"),
        obj(
            4,
            b"<< /Type /Obj#53tm /N 1 /First 4 /Filter /FlateDecode /Length 9 >>",
            zlib.compress(b"x" * 50)[:9],
        ),
    ],
    ids=["predictor", "lzw", "damaged", "cut-short-escaped-type"],
)
def test_object_streams_it_cannot_read_are_refused_as_unchecked(tmp_path, stream):
    assert check(tmp_path, pdf(stream)) == UNCHECKED
