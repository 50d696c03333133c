"""Importing a person's Perplexity library and keeping it in sync (issue 22): the job's rows
(jobs.py), saving a fetched thread (store.py), the running job (runner.py), the process's keeper
that starts, resumes and schedules jobs (keeper.py), and the Settings section (display.py,
views.py, consumers.py)."""
