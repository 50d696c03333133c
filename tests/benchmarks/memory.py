"""A process's resident memory for the benchmarks: read once (rss_mb), or its peak while
something runs (Sampler, every 5 ms). No side effects on import (the benchmark modules set up
their data dirs when imported)."""

from __future__ import annotations

import threading
import time
from pathlib import Path


def rss_mb(pid: int) -> float:
    """The resident memory of the process and its descendants (the server is granian's main
    process and the worker it supervises), in MB."""
    total = 0.0
    for each in [pid, *descendants(pid)]:
        try:
            rows = Path(f"/proc/{each}/status").read_text().splitlines()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += next((int(row.split()[1]) / 1024 for row in rows if row.startswith("VmRSS")), 0.0)
    return total


def descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


class Sampler:
    """A process's peak resident memory while it runs (sampled every 5 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.running = pid, 0.0, True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.005)

    def stop(self) -> float:
        self.running = False
        self.thread.join()
        return self.peak
