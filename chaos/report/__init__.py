"""The reports of a run: index.html (a picture readable in a minute), junit.xml (for CI) and a trend page.

Everything is rebuilt from the run directory alone (docs/run-store.md): results.json for the verdicts, each arm's
history.jsonl for the timelines, spec.json for descriptions, logs/ for links. The HTML is one self-contained file:
plots are inline SVG rendered by matplotlib (no script, no network), so it opens from disk and from a CI artifact.
Every string that comes from a file is escaped; see docs/reports.md.

Modules: model (reading a run), facts (what was run, how to rerun it), plots, markup (what pages share), page
(index.html), junit, trend, cli.
Every name is re-exported here: `from chaos.report import write_report` keeps working.
"""
from .cli import (
    main_report,
)
from .facts import (
    flaky_lines,
    recovery,
    rerun_command,
    run_command,
    utc,
)
from .junit import (
    JUNIT_ERRORS,
    write_junit,
)
from .markup import (
    CSS,
)
from .model import (
    VERDICT_COLOURS,
    VERDICT_ORDER,
    Arm,
    FaultWindow,
    ReportError,
    Run,
    Timeline,
    load_run,
    load_timeline,
)
from .page import (
    DISCRIMINATION_COLOURS,
    MUTANT_COLOURS,
    NOT_DISCRIMINATING_LINE,
    discrimination_line,
    render_report,
    write_report,
)
from .plots import (
    FAULT_COLOURS,
    PANELS,
    Metric,
    Panel,
    plot_panel,
)
from .trend import (
    NOT_RECOVERED,
    TREND_METRICS,
    TrendMetric,
    TrendRow,
    arm_figures,
    collect_runs,
    find_regressions,
    render_trend,
    write_trend,
)

__all__ = [
    "Arm", "CSS", "DISCRIMINATION_COLOURS", "FAULT_COLOURS", "FaultWindow", "JUNIT_ERRORS", "MUTANT_COLOURS",
    "Metric", "NOT_DISCRIMINATING_LINE", "NOT_RECOVERED", "PANELS", "Panel", "ReportError", "Run",
    "TREND_METRICS", "Timeline", "TrendMetric", "TrendRow", "VERDICT_COLOURS", "VERDICT_ORDER", "arm_figures",
    "collect_runs", "discrimination_line", "find_regressions", "flaky_lines", "load_run", "load_timeline",
    "main_report", "plot_panel", "recovery", "render_report", "render_trend", "rerun_command", "run_command", "utc",
    "write_junit", "write_report", "write_trend",
]
