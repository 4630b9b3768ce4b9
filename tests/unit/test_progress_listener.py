"""The job's progress listener: a progress event that crosses py4j as one JSON string is written whole."""
import json

from job.progress import ProgressFileListener, _JsonProgress


class _JavaProgress:
    """What py4j hands the bridge: an event whose progress answers json() (the JVM's StreamingQueryProgress)."""

    def __init__(self, progress: dict):
        self.text = json.dumps(progress)

    def progress(self):
        return self

    def json(self) -> str:
        return self.text


def test_a_progress_event_is_appended_whole_and_handed_on(tmp_path):
    path, heard = tmp_path / "progress.jsonl", []
    listener = ProgressFileListener(str(path), on_progress=heard.append)
    progress = {"batchId": 7, "numInputRows": 50, "durationMs": {"triggerExecution": 612},
                "stateOperators": [{"numRowsTotal": 200, "customMetrics": {"rocksdbBytesCopied": 0}}],
                "sources": [{"endOffset": {"t": {"0": 12}}}], "id": "9f1c6e0a-0000-4000-8000-000000000000"}
    _JsonProgress(listener).onQueryProgress(_JavaProgress(progress))
    _JsonProgress(listener).onQueryProgress(_JavaProgress({**progress, "batchId": 8}))
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["event"] for r in records] == ["progress", "progress"]
    assert records[0]["progress"] == progress and records[1]["progress"]["batchId"] == 8
    assert heard == [progress, {**progress, "batchId": 8}]


def test_without_a_progress_file_the_supervisor_still_hears_of_progress(tmp_path):
    heard = []
    _JsonProgress(ProgressFileListener("", on_progress=heard.append)).onQueryProgress(_JavaProgress({"batchId": 0}))
    assert heard == [{"batchId": 0}]
    assert list(tmp_path.iterdir()) == []
