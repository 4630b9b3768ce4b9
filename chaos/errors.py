"""Exit codes and typed errors of the harness. Messages are one line: what is wrong, what to do."""

PASSED = 0
FAILED = 1
USAGE = 2          # bad command line or experiment spec
ENVIRONMENT = 3    # the environment broke (UNKNOWN verdict): never reported as a job failure
HANG = 4
NODATA = 5
SKIPPED = 6        # nothing failed, but some arm could not run its faults on the target: never a pass
INTERRUPTED = 130


class ChaosError(Exception):
    exit_code = FAILED

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class SpecError(ChaosError):
    exit_code = USAGE
