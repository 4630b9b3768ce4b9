"""Errors of the environment layer. Each message is one line: what is wrong and what to do.

The harness maps every InfraError to exit code 3 (environment error), so a broken environment is
never reported as a broken job.
"""


class InfraError(Exception):
    """The environment (artifacts, processes, containers, ports) is not usable."""


class ArtifactError(InfraError):
    """A pinned artifact is missing, corrupt or could not be fetched."""


class ComponentError(InfraError):
    """A stack component failed to start, or died."""
