"""Supervised restarts: a failed query is restarted with exponential backoff, within a failure budget.

Incident 001/002: "Exceeded checkpoint tolerable failure threshold" — the tolerable threshold was 0, so the first
failed checkpoint killed the job, while the opposite (retry forever) hides a job that can no longer make
progress. Here a transient failure (Kafka unreachable, an S3 error or timeout during a commit, a lost executor)
restarts the query after a backoff that doubles up to a cap; failures are counted in a sliding window, and one
more than the budget stops the job with one line naming the last causes. Fatal failures (a lost lease, state
that cannot be verified, bad configuration) never restart: restarting cannot fix them. Neither can a failure that
comes back the same way on every restart with no batch in between (a checkpoint file Spark cannot read, say): after
REPEATS_BEFORE_STOP of them the job verifies and repairs its checkpoint once, and if the failure still repeats it
stops with one line instead of spending its budget on it.

The policy is pure (a clock in, decisions out) so tests/unit can drive it.
"""
from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# Failures no restart can fix. Matched against the first lines of the query's exception.
FATAL_PATTERNS = (
    r"LeaseLost|lost the lease",
    r"IntegrityError",
    r"AnalysisException|UNRESOLVED_|DATATYPE_MISMATCH|INVALID_OPTION|IllegalArgumentException",
    r"STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA|STATE_STORE_.*SCHEMA",
)
# Failures whose restart must verify (and repair) the checkpoint first: damaged state files, not a state store
# that could not be read because S3 was unreachable (CANNOT_LOAD_STATE_STORE wraps both); and the query's own
# records that do not parse or are missing (a torn offsets entry: "Unexpected end-of-input"; a state directory left
# by a batch 0 that never committed: STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY).
STATE_PATTERNS = (r"Bad table magic number", r"block checksum mismatch", r"ZipException", r"UNEXPECTED_FILE_SIZE",
                  r"Corruption: ", r"STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY", r"Unexpected end-of-input",
                  r"JsonParseException|JsonEOFException|MismatchedInputException|Unrecognized token",
                  r"UNSUPPORTED_LOG_VERSION|INVALID_LOG_VERSION|Log file was malformed|MalformedInputException",
                  r"FileNotFoundException")
UNREACHABLE = r"ConnectException|Connection refused|Connection reset|SocketTimeout|SocketException|SdkClientException"
# A failure that comes back the same way on every restart, with no batch in between, is not transient, unless it
# says that something was out of reach (an outage repeats the same way until it ends; the budget bounds that).
# An HTTP 5xx only as a status ("Status Code: 503", minio's "status code 503", "503 Slow Down"), never a number
# that merely contains one (a batch 1503, an offset 25003).
OUT_OF_REACH = (UNREACHABLE + r"|TimeoutException|[Tt]imed out|timeout|SlowDown|Service Unavailable|InternalError"
                r"|Throttl|UnknownHost|NoRouteToHost|ExecutorLost|Lost executor|[Ee]xecutor.*(?:lost|exited)"
                r"|[Ss]tatus [Cc]ode:? 5\d\d|\b50[0-4] [A-Z]"
                r"|NotLeaderOrFollower|node assignment|disconnected|LeaseUnconfirmed")
REPEATS_BEFORE_STOP = 3
# Issue 40 (incident 005): the executors' local disk full or failing under RocksDB (its own IOError text, or the
# JVM's). The checkpoint in S3 is intact and the state is restored from it once the disk works again, so with
# Settings.local_disk_outage such a failure is an outage, bounded by the budget, never stopped as a repeat.
LOCAL_DISK = r"No space left on device|Input/output error"


def first_line(text: str | None, limit: int = 300) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line[:limit]


# py4j prints the Java exception it wraps on a line of its own after ": " (the `py4j` group).
_EXCEPTION_LINE = re.compile(r"^\s*(?:Caused by: |(?P<py4j>: ))?"
                             r"([a-zA-Z_][\w.$]*(?:Error|Exception|Lost|Held|Exceeded|Unconfirmed)): (.*)$")
# Wrappers say that something failed, not what: the cause is below them.
_WRAPPERS = ("py4j.", "Py4J", "pyspark.errors", "StreamingQueryException", "ForeachBatchUserFuncException",
             "org.apache.spark.SparkException", "java.util.concurrent.ExecutionException")
# ...except a stage Spark gave up on: its reason is in the wrapper's own message, often with no `Caused by:` below.
_SAYS_WHAT = re.compile(r"Job aborted due to stage failure")


def root_cause(text: str | None, limit: int = 300) -> str:
    """The line that names a failure: the deepest exception that is not a wrapper (a Python error raised in
    foreachBatch is wrapped by py4j and Spark; a Java one sits in a `Caused by:` chain); where there is none, the
    stage Spark gave up on, whose message carries the reason; else the first line."""
    causes, stages = [], []
    for line in (text or "").splitlines():
        match = _EXCEPTION_LINE.match(line)
        if match is None:
            continue
        found = f"{match.group(2)}: {match.group(3).strip()}"
        wrapper = match.group(2).split(".")[-1].startswith(_WRAPPERS) or match.group(2).startswith(_WRAPPERS)
        if not wrapper and not match.group("py4j"):  # py4j's line is the top of a chain whose cause is below it
            causes.append(found)
        elif _SAYS_WHAT.match(match.group(3)):
            # a stage's call site ("call at", "start at" a path into the venv) would crowd out the reason
            stages.append(re.sub(r" \([^()]* at [^()]*\)", "", found))
    return (causes[-1] if causes else stages[-1] if stages else first_line(text))[:limit]


def classify(description: str) -> str:
    """fatal | state | transient"""
    head = "\n".join((description or "").splitlines()[:5])
    if any(re.search(p, head) for p in FATAL_PATTERNS):
        return "fatal"
    if any(re.search(p, description or "") for p in STATE_PATTERNS):
        return "state"
    if re.search(r"CANNOT_LOAD_STATE_STORE", description or "") and not re.search(UNREACHABLE, description or ""):
        return "state"  # could not load, and not for want of a connection: check the files
    return "transient"


def signature(cause: str) -> str:
    """A failure's cause without what differs between two occurrences of the same failure (numbers, ids, paths'
    random parts), so repeats can be told apart from different failures."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", cause or "")
    text = re.sub(r"\b[0-9a-f]{12,}\b", "<id>", text)
    return re.sub(r"\d+", "#", text)[:200]


def local_disk(description: str) -> bool:
    """The failure says a local disk is full or failing (matched on the whole text: RocksDB's message puts the errno
    after a long local path, past what a cause line keeps)."""
    return bool(re.search(LOCAL_DISK, description or ""))


def out_of_reach(cause: str) -> bool:
    # A stage Spark gave up on failed every attempt: its repeat is a repeat, whatever its last attempt met (an
    # executor killed by its own task, a poison batch, reads like one lost to an outage).
    return bool(re.search(OUT_OF_REACH, cause or "")) and not _SAYS_WHAT.search(cause or "")


class BudgetExceeded(Exception):
    """More failures in the window than the budget allows: the job stops."""


@dataclass
class RestartPolicy:
    budget: int                     # failures tolerated within `window_s`; 0: the first failure stops the job
    window_s: float = 300.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    failures: deque = field(default_factory=deque)  # (time, cause)
    consecutive: int = 0
    streak: list = field(default_factory=list)  # (signature, out of reach) of the failures since the last batch
    repair_tried: bool = False  # a repeating failure got one verification of the checkpoint since the last batch
    stop_on_repeat: bool = True  # the repeat rule (Settings.stop_on_repeat); off: a repeat restarts like any failure

    def failed(self, cause: str, outage: bool = False) -> float:
        """Record a failure; return the backoff before the restart, or raise BudgetExceeded. `outage`: it is out of
        reach whatever its cause line says (a local disk failure: `local_disk`)."""
        now = self.clock()
        self.failures.append((now, cause))
        while self.failures and now - self.failures[0][0] > self.window_s:
            self.failures.popleft()
        self.consecutive += 1
        self.streak.append((signature(cause), outage or out_of_reach(cause)))
        if len(self.failures) > self.budget:
            causes = "; ".join(dict.fromkeys(c for _, c in list(self.failures)[-3:]))
            raise BudgetExceeded(f"failure budget exceeded: {len(self.failures)} failures within "
                                 f"{self.window_s:.0f} s (budget {self.budget}); last causes: {causes}")
        return min(self.backoff_max_s, self.backoff_initial_s * 2 ** (self.consecutive - 1))

    def repeating(self, threshold: int = REPEATS_BEFORE_STOP) -> bool:
        """Have the last `threshold` failures been the same one, with no batch in between, and not an outage? Never,
        with the repeat rule off: the job then restarts through the repeats until its budget is spent."""
        if not self.stop_on_repeat:
            return False
        last = self.streak[-threshold:]
        return len(last) >= threshold and len(set(last)) == 1 and not last[0][1]

    def progressed(self) -> None:
        """A batch completed after a restart: the next failure starts the backoff from the beginning again."""
        self.consecutive = 0
        self.streak.clear()
        self.repair_tried = False
