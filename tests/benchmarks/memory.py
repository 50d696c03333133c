"""A server's resident memory for the benchmarks: read once (rss_mb: its processes together, as
tests/benchmarks/servers.py reads them), or its peak while something runs (Sampler, every 5 ms).
No side effects on import (the benchmark modules set up their data dirs when imported)."""

from __future__ import annotations

import threading
import time

from tests.benchmarks.servers import memory_mb


def rss_mb(pid: int) -> float:
    """The resident memory of a server's processes (granian's main process and its worker), in
    MB; 0 once they are gone."""
    try:
        return memory_mb(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


class Sampler:
    """A server's peak resident memory while it runs (sampled every 5 ms)."""

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
