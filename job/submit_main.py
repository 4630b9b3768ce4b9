"""The main file for spark-submit: `spark-submit --py-files job.zip job_main.py OPTIONS` (docs/job.md).

spark-submit runs a file, not a module; this file only hands over to `job.__main__`, which comes from the
archive given with --py-files (`python -m job.package` builds both).
"""
import sys

from job.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
