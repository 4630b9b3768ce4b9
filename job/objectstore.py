"""The job's own S3 access for its bookkeeping (lease, integrity manifests, rollback), beside Spark's s3a.

It goes through the same endpoint as Spark (the stack's `s3` proxy), so a fault on S3 hits the bookkeeping
exactly as it hits checkpoints. Conditional writes are what make the lease safe: MinIO honours
`If-None-Match: *` (create only if absent) and `If-Match: <etag>` (replace only if unchanged) on PutObject,
and answers 412 PreconditionFailed otherwise. It does *not* honour If-Match on DeleteObject (measured: the
object is deleted whatever the ETag), so nothing here deletes conditionally.

minio-py 7.2's public put_object cannot send those headers; `_put_object` (the same request, with headers)
can. The pin in requirements.lock keeps that private method stable, and tests/integration exercise it.
"""
from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass


class PreconditionFailed(Exception):
    """A conditional write lost: the object exists (create-only) or changed (replace-if-unchanged)."""


class Missing(Exception):
    """The object does not exist."""


@dataclass(frozen=True)
class Listed:
    key: str
    size: int
    etag: str


def _etag(value: str | None) -> str:
    return (value or "").strip('"')


class ObjectStore:
    """Objects under one bucket. Keys are full keys inside the bucket (no leading slash)."""

    def __init__(self, client, bucket: str):
        self.client = client
        self.bucket = bucket

    @classmethod
    def connect(cls, endpoint: str, access_key: str, secret_key: str, bucket: str,
                timeout_s: float = 10.0) -> ObjectStore:
        """With explicit keys (tests); the job uses from_providers."""
        from minio.credentials.providers import StaticProvider

        return cls._client(endpoint.removeprefix("http://"), bucket, StaticProvider(access_key, secret_key),
                           secure=False, region=None, timeout_s=timeout_s)

    @classmethod
    def from_providers(cls, host: str, bucket: str, secure: bool = True, region: str | None = None,
                       timeout_s: float = 10.0) -> ObjectStore:
        """Credentials from the standard places, as S3A's default providers in job/spark.py take them: the
        environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN), then the shared credentials
        file (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE)."""
        from minio.credentials.providers import AWSConfigProvider, ChainedProvider, EnvAWSProvider

        return cls._client(host, bucket, ChainedProvider([EnvAWSProvider(), AWSConfigProvider()]), secure=secure,
                           region=region, timeout_s=timeout_s)

    @classmethod
    def _client(cls, host: str, bucket: str, credentials, secure: bool, region: str | None,
                timeout_s: float) -> ObjectStore:
        import urllib3
        from minio import Minio

        # Bounded waits and a few quick retries: a lease renewal must fail in seconds, not hang on a slow proxy.
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s),
                                   retries=urllib3.Retry(total=2, backoff_factor=0.2,
                                                         status_forcelist=(500, 502, 503, 504)))
        client = Minio(host, credentials=credentials, secure=secure, region=region, http_client=http)
        return cls(client, bucket)

    # -- reads ----------------------------------------------------------------------------------------------
    def get(self, key: str) -> tuple[bytes, str]:
        """(content, etag); Missing if there is no such object."""
        data, etag, _headers = self._read(key)
        return data, etag

    def get_aged(self, key: str) -> tuple[bytes, str, float | None]:
        """(content, etag, age in seconds): the age by S3's own clock, its answer's Date less the object's
        Last-Modified (both whole seconds, so within a second), and so independent of this host's clock; None when
        the answer lacks either header."""
        from email.utils import parsedate_to_datetime

        data, etag, headers = self._read(key)
        try:
            age: float | None = (parsedate_to_datetime(headers["Date"])
                                 - parsedate_to_datetime(headers["Last-Modified"])).total_seconds()
        except (KeyError, TypeError, ValueError):
            age = None
        return data, etag, age

    def _read(self, key: str) -> tuple[bytes, str, Mapping[str, str]]:
        """(content, etag, the answer's headers); Missing if there is no such object."""
        from minio.error import S3Error

        try:
            response = self.client.get_object(self.bucket, key)
        except S3Error as error:
            if error.code in ("NoSuchKey", "NoSuchObject"):
                raise Missing(key) from None
            raise
        try:
            return response.read(), _etag(response.headers.get("ETag")), response.headers
        finally:
            response.close()
            response.release_conn()

    def list(self, prefix: str, markers: bool = False) -> Iterator[Listed]:
        """Objects under `prefix`; with `markers`, also the empty "directory/" objects Hadoop's s3a writes."""
        for obj in self.client.list_objects(self.bucket, prefix=prefix, recursive=True):
            if obj.is_dir and not markers:
                continue
            yield Listed(obj.object_name, obj.size or 0, _etag(obj.etag))

    # -- writes ---------------------------------------------------------------------------------------------
    def put(self, key: str, data: bytes) -> str:
        result = self.client.put_object(self.bucket, key, io.BytesIO(data), len(data))
        return _etag(result.etag)

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self._conditional_put(key, data, {"If-None-Match": "*"})

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self._conditional_put(key, data, {"If-Match": f'"{etag}"'})

    def _conditional_put(self, key: str, data: bytes, headers: dict[str, str]) -> str:
        from minio.error import S3Error

        try:
            result = self.client._put_object(self.bucket, key, data, headers=headers)
        except S3Error as error:
            if error.code == "PreconditionFailed":
                raise PreconditionFailed(key) from None
            if error.code in ("NoSuchKey", "NoSuchObject"):  # If-Match on an object that is gone
                raise PreconditionFailed(key) from None
            raise
        return _etag(result.etag)

    def delete(self, key: str) -> None:
        self.client.remove_object(self.bucket, key)

    def move(self, key: str, to_key: str) -> None:
        """Copy then delete (S3 has no rename): used to quarantine a damaged file rather than destroy it."""
        from minio.commonconfig import CopySource
        from minio.error import S3Error

        try:
            self.client.copy_object(self.bucket, to_key, CopySource(self.bucket, key))
        except S3Error as error:
            if error.code in ("NoSuchKey", "NoSuchObject"):
                raise Missing(key) from None
            raise
        self.client.remove_object(self.bucket, key)
