"""What a run may leave behind: processes and listening ports. Shared by the integration tests."""
from __future__ import annotations

import os
from pathlib import Path


def pids_of(run_dir: Path) -> list[int]:
    """Processes whose command line or environment mentions the run directory."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if str(run_dir).encode() in cmdline or str(run_dir).encode() in environ:
            found.append(int(entry))
    return found


def ports_of(info: dict) -> list[tuple[str, int]]:
    addresses = [info["kafka_bootstrap"], info["kafka_internal_bootstrap"],
                 info["s3_endpoint"].removeprefix("http://"), info["s3_direct_endpoint"].removeprefix("http://"),
                 info["toxiproxy_api"].removeprefix("http://"), info["spark_master"].removeprefix("spark://"),
                 info["spark_master_ui"].removeprefix("http://")]
    addresses += [p["listen"] for p in info["proxies"].values()] + [p["upstream"] for p in info["proxies"].values()]
    if info.get("s3proxy_api"):  # the S3 fault proxy's API (its S3 listener is the `s3` proxy's upstream)
        addresses.append(info["s3proxy_api"].removeprefix("http://"))
    return [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in addresses]
