"""Benchmarks: `chaos bench ...`, figures measured or counted, never a verdict (chaos/commands/bench.py stores each
as a run directory's results.json).

    job.py           the job's sustained throughput per way of keeping sessions (`bench job`), and its start-up per
                     JVM variant (`bench startup`)
    suite_timing.py  where a stored suite run's wall time went, from its files (`bench suite`)
    crash_tally.py   what stored runs' lifecycle-triggered faults hit, and how each arm came out (`bench crashes`)
    cpu_profile.py   where a command's CPU went, by kind of process (`bench cpu`)
    oracle.py        what judging exactly-once costs in time and peak memory (`python -m chaos.bench.oracle`)

The benchmarks of the stack alone are infra/bench.py's.
"""
