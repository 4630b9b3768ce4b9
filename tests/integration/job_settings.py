"""Job settings the integration tests share.

OUTCOME_TRIGGER_MS: the trigger of the long-running jobs of tests that judge outcomes only (a repair, exactly once,
an exit code), never a timing. A running hardened job at 100 events/s costs 0.54 of a core with the profile's 1 s
trigger and 0.29-0.32 with 3 s (driver and executor processes over 60 s after warm-up, twice each; docs/lab-notes.md
"`make test`: the trigger of the outcome tests"), and `make test`'s shared session is bound by its CPU. The smoke's
arms and every test with a recovery bound keep their spec's trigger.
"""
OUTCOME_TRIGGER_MS = 3_000
