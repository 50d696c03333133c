"""The parts of a running entry besides its answer text (status, steps, sources, related
questions, meta, images, report, a clarifying question, files) as HTML fragments, each
re-rendered whole and only when what it shows changed (`changed_parts`); a newcomer gets all of
them as the group's pages show them (`full_state`). `run` is a search.live.runner.Run; the
answer's own text is search.live.fragments.AnswerStream's.
"""

from __future__ import annotations

import time

from django.template.loader import render_to_string

from pplxweb.perplexity.extract import Result
from pplxweb.perplexity.sources import file_hits
from search import attachments, clarifications
from search.display import carried_text, duration, model_label, report_context
from search.live import questions
from search.models import Entry
from search.render import render_sources, scrub
from search.rendered import source_refs

REPORT_RENDER_EVERY = 2.0  # seconds between re-renders of a growing research report
STEPS_SHOWN = 30  # the latest steps a running answer shows


def part_keys(run, final: bool = False) -> dict[str, tuple]:
    """What each part of a running entry shows, as a key built from the result as it is (a run
    starts with the keys of its new, empty entry: the page already shows that)."""
    result = _result(run)
    running = run.status == Entry.Status.RUNNING
    return {
        "status": (run.status, run.error, run.carried),
        "steps": (tuple((s.kind, s.text) for s in result.steps[-STEPS_SHOWN:]), running),
        "sources": tuple(s.url for s in result.sources),
        "related": tuple(result.related),
        "meta": (result.downgraded, run.error, final, running or result.model),  # the model shows at the end
        "images": tuple((r["n"], r.get("file"), r.get("error")) for r in run.downloads.records()),
        "report": (len(result.report), hash(result.report[-64:]), running),
        "question": (_question(run) if running else None, _asked(run, running)),
        "files": _cited(run),
    }


def changed_parts(run, final: bool = False) -> list[str]:
    """Fragments for what changed since the run's last update (all of them on `final`). The
    template context is only built when some part changed (mid-answer, most updates bring only
    text)."""
    keys = part_keys(run, final)
    changed = [name for name, key in keys.items() if run.sent.get(name) != key]
    result = _result(run)
    parts = []
    now = time.monotonic()
    if "report" in changed and not final and now - run.report_rendered_at < REPORT_RENDER_EVERY:
        changed.remove("report")  # a report grows by hundreds of whole replaces: a few renders do
    if changed:
        context = _context(run)
        for name in changed:
            run.sent[name] = keys[name]
            if name == "sources":
                parts.append(_sources_fragment(run.entry_id, result))
            elif name == "files":
                parts.append(_files_fragment(run))
            elif name == "report":
                run.report_rendered_at = now
                parts.append(_report_fragment(run, result))
            else:
                parts.append(_part(name, context))
    parts += run.answer.update(result.answer, result.sources, final=final)
    return parts


def full_state(run) -> str:
    """Every part of the run as the group's pages show it now, for a newcomer (the answer as
    sent so far: the next update applies to it)."""
    result = _result(run)
    context = _context(run)
    parts = [_part(n, context) for n in ("status", "steps", "related", "meta", "images", "question")]
    parts.append(_sources_fragment(run.entry_id, result))
    parts.append(_files_fragment(run))
    parts.append(_report_fragment(run, result))
    parts.append(run.answer.current(result.sources))
    return "".join(parts)


def _result(run) -> Result:
    """The run's result so far (an empty running one before the first extraction)."""
    return run.result or Result(status="running")


def _context(run) -> dict:
    result = _result(run)
    return {
        "entry_id": run.entry_id,
        "thread_id": run.thread_id,
        "status": run.status,
        "status_label": dict(Entry.Status.choices).get(run.status, run.status),
        "running": run.status == Entry.Status.RUNNING,
        "started_ms": int((time.time() - (time.monotonic() - run.started)) * 1000),
        "steps": [{"kind": s.kind, "text": scrub(s.text)} for s in result.steps[-STEPS_SHOWN:]],
        "related": [scrub(q) for q in result.related],
        "model": model_label(result.model, run.models),
        "downgraded": result.downgraded,
        "error": run.error,
        "seconds": duration(int((time.monotonic() - run.started) * 1000)),
        "first_text": duration(run.first_text_ms),
        "answered": bool(result.answer),  # Copy is offered only for an answer with text
        "images": run.downloads.records(),
        "question": _question(run) if run.status == Entry.Status.RUNNING else None,
        "place": run.place,
        "carried": carried_text(run.carried),
        "clarified": clarifications.shown(questions.kept(run, final=run.status != Entry.Status.RUNNING)),
        "oob": True,
    }


def _part(name: str, context: dict) -> str:
    return render_to_string(f"search/{name}_fragment.html", context)


def _question(run):
    """The clarifying question the run waits on, unless it was answered or skipped here."""
    question = _result(run).question
    return None if question is None or question.key in run.clarified else question


def _asked(run, running: bool) -> tuple:
    """What became of the run's clarifying questions so far."""
    return tuple((r["key"], r["outcome"]) for r in questions.kept(run, final=not running))


def _report_fragment(run, result: Result) -> str:
    running = run.status == Entry.Status.RUNNING
    return render_to_string(
        "search/report_fragment.html", report_context(run.entry_id, result.report, result.sources, running)
    )


def _cited(run) -> tuple[int, ...]:
    """The question's files the answer draws on so far (its attachment hits), as the saved page
    marks them at the end (attachments.mark_cited)."""
    if not run.files or run.snapshot is None:
        return ()
    return tuple(sorted(attachments.cited_by(run.files, file_hits(run.snapshot))))


def _files_fragment(run) -> str:
    """The question's files, the cited ones marked "your file" ("" when it has none)."""
    return render_to_string(
        "search/attachments_list.html",
        {
            "entry_id": run.entry_id,
            "attachments": attachments.shown(run.files, set(_cited(run))),
            "oob": True,
        },
    )


def _sources_fragment(entry_id: int, result: Result) -> str:
    return render_to_string(
        "search/sources_fragment.html",
        {
            "entry_id": entry_id,
            "sources": render_sources(result.sources, source_refs(entry_id)),
            "count": len(result.sources),
            "oob": True,
        },
    )
