"""The checks: judge one recorded run offline, from its run store alone (docs/run-store.md).

Every check is a pure function over parsed records (a `Timeline` of history.jsonl) or parsed outputs (oracle.json,
lineage.json) and a typed target from the spec (chaos.spec.Targets), returning one `Check`. Only the loaders
(judge.py: `judge_arm`, `judge_run`) read files, and only `judge_run` writes (each arm's result.json); `chaos run`
and `chaos check RUN_DIR` store what judge_run returns as results.json. Verdicts and how they combine:
chaos/verdicts.py.

The modules, along the seams of what they judge:

    timeline.py        the parsed history (Timeline), the result (Check), shared helpers
    base.py            what a check is (CheckDef) and reads (ArmData, ControlData); settle/unjudged for the control
    registry.py        CHECKS, the only list of checks and their order; the guard (an exception -> UNKNOWN)
    environment.py     environment     an arm with `error` records: UNKNOWN
    progress.py        progress        batch_id advances within every phase window; stuck from the first fault to
                                       the end: HANG
    recovery.py        recovery        seconds from each disruption (a heal, a restart of the driver) to the first
                                       of `healthy_samples` consecutive samples with lag < lag_below and progress
                                       in a batch that started after it; the worst of them, PASSED if <= within;
                                       one not recovered before the next fault fails (unless `grouped`)
                       max_lag         the largest lag of the inject and recover samples
                       still_healthy   the last `samples` samples of the recover phase: lag below the recovery
                                       bound (else 5 s of input), driver up, a batch completed (or nothing pending)
    exactly_once.py    lost            oracle.json: lost sessions (compare) or acknowledged events (coverage);
                                       output with wrong fields fails it too
                       duplicated      oracle.json: duplicated sessions / events; output nobody sent fails it too
    output_latency.py  emitted_within  oracle.json's emission waits: the longest from a session's first event to
                                       the end of the batch that wrote it, PASSED if <= within
    state.py           state           trend (plateau | growth): least-squares slope of state_rows (state_bytes as
                                       secondary evidence) over the `during` phases after `warmup`, vs `threshold`;
                                       bounds max_rows_per_key and max_rows
    logs.py            logs            each expected pattern has a `log` record, no forbidden one has
    lineage.py         lineage         lineage.json: metadata, contiguous offsets/commits, at most one batch in
                                       flight, the next state version loadable in every partition
    deployment.py      refused_within  every second deployment is refused (or exits non-zero) within the bound
                       exit_code       the code the job's driver ended with
                       exits           every arm: an exit of the driver the harness did not cause FAILS a subject
                                       (code, meaning, the job's last line) unless exit_code names it; a control's
                                       is recorded, never failing it
    outage.py          outage_reported from the first lasting fault's start to the driver's own exit with a
                                       documented failure code (never a harness kill), PASSED if <= within
    steady_state.py    probe:<metric>  the spec's steady-state probes: the fraction of measured samples outside
                                       [min, max] in the probe's phases is <= tolerance
    arm.py             one arm: the registered checks, then a control arm's `control` check (expect=incident needs
                       a signature: a matched expected log line, else state growth, else the job's failure line from
                       arm.json; expect=survives says why it survived too)
    discrimination.py  the control's data judged by the hardened arm's targets (docs/experiments.md)
    judge.py           the loaders: judge_arm, judge_discrimination, judge_run

A new check: docs/architecture.md, "Where a new check goes".
"""
