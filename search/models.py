from __future__ import annotations

import os
import socket
from datetime import time

from django.conf import settings
from django.db import models
from django.shortcuts import get_object_or_404

RUNNER = f"{socket.gethostname()}:{os.getpid()}"  # this process, as the rows it runs name it (Entry.runner)


class ImportJob(models.Model):
    """One import of a history file: its threads carry it until it is done, so a server stopped
    mid-import removes them whole at the next start (search.history.import_jobs)."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        REMOVED = "removed", "removed"  # cut short by a stop; kept until its person has been told

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=12, choices=State.choices, default=State.RUNNING)
    runner = models.CharField(max_length=120, blank=True)  # host:pid of the process importing
    started = models.DateTimeField(auto_now_add=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    imported = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"import {self.pk} ({self.state})"


class Thread(models.Model):
    """A conversation: the first question and its follow-ups."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="threads")
    title = models.CharField(max_length=300)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    # Perplexity's ids for follow-ups (docs/protocol.md §4.4): the first token and slug stay
    read_write_token = models.CharField(max_length=200, blank=True)
    thread_url_slug = models.CharField(max_length=200, blank=True)
    # the import that wrote it (None: asked here); removed with it if the import is cut short
    import_job = models.ForeignKey(
        ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # the household member it came from, when the owner kept a removed member's history
    kept_from = models.CharField(max_length=150, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-updated"])]

    def __str__(self) -> str:
        return self.title


class Entry(models.Model):
    """One question and its answer, saved before the first byte goes upstream."""

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        TRUNCATED = "truncated", "cut short"
        FAILED = "failed", "failed"
        STOPPED = "stopped", "stopped"
        INTERRUPTED = "interrupted", "interrupted"

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="entries")
    # the thread's owner, kept here too so history pages are one index range (user, -id)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    question = models.TextField()
    options = models.JSONField(default=dict)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    answer = models.TextField(blank=True)
    # a Deep Research run's report (Markdown); the answer is then the run's cover note
    report = models.TextField(blank=True)
    sources = models.JSONField(default=list)
    related = models.JSONField(default=list)
    steps = models.JSONField(default=list)
    # generated images: [{n, caption, width, height, file | error}], files in search.images.folder()
    images = models.JSONField(default=list, blank=True)
    # a research run's clarifying questions and what became of them (search/clarifications.py)
    clarifications = models.JSONField(default=list, blank=True)
    model_asked = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=80, blank=True)
    downgraded = models.BooleanField(default=False)
    credential = models.CharField(max_length=20, blank=True)
    backend_uuid = models.CharField(max_length=200, blank=True)
    context_uuid = models.CharField(max_length=200, blank=True)  # for terminate (docs/protocol.md §9.2)
    origin = models.CharField(max_length=20, blank=True)  # "perplexity": imported from the library
    asked_by = models.CharField(max_length=60, blank=True)  # the agent token's name (search/api), else ""
    # shapes of the stream pplxweb did not know: {"blocks": {usage: n}, "steps": {...}, "fields": {...}}
    drift = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # versions of one turn (search/versions.py): a redo is an entry of its own whose `turn` is the
    # turn's first answer's id (None: the only answer of its turn); `shown`: the version the
    # conversation shows and goes on from (one per turn)
    turn = models.BigIntegerField(null=True, blank=True)
    shown = models.BooleanField(default=True)
    # the Perplexity thread this answer is in (docs/protocol.md §4.4, §4.5): its token, when an
    # incognito one expires there, and why it was asked in a new thread carrying the earlier
    # turns ("" when it was not; search/live/upstream.py)
    read_write_token = models.CharField(max_length=200, blank=True)
    upstream_expires = models.DateTimeField(null=True, blank=True)
    carried = models.CharField(max_length=40, blank=True)
    runner = models.CharField(max_length=120, blank=True)  # host:pid of the process running it
    # the import that wrote it into a conversation that was already here (a new conversation's
    # entries go with their thread's import_job); removed with it if the import is cut short
    import_job = models.ForeignKey(
        ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    first_byte_ms = models.PositiveIntegerField(null=True, blank=True)
    first_text_ms = models.PositiveIntegerField(null=True, blank=True)
    done_ms = models.PositiveIntegerField(null=True, blank=True)
    # what the person's storage quota counts of it (search.storage): the text of an imported
    # entry (0 for one asked here), and the files of its kept images
    import_bytes = models.PositiveBigIntegerField(default=0)
    image_bytes = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["created", "pk"]
        indexes = [
            models.Index(fields=["status"]),
            models.Index(fields=["thread", "created"]),
            models.Index(fields=["user", "-id"], name="search_entry_user_recent"),
            # the history page's order (newest asked first), and import's "already here?"
            models.Index(fields=["user", "created"], name="search_entry_user_created"),
            # the library import's "is this turn here?" (upstream ids are unique per person)
            models.Index(fields=["user", "backend_uuid"], name="search_entry_user_upstream"),
            # History's model list (each model of a person's answers, one index seek apiece), and
            # a search filtered by model or status: its newest matches, not a walk through every entry
            models.Index(fields=["user", "model", "created"], name="search_entry_user_model_at"),
            models.Index(fields=["user", "status", "created"], name="search_entry_user_status"),
            # what a person keeps (search.storage), summed from the index alone
            models.Index(fields=["user", "import_bytes", "image_bytes"], name="search_entry_user_kept"),
            # the versions of a turn (only redone turns have one)
            models.Index(fields=["turn"], name="search_entry_turn", condition=models.Q(turn__isnull=False)),
        ]
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        return self.question[:80]

    def save(self, *args, **kwargs) -> None:
        if self.user_id is None and self.thread_id is not None:
            self.user_id = Thread.objects.values_list("user_id", flat=True).get(pk=self.thread_id)
        super().save(*args, **kwargs)

    @property
    def running(self) -> bool:
        return self.status == self.Status.RUNNING


class LibraryJob(models.Model):
    """One import or sync of a person's Perplexity library (search.library): its progress, kept
    as it goes so a restart resumes it, and its summary at the end."""

    class Kind(models.TextChoices):
        IMPORT = "import", "import"
        SYNC = "sync", "sync"

    class State(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        STOPPED = "stopped", "stopped"  # with a sentence in `error`; what it fetched is kept
        CANCELLED = "cancelled", "cancelled"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="library_jobs")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.IMPORT)
    automatic = models.BooleanField(default=False)
    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    phase = models.CharField(max_length=10, default="listing")  # "listing", then "fetching"
    offset = models.PositiveIntegerField(default=0)  # how far the listing got
    listed = models.PositiveIntegerField(default=0)
    fetched = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    deleted = models.PositiveIntegerField(default=0)
    new_entries = models.PositiveIntegerField(default=0)
    requests = models.PositiveIntegerField(default=0)
    walked = models.BooleanField(default=False)  # the listing reached its end
    notes = models.JSONField(default=list, blank=True)  # [{"title", "reason"}] of skipped/failed threads
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    runner = models.CharField(max_length=120, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-started"]), models.Index(fields=["state"])]

    def __str__(self) -> str:
        return f"library {self.kind} of {self.user} ({self.state})"

    @property
    def running(self) -> bool:
        return self.state == self.State.RUNNING


class LibraryThread(models.Model):
    """A thread of a person's Perplexity library as pplxweb last saw it, and its conversation here."""

    class State(models.TextChoices):
        PENDING = "pending", "to fetch"
        DONE = "done", "imported"
        SKIPPED = "skipped", "skipped"
        FAILED = "failed", "failed"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)  # context_uuid (a slug can change), else uuid or slug
    slug = models.CharField(max_length=200)
    title = models.CharField(max_length=300, blank=True)
    activity = models.CharField(max_length=40, blank=True)  # last_query_datetime at the last fetch
    count = models.IntegerField(null=True, blank=True)  # query_count at the last fetch
    thread = models.OneToOneField(
        Thread, null=True, blank=True, on_delete=models.SET_NULL, related_name="upstream"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    reason = models.CharField(max_length=300, blank=True)
    seen_by = models.PositiveIntegerField(default=0)  # the last job whose listing showed it
    deleted = models.BooleanField(default=False)  # deleted (or expired) on Perplexity; kept here

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="library_thread_key")]
        indexes = [models.Index(fields=["user", "state"])]

    def __str__(self) -> str:
        return self.title or self.slug


class LibrarySchedule(models.Model):
    """A person's automatic library sync: off by default, daily at a time they choose."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    enabled = models.BooleanField(default=False)
    at = models.TimeField(default=time(3, 0))  # in the server's time zone (PPLXWEB_TIME_ZONE)
    last_run = models.DateField(null=True, blank=True)

    def __str__(self) -> str:
        return f"library sync of {self.user}"


class Attachment(models.Model):
    """A file someone asked about, kept beside the answer (search.attachments): its bytes in
    DATA_DIR/attachments/<stored>, its entry once asked (until then an upload, swept after a day).
    The file is named by its content, so rows with the same bytes share it ("Ask again", the same
    file attached twice, an import naming it many times); it goes with the last row naming it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    entry = models.ForeignKey(
        Entry, on_delete=models.CASCADE, null=True, blank=True, related_name="attachments"
    )
    name = models.CharField(max_length=300)  # as given, cleaned of what cannot be shown
    stored = models.CharField(max_length=80, db_index=True)  # pplxweb's own safe file name (sha256.kind)
    size = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=12)  # search.attachments.KINDS
    remote_url = models.TextField(blank=True)  # Perplexity's URL for it, once uploaded there
    cited = models.BooleanField(default=False)  # the answer named it (a "your file" source)
    position = models.PositiveSmallIntegerField(default=0)  # its place in the question's files
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position", "pk"]  # as attached (uploads finish in any order)
        indexes = [models.Index(fields=["entry", "created"], name="search_attachment_unasked")]

    def __str__(self) -> str:
        return self.name


def thread_for(user, pk: int) -> Thread:
    """Someone's own conversation, or 404 (never another person's, never saying it exists)."""
    return get_object_or_404(Thread, pk=pk, user=user)


def entry_for(user, pk: int) -> Entry:
    """Someone's own entry, or 404."""
    return get_object_or_404(Entry, pk=pk, thread__user=user)


class Rendered(models.Model):
    """An entry's answer and report as the page shows them, rendered once (search/rendered.py):
    valid while `key` matches the entry's text, sources and the renderer's version."""

    entry = models.OneToOneField(Entry, on_delete=models.CASCADE, primary_key=True, related_name="rendered")
    key = models.CharField(max_length=40)
    answer = models.TextField(blank=True)
    report = models.TextField(blank=True)
    toc = models.JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"rendered entry {self.entry_id}"
