"""Targets (issue 19, docs/targets.md): an existing environment described by a file — where Kafka, S3 and Spark are,
which Toxiproxy the faults go through, credentials by variable name, hooks for process faults. `model.py` validates
the file, `doctor.py` checks that a target answers and that its traffic crosses the proxies, `from_stack.py` writes a
running stack as a target (`chaos stack up --write-target`)."""
from .model import load_target, parse_target

__all__ = ["load_target", "parse_target"]
