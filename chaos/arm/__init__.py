"""One arm's run: its job against the stack, its steps and its phases, put in order by chaos/run.py's `ArmRun`.

    steps.py      the steps before and after the phases (`ArmContext`, what every step shares; `warm_up`, `produce`,
                  `clean_up`)
    schedule.py   the phases while the workload runs: the faults at their times or on the job's events
                  (`FaultSchedule`), the phase marks and the early ends (`PhaseClock`)
    job.py        the arm's job: its topic, driver process, drain and oracle (`JobArm`)
    sampler.py    the sampler and the log scanner, writing samples and matched log lines into the history
    lifecycle.py  lifecycle triggers (chaos/triggers.py) realised on the running job

What the checks and other commands share with a run stays beside this package: the history (chaos/history.py), the
workload and its ledger (chaos/workload.py), the oracle, the job's outputs (chaos/outputs.py) and the triggers' model.
"""
