"""The system under test: a PySpark Structured Streaming sessionization job, kept apart from the harness.

It reads events from Kafka, groups them per key into sessions, and writes every closed session exactly
once to MinIO. Two profiles: `hardened` (what the incidents teach) and `naive` (what the incident jobs
did). See docs/job.md.
"""
