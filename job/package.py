"""`python -m job.package [--out DIR]`: build what spark-submit needs to run the job (docs/job.md).

    DIR/job.zip       the `job` package, for --py-files (the driver and the executors import it)
    DIR/job_main.py   the main file (job/submit_main.py)

The archive holds the job's own code only. Its Python dependencies come from the cluster's Python: pyspark
(Spark's own), on the driver also minio (the lease and integrity manifests), and pandas/pyarrow where the naive
profile runs (transformWithStateInPandas).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
ARCHIVE = "job.zip"
MAIN = "job_main.py"


def build(out: Path) -> tuple[Path, Path]:
    """Write DIR/job.zip and DIR/job_main.py; their paths. Reproducible: sorted entries, fixed timestamps."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / ARCHIVE
    temporary = archive.with_suffix(".zip.tmp")
    with zipfile.ZipFile(temporary, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        for source in sorted(PACKAGE_DIR.glob("*.py")):
            entry = zipfile.ZipInfo(f"job/{source.name}", date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            zipped.writestr(entry, source.read_bytes())
    temporary.replace(archive)
    main = out / MAIN
    shutil.copyfile(PACKAGE_DIR / "submit_main.py", main)
    return archive, main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m job.package", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("dist"), help="directory to write into (default: dist)")
    archive, main_file = build(parser.parse_args(argv).out)
    print(f"{archive}\n{main_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
