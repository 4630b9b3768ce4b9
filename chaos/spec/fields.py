"""The validation toolkit: each spec field checked by kind (a mapping of known fields, an integer, a number, a
duration, a choice, a regex...) within its bound (LIMITS), raising `Invalid(path, what, allowed)`, which the loaders
turn into the one SpecError line `<file>: <dotted.field.path>: <what is wrong>; allowed: <what is allowed>`.

Fault kinds (chaos/faults/) use it for their own checks (`validate`), so their errors read like every other."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeGuard, TypeVar

import yaml

from ..errors import SpecError

DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_PAYLOAD_BYTES = 4096
MAX_NAME = 64  # experiment and suite names become directory names (run store, deployments, buckets)
NAME_RE = re.compile(rf"^[a-z0-9][a-z0-9-]{{0,{MAX_NAME - 1}}}$")
NAME_HELP = f"lowercase letters, digits and dashes, starting with a letter or digit, at most {MAX_NAME} characters"
GLOB_RE = re.compile(r"^[A-Za-z0-9_./*?-]{1,200}$")
INCIDENT_FILE_RE = re.compile(r"^\d{3}-[A-Za-z0-9._-]+\.txt$")
DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
DURATION_HELP = "a duration like 500ms, 30s, 2m, 1h or a number of seconds"
EPSILON = 1e-9  # float slack when checking that scaled durations fit

# -- what this machine can do --------------------------------------------------------------------------------
# Every number a spec or suite gives is bounded, declared here once by field name (the last named part of its path:
# `keys` bounds workload.keys, `count` a fault's count param). A number past its bound is refused with the usual
# one line before anything starts: `keys: 99999999999999999999999` would otherwise start a stack that cannot hold
# it. A field without an entry gets its kind's default below; a tighter bound in the code (a catalog param's
# maximum, payload_bytes) still applies. The suite runs on one host of a few cores: these are far above what any
# experiment uses (rates of 50-200 events/s, 200 keys, 4 partitions) and far below what would overflow.
MAX_INT = 2**31 - 1  # an int field without its own bound (counts of events, rows, a seed)
MAX_NUMBER = 1e9  # a number field without its own bound, either sign (probe bounds, lag in records)
MAX_DURATION_S = 24 * 3600.0  # any duration after scaling: a phase, a fault's at/duration, a recovery bound
MAX_SCALE = 100.0  # a suite's or --scale's multiplier of every phase and fault time
MAX_ITEMS = 100  # entries of a list: faults, probes, log signatures, a suite's experiments
LIMITS: Mapping[str, float] = MappingProxyType({
    # the workload: what one producer and a 2-core Spark can push and hold
    "rate": 100_000, "keys": 10_000_000, "partitions": 256, "rotation_live_actors": 10_000_000, "zipf_s": 10,
    "rotation_events": 1_000_000,
    "seed": MAX_INT,
    # job settings an arm may change
    "max_offsets_per_trigger": 100_000_000, "catch_up_factor": 1_000, "min_batches_to_retain": 10_000,
    "failure_budget": 10_000,
    # targets
    "healthy_samples": 10_000, "min_matches": 1_000_000, "max_rows_per_key": 1_000_000, "threshold": 1_000,
    "bytes_threshold": 1_000, "bytes_per_event": 1_000_000, "lag_below": 1e9,
    # fault params the catalog leaves open above
    "count": 1_000, "batch": 1_000_000_000, "rate_kbps": 10_000_000, "timeout_ms": 86_400_000,
    "average_size": 100_000_000, "size_variation": 100_000_000, "delay_us": 86_400_000_000, "bytes": 2**40,
    # a suite ("lanes": stacks side by side, each with its own Spark job: more than 4 starve two cores)
    "scale": MAX_SCALE, "repeat": 20, "lanes": 4,
})


# -- durations -----------------------------------------------------------------------------------------------

def parse_duration(value: object) -> float:
    """"500ms", "30s", "2m", "1h", "1.5s", or a plain non-negative number (seconds) -> seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if not finite(value) or value < 0:
            raise ValueError(f"{value!r} is not a non-negative finite number of seconds")
        return float(value)
    if isinstance(value, str):
        match = DURATION_RE.match(value.strip())
        if match:
            seconds = float(match.group(1)) * DURATION_UNITS[match.group(2) or "s"]
            if math.isfinite(seconds):  # 400 digits parse to inf
                return seconds
    raise ValueError(f"{value!r} is not a duration")


def finite(value: int | float) -> bool:
    """A finite float, or an int a float can hold (math.isfinite raises OverflowError past 1e308)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


# -- validation machinery ------------------------------------------------------------------------------------

Path_ = tuple[str, ...]


class Invalid(Exception):
    def __init__(self, path: Path_, what: str, allowed: str) -> None:
        super().__init__(what)
        self.path, self.what, self.allowed = path, what, allowed


class DuplicateKey(Exception):
    def __init__(self, path: Path_, first: int, second: int) -> None:
        super().__init__(path)
        self.path, self.first, self.second = path, first, second


def find_duplicate_keys(node: yaml.Node | None, path: Path_ = ()) -> None:
    """Refuse a key written twice in one mapping (YAML would silently keep the last), naming its field path.
    Keys compare as the values they construct to (`a` and `'a'` are one key); unhashable keys are left to the
    loader, which refuses them."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[object, int] = {}
        for key_node, value_node in node.value:
            key = None
            if isinstance(key_node, yaml.ScalarNode):
                try:
                    key = yaml.SafeLoader("").construct_object(key_node, deep=True)
                except yaml.YAMLError:
                    key = None
            line = key_node.start_mark.line + 1
            try:
                if key is not None and key in seen:
                    raise DuplicateKey(path + (str(key),), seen[key], line)
                if key is not None:
                    seen[key] = line
            except TypeError:  # unhashable
                pass
            find_duplicate_keys(value_node, path + (str(key) if key is not None else "?",))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            find_duplicate_keys(item, path + (str(index),))


def show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def dotted(path: Path_) -> str:
    return ".".join(path) if path else "(document)"


def mapping_of(value: object, path: Path_, fields: Iterable[str], required: Iterable[str] = ()) -> dict:
    fields = tuple(fields)
    if not isinstance(value, dict):
        raise Invalid(path, f"must be a mapping, got {show(value)}",
                       f"a mapping of {', '.join(fields)}" if fields else "an empty mapping (no fields here)")
    for key in value:
        if key not in fields:
            raise Invalid(path + (str(key),), "unknown field", ", ".join(fields))
    for key in required:
        if key not in value:
            raise Invalid(path + (key,), "missing", f"{key} is required here")
    return value


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[float]:  # an int too (bool is not)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value)


def num(value: float) -> str:
    """A bound as a person reads it: 2147483647, not 2.14748e+09."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def bounds_text(minimum: float | None, maximum: float | None) -> str:
    parts = ([f">= {num(minimum)}"] if minimum is not None else []) + ([f"<= {num(maximum)}"]
                                                                        if maximum is not None else [])
    return " and ".join(parts)


def limit_of(path: Path_, default: float) -> float:
    """The bound LIMITS declares for the field at `path` (its last named part), or `default`."""
    field = next((part for part in reversed(path) if not part.isdigit()), "")
    return LIMITS.get(field, default)


def integer(value: object, path: Path_, minimum: int | None = None, maximum: int | None = None) -> int:
    cap = int(limit_of(path, MAX_INT))
    maximum = cap if maximum is None else min(maximum, cap)
    minimum = -cap if minimum is None else minimum
    if not is_int(value) or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise Invalid(path, f"{show(value)} is not valid", f"an integer {bounds_text(minimum, maximum)}".strip())
    return value


def number(value: object, path: Path_, minimum: float | None = None, maximum: float | None = None,
            above: float | None = None) -> float:
    cap = limit_of(path, MAX_NUMBER)
    maximum = cap if maximum is None else min(maximum, cap)
    minimum = -cap if minimum is None and above is None else minimum
    if not (is_number(value) and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
            and not (above is not None and value <= above)):
        bounds = bounds_text(minimum, maximum) if above is None else f"> {num(above)} and <= {num(maximum)}"
        raise Invalid(path, f"{show(value)} is not valid", f"a number {bounds}".strip())
    return float(value)


def boolean(value: object, path: Path_) -> bool:
    if not isinstance(value, bool):
        raise Invalid(path, f"{show(value)} is not valid", "true | false")
    return value


def nonempty_text(value: object, path: Path_) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid(path, f"{show(value)} is not valid", "a non-empty string")
    return value


_C = TypeVar("_C")


def choice(value: object, path: Path_, choices: tuple[_C, ...]) -> _C:
    """value, one of `choices` (typed as them: for strings it is one; a number may be an equal float, 1.0 for 1)."""
    if value not in choices or isinstance(value, bool):
        raise Invalid(path, f"{show(value)} is not valid", " | ".join(str(c) for c in choices))
    return value


def duration_field(value: object, path: Path_, scale: float = 1.0, positive: bool = False) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise Invalid(path, f"{show(value)} is not a duration", DURATION_HELP) from None
    if positive and seconds <= 0:
        raise Invalid(path, f"{show(value)} must be longer than 0", f"{DURATION_HELP}, > 0")
    if not math.isfinite(seconds * scale) or seconds * scale > MAX_DURATION_S:
        raise Invalid(path, f"{show(value)} is too long" + (f" (x scale {scale:g})" if scale != 1 else ""),
                       f"{DURATION_HELP}, at most {MAX_DURATION_S / 3600:g}h after scaling")
    # Microsecond rounding keeps scaled sums exact enough to compare (0.2 * 30 + 0.2 * 60 == 0.2 * 90).
    return round(seconds * scale, 6)


def regex_field(value: object, path: Path_) -> str:
    pattern = nonempty_text(value, path)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise Invalid(path, f"{show(pattern)} is not a valid regex ({exc})", "a Python regular expression") \
            from None
    return pattern


def fmt_seconds(value: float) -> str:
    return f"{value:g}s"

def required_key(section: dict, key: str, path: Path_) -> object:
    if key not in section:
        raise Invalid(path + (key,), "missing", f"{key} is required here")
    return section[key]


def check_scale(scale: object, source: str, path: Path_) -> float:
    if not is_number(scale) or scale <= 0 or scale > MAX_SCALE:
        raise SpecError(f"{source}: {dotted(path)}: {show(scale)} is not valid; allowed: a number > 0 and "
                        f"<= {num(MAX_SCALE)}")
    return float(scale)
