"""A throwaway certificate authority for a stack that serves S3 over TLS (`chaos stack up --s3-tls`,
Stack(s3_tls=True)).

One CA per stack start, made with the `openssl` command line, signs one server certificate for 127.0.0.1 that MinIO
and the S3 fault proxy (infra/s3proxy/) serve. Clients trust the CA: Python's through a PEM bundle (ca.pem, also
SSL_CERT_FILE for the job's own S3 client), the JVMs (Spark's S3A in the driver and the executors) through a PKCS12
trust store made with the JDK's keytool. Nothing here is a secret worth keeping: the keys live in the run's stack
directory and die with it.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import InfraError

# A trust store holds public certificates only; its password guards nothing (the JDK's own cacerts uses this one).
TRUSTSTORE_PASSWORD = "changeit"
DAYS = 7


@dataclass(frozen=True)
class TlsFiles:
    directory: Path  # MinIO's --certs-dir: public.crt and private.key at its top

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def cert(self) -> Path:
        return self.directory / "public.crt"

    @property
    def key(self) -> Path:
        return self.directory / "private.key"

    @property
    def truststore(self) -> Path:
        return self.directory / "truststore.p12"

    def jvm_options(self) -> list[str]:
        """JVM options that make a JVM trust the CA (S3A's HTTP client uses the JVM's default trust)."""
        return [f"-Djavax.net.ssl.trustStore={self.truststore}", "-Djavax.net.ssl.trustStoreType=PKCS12",
                f"-Djavax.net.ssl.trustStorePassword={TRUSTSTORE_PASSWORD}"]


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"could not {what}: {exc}") from None
    if done.returncode != 0:
        raise InfraError(f"could not {what}: {argv[0]} exited {done.returncode}: {done.stderr.strip()[-300:]}")


def make_certificates(directory: Path, keytool: str | None = None) -> TlsFiles:
    """A CA, a certificate for 127.0.0.1 signed by it, and a trust store holding the CA, in `directory`."""
    openssl = shutil.which("openssl")
    keytool = keytool or shutil.which("keytool")
    if openssl is None or keytool is None:
        raise InfraError("TLS on S3 needs openssl and the JDK's keytool on PATH; install them (Debian: openssl, "
                         "openjdk-17-jdk-headless)")
    directory.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(directory)
    ca_key, csr, extensions = directory / "ca.key", directory / "server.csr", directory / "server.ext"
    _run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", str(DAYS), "-subj", "/CN=chaos-suite CA",
          "-keyout", str(ca_key), "-out", str(files.ca), "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign"], "make the stack's CA")
    _run([openssl, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(files.key),
          "-out", str(csr)], "make the S3 server's key")
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
                          "basicConstraints=CA:FALSE\n")
    _run([openssl, "x509", "-req", "-in", str(csr), "-CA", str(files.ca), "-CAkey", str(ca_key), "-CAcreateserial",
          "-days", str(DAYS), "-out", str(files.cert), "-extfile", str(extensions)], "sign the S3 server's certificate")
    files.truststore.unlink(missing_ok=True)
    _run([keytool, "-importcert", "-noprompt", "-alias", "chaos-suite-ca", "-file", str(files.ca), "-keystore",
          str(files.truststore), "-storetype", "PKCS12", "-storepass", TRUSTSTORE_PASSWORD],
         "make the JVMs' trust store")
    return files
