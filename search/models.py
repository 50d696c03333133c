from __future__ import annotations

from django.conf import settings
from django.db import models


class ImportJob(models.Model):
    """One import of a history file: its threads carry it until it is done, so a server stopped
    mid-import removes them whole at the next start (search.import_jobs)."""

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
    # Perplexity's ids for follow-ups (protocol.md 2.6): the first token and slug stay
    read_write_token = models.CharField(max_length=200, blank=True)
    thread_url_slug = models.CharField(max_length=200, blank=True)
    # the import that wrote it (None: asked here); removed with it if the import is cut short
    import_job = models.ForeignKey(
        ImportJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

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
    model_asked = models.CharField(max_length=80, blank=True)
    model = models.CharField(max_length=80, blank=True)
    downgraded = models.BooleanField(default=False)
    credential = models.CharField(max_length=20, blank=True)
    backend_uuid = models.CharField(max_length=200, blank=True)
    context_uuid = models.CharField(max_length=200, blank=True)  # for terminate (protocol.md 8.5)
    # shapes of the stream pplxweb did not know: {"blocks": {usage: n}, "steps": {...}, "fields": {...}}
    drift = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    runner = models.CharField(max_length=120, blank=True)  # host:pid of the process running it
    created = models.DateTimeField(auto_now_add=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    first_byte_ms = models.PositiveIntegerField(null=True, blank=True)
    first_text_ms = models.PositiveIntegerField(null=True, blank=True)
    done_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["created", "pk"]
        indexes = [
            models.Index(fields=["status"]),
            models.Index(fields=["thread", "created"]),
            models.Index(fields=["user", "-id"], name="search_entry_user_recent"),
            # the history page's order (newest asked first), and import's "already here?"
            models.Index(fields=["user", "created"], name="search_entry_user_created"),
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
