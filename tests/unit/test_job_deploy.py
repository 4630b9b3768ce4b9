"""The deployable job (issue 19, part 1): no harness code in it, options and their environment fallbacks, no secret
on a command line, and the archive spark-submit gets."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from job import spark as deploy

REPO = Path(__file__).resolve().parents[2]


def test_the_job_imports_nothing_from_the_harness():
    code = ("import json, sys, job, job.__main__, job.submit_main, job.package\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('infra', 'chaos', 'tests'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert json.loads(out) == []


def _parse(argv, environ=None):
    from job.__main__ import parse

    return parse(["--profile", "hardened", "--topic", "t", "--deployment", "d", *argv], environ=environ or {})


def test_options_make_the_deployment():
    settings, deployment = _parse(["--kafka-bootstrap-servers", "b1:9092,b2:9092", "--s3-endpoint",
                                   "https://s3.example:9000", "--s3-region", "eu-west-1", "--s3-path-style",
                                   "--storage-uri", "s3a://bucket/prefix", "--kafka-option",
                                   "security.protocol=SASL_SSL", "--kafka-option", "kafka.sasl.mechanism=PLAIN",
                                   "--spark-conf", "spark.master=spark://m:7077"])
    assert settings.progress_file == ""
    assert deployment.kafka_bootstrap_servers == "b1:9092,b2:9092"
    assert deployment.kafka_options == {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"}
    assert deployment.checkpoint_uri == "s3a://bucket/prefix/d/checkpoint"
    assert deployment.output_uri == "s3a://bucket/prefix/d/output"
    assert deployment.bucket == "bucket"
    assert deployment.s3.tls and deployment.s3.path_style and deployment.s3.host == "s3.example:9000"
    conf = deploy.session_conf("app", deployment.s3, deployment.spark_conf, s3a_options={"retry.limit": "2"},
                               spark_options={"spark.task.maxFailures": "2"})
    assert conf["spark.master"] == "spark://m:7077"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == deploy.DEFAULT_CREDENTIALS_PROVIDERS
    assert conf["spark.hadoop.fs.s3a.retry.limit"] == "2" and conf["spark.task.maxFailures"] == "2"
    assert not any("secret" in key or "access.key" in key for key in conf)


def test_the_environment_fills_in_what_options_leave_out():
    _, deployment = _parse([], environ={
        "JOB_KAFKA_BOOTSTRAP_SERVERS": "k:9092", "AWS_ENDPOINT_URL_S3": "http://minio:9000", "AWS_REGION": "r1",
        "JOB_S3_PATH_STYLE": "true", "JOB_CHECKPOINT_URI": "s3a://b/cp", "JOB_OUTPUT_URI": "s3a://b/out"})
    assert deployment.kafka_bootstrap_servers == "k:9092"
    assert deployment.s3 == deploy.S3Options(endpoint="http://minio:9000", region="r1", path_style=True, tls=False)
    assert (deployment.checkpoint_uri, deployment.output_uri) == ("s3a://b/cp", "s3a://b/out")
    # an option wins over the environment
    _, deployment = _parse(["--kafka-bootstrap-servers", "o:1", "--storage-uri", "s3a://c"],
                           environ={"JOB_KAFKA_BOOTSTRAP_SERVERS": "k:9092", "JOB_STORAGE_URI": "s3a://b"})
    assert deployment.kafka_bootstrap_servers == "o:1" and deployment.checkpoint_uri == "s3a://c/d/checkpoint"


@pytest.mark.parametrize("argv, message", [
    ([], "no Kafka"),
    (["--kafka-bootstrap-servers", "k:1"], "no storage"),
    (["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3://b"], "not an s3a://"),
    (["--kafka-bootstrap-servers", "k:1", "--checkpoint-uri", "s3a://a/c", "--output-uri", "s3a://b/o"], "one bucket"),
    (["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3a://b", "--s3-endpoint", "http://m", "--s3-tls"],
     "contradicts"),
    (["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3a://b", "--spark-conf",
      "spark.hadoop.fs.s3a.secret.key=x"], "carries a secret"),
    (["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3a://b", "--spark-conf",
      "spark.hadoop.fs.s3a.access.key=x"], "carries a secret"),
    (["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3a://b", "--kafka-option", "ssl.truststore.password=x"],
     "carries a secret"),
    (["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3a://b", "--kafka-option",
      'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'],
     "carries a secret"),
    (["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3a://b", "--kafka-option", "novalue"], "KEY=VALUE"),
])
def test_bad_deployment_options_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        _parse(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_secret_by_reference_is_accepted():
    _, deployment = _parse(["--kafka-bootstrap-servers", "k:1", "--storage-uri", "s3a://b",
                            "--kafka-option", "ssl.truststore.password=${env:TRUSTSTORE_PASSWORD}",
                            "--kafka-option", 'sasl.jaas.config=x required username="u" password="${env:KAFKA_PW}";'])
    assert deployment.kafka_options["kafka.ssl.truststore.password"] == "${env:TRUSTSTORE_PASSWORD}"


def test_the_harness_passes_the_stack_as_options_and_the_same_spark_settings(tmp_path):
    from infra.access import DriverSlot, StackInfo
    from infra.driver import job_args, spark_conf

    info = StackInfo(backend="local", run_dir=str(tmp_path), kafka_bootstrap="127.0.0.1:1",
                     kafka_internal_bootstrap="127.0.0.1:2", s3_endpoint="http://127.0.0.1:3",
                     s3_direct_endpoint="http://127.0.0.1:4", bucket="chaos", toxiproxy_api="",
                     spark_master="spark://127.0.0.1:5", spark_master_ui="", spark_jars=["/a.jar"], spark_home="/s",
                     driver=DriverSlot("127.0.0.1", "127.0.0.2", 6, 7), proxies={})
    own = ["--profile", "naive", "--topic", "t", "--deployment", "d", "--progress-file", "p",
           "--settings-json", json.dumps({"proxied_driver": False})]
    args = job_args(info, own)
    assert args[:len(own)] == own
    settings, deployment = _parse(args[6:], environ={})
    assert deployment.kafka_bootstrap_servers == "127.0.0.1:1"
    assert deployment.checkpoint_uri == "s3a://chaos/d/checkpoint" and deployment.output_uri == "s3a://chaos/d/output"
    assert deployment.s3.credentials_providers == deploy.ENV_CREDENTIALS_PROVIDER
    # what the job's session gets is what a harness driver gets, with this job's profile and driver ports
    assert deploy.session_conf("app", deployment.s3, deployment.spark_conf) == spark_conf(
        info, "app", proxied_driver=False, profile="naive")
    assert deployment.spark_conf["spark.driver.port"] == "0"


def test_the_package_holds_the_job_and_its_main_file(tmp_path):
    from job.package import build

    archive, main = build(tmp_path)
    names = zipfile.ZipFile(archive).namelist()
    assert {"job/__init__.py", "job/__main__.py", "job/spark.py", "job/settings.py"} <= set(names)
    assert all(name.startswith("job/") for name in names)
    assert "from job.__main__ import main" in main.read_text()
    assert build(tmp_path)[0].read_bytes() == archive.read_bytes()  # reproducible
