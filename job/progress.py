"""Every StreamingQueryProgress, appended as one JSON line to a file the harness tails."""
from __future__ import annotations

import json
import time
from typing import Callable

from pyspark.sql.streaming import StreamingQueryListener


class ProgressFileListener(StreamingQueryListener):
    """`on_progress` (optional) gets each progress as a dict after it is written (the job's integrity recorder).
    An empty `path` writes nothing."""

    def __init__(self, path: str, on_progress: Callable[[dict], None] | None = None):
        self.path = path
        self.on_progress = on_progress

    def _append(self, record: dict) -> None:
        if not self.path:  # no progress file: the supervisor still hears of progress
            return
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")

    def onQueryStarted(self, event) -> None:
        self._append({"event": "started", "wall_ms": int(time.time() * 1000), "id": str(event.id),
                      "run_id": str(event.runId)})

    def onQueryProgress(self, event) -> None:
        # lastProgress holds uuid values: its .json is the faithful form (FACTS).
        progress = json.loads(event.progress.json)
        self._append({"event": "progress", "wall_ms": int(time.time() * 1000), "progress": progress})
        if self.on_progress is not None:
            self.on_progress(progress)

    def onQueryIdle(self, event) -> None:
        self._append({"event": "idle", "wall_ms": int(time.time() * 1000)})

    def onQueryTerminated(self, event) -> None:
        self._append({"event": "terminated", "wall_ms": int(time.time() * 1000),
                      "exception": event.exception})
