"""Every StreamingQueryProgress, appended as one JSON line to a file the harness tails."""
from __future__ import annotations

import json
import time
from collections.abc import Callable

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener


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
        self._progress(json.loads(event.progress.json))

    def _progress(self, progress: dict) -> None:
        self._append({"event": "progress", "wall_ms": int(time.time() * 1000), "progress": progress})
        if self.on_progress is not None:
            self.on_progress(progress)

    def onQueryIdle(self, event) -> None:
        self._append({"event": "idle", "wall_ms": int(time.time() * 1000)})

    def onQueryTerminated(self, event) -> None:
        self._append({"event": "terminated", "wall_ms": int(time.time() * 1000),
                      "exception": event.exception})

    @property
    def _jlistener(self):
        """The JVM's handle on this listener (what `spark.streams.addListener` registers): PySpark's, except that a
        progress event crosses py4j as one JSON string (_JsonProgress)."""
        if not hasattr(self, "_json_jlistener"):
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            if jvm is None:
                raise RuntimeError("the progress listener is registered before a SparkContext exists; "
                                   "start the session first")
            self._json_jlistener = jvm.PythonStreamingQueryListenerWrapper(_JsonProgress(self))
        return self._json_jlistener


class _JsonProgress(JStreamingQueryListener):
    """PySpark's bridge, but for progress: PySpark builds each progress event field by field, ~40 py4j calls that
    each cost the driver JVM's listener thread (measured: ~2 CPU-s in a job's first 37 s, the driver's second
    busiest thread, on every batch of every job the suite runs). Its own `StreamingQuery.lastProgress` reads the
    progress's JSON in one call, and so does this. It stands on two of PySpark's inner names (this class and the
    JVM's PythonStreamingQueryListenerWrapper), pinned with pyspark in requirements.lock: an upgrade that moves
    them fails the job's start at addListener, and test_job's clean runs with it."""

    def __init__(self, pylistener: ProgressFileListener) -> None:
        super().__init__(pylistener)
        self.progress_listener = pylistener

    def onQueryProgress(self, jevent) -> None:
        self.progress_listener._progress(json.loads(jevent.progress().json()))
