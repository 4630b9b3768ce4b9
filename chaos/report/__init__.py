"""The reports of a run: index.html (a picture readable in a minute), junit.xml (for CI) and a trend page.

Everything is rebuilt from the run directory alone (docs/run-store.md): results.json for the verdicts, each arm's
history.jsonl for the timelines, spec.json for descriptions, logs/ for links. The HTML is one self-contained file:
plots are inline SVG rendered by matplotlib (no script, no network), so it opens from disk and from a CI artifact.
Every string that comes from a file is escaped; see docs/reports.md.

Modules: model (reading a run), facts (what was run, how to rerun it), plots, markup (what pages share), page
(index.html), junit, trend, cli.
Re-exported here: the names other modules import through chaos.report (`write_report`, `write_junit`, `write_trend`,
`main_report`, `load_run`, ...); anything else is imported from its defining module (e.g. chaos.report.facts).
"""
from .cli import (
    main_report,
)
from .facts import (
    flaky_lines,
    rerun_command,
)
from .junit import (
    write_junit,
)
from .model import (
    Arm,
    load_run,
    load_timeline,
)
from .page import (
    render_report,
    write_report,
)
from .plots import (
    PANELS,
)
from .trend import (
    NOT_RECOVERED,
    arm_figures,
    collect_runs,
    find_regressions,
    write_trend,
)

__all__ = [
    "Arm", "NOT_RECOVERED", "PANELS", "arm_figures", "collect_runs", "find_regressions", "flaky_lines", "load_run",
    "load_timeline", "main_report", "render_report", "rerun_command", "write_junit", "write_report", "write_trend",
]
