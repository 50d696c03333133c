"""Imports are bounded: declared sizes checked before reading, blank lines cost nothing, memory
stays flat, every malformed shape is a sentence, and an import is one job that completes or is
removed whole (also when the server is killed mid-import)."""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile

import pytest
from django.conf import settings
from django.urls import reverse

from search.history import import_jobs, imports
from search.models import Entry, ImportJob, Thread

HEADER = b'{"format": "pplxweb-history/1", "exported": "2026-01-01T00:00:00+00:00", "threads": [\n'


def conversation(question: str, created: str = "2026-01-02T03:04:05+00:00", **entry) -> dict:
    return {"title": question, "entries": [{"question": question, "created": created, **entry}]}


def listing(*threads: dict) -> bytes:
    return HEADER + b",\n".join(json.dumps(t).encode() for t in threads) + b"\n]}\n"


def zipped(history: bytes, extra: int = 0) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("history.json", history)
        for n in range(extra):
            archive.writestr(f"images/{n}/0.png", b"")
    return out.getvalue()


def declaring(data: bytes, size: int) -> bytes:
    """The zip with history.json's declared (uncompressed) size changed, in both headers."""
    data = bytearray(data)
    local = data.index(b"PK\x03\x04")
    central = data.index(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, size)
    struct.pack_into("<I", data, central + 24, size)
    return bytes(data)


@pytest.mark.django_db
def test_a_declared_size_over_the_cap_is_refused_before_reading(owner):
    four_gb = declaring(zipped(listing(conversation("q"))), 0xFFFFFFF0)
    with pytest.raises(imports.ImportRefused, match=r"history.json in that zip is larger than 1 GB"):
        imports.import_history(owner, four_gb)
    assert not Thread.objects.exists() and not ImportJob.objects.exists()


@pytest.mark.django_db
def test_a_lying_declared_size_reads_no_more_than_declared(owner):
    real = zipped(listing(*(conversation(f"q{n}") for n in range(50))))
    # less than it holds: reading stops at the declared size, and the checksum says so
    with pytest.raises(imports.ImportRefused, match="That zip is damaged"):
        imports.import_history(owner, declaring(real, 10))
    assert not Thread.objects.exists() and not ImportJob.objects.exists()
    # more than it holds (under the cap): only what is there is read, and it is whole
    assert imports.import_history(owner, declaring(real, 100_000)) == (50, 0)


@pytest.mark.django_db
def test_ten_thousand_members_and_more_than_the_cap(owner, monkeypatch):
    data = zipped(listing(conversation("with many files")), extra=10_000)
    assert imports.import_history(owner, data) == (1, 0)  # the other members are not read
    monkeypatch.setattr(imports, "MAX_MEMBERS", 5_000)
    with pytest.raises(imports.ImportRefused, match="more than 5,000 files"):
        imports.import_history(owner, data)


@pytest.mark.django_db
def test_blank_lines_cost_nothing(owner):
    blank = HEADER + b"\n" * (16 * 1024 * 1024) + json.dumps(conversation("after the blanks")).encode()
    blank += b"\n" + b" \r\n\t\n" * 1_000_000 + b"]}\n"
    data = zipped(blank)
    assert len(data) < 100_000  # a small upload that unpacks to ~21 MB of nothing
    assert imports.import_history(owner, data) == (1, 0)
    assert Entry.objects.get().question == "after the blanks"
    # the work: a read a block, and only the lines with text reach Python (a readline per blank
    # line took 99 s here)
    reads = []

    class Counted(io.BytesIO):
        def read(self, size=-1):
            reads.append(size)
            return super().read(size)

    lines = list(imports._lines(Counted(blank)))
    assert len(lines) == 3 and len(reads) <= len(blank) // imports.READ_BLOCK + 2


def tiny_parts(layout: str, part: bytes, size: int) -> bytes:
    parts = b", ".join([part] * (size // (len(part) + 2)))
    if layout == "document":
        return b'{"threads": [{"entries": [{"question": "q", "related": [' + parts + b"]}]}]}"
    return HEADER + b'{"entries": [{"question": "q", "related": [' + parts + b"]}]}\n]}"


def peak_refusing(owner, data: bytes, sentence: str) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(imports.ImportRefused, match=sentence):
            imports.import_history(owner, data)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.django_db
@pytest.mark.parametrize("layout", ["document", "line"])
@pytest.mark.parametrize("part", [b"{}", b'"ab"', b"[]", b"0.5"])
def test_a_conversation_of_tiny_parts_is_refused_before_it_is_parsed(owner, layout, part):
    """7 MB (under the 8 MB a conversation may take) of parts of 2-4 bytes: 300 MB and more of
    Python objects once parsed. Refused unparsed: the import holds copies of the bytes only."""
    data = tiny_parts(layout, part, 7 * 1024 * 1024)
    peak = peak_refusing(owner, data, "more parts than any pplxweb writes")
    assert peak < 4 * len(data), peak
    assert not Thread.objects.exists() and not ImportJob.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("layout", ["document", "line"])
def test_51_mb_of_short_strings_is_refused_having_read_8_mb(owner, layout):
    data = tiny_parts(layout, b'"ab"', 51 * 1024 * 1024)
    peak = peak_refusing(owner, data, "larger than 8 MB")
    assert peak < 3 * 8 * 1024 * 1024, peak  # the file's bytes are the test's; the import read 8 MB


MALFORMED = [
    (b"[" * 100_000 + b"]" * 100_000, imports.DEEP),
    (b'{"entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", imports.DEEP),
    (listing(conversation("q", created="2020-13-45T00:00:00")), "not a date"),
    (listing(conversation("q", created="9999-12-31T23:30:00-23:00")), "not a date"),
    (listing(conversation("q", created="0001-01-01T00:10:00+05:00")), "not a date"),
    (listing(conversation("q", created=12345)), "not a date"),
    (
        HEADER
        + b'{"entries": [{"question": "q", "created": "2026-01-01T00:00:00", "options": {"x": NaN}}]}\n]}',
        "NaN",
    ),
    (
        b'{"entries": [{"question": "q", "created": "2026-01-01T00:00:00", "options": [Infinity]}]}',
        "Infinity",
    ),
    (b'{"entries": [{"question": "q", "created": "2026-01-01T00:00:00", "x": -Infinity}]}', "-Infinity"),
    (listing(conversation("q", status=["completed"])), "malformed"),
    (listing(conversation("q", status=None)), "malformed"),
    (listing(conversation("q", sources={"a": 1})), "malformed"),
    (listing({"entries": [{"question": 7, "created": "2026-01-01T00:00:00"}]}), "no question"),
    (listing({"entries": {"question": "q"}}), "no entries"),
    (listing({"entries": ["q"]}), "no question"),
    (b'{"format": "pplxweb-history/1", "threads": "all of them"}', "not a pplxweb history export"),
    (b'["a list"]', "not a pplxweb history export"),
    (b"\xff\xfe not utf-8", "not valid JSON"),
    (HEADER + b"not json\n]}", "not valid JSON"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("content", "sentence"), MALFORMED)
def test_every_malformed_shape_is_a_sentence_on_the_page(owner_client, content, sentence):
    response = owner_client.post(reverse("search:import"), {"file": io.BytesIO(content)}, follow=True)
    assert response.status_code == 200
    assert sentence in response.content.decode()
    assert not Entry.objects.exists() and not Thread.objects.exists() and not ImportJob.objects.exists()


@pytest.mark.django_db
def test_odd_but_storable_values_come_in_cleaned(owner):
    item = conversation("nul\x00 and \ud800", answer="a\x00b", model="m" * 300, related=["r\x00"])
    assert imports.import_history(owner, listing(item)) == (1, 0)
    entry = Entry.objects.get()
    assert (entry.question, entry.answer, entry.related, len(entry.model)) == ("nul and ?", "ab", ["r"], 80)


@pytest.mark.django_db
def test_an_answer_longer_than_pplxweb_keeps_comes_in_cut_with_a_note(owner):
    from pplxweb.perplexity.values import MAX_TEXT

    item = conversation("long", answer="a" * (MAX_TEXT + 100_000), report="r" * 10)
    assert imports.import_history(owner, listing(item)) == (1, 0)
    entry = Entry.objects.get()
    assert len(entry.answer) == MAX_TEXT and entry.answer.endswith("characters; the rest was left out.)*")
    assert entry.report == "r" * 10 and entry.import_bytes > MAX_TEXT


@pytest.mark.django_db
def test_one_import_at_a_time(owner, member):
    assert import_jobs._one_at_a_time.acquire(blocking=False)
    try:
        with pytest.raises(imports.ImportRefused, match="Another import is running on this server"):
            imports.import_history(member, listing(conversation("q")))
    finally:
        import_jobs._one_at_a_time.release()
    # one of this person's still running in another process (its heartbeat is fresh)
    from django.utils import timezone

    ImportJob.objects.create(user=member, runner="otherhost:1", heartbeat=timezone.now())
    with pytest.raises(imports.ImportRefused, match="An import of yours is still running"):
        imports.import_history(member, listing(conversation("q")))
    assert imports.import_history(owner, listing(conversation("q"))) == (1, 0)  # someone else's is fine
    assert ImportJob.objects.get(user=owner).state == "done"


@pytest.mark.django_db
def test_a_refusal_late_in_an_import_removes_the_job_whole(owner, monkeypatch):
    monkeypatch.setattr(imports, "WRITE_BATCH", 1)
    items = [conversation(f"q{n}") for n in range(5)] + [conversation("late", created="not a date")]
    with pytest.raises(imports.ImportRefused, match="not a date"):
        imports.import_history(owner, listing(*items))
    assert not Thread.objects.exists() and not ImportJob.objects.exists()


KILLED_IMPORT = """
import os, sys, django
django.setup()
from django.contrib.auth import get_user_model
from search.history import imports
imports.WRITE_BATCH = 20
user = get_user_model().objects.get(username="owner")
imports.import_history(user, open(sys.argv[1], "rb"))
"""


@pytest.mark.django_db(transaction=True)
def test_an_import_killed_mid_way_is_removed_whole_at_the_next_start(owner, client, tmp_path):
    path = tmp_path / "history.json"
    path.write_bytes(listing(*(conversation(f"q{n}", answer="x" * 2000, created=f"2026-01-01T00:{n // 60 % 60:02}:{n % 60:02}+00:00") for n in range(3000))))  # fmt: skip
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "PPLXWEB_DATABASE_NAME": str(settings.DATABASES["default"]["NAME"])}  # fmt: skip
    child = subprocess.Popen([sys.executable, "-c", KILLED_IMPORT, str(path)], env=env, cwd=settings.BASE_DIR)
    try:
        deadline = time.monotonic() + 60
        while Thread.objects.count() < 100:  # well into it, far from done
            assert child.poll() is None and time.monotonic() < deadline, "the import ended too soon"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    assert Thread.objects.count() >= 100 and ImportJob.objects.get().state == "running"
    assert import_jobs.sweep(at_start=True) == 1  # what serve does at start
    assert not Thread.objects.exists() and not Entry.objects.exists()
    client.force_login(owner)
    page = client.get(reverse("search:history")).content.decode()
    assert "cut short when the server stopped" in page
    assert "cut short when" not in client.get(reverse("search:history")).content.decode()  # said once
