"""Experiment specs: every checked-in experiment loads and round-trips through spec.json; a corpus of bad specs, each
with its one-line message `<file>: <field path>: <what>; allowed: <what is allowed>`; and a property test that any
generated document is either accepted or refused with such a line, never with another exception."""
from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.errors import SpecError
from chaos.faults.registry import FAULTS
from chaos.spec import TARGET_FIELDS, TARGET_PARAMS, ExperimentSpec, load_experiment, load_suite

ROOT = Path(__file__).resolve().parents[2]
# Every target an arm may set, in the order the one-line errors list them: the fixed ones, then those declared by
# their params (chaos/spec/targets.py); a new target extends this without a test to edit.
EVERY_TARGET = (*TARGET_FIELDS, *TARGET_PARAMS)
# Every kind, in the registry's order: the `allowed:` of an unknown fault (tests/unit/test_fault_kinds.py checks the
# order of families; a new kind needs no line here).
KIND_NAMES = ", ".join(FAULTS)
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.yaml"))

BASE = """
name: t-spec
description: test
incident: {file: 001-x.txt, error: boom}
seed: 1
workload: {shape: uniform, keys: 20, rate: 50, partitions: 2}
job: {session_gap: 2s, max_session_length: 20s, watermark: 1s, trigger: 1s}
phases: {steady: 10s, inject: 20s, recover: 10s}
faults:
  - {fault: network.down, target: kafka, at: 0s, duration: 5s}
probes:
  - {metric: processed_rate, min: 1, phases: [steady], tolerance: 0.5}
arms:
  hardened:
    targets: {progress: true, recovery: {within: 5s, lag_below: 100}, lost: 0, duplicated: 0}
  naive:
    targets: {logs: {expected: ["boom"]}}
"""


def base() -> dict:
    return yaml.safe_load(BASE)


def write(directory: Path, doc: object, name: str = "exp.yaml") -> Path:
    path = directory / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


# -- every experiment --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_every_experiment_round_trips_through_spec_json(path, scale):
    try:
        spec = load_experiment(path, scale)
    except SpecError as exc:
        # At full length every experiment is valid; shortened, a recovery target may no longer fit, nor faults spaced
        # for recoveries judged alone (by design: targets are not scaled).
        assert scale != 1.0 and (": arms.hardened.targets.recovery.within: " in str(exc)
                                 or "judges each alone" in str(exc) or "judges each disruption alone" in str(exc)), exc
        return
    stored = json.loads(json.dumps(spec.to_dict()))
    again = ExperimentSpec.from_dict(stored)
    assert again == spec
    assert again.to_dict() == spec.to_dict()
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(stored, sort_keys=True)


def test_the_nightly_suite_loads():
    suite = load_suite(ROOT / "experiments" / "suites" / "nightly.yaml")
    assert suite.entries


def test_control_expectations_default_and_round_trip(tmp_path):
    spec = load_experiment(write(tmp_path, base()))
    assert spec.arm("naive").expect == "incident" and spec.arm("naive").note is None
    assert spec.arm("naive").role == "control"
    assert spec.arm("hardened").expect is None and spec.arm("hardened").role == "subject"
    doc = base()
    doc["arms"]["naive"].update(expect="survives", note="the naive job has no state to lose here")
    spec = load_experiment(write(tmp_path, doc))
    assert (spec.arm("naive").expect, spec.arm("naive").note) == ("survives",
                                                                   "the naive job has no state to lose here")
    assert ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_from_dict_of_an_older_spec_json_defaults_the_expectation(tmp_path):
    stored = load_experiment(write(tmp_path, base())).to_dict()
    for arm in stored["arms"]:
        del arm["expect"], arm["note"]
    spec = ExperimentSpec.from_dict(stored)
    assert spec.arm("naive").expect == "incident" and spec.arm("hardened").expect is None


@pytest.mark.parametrize("mangle, fragment", [
    (lambda d: d.pop("phases"), "missing field 'phases' in ExperimentSpec"),
    (lambda d: d["arms"][0]["targets"].update(speed=1), "unknown field 'speed' in Targets"),
    (lambda d: d.clear(), "missing field"),
])
def test_from_dict_refuses_what_to_dict_never_wrote_in_one_line(tmp_path, mangle, fragment):
    stored = load_experiment(write(tmp_path, base())).to_dict()
    mangle(stored)
    with pytest.raises(SpecError) as caught:
        ExperimentSpec.from_dict(stored, where="x/spec.json")
    message = str(caught.value)
    assert message.startswith("x/spec.json: (document): not an ExperimentSpec.to_dict() (") and "\n" not in message
    assert fragment in message
    with pytest.raises(SpecError):
        ExperimentSpec.from_dict(["not", "a", "mapping"])


# -- the corpus of bad specs -------------------------------------------------------------------------------------
def _set(*path_and_value):
    *path, key, value = path_and_value

    def mutate(doc):
        node = doc
        for part in path:
            node = node[part]
        node[key] = value
    return mutate


def _append_fault(fault):
    return lambda doc: doc["faults"].append(fault)


CORPUS = [
    ("unknown field", _set("colour", "red"),
     "colour: unknown field; allowed: name, description, incident, seed, workload, job, phases, faults, probes, arms, "
     "warm_up, cannot_discriminate, claims, topology, schedule"),
    ("missing field", lambda d: d.pop("seed"), "seed: missing; allowed: seed is required here"),
    ("unknown topology", _set("topology", "mesh"), "topology: 'mesh' is not valid; allowed: single | cluster"),
    ("one broker of a cluster on a single stack", _set("faults", 0, "target", "kafka-2"),
     "faults.0.target: kafka-2 names one broker of a cluster, and this experiment runs on a single stack; "
     "allowed: kafka; or topology: cluster"),
    ("one worker's link on a single stack", _set("faults", 0, "target", "spark-driver-worker-1"),
     "faults.0.target: spark-driver-worker-1 names one Spark worker's link to the driver, and this experiment runs "
     "on a single stack of 1 worker; allowed: spark-driver; or topology: cluster"),
    ("broker 3 on a single stack", _append_fault({"fault": "process.kill", "target": "broker", "at": "6s",
                                                  "duration": "5s", "params": {"broker": 3}}),
     "faults.1.params.broker: broker 3 on a single stack of 1 broker; "
     "allowed: 1, leader or each; or topology: cluster"),
    ("executors of a broker kill", _append_fault({"fault": "process.kill", "target": "broker", "at": "6s",
                                                  "duration": "5s", "params": {"executors": "one"}}),
     "faults.1.params.executors: applies to target executor, not broker; allowed: no executors for broker"),
    ("an executor restarted at heal", _append_fault({"fault": "process.kill", "target": "executor", "at": "6s",
                                                     "duration": "5s", "params": {"restart": "at_heal"}}),
     "faults.1.params.restart: applies to target broker or minio, not executor; allowed: no restart for executor"),
    ("a leader move on a single stack", _append_fault({"fault": "broker.leader_move", "at": "6s", "duration": "5s"}),
     "faults.1.fault: broker.leader_move needs at least 2 brokers, and this experiment runs on a single stack of 1 "
     "broker; allowed: topology: cluster"),
    ("a broker beyond three", _append_fault({"fault": "process.pause", "target": "broker", "at": "6s",
                                             "duration": "5s", "params": {"broker": 4}}),
     "faults.1.params.broker: 4 is not valid; allowed: an integer >= 1 and <= 3 or leader or each"),
    ("bad duration", _set("phases", "steady", "10 parsecs"),
     "phases.steady: '10 parsecs' is not a duration; allowed: a duration like 500ms, 30s, 2m, 1h or a number of "
     "seconds"),
    ("zero duration", _set("phases", "recover", "0s"),
     "phases.recover: '0s' must be longer than 0; allowed: a duration like 500ms, 30s, 2m, 1h or a number of "
     "seconds, > 0"),
    ("infinite duration", _set("phases", "steady", "9" * 400 + "s"),
     "phases.steady: '" + "9" * 56 + "... is not a duration; allowed: a duration like 500ms, 30s, 2m, 1h or a "
     "number of seconds"),
    ("unknown fault", _set("faults", 0, "fault", "network.explode"),
     f"faults.0.fault: unknown fault 'network.explode'; allowed: {KIND_NAMES}"),
    ("bad fault target", _set("faults", 0, "target", "zookeeper"),
     "faults.0.target: 'zookeeper' is not valid; allowed: kafka | kafka-1 | kafka-2 | kafka-3 | s3 | spark-driver | "
     "spark-driver-worker-1 | spark-driver-worker-2"),
    ("unknown target", _set("arms", "hardened", "targets", "speed", 1),
     "arms.hardened.targets.speed: unknown field; allowed: " + ", ".join(EVERY_TARGET)),
    ("bad param", _append_fault({"fault": "network.bandwidth", "target": "s3", "params": {"rate_kbps": -5}}),
     "faults.1.params.rate_kbps: -5 is not valid; allowed: an integer >= 0 and <= 10000000"),
    ("a repeated corruption method", _append_fault({"fault": "checkpoint.corrupt", "at": "0s", "duration": "5s",
                                                    "params": {"kind": "sst", "method": ["footer", "footer"]}}),
     "faults.1.params.method: ['footer', 'footer'] is not valid (empty, or a choice twice); allowed: bit_flip | "
     "truncate | footer | zero_fill, or a list of distinct ones"),
    ("an unknown corruption method in a list", _append_fault({"fault": "checkpoint.corrupt", "at": "0s",
                                                              "duration": "5s",
                                                              "params": {"kind": "sst", "method": ["footer", "melt"]}}),
     "faults.1.params.method.1: 'melt' is not valid; allowed: bit_flip | truncate | footer | zero_fill"),
    ("several changelogs at a fixed version", _append_fault({"fault": "checkpoint.corrupt", "at": "0s",
                                                             "duration": "5s", "params": {
                                                                 "kind": "changelog", "version": 3,
                                                                 "method": ["truncate", "bit_flip"]}}),
     "faults.1.params.version: 3 with 2 methods: only one changelog file can be damaged at a fixed version; "
     "allowed: newest, or one method"),
    ("a list where one choice is allowed", _append_fault({"fault": "network.latency", "target": "s3", "params": {
        "latency": "1s", "direction": ["upstream"]}}),
     "faults.1.params.direction: ['upstream'] is not valid; allowed: upstream | downstream | both"),
    ("param of a fault without params", _set("faults", 0, "params", {"latency": "1s"}),
     "faults.0.params.latency: unknown field; allowed: no params: network.down takes none"),
    ("missing param", _append_fault({"fault": "network.latency", "target": "s3"}),
     "faults.1.params.latency: missing; allowed: a duration like 500ms, 30s, 2m >= 0s"),
    ("params across each other", _append_fault({"fault": "network.flap", "target": "s3",
                                                "params": {"period": "2s", "down": "3s"}}),
     "faults.1.params.down: 3s is not shorter than the period 2s; allowed: down < period"),
    ("fault outside the inject phase", lambda d: d["faults"][0].update(at="15s", duration="10s"),
     "faults.0.duration: at 15s + start_jitter 0s + duration 10s ends after the inject phase (20s, scale 1); "
     "allowed: at + start_jitter + duration <= phases.inject"),
    ("overlapping faults", _append_fault({"fault": "network.down", "target": "kafka", "at": "3s", "duration": "5s"}),
     "faults.1: overlaps faults.0 (network.down on kafka) in arm hardened; allowed: one copy of a fault per target "
     "at a time in an arm"),
    ("recovery longer than recover", _set("arms", "hardened", "targets", "recovery", "within", "30s"),
     "arms.hardened.targets.recovery.within: 30s is longer than the recover phase (10s after scaling): recovery "
     "could not be observed; allowed: within <= phases.recover (targets are not scaled)"),
    ("refused_within without a second deployment", _set("arms", "hardened", "targets", "refused_within", "5s"),
     "arms.hardened.targets.refused_within: no fault starts a second deployment; allowed: a "
     "checkpoint.second_deployment fault in faults"),
    ("staggered without stagger", _append_fault({"fault": "checkpoint.second_deployment",
                                                 "params": {"mode": "staggered"}}),
     "faults.1.params.stagger: missing; allowed: a duration: how long after the first deployment restarts the "
     "second one starts"),
    ("second deployment's pause after its window", _append_fault(
        {"fault": "checkpoint.second_deployment", "at": "6s", "duration": "10s",
         "params": {"mode": "staggered", "stagger": "5s", "pause_first_after": "5s"}}),
     "faults.1.params.pause_first_after: stagger 5s + 5s is not shorter than the fault (10s; neither is scaled): the "
     "first would never be paused; allowed: stagger + pause_first_after < duration"),
    ("simultaneous second deployment's pause after its window", _append_fault(
        {"fault": "checkpoint.second_deployment", "at": "6s", "duration": "10s",
         "params": {"mode": "simultaneous", "pause_first_after": "10s"}}),
     "faults.1.params.pause_first_after: 10s is not shorter than the fault (10s; neither is scaled): the first "
     "would never be paused; allowed: stagger + pause_first_after < duration"),
    ("expect on a hardened arm", _set("arms", "hardened", "expect", "survives"),
     "arms.hardened.expect: only a control arm has an expectation (hardened is the subject); allowed: expect under "
     "arms.naive only"),
    ("note on a hardened arm", _set("arms", "hardened", "note", "why"),
     "arms.hardened.note: only a control arm has an expectation (hardened is the subject); allowed: note under "
     "arms.naive only"),
    ("unknown expectation", _set("arms", "naive", "expect", "maybe"),
     "arms.naive.expect: 'maybe' is not valid; allowed: incident | survives"),
    ("survives without a note", _set("arms", "naive", "expect", "survives"),
     "arms.naive.note: missing: a control expected to survive must say why; allowed: a non-empty string: why the "
     "control honestly survives this fault"),
    ("a note without survives", _set("arms", "naive", "note", "why"),
     "arms.naive.note: only applies to expect: survives; allowed: no note when the control is expected to "
     "reproduce the incident"),
    ("bad regex", _set("arms", "naive", "targets", "logs", "expected", ["("]),
     "arms.naive.targets.logs.expected.0: '(' is not a valid regex (missing ), unterminated subpattern at position "
     "0); allowed: a Python regular expression"),
    ("bad trend", _set("arms", "naive", "targets", "state", {"trend": "shrink"}),
     "arms.naive.targets.state.trend: 'shrink' is not valid; allowed: plateau | growth"),
    ("probe on batch_id", _set("probes", 0, "metric", "batch_id"),
     "probes.0.metric: 'batch_id' is not valid; allowed: input_rate | processed_rate | lag | batch_duration_ms | "
     "state_rows | state_bytes | checkpoint_bytes"),
    ("a number too big for a float", _set("workload", "rate", 10 ** 400),
     "workload.rate: " + "1" + "0" * 56 + "... is not valid; allowed: a number > 0 and <= 100000"),
    ("empty targets", _set("arms", "naive", "targets", {}),
     "arms.naive.targets: is empty: an arm must be judged on something; allowed: " + ", ".join(EVERY_TARGET)),
    ("bad name", _set("name", "Bad Name"),
     "name: 'Bad Name' is not a valid name; allowed: lowercase letters, digits and dashes, starting with a letter or "
     "digit, at most 64 characters"),
]


@pytest.mark.parametrize("case, mutate, message", CORPUS, ids=[c[0] for c in CORPUS])
def test_a_bad_spec_is_one_line_naming_file_and_field(tmp_path, case, mutate, message):
    doc = base()
    mutate(doc)
    path = write(tmp_path, doc)
    with pytest.raises(SpecError) as caught:
        load_experiment(path)
    assert str(caught.value) == f"{path}: {message}"
    assert caught.value.exit_code == 2


RAW_CORPUS = [
    ("duplicate key", BASE.replace("seed: 1\n", "seed: 1\nseed: 2\n"),
     "seed: appears twice (lines 5 and 6); allowed: each key once per mapping"),
    ("duplicate nested key", BASE.replace("{shape: uniform, keys: 20,", "{shape: uniform, keys: 20, keys: 30,"),
     "workload.keys: appears twice (lines 6 and 6); allowed: each key once per mapping"),
    ("duplicate key in a list item", BASE.replace("at: 0s, duration: 5s}", "at: 0s, at: 1s, duration: 5s}"),
     "faults.0.at: appears twice (lines 10 and 10); allowed: each key once per mapping"),
    ("unhashable key", "? [a, b]\n: 1\n", "line 1: not valid YAML (found unhashable key); allowed: a YAML mapping"),
    ("not YAML", "name: [unclosed\n", "line 2: not valid YAML (expected ',' or ']', but got '<stream end>'); allowed: "
                                      "a YAML mapping"),
    ("not a mapping", "- a\n- b\n", "(document): must be a mapping, got ['a', 'b']; allowed: a mapping of name, "
                                    "description, incident, seed, workload, job, phases, faults, probes, arms, "
                                    "warm_up, cannot_discriminate, claims, topology, schedule"),
    ("empty file", "", "(document): must be a mapping, got None; allowed: a mapping of name, description, incident, "
                       "seed, workload, job, phases, faults, probes, arms, warm_up, cannot_discriminate, claims, "
                       "topology, schedule"),
]


@pytest.mark.parametrize("case, text, message", RAW_CORPUS, ids=[c[0] for c in RAW_CORPUS])
def test_bad_yaml_is_one_line_naming_file_and_place(tmp_path, case, text, message):
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load_experiment(path)
    assert str(caught.value) == f"{path}: {message}"


def test_a_file_that_is_not_utf8_or_missing_is_one_line(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_bytes(b"name: \xff\n")
    with pytest.raises(SpecError, match=r"^.*exp\.yaml: \(file\): not UTF-8 text \(byte 6\); allowed: a UTF-8 YAML "
                                        r"file$"):
        load_experiment(path)
    with pytest.raises(SpecError, match=r"nope\.yaml: \(file\): cannot read \(No such file or directory\); allowed"):
        load_experiment(tmp_path / "nope.yaml")
    with pytest.raises(SpecError, match=r"exp\.yaml: scale: 0 is not valid; allowed: a number > 0 and <= 100$"):
        load_experiment(write(tmp_path, base()), scale=0)


# -- suites ------------------------------------------------------------------------------------------------------
def _suite(tmp_path: Path, entries: list, **top) -> Path:
    write(tmp_path, base())
    return write(tmp_path, {"name": "s", **top, "experiments": entries}, "suite.yaml")


SUITE_CORPUS = [
    ("an override of an unknown field", [{"path": "exp.yaml", "overrides": {"colour": 1}}],
     "{suite}: experiments.0.overrides.colour: unknown field; allowed: name, description, incident, seed, "
     "workload, job, phases, faults, probes, arms, warm_up, cannot_discriminate, claims, topology, schedule"),
    ("an invalid override value", [{"path": "exp.yaml", "overrides": {"workload": {"rate": -1}}}],
     "{suite}: experiments.0.overrides.workload.rate: -1 is not valid; allowed: a number > 0 and <= 100000"),
    ("an override that replaces a list", [{"path": "exp.yaml", "overrides": {"faults": [{"fault": "nope"}]}}],
     "{suite}: experiments.0.overrides.faults.0.fault: unknown fault 'nope'; allowed: " + KIND_NAMES),
    ("an error the override did not cause", [{"path": "exp.yaml", "overrides": {"phases": {"recover": "2s"}}}],
     "{exp}: arms.hardened.targets.recovery.within: 5s is longer than the recover phase (2s after scaling): "
     "recovery could not be observed; allowed: within <= phases.recover (targets are not scaled)"),
    ("the same experiment twice", [{"path": "exp.yaml"}, {"path": "exp.yaml"}],
     "{suite}: experiments.1: experiment name 't-spec' is already used by experiments.0; allowed: unique names "
     "(override name)"),
    ("a missing experiment file", [{"path": "nope.yaml"}],
     "{suite}: experiments.0.path: {dir}/nope.yaml is not a file; allowed: a path relative to the suite file"),
    ("an unknown entry field", [{"path": "exp.yaml", "repeat": 2}],
     "{suite}: experiments.0.repeat: unknown field; allowed: path, scale, overrides, arms, seed"),
    ("an arm the experiment lacks", [{"path": "exp.yaml", "arms": ["hardened", "canary"]}],
     "{suite}: experiments.0.arms: ['hardened', 'canary'] is not valid; allowed: a non-empty list of distinct arms "
     "of t-spec: hardened, naive"),
    ("no arms", [{"path": "exp.yaml", "arms": []}],
     "{suite}: experiments.0.arms: [] is not valid; allowed: a non-empty list of distinct arms of t-spec: "
     "hardened, naive"),
    ("a bad entry scale", [{"path": "exp.yaml", "scale": 0}],
     "{suite}: experiments.0.scale: 0 is not valid; allowed: a number > 0 and <= 100"),
    ("no experiments", [],
     "{suite}: experiments: [] is not a non-empty list of at most 100; allowed: a list of {{path, overrides}}"),
]


@pytest.mark.parametrize("case, entries, message", SUITE_CORPUS, ids=[c[0] for c in SUITE_CORPUS])
def test_suite_errors_name_the_suite_and_the_override(tmp_path, case, entries, message):
    path = _suite(tmp_path, entries)
    with pytest.raises(SpecError) as caught:
        load_suite(path)
    assert str(caught.value) == message.format(suite=path, exp=tmp_path / "exp.yaml", dir=tmp_path)


def test_suite_scale_error_and_a_rescaled_suite(tmp_path):
    with pytest.raises(SpecError, match=r"suite\.yaml: scale: -1 is not valid; allowed: a number > 0 and <= 100$"):
        load_suite(_suite(tmp_path, [{"path": "exp.yaml"}], scale=-1))
    suite = load_suite(_suite(tmp_path, [{"path": "exp.yaml", "overrides": {"name": "other"}}], scale=0.5))
    assert suite.entries[0].spec.name == "other" and suite.entries[0].spec.phases.steady == 5.0


# -- property: accepted, or refused in one line ----------------------------------------------------------------
LEAVES = st.one_of(
    st.sampled_from(["30s", "500ms", "2m", "1h", "1.5s", "0s", "-1s", "10 parsecs", "", " ", "9" * 400 + "s",
                     "hardened", "naive", "incident", "survives", "plateau", "growth", "kafka", "s3", "checkpoint",
                     "network.down", "network.latency", "data.hot_key", "steady", "inject", "recover", "(", ".*",
                     "uniform", "rotating", "zipf", "hot_key", "newest", "staggered", "simultaneous"]),
    st.integers(min_value=-5, max_value=200), st.sampled_from([10 ** 400, -(10 ** 400), 2 ** 63]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), st.text(max_size=8),
    st.lists(st.sampled_from(["steady", "inject", 1, None]), max_size=3),
    st.dictionaries(st.sampled_from(["a", "min", "max", "trend", "within"]), st.integers(-1, 3), max_size=2),
)

# Where a mutation may land: a path into BASE (the last part may be a new key) and the keys a new field may take.
PATHS = [
    ("name",), ("description",), ("seed",), ("incident", "file"), ("incident", "error"),
    ("workload", "shape"), ("workload", "keys"), ("workload", "rate"), ("workload", "partitions"),
    ("workload", "payload_bytes"), ("workload", "zipf_s"), ("workload", "rotation_live_actors"),
    ("workload", "rotation_gap"), ("job", "session_gap"), ("job", "max_session_length"), ("job", "trigger"),
    ("phases", "steady"), ("phases", "inject"), ("phases", "recover"),
    ("faults", 0, "fault"), ("faults", 0, "target"), ("faults", 0, "at"), ("faults", 0, "duration"),
    ("faults", 0, "start_jitter"), ("faults", 0, "params"), ("faults", 0, "params", "latency"),
    ("probes", 0, "metric"), ("probes", 0, "min"), ("probes", 0, "max"), ("probes", 0, "phases"),
    ("probes", 0, "tolerance"),
    ("arms", "hardened", "settings"), ("arms", "hardened", "settings", "max_offsets_per_trigger"),
    ("arms", "hardened", "settings", "kafka_options"), ("arms", "hardened", "settings", "state_impl"),
    ("arms", "hardened", "expect"), ("arms", "naive", "expect"), ("arms", "naive", "note"),
    ("arms", "hardened", "targets", "progress"), ("arms", "hardened", "targets", "recovery", "within"),
    ("arms", "hardened", "targets", "recovery", "lag_below"),
    ("arms", "hardened", "targets", "recovery", "healthy_samples"), ("arms", "hardened", "targets", "lost"),
    ("arms", "hardened", "targets", "max_lag"), ("arms", "hardened", "targets", "refused_within"),
    ("arms", "hardened", "targets", "lineage"), ("arms", "hardened", "targets", "state"),
    ("arms", "naive", "targets", "state"), ("arms", "naive", "targets", "logs", "expected"),
    ("arms", "naive", "targets", "logs", "forbidden"), ("arms", "naive", "targets"), ("arms",), ("faults",),
    ("probes",), ("colour",),
]

FAULT_DOCS = st.fixed_dictionaries(
    {"fault": st.sampled_from(["network.flap", "process.kill", "checkpoint.second_deployment", "checkpoint.corrupt",
                               "data.key_rotation", "network.limit_data", "nope"])},
    optional={"target": st.sampled_from(["kafka", "s3", "job-driver", "executor", "checkpoint", "workload", 3]),
              "at": LEAVES, "duration": LEAVES, "start_jitter": LEAVES,
              "params": st.dictionaries(st.sampled_from(["period", "down", "count", "interval", "signal", "mode",
                                                         "stagger", "kind", "version", "method", "live_actors",
                                                         "gap", "bytes", "direction", "toxicity"]), LEAVES,
                                        max_size=4)})

MUTATION = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(PATHS), LEAVES),
    st.tuples(st.just("delete"), st.sampled_from(PATHS), st.none()),
    st.tuples(st.just("fault"), st.none(), FAULT_DOCS),
)


def _apply(doc: dict, mutation) -> None:
    kind, path, value = mutation
    if kind == "fault":
        if isinstance(doc.get("faults"), list):
            doc["faults"].append(value)
        return
    node = doc
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if not isinstance(node, (dict, list)):
        return
    try:
        if kind == "delete":
            del node[path[-1]]
        else:
            node[path[-1]] = copy.deepcopy(value)
    except (KeyError, IndexError, TypeError):
        pass


def _assert_accepted_or_one_line(path: Path, load) -> None:
    try:
        load()
    except SpecError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"{path}: "), message
        assert "; allowed: " in message, message


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(MUTATION, min_size=1, max_size=4),
       scale=st.one_of(st.just(1.0), st.floats(min_value=0.01, max_value=3)))
def test_generated_specs_are_accepted_or_refused_in_one_line(mutations, scale):
    doc = base()
    for mutation in mutations:
        _apply(doc, mutation)
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), doc)
        _assert_accepted_or_one_line(path, lambda: load_experiment(path, scale))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(MUTATION, min_size=1, max_size=3), scale=LEAVES)
def test_generated_suite_overrides_are_accepted_or_refused_in_one_line(mutations, scale):
    overrides: dict = {}
    for kind, path, value in mutations:
        if kind == "set":
            node = overrides
            for part in path[:-1]:
                node = node.setdefault(str(part), {}) if isinstance(node, dict) else {}
            if isinstance(node, dict):
                node[str(path[-1])] = value
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), base())
        suite = write(Path(tmp), {"name": "s", "scale": scale,
                                  "experiments": [{"path": "exp.yaml", "overrides": overrides}]}, "suite.yaml")
        try:
            load_suite(suite)
        except SpecError as exc:
            message = str(exc)
            assert "\n" not in message, message
            assert message.startswith((f"{suite}: ", f"{Path(tmp) / 'exp.yaml'}: ")), message


def test_a_spec_line_is_never_a_traceback_for_a_float_nan(tmp_path):
    doc = base()
    doc["workload"]["rate"] = math.nan
    with pytest.raises(SpecError, match=r"workload\.rate: nan is not valid; allowed: a number > 0 and <= 100000$"):
        load_experiment(write(tmp_path, doc))


def test_an_experiments_readme_documents_every_field():
    text = (ROOT / "experiments" / "README.md").read_text()
    from chaos.faults.registry import FAULTS
    from chaos.spec import (
        ARM_SETTINGS,
        FAULT_FIELDS,
        JOB_FIELDS,
        PROBE_FIELDS,
        TARGET_FIELDS,
        TOP_FIELDS,
        WORKLOAD_FIELDS,
    )

    for name in (*TOP_FIELDS, *WORKLOAD_FIELDS, *JOB_FIELDS, *FAULT_FIELDS, *PROBE_FIELDS, *ARM_SETTINGS,
                 *TARGET_FIELDS, "expect", "note", "within", "healthy_samples", "lag_below", "trend", "during",
                 "warmup", "threshold", "max_rows_per_key", "max_rows", "expected", "forbidden", "overrides"):
        assert f"`{name}`" in text, name
    for fault in FAULTS.values():
        assert f"`{fault.name}`" in text, fault.name
        for param in fault.params:
            assert f"`{param}`" in text, (fault.name, param)
    for name, declared in TARGET_PARAMS.items():
        assert f"`{name}`" in text, name
        for param in declared.params:
            assert f"`{param}`" in text, (name, param)


def _with_s3_latency(at: str, duration: str) -> dict:
    """The base spec with a second fault: latency on s3 (the hardened recovery grouped: the faults come closer than
    its window)."""
    doc = base()
    doc["arms"]["hardened"]["targets"]["recovery"]["grouped"] = True
    doc["faults"].append({"fault": "network.latency", "target": "s3", "at": at, "duration": duration,
                          "params": {"latency": "100ms"}})
    return doc


def test_an_arm_may_run_a_subset_of_the_faults(tmp_path):
    doc = _with_s3_latency("8s", "2s")
    doc["arms"]["naive"]["faults"] = [0]
    spec = load_experiment(write(tmp_path, doc))
    assert spec.arm("naive").faults == (0,) and spec.arm("hardened").faults is None
    assert ExperimentSpec.from_dict(spec.to_dict()) == spec
    for bad, message in (([2], "arms.naive.faults.0: 2 is not valid; allowed: an integer >= 0 and <= 1"),
                         ([], "arms.naive.faults: [] is not a non-empty list"),
                         ([1, 0], "arms.naive.faults: [1, 0] names a fault twice or out of order")):
        doc["arms"]["naive"]["faults"] = bad
        with pytest.raises(SpecError) as error:
            load_experiment(write(tmp_path, doc))
        assert message in str(error.value)


def test_an_arm_with_a_subset_of_the_faults_injects_only_as_long_as_they_need(tmp_path):
    doc = _with_s3_latency("2s", "3s")
    doc["arms"]["naive"]["faults"] = [1]
    spec = load_experiment(write(tmp_path, doc))
    assert spec.phases_of("hardened") == spec.phases
    naive = spec.phases_of("naive")
    assert (naive.steady, naive.inject, naive.recover) == (spec.phases.steady, 5.0, spec.phases.recover)


def test_overlapping_copies_of_a_fault_may_run_in_different_arms(tmp_path):
    doc = base()
    doc["faults"].append({"fault": "network.down", "target": "kafka", "at": "3s", "duration": "5s"})
    doc["arms"]["hardened"]["faults"] = [0]
    doc["arms"]["naive"]["faults"] = [1]
    spec = load_experiment(write(tmp_path, doc))
    assert (spec.arm("hardened").faults, spec.arm("naive").faults) == ((0,), (1,))
    doc["arms"]["naive"]["faults"] = [0, 1]
    with pytest.raises(SpecError, match=r"faults.1: overlaps faults.0 \(network.down on kafka\) in arm naive"):
        load_experiment(write(tmp_path, doc))


def test_a_log_signature_may_require_a_count(tmp_path):
    doc = base()
    doc["arms"]["naive"]["targets"] = {"logs": {"expected": ["could not be established"], "min_matches": 40}}
    spec = load_experiment(write(tmp_path, doc))
    assert spec.arm("naive").targets.logs.min_matches == 40
    assert ExperimentSpec.from_dict(spec.to_dict()) == spec
    doc["arms"]["naive"]["targets"] = {"logs": {"forbidden": ["x"], "min_matches": 2}}
    with pytest.raises(SpecError, match="arms.naive.targets.logs.min_matches: applies to expected signatures"):
        load_experiment(write(tmp_path, doc))


def test_a_suite_entry_may_run_some_of_the_arms(tmp_path):
    loaded = load_suite(_suite(tmp_path, [{"path": "exp.yaml", "arms": ["hardened"]}]))
    assert [arm.profile for arm in loaded.entries[0].spec.arms] == ["hardened"]


def test_a_suite_entry_keeps_its_own_scale_and_a_suite_repeats(tmp_path):
    long_recover = {"phases": {"recover": "40s"}}  # the recovery bound (5 s) must fit at every scale used here
    suite = _suite(tmp_path, [{"path": "exp.yaml", "overrides": long_recover},
                              {"path": "exp.yaml", "scale": 1.0, "overrides": {"name": "long", **long_recover}}],
                   scale=0.5, repeat=3)
    loaded = load_suite(suite)
    assert loaded.repeat == 3
    assert [e.spec.scale for e in loaded.entries] == [0.5, 1.0]
    rescaled = load_suite(suite, scale=0.25)  # --scale replaces the suite's, not an entry's own
    assert [e.spec.scale for e in rescaled.entries] == [0.25, 1.0]
    with pytest.raises(SpecError, match="repeat: 0 is not valid"):
        load_suite(_suite(tmp_path, [{"path": "exp.yaml"}], repeat=0))


def test_an_override_key_with_a_bang_replaces_the_mapping_instead_of_merging(tmp_path):
    merged = load_suite(_suite(tmp_path, [{"path": "exp.yaml", "overrides": {
        "arms": {"naive": {"targets": {"lost": 0}}}}}])).entries[0].spec.arm("naive").targets
    assert merged.logs is not None and merged.lost == 0  # merged: the experiment's logs target stays
    replaced = load_suite(_suite(tmp_path, [{"path": "exp.yaml", "overrides": {
        "arms": {"naive": {"targets!": {"lost": 0}}}}}])).entries[0].spec.arm("naive").targets
    assert replaced.logs is None and replaced.lost == 0
    with pytest.raises(SpecError, match=r"experiments\.0\.overrides\.arms\.naive\.targets\.lost: -1 is not valid"):
        load_suite(_suite(tmp_path, [{"path": "exp.yaml",
                                      "overrides": {"arms": {"naive": {"targets!": {"lost": -1}}}}}]))


def test_a_lag_bound_in_seconds_of_input_is_records_at_the_workloads_rate(tmp_path):
    import json

    doc = base()
    doc["arms"]["hardened"]["targets"]["recovery"]["lag_below"] = "4s"
    spec = load_experiment(write(tmp_path, doc))
    recovery = spec.arm("hardened").targets.recovery
    assert (recovery.lag_below, recovery.lag_below_s) == (4 * spec.workload.rate, 4.0)
    assert ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    doc["arms"]["hardened"]["targets"]["recovery"]["lag_below"] = "soon"
    with pytest.raises(SpecError, match="recovery.lag_below: 'soon' is not a duration"):
        load_experiment(write(tmp_path, doc))


# -- every number bounded (issue 18): absurd values are refused as a class, not case by case ------------------------
ABSURD = 99999999999999999999999


def _numeric_leaves(node: object, path: tuple = ()):
    """Every number and every duration string in a YAML document, as (path, value)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numeric_leaves(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _numeric_leaves(value, path + (index,))
    elif isinstance(node, (int, float)) and not isinstance(node, bool) or isinstance(node, str) and \
            node[:1].isdigit() and node.rstrip("hms").replace(".", "").isdigit():
        yield path, node


def _replaced(doc: object, path: tuple, value: object) -> object:
    doc = copy.deepcopy(doc)
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return doc


SOURCES = [*EXPERIMENTS, *sorted((ROOT / "experiments" / "suites").glob("*.yaml"))]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_number_of_every_spec_and_suite_is_bounded(tmp_path, source):
    """Each number (and duration) in a checked-in experiment or suite, replaced by an absurd one, is refused in
    one line naming the field: nothing past what this machine can do reaches a stack."""
    suite = source.parent.name == "suites"
    original = yaml.safe_load(source.read_text())
    wrong = []
    cases = [(path, absurd) for path, value in _numeric_leaves(original)
             for absurd in ([ABSURD, -ABSURD] if not isinstance(value, str) else ["99999999h"])]
    assert cases
    for path, absurd in cases:
        doc = _replaced(original, path, absurd)
        if suite:  # the suite's entries point at the real experiments
            for entry in doc["experiments"]:
                entry["path"] = str((source.parent / entry["path"]).resolve())
        target = write(tmp_path, doc, source.name)
        field = next(str(p) for p in reversed(path) if not isinstance(p, int))
        try:
            (load_suite if suite else load_experiment)(target)
            wrong.append(f"{path}={absurd}: accepted")
        except SpecError as exc:
            message = str(exc)
            if "\n" in message or "; allowed: " not in message or field not in message:
                wrong.append(f"{path}={absurd}: {message}")
    assert not wrong, wrong


def test_a_long_experiment_name_is_a_spec_error(tmp_path):
    doc = base()
    doc["name"] = "a" * 300
    with pytest.raises(SpecError, match=r"name: 'a+\.\.\. is not a valid name; allowed: .*at most 64 characters$"):
        load_experiment(write(tmp_path, doc))
    doc["name"] = "a" * 64
    assert load_experiment(write(tmp_path, doc)).name == "a" * 64


def test_a_suite_name_is_a_name(tmp_path):
    write(tmp_path, base())
    for bad in ("a" * 65, "Night ly", "../x"):
        suite = write(tmp_path, {"name": bad, "experiments": [{"path": "exp.yaml"}]}, "suite.yaml")
        with pytest.raises(SpecError, match=r"suite\.yaml: name: .* is not a valid name; allowed: lowercase"):
            load_suite(suite)


# -- a stored spec.json runs again (issue 18) ---------------------------------------------------------------------
@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_a_stored_spec_json_loads_as_the_spec_that_ran(tmp_path, path):
    """load -> store (as chaos/run.py writes spec.json) -> load gives the same spec, through load_experiment, the
    path `chaos run FILE` and `chaos rerun` take (it used to say "source: unknown field")."""
    spec = load_experiment(path)
    stored = tmp_path / "spec.json"
    stored.write_text(json.dumps(spec.to_dict(), indent=2) + "\n")
    again = load_experiment(stored)
    assert again == spec
    stored.write_text(json.dumps(again.to_dict(), indent=2) + "\n")
    assert load_experiment(stored) == spec
    with pytest.raises(SpecError, match=r"spec\.json: scale: a stored spec\.json is already scaled"):
        load_experiment(stored, 0.5)


@pytest.mark.parametrize("mangle, fragment", [
    (lambda d: d["workload"].update(keys=ABSURD), "workload.keys: 99999999999999999999999 is not valid"),
    (lambda d: d.update(seed=-1), "seed: -1 is not valid"),
    (lambda d: d["phases"].update(steady=1e12), "phases.steady: 1000000000000.0 is not valid"),
    (lambda d: d.update(name="x" * 100), "name: 'xxxx"),
    (lambda d: d["faults"][0].update(fault="network.nope"), "faults.0.fault: unknown fault 'network.nope'"),
    (lambda d: d.update(scale=1000), "scale: 1000 is not valid"),
])
def test_a_stored_spec_json_is_held_to_the_same_bounds(tmp_path, mangle, fragment):
    stored = load_experiment(write(tmp_path, base())).to_dict()
    mangle(stored)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(stored))
    with pytest.raises(SpecError) as caught:
        load_experiment(path)
    assert str(caught.value).startswith(f"{path}: ") and fragment in str(caught.value) and "\n" not in str(caught.value)


def test_a_stored_spec_json_that_is_not_json_is_one_line(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text("{not json")
    with pytest.raises(SpecError, match=r"spec\.json: \(document\): not JSON \("):
        load_experiment(path)


def test_a_triggered_kill_may_keep_its_server_lost_until_the_heal(tmp_path):
    # the broker dies as a batch's offsets are stored (its next offset request meets the dead leader) and stays down
    # for the window, where `restart: at_once` would bring it back at once
    doc = base()
    doc["topology"] = "cluster"
    doc["arms"]["hardened"]["targets"]["recovery"]["grouped"] = True  # the kill comes 1 s after the outage heals
    doc["faults"].append({"fault": "process.kill", "target": "broker", "at": "6s", "duration": "10s",
                          "params": {"broker": "leader", "restart": "at_heal"}, "on": {"event": "offsets_written"}})
    spec = load_experiment(write(tmp_path, doc))
    assert spec.faults[1].params["restart"] == "at_heal" and spec.faults[1].on is not None


def test_a_compact_schedule_needs_its_faults_one_after_another_and_no_workload_shaping(tmp_path):
    doc = _with_s3_latency("6s", "3s")
    doc["schedule"] = "compact"
    spec = load_experiment(write(tmp_path, doc))
    assert spec.schedule == "compact" and load_experiment(write(tmp_path, base())).schedule == "fixed"
    assert ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    doc["faults"][1]["at"] = "4s"  # the first window runs 0-5 s
    with pytest.raises(SpecError, match=r"faults.1.at: starts at 4s, before faults.0 can have ended \(5s\), and "
                                        r"the schedule is compact \(arm hardened\)"):
        load_experiment(write(tmp_path, doc))
    doc["arms"]["naive"]["faults"] = doc["arms"]["hardened"]["faults"] = [1]  # one fault per arm: nothing to order
    assert load_experiment(write(tmp_path, doc)).schedule == "compact"
    doc = base()
    doc["schedule"] = "compact"
    doc["faults"] = [{"fault": "data.hot_key", "target": "workload", "at": "0s", "duration": "5s"}]
    with pytest.raises(SpecError, match="faults.0.fault: data.hot_key shapes the workload"):
        load_experiment(write(tmp_path, doc))
    doc["schedule"] = "sometimes"
    with pytest.raises(SpecError, match="schedule: 'sometimes' is not valid; allowed: fixed | compact"):
        load_experiment(write(tmp_path, doc))


def test_a_suite_names_its_own_lanes_within_bounds(tmp_path):
    assert load_suite(_suite(tmp_path, [{"path": "exp.yaml"}])).lanes == 1
    assert load_suite(_suite(tmp_path, [{"path": "exp.yaml"}], lanes=2)).lanes == 2
    for bad in (0, 5, "two", 1.5):
        with pytest.raises(SpecError, match=r"suite\.yaml: lanes: .* is not valid; allowed: an integer >= 1 and <= 4$"):
            load_suite(_suite(tmp_path, [{"path": "exp.yaml"}], lanes=bad))


def test_chaos_run_takes_the_suites_lanes_unless_the_command_line_says(monkeypatch):
    from chaos.commands import runs

    seen = []
    monkeypatch.setattr(runs, "_execute", lambda *args, **_kw: seen.append(args[8]) or 0)
    runs.run([], "smoke", None, "local", None, None, [])
    runs.run([], "smoke", None, "local", None, None, [], lanes=1)
    runs.run(["checkpoint-commit-budget"], None, None, "local", None, None, [])
    assert seen == [load_suite(ROOT / "experiments" / "suites" / "smoke.yaml").lanes, 1, 1]


def test_faults_an_arm_judges_alone_are_spaced_for_its_recovery(tmp_path):
    """Without `grouped`, each disruption is watched only until the next fault begins: a fault must begin at least
    within + healthy_samples (5 s + 3 samples here) after the one before it ends, and act no more often than that."""
    def load(second: dict, grouped: bool = False):
        doc = base()
        doc["phases"]["inject"] = "40s"
        doc["faults"].append(second)
        doc["arms"]["hardened"]["targets"]["recovery"]["grouped"] = grouped
        return load_experiment(write(tmp_path, doc))

    latency = {"fault": "network.latency", "target": "s3", "duration": "2s", "params": {"latency": "100ms"}}
    with pytest.raises(SpecError, match=r"faults.1.at: starts 7.9s after faults.0's window ends, sooner than "
                                        r"recovery's 8s, and arm hardened judges each disruption alone; allowed: "
                                        r"faults at least 8s apart \(recovery within 5s \+ 3 samples\), or grouped: "
                                        r"true in arms.hardened.targets.recovery"):
        load({**latency, "at": "12.9s"})
    assert load({**latency, "at": "13s"}).faults[1].at == 13.0
    assert load({**latency, "at": "6s"}, grouped=True).arm("hardened").targets.recovery.grouped
    # lasting faults that overlap act together: one disruption, at the last heal
    assert load({**latency, "at": "2s"}).faults[1].at == 2.0
    # a kill inside the outage counts from its heal; one that may land after the heal does not
    kill = {"fault": "process.kill", "target": "job-driver", "duration": "2s"}
    assert load({**kill, "at": "1s"}).faults[1].at == 1.0
    with pytest.raises(SpecError, match=r"faults.1.at: acts within faults.0's window, outside any lasting fault, "
                                        r"and arm hardened judges each disruption alone"):
        load({**kill, "at": "4s"})
    # a fault that acts more than once: at an interval at least the window, never on events
    with pytest.raises(SpecError, match=r"faults.1.params.interval: acts every 7s, sooner than recovery's 8s"):
        load({**kill, "at": "13s", "duration": "20s", "params": {"count": 2, "interval": "7s"}})
    assert load({**kill, "at": "13s", "duration": "20s", "params": {"count": 2, "interval": "8s"}}).faults[1]
    with pytest.raises(SpecError, match=r"faults.1.params.count: 2 firings on the job's events may come closer "
                                        r"than recovery's 8s, and arm hardened judges each alone"):
        load({**kill, "at": "13s", "duration": "20s", "params": {"count": 2}, "on": {"event": "first_batch"}})
    assert load({**kill, "at": "13s", "duration": "20s", "params": {"count": 2}, "on": {"event": "first_batch"}},
                grouped=True).faults[1].on is not None
    # a file damaged in place while the job runs disrupts nothing: what reloads it (an executor lost) is the disruption
    rot = {"fault": "checkpoint.corrupt", "duration": "2s", "params": {"kind": "sst", "method": "footer"}}
    with pytest.raises(SpecError, match=r"faults.1.at: starts 5s after faults.0's window ends"):
        load({**rot, "at": "10s"})
    assert load({**rot, "at": "10s", "params": {**rot["params"], "while_job": "running"}}).faults[1].at == 10.0
    with pytest.raises(SpecError, match=r"faults.1.params.while_job: running: a trigger's `on` kills the job"):
        load({**rot, "at": "13s", "params": {**rot["params"], "while_job": "running"},
              "on": {"event": "first_batch"}})
