"""index.html of one run: the picture an on-call engineer reads in a minute (docs/reports.md)."""
from __future__ import annotations

from pathlib import Path

from ..state_held import describe, peak_state, size
from . import facts
from .markup import _badge, _count, _duration, _e, _link, _page
from .model import VERDICT_COLOURS, Arm, Run, Timeline, _anchor, _number, _verdict, _write_atomic, load_run
from .plots import LEGACY_STATE_BYTES, PANELS, _fault_colour, plot_panel, thresholds


def _check_line(check: dict) -> str:
    verdict = _verdict(check.get("verdict"))
    return (f'<div class="check" title="{_e(check.get("message"))}">{_badge(verdict)} '
            f'{_e(check.get("name"))}: <span class="exp">expected</span> {_e(check.get("expected"))} '
            f'<span class="exp">measured</span> {_e(check.get("measured"))}</div>')


def _checks_cell(arm: dict) -> str:
    """The checks that did not pass, in the open; the passed ones folded away (<details>)."""
    checks = [c for c in arm.get("checks") or [] if isinstance(c, dict)]
    if not checks:
        return '<span class="small">no checks</span>'
    failing = facts.failing_checks(arm)
    passed = [c for c in checks if c.get("verdict") == "PASSED"]
    parts = [_check_line(c) for c in failing]
    if arm.get("interrupted"):
        parts.insert(0, f'<div class="small">interrupted: {_e(arm["interrupted"])}</div>')
    if passed:
        parts.append(f'<details class="passed"><summary>{len(passed)} passed check{"s" if len(passed) != 1 else ""}'
                     f"</summary>{''.join(_check_line(c) for c in passed)}</details>")
    waived = arm.get("waived")
    if isinstance(waived, dict):  # invariants the spec waives: not judged, and why
        parts += [f'<div class="small">waived {_e(name)}: {_e(reason)}</div>' for name, reason in waived.items()]
    return "".join(parts)


def _recovery_cell(data: dict, tag: str = "td") -> str:
    """Recovery time; "not recovered" in red (class not-recovered), distinct from "–" (nothing to recover from)."""
    text, not_recovered = facts.recovery(data)
    if not_recovered:
        return f'<{tag} class="num not-recovered" title="the recovery check failed: {_e(_recovery_message(data))}">' \
               f"{_e(text)}</{tag}>"
    return f'<{tag} class="num">{_e(text)}</{tag}>'


def _recovery_message(data: dict) -> str:
    return next((str(c.get("message") or "") for c in data.get("checks") or []
                 if isinstance(c, dict) and c.get("name") == "recovery"), "")


def _failures_block(run: Run) -> str:
    """The top of the page: each arm that did not pass, with its failing checks and their messages; then the
    discriminations a suite requires that failed. "Every arm passed" when there is nothing to show."""
    mutation = run.results.get("mutation")
    if isinstance(mutation, dict):
        return _mutation_failures(mutation)
    items = []
    for experiment in run.experiments:
        name = str(experiment.get("name", "?"))
        for arm in run.arms.get(name, []):
            if arm.verdict == "PASSED":
                continue
            if arm.skipped is not None:
                items.append(f'<li class="failing-arm skipped-arm" data-arm="{_e(arm.anchor)}">{_badge(arm.verdict)} '
                             f'<a href="#{_e(arm.anchor)}">{_e(name)} / {_e(arm.profile)}</a>: not run, '
                             f'<span class="skipped">{_e(arm.skipped)}</span></li>')
                continue
            checks = "".join(
                f'<li class="failing-check" data-check="{_e(c.get("name"))}">{_badge(_verdict(c.get("verdict")))} '
                f'<strong>{_e(c.get("name"))}</strong>: expected {_e(c.get("expected"))}, measured '
                f'<strong>{_e(c.get("measured"))}</strong><div class="msg">{_e(c.get("message"))}</div></li>'
                for c in facts.failing_checks(arm.data))
            errors = "".join(f'<li class="err">environment error: {_e(e.get("message"))}</li>'
                             for e in arm.timeline.errors if not checks)
            body = checks + errors or f'<li class="small">{_e(arm.verdict)} with no failing check recorded</li>'
            items.append(f'<li class="failing-arm" data-arm="{_e(arm.anchor)}">{_badge(arm.verdict)} '
                         f'<a href="#{_e(arm.anchor)}">{_e(name)} / {_e(arm.profile)}</a>'
                         f"<ul>{body}</ul></li>")
        discrimination = _discrimination(experiment)
        if discrimination is not None and discrimination.get("verdict") == "FAILED":
            items.append(f'<li class="failing-arm" data-arm="{_e(_anchor(name))}">{_badge("FAILED")} '
                         f'<a href="#{_e(_anchor(name))}">{_e(name)}</a>: '
                         f'<span class="disc disc-not_discriminating">{_e(discrimination_line(discrimination))}'
                         "</span></li>")
    if run.results.get("error"):
        items.append(f'<li class="err">{_e(run.results["error"])}</li>')
    if run.status not in ("completed", "?"):  # interrupted, error, or still running (or killed) when judged
        items.append(f'<li class="err run-status">the run did not complete: status {_e(run.status)}'
                     f'{" (killed; cleaned up by chaos clean)" if run.meta.get("killed") else ""}</li>')
    if not items:
        return ('<section id="failures" class="failures none"><h2>failures</h2>'
                f'<p>none: {"every arm passed" if run.experiments else "no experiment in this run"}</p></section>')
    count = sum(1 for experiment in run.experiments for arm in run.arms.get(str(experiment.get("name", "?")), [])
                if arm.verdict != "PASSED")
    return (f'<section id="failures" class="failures"><h2>failures first: {count} arm{"s" if count != 1 else ""} '
            f'did not pass</h2><ul>{"".join(items)}</ul></section>')


def _mutation_failures(mutation: dict) -> str:
    """A mutate run fails by its mutants, not its arms (a failed arm there is a killed mutant: good): the mutants
    that survived (a switch off and every check still passed) or could not be judged."""
    cells = [c for c in mutation.get("cells") or [] if isinstance(c, dict) and c.get("status") != "killed"]
    if not cells:
        return ('<section id="failures" class="failures none"><h2>failures</h2><p>none: every mutant was killed'
                "</p></section>")
    items = "".join(f'<li class="failing-arm" data-arm="{_e(_anchor(str(c.get("experiment"))))}">'
                    f'<span class="v" style="background:{MUTANT_COLOURS.get(str(c.get("status")), "#6e7781")}">'
                    f'{_e(str(c.get("status")).upper())}</span> {_e(c.get("experiment"))} without '
                    f'<strong>{_e(c.get("switch"))}</strong><div class="msg">{_e(c.get("why"))}</div></li>'
                    for c in cells)
    return (f'<section id="failures" class="failures"><h2>failures first: {len(cells)} mutant'
            f'{"s" if len(cells) != 1 else ""} not killed</h2><ul>{items}</ul></section>')


def _flaky_block(run: Run) -> str:
    """Pre-release runs repeat the suite: arms whose verdicts differ between repeats are flaky."""
    entries = facts.flaky(run)
    repeat = run.meta.get("repeat")
    if not entries:
        return (f'<p class="small" id="flaky">flaky: none (the suite ran {_e(repeat)} times; every arm gave the same '
                "verdict each time)</p>" if isinstance(repeat, int) and repeat > 1 else "")
    items = "".join(f'<li class="flaky-arm">{_e(facts.flaky_line(e))}</li>' for e in entries)
    return (f'<section id="flaky" class="flaky"><h2>flaky: {len(entries)} arm{"s" if len(entries) != 1 else ""} '
            f"whose verdicts differ between repeats</h2><ul>{items}</ul></section>")


def _run_facts(run: Run) -> str:
    rows = "".join(f'<tr data-fact="{_e(k)}"><th>{_e(k)}</th><td>'
                   + (f"<code>{_e(v)}</code>" if k in ("rerun", "command", "commit") else _e(v)) + "</td></tr>"
                   for k, v in facts.run_properties(run))
    return f'<details class="run-facts" open><summary>run</summary><table class="facts">{rows}</table></details>'


def _survived_note(arm: dict) -> str | None:
    """The checkers' `control` check of a control expected to survive says "control survived too: <note>"."""
    for check in arm.get("checks") or []:
        message = str(check.get("message") or "")
        if check.get("name") == "control" and message.startswith("control survived too"):
            return message
    return None


def _did_not_survive(arm: dict) -> str | None:
    """The failed `control` check of a control that was expected to survive (expected "survives"): its message."""
    for check in arm.get("checks") or []:
        if isinstance(check, dict) and check.get("name") == "control" and check.get("expected") == "survives" \
                and check.get("verdict") == "FAILED":
            return str(check.get("message") or "the control was expected to survive but failed")
    return None


def _signature_cell(arm: dict) -> str:
    signature = arm.get("signature")
    if arm.get("role") == "control":
        if signature:
            return f"control reproduced: <code>{_e(signature)}</code>"
        survived = _survived_note(arm)
        if survived and arm.get("verdict") == "PASSED":
            return f'<span class="small">{_e(survived)}</span>'
        failed = _did_not_survive(arm)
        if failed:  # not an incident to reproduce: the control was expected to survive, and did not
            return f'<span class="err" title="{_e(failed)}">control did not survive (it was expected to)</span>'
        return '<span class="err">control did not reproduce the incident</span>'
    return f"<code>{_e(signature)}</code>" if signature else ""


def _skipped(arm: Arm) -> str:
    return f'<span class="skipped">skipped: {_e(arm.skipped)}</span>'


def _summary_table(run: Run) -> str:
    rows = []
    for experiment in run.experiments:
        name = str(experiment.get("name", "?"))
        for arm in run.arms.get(name, []):
            data = arm.data
            role = f' <span class="small">({_e(data.get("role"))})</span>' if data.get("role") else ""
            rows.append(
                f'<tr><td><a href="#{_e(_anchor(name))}">{_e(name)}</a></td>'
                f'<td><a href="#{_e(arm.anchor)}">{_e(arm.profile)}</a>{role}</td>'
                f"<td>{_badge(arm.verdict)}</td><td>{_checks_cell(data) if arm.skipped is None else _skipped(arm)}</td>"
                f"{_recovery_cell(data)}"
                f'<td class="num">{_count(data.get("lost"))}</td><td class="num">{_count(data.get("duplicated"))}</td>'
                f"<td>{_signature_cell(data)}</td></tr>")
    if not rows:
        return '<p class="small">This run has no experiments (a smoke or bench run); see results.json.</p>'
    return ('<table class="summary"><thead><tr><th>experiment</th><th>arm</th><th>verdict</th>'
            "<th>checks (expected vs measured)</th><th>recovery</th><th>lost</th><th>duplicated</th>"
            f"<th>signature</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


# -- discrimination: the control judged by the hardened targets (chaos/checks/discrimination.py `discriminate`)
DISCRIMINATION_COLOURS = {"discriminating": "#1a7f37", "not_discriminating": "#cf222e", "inconclusive": "#9a6700",
                          "waived": "#6e7781", "not_run": "#6e7781"}
NOT_DISCRIMINATING_LINE = "NOT DISCRIMINATING: a job without the hardening passes every hardened target"


def _discrimination(experiment: dict) -> dict | None:
    value = experiment.get("discrimination")
    return value if isinstance(value, dict) and value.get("status") in DISCRIMINATION_COLOURS else None


def discrimination_line(discrimination: dict) -> str:
    """The one line an experiment shows (plain text): what a job without the hardening did against its targets."""
    status = discrimination.get("status")
    if status == "not_discriminating":
        return NOT_DISCRIMINATING_LINE + (" (required by this suite: the experiment fails)"
                                          if discrimination.get("verdict") == "FAILED"
                                          else " (reported only: this suite does not require discrimination)")
    if status == "inconclusive":
        return ("INCONCLUSIVE: " + str(discrimination.get("message") or "").removeprefix("inconclusive: ")
                + (" (required by this suite: the experiment fails)" if discrimination.get("verdict") == "FAILED"
                   else ""))
    return str(discrimination.get("message") or status)


def _discrimination_badge(status: str) -> str:
    return (f'<span class="v" style="background:{DISCRIMINATION_COLOURS.get(status, "#6e7781")}">'
            f"{_e(status.replace('_', ' '))}</span>")


def _discrimination_block(experiment: dict) -> str:
    discrimination = _discrimination(experiment)
    if discrimination is None:
        return ""
    status = str(discrimination["status"])
    checks = [c for c in discrimination.get("checks") or [] if isinstance(c, dict)]
    verdicts = " · ".join(f'<span title="{_e(c.get("message"))}">{_badge(_verdict(c.get("verdict")))} '
                          f'{_e(c.get("name"))}</span>' for c in checks)
    return (f'<p class="disc disc-{_e(status)}" data-status="{_e(status)}">{_e(discrimination_line(discrimination))}'
            "</p>" + (f'<p class="small">the hardened targets on the {_e(discrimination.get("control"))} '
                      f"control's data: {verdicts}</p>" if verdicts else ""))


def _discrimination_table(run: Run) -> str:
    rows = []
    for experiment in run.experiments:
        discrimination = _discrimination(experiment)
        if discrimination is None:
            continue
        name = str(experiment.get("name", "?"))
        status = str(discrimination["status"])
        rows.append(f'<tr><td><a href="#{_e(_anchor(name))}">{_e(name)}</a></td>'
                    f"<td>{_discrimination_badge(status)}</td>"
                    f'<td class="disc disc-{_e(status)}">{_e(discrimination_line(discrimination))}</td></tr>')
    if not rows:
        return ""
    return ('<h2>discrimination</h2><p class="small">Each control\'s history judged by its experiment\'s hardened '
            "targets: a job without the hardening must fail at least one.</p>"
            '<table class="discrimination"><thead><tr><th>experiment</th><th>status</th>'
            f"<th>a job without the hardening</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _fault_table(timeline: Timeline) -> str:
    if not timeline.faults:
        return '<p class="small">No fault was injected in this arm.</p>'
    rows = []
    for window in timeline.faults:
        params = ", ".join(f"{k}={v}" for k, v in window.params.items())
        end = (f"{window.end:.1f} s" + _wall(window.end_wall) if window.end is not None
               else '<span class="err">not healed</span>')
        length = f"{window.end - window.start:.1f} s" if window.end is not None else "–"
        rows.append(f'<tr><td><span class="swatch" style="background:{_fault_colour(window)}"></span>'
                    f"F{window.index}</td><td><code>{_e(window.name)}</code></td><td>{_e(window.target)}</td>"
                    f"<td><code>{_e(params)}</code></td><td class=\"num\">{window.start:.1f} s"
                    f"{_wall(window.start_wall)}</td>"
                    f'<td class="num">{end}</td><td class="num">{length}</td></tr>')
    return ('<table class="faults"><thead><tr><th></th><th>fault</th><th>target</th><th>params</th>'
            "<th>injected</th><th>healed</th><th>length</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _schedule_line(timeline: Timeline) -> str:
    """A compact schedule's steps (`schedule: compact`): which fault was done how long before its window's end, so
    the next window opened, or the inject phase ended, that much earlier than planned."""
    if not timeline.schedule:
        return ""
    steps, total = [], 0.0
    for record in timeline.schedule:
        saved = _number(record.get("saved_s")) or 0.0
        total = _number(record.get("total_saved_s")) or total + saved
        label = (f"{record['name']} on {record.get('target')}" if record.get("name")
                 else f"the spec's fault {record.get('fault')}")  # records before 2026-11-26 name only the index
        steps.append(f"{label} done {saved:.1f} s before its window's end (at {float(record['t']):.1f} s)")
    return (f'<p class="small schedule">compact schedule: {_e("; ".join(steps))}; the phases after it moved up by '
            f"{total:.1f} s in all</p>")


def _wall(wall: str | None) -> str:
    text = facts.utc(wall)
    return f'<br><span class="wall">{_e(text)}</span>' if text else ""


def _log_table(run_dir: Path, timeline: Timeline) -> str:
    if not timeline.logs:
        return '<p class="small">No log signature matched.</p>'
    rows = []
    for record in timeline.logs:
        source = record.get("source")
        rows.append(f"<tr><td class=\"num\">{float(record['t']):.1f} s</td><td><code>{_e(record.get('signature'))}"
                    f"</code></td><td>{_link(run_dir, source)}:{_e(record.get('line'))}</td>"
                    f"<td class=\"log\">{_e(record.get('text'))}</td></tr>")
    return ('<table class="logs"><thead><tr><th>t</th><th>signature</th><th>where</th><th>line</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _arm_section(run: Run, arm: Arm) -> str:
    timeline, data = arm.timeline, arm.data
    parts = [f'<div class="arm" id="{_e(arm.anchor)}"><h3>{_e(arm.experiment)} / {_e(arm.profile)} '
             f'{_badge(arm.verdict)} <span class="small">{_e(data.get("role") or "")}</span></h3>']
    recovery_text, not_recovered = facts.recovery(data)
    recovery = (f'recovery <span class="not-recovered">{_e(recovery_text)}</span>' if not_recovered
                else f"recovery {_e(recovery_text)}")
    figures = [recovery, f"lost {_count(data.get('lost'))}", f"duplicated {_count(data.get('duplicated'))}"]
    # a result judged before state_held existed: the same peaks, from the history the report reads anyway
    held = describe(data.get("state_held") if "state_held" in data else peak_state(timeline.samples))
    if held:
        figures.append(f'<span class="state-held">{_e(held)}</span>')
    signature = _signature_cell(data)
    parts.append(f'<p class="small">{" · ".join(figures)}{" · " + signature if signature else ""}</p>')
    if arm.skipped is not None:
        parts.append(f"<p>{_skipped(arm)} (not run: nothing was judged)</p>")
    started = facts.utc(timeline.first_wall)
    phases = " · ".join(f"{_e(name)} {_e(facts.utc(wall))}" for name, wall in timeline.phase_walls.items())
    seed = facts.seed(arm)
    parts.append(f'<p class="small arm-facts">started <span class="wall">{_e(started or "?")}</span>'
                 f'{" · " + phases if phases else ""} · seed {_e(seed if seed is not None else "?")}<br>'
                 f"rerun: <code>{_e(facts.rerun_command(run, f'{arm.experiment}/{arm.profile}'))}</code> · "
                 f"or: <code>{_e(facts.run_command(run, arm))}</code></p>")
    for error in timeline.errors:
        parts.append(f'<p class="err">environment error at {float(error["t"]):.1f} s: {_e(error.get("message"))}</p>')
    if timeline.problem:
        parts.append(f'<p class="err">{_e(timeline.problem)}</p>')
    parts.append(_fault_table(timeline))
    schedule = _schedule_line(timeline)
    if schedule:
        parts.append(schedule)
    if timeline.samples:
        plots, limits = [], thresholds(arm)
        legacy = not any("state_sst_bytes" in s for s in timeline.samples)
        for panel in PANELS:
            svg = plot_panel(panel, timeline, data, salt=f"{arm.anchor}-{panel.slug}", limits=limits)
            if svg is None:
                why = LEGACY_STATE_BYTES if legacy and any(m.key == "state_sst_bytes" for m in panel.metrics) else ""
                plots.append(f'<div class="plot nodata" data-panel="{panel.slug}"><div class="title">'
                             f"{_e(panel.title)}</div><div>no data</div>"
                             + (f'<div class="small why">{_e(why)}</div>' if why else "") + "</div>")
            else:
                plots.append(f'<div class="plot" data-panel="{panel.slug}">{svg}</div>')
        parts.append(f'<div class="plots">{"".join(plots)}</div>')
    elif not timeline.problem:
        parts.append('<p class="small">no samples recorded: no data to plot</p>')
    parts.append("<h4>log signatures</h4>" + _log_table(run.dir, timeline))
    links = []
    for job in timeline.jobs:
        extra = f" code {job.get('code')}" if "code" in job else ""
        extra += f" ({job.get('cause')})" if job.get("cause") else ""
        log = f" — {_link(run.dir, job['log'])}" if job.get("log") else ""
        links.append(f"<li>{float(job['t']):.1f} s: {_e(job.get('process'))} {_e(job.get('event'))}"
                     f"{_e(extra)}{log}</li>")
    if links:
        parts.append(f'<h4>job events</h4><ul class="small">{"".join(links)}</ul>')
    files = [name for name in ("history.jsonl", "result.json", "oracle.json", "lineage.json", "sessions.jsonl")
             if (arm.dir / name).is_file()]
    if files:
        rel = arm.dir.relative_to(run.dir).as_posix()
        parts.append('<p class="small">files: ' + " · ".join(_link(run.dir, f"{rel}/{n}", n) for n in files)
                     + "</p>")
    parts.append("</div>")
    return "".join(parts)


def _experiment_section(run: Run, experiment: dict) -> str:
    name = str(experiment.get("name", "?"))
    spec = experiment.get("spec") or {}
    incident = experiment.get("incident") or spec.get("incident") or {}
    parts = [f'<section id="{_e(_anchor(name))}"><h2>{_e(name)} {_badge(_verdict(experiment.get("verdict")))}</h2>']
    if spec.get("description"):
        parts.append(f'<p>{_e(spec["description"])}</p>')
    if isinstance(incident, dict) and incident:
        parts.append(f'<p class="small">incident <code>{_e(incident.get("file"))}</code>: '
                     f'{_e(incident.get("error"))}</p>')
    parts.append(_discrimination_block(experiment))
    for arm in run.arms.get(name, []):
        parts.append(_arm_section(run, arm))
    parts.append("</section>")
    return "".join(parts)



def render_report(run: Run) -> str:
    verdict = run.verdict
    meta = run.meta
    banner = [f"suite {meta.get('suite', '?')}", f"backend {meta.get('backend', '?')}",
              f"scale {meta.get('scale', '?')}", f"commit {facts.commit(run)[:12]}", f"status {run.status}"]
    if run.started:
        banner.append(f"started {facts.utc(run.started)}")
    if _duration(meta):
        banner.append(_duration(meta))
    body = [f'<div class="banner" style="background:{VERDICT_COLOURS[verdict]}"><h1>{_e(verdict)}</h1>'
            f'<span>{_e(run.dir.name)}</span><span class="meta">{_e(" · ".join(banner))}</span></div>',
            _failures_block(run), _flaky_block(run), _run_facts(run),
            *_mutation_section(run.results.get("mutation")),
            "<h2>verdicts</h2>", _summary_table(run), _discrimination_table(run)]
    body.append(_recovery_size_section(run))
    body += [_experiment_section(run, experiment) for experiment in run.experiments]
    # logs/<lane>/ holds a lane's logs in a run with --lanes (chaos/lanes/launch.py)
    logs = sorted((run.dir / "logs").rglob("*.log")) if (run.dir / "logs").is_dir() else []
    if logs:
        names = [p.relative_to(run.dir / "logs").as_posix() for p in logs]
        items = "".join(f"<li>{_link(run.dir, f'logs/{name}', name)} "
                        f'<span class="small">{p.stat().st_size:,} B</span></li>' for p, name in zip(logs, names))
        body.append(f'<h2>logs</h2><ul class="small">{items}</ul>')
    body.append('<p class="small">Built by <code>chaos report</code> from the files of this run directory '
                "(docs/reports.md). Plot times are seconds since each arm started; wall-clock times are UTC.</p>")
    return _page(f"{verdict} · {run.dir.name}", "".join(body))


def _recovery_size_section(run: Run) -> str:
    """A run whose arms held state at scale (over MEASURE_ABOVE_BYTES at a disruption): recovery against the state
    held, every disruption of every arm, with the floor beside it (chaos/bench/recovery_size.py)."""
    from ..bench.recovery_size import back_text, lag_text, plot_svg, recovered_text, run_points
    from ..restore_floor import MEASURE_ABOVE_BYTES

    try:
        points = [p for p in run_points(run.dir) if (p.state_bytes or 0) > MEASURE_ABOVE_BYTES]
        svg = plot_svg(points) if points else None
    except Exception as exc:  # a figure beside the verdicts: never the reason a report is not written
        return f'<p class="small">recovery against state size: not drawn ({_e(type(exc).__name__)}: {_e(exc)})</p>'
    if svg is None:
        return ""
    rows = "".join(f"<tr><td>{_e(p.fault)}</td><td>{_e(size(p.state_bytes))}</td><td>{_e(p.profile)}</td>"
                   f"<td>{_e(p.first_batch_s if p.first_batch_s is not None else '-')}</td>"
                   f"<td>{_e(recovered_text(p))}</td><td>{_e(lag_text(p))}</td><td>{_e(back_text(p))}</td>"
                   f"<td>{_e(p.floor_s if p.floor_s is not None else '-')}</td><td>{_e(p.experiment)}</td></tr>"
                   for p in sorted(points, key=lambda p: (p.fault, p.state_bytes or 0, p.profile)))
    return ("<h2>recovery against state size</h2>" + svg +
            "<table><tr><th>fault</th><th>state (SST)</th><th>arm</th><th>first new batch (s)</th>"
            "<th>recovered</th><th>lag before (records)</th><th>back to it</th><th>floor (s)</th>"
            f"<th>experiment</th></tr>{rows}</table>"
            '<p class="small">Every disruption of an arm holding more than 16 MiB of state, measured alone by the '
            "recovery check's definition (a control by its subject's target). Lag before: the largest in the minute "
            "before it; where that was over the bound already (a job slower than its input), back to it is the time "
            "to the same healthy run with the lag under 1.1 times it (hollow markers). The floor: the state's bytes "
            "over the S3 read throughput the arm measured through the job's own proxy; no restore from S3 is "
            "faster.</p>")


MUTANT_COLOURS = {"killed": "#2e7d32", "survived": "#c62828", "unknown": "#9e9e9e", "not claimed": "#c62828"}


def _mutation_section(mutation: dict | None) -> list[str]:
    """A mutate run (chaos/mutate.py): the kill rate, then the switch x experiment matrix."""
    if not isinstance(mutation, dict):
        return []
    from ..mutate import headline

    cells = [c for c in mutation.get("cells") or [] if isinstance(c, dict)]
    experiments = sorted({str(c.get("experiment")) for c in cells})
    rows = []
    for switch, entry in sorted((mutation.get("switches") or {}).items()):
        # an explained survivor is a survivor: its reason is shown beside it, not instead of it
        reason = f' <span class="small">(explained: {_e(entry["explained"])})</span>' if entry.get("explained") else ""
        row = [f"<td><b>{_e(switch)}</b></td>",
               f'<td style="color:{MUTANT_COLOURS.get(entry.get("status"), "#000")}"><b>'
               f'{_e(entry.get("status"))}</b>{reason}</td>']
        for experiment in experiments:
            cell = next((c for c in cells if c.get("switch") == switch and c.get("experiment") == experiment), None)
            row.append("<td></td>" if cell is None else
                       f'<td title="{_e(cell.get("why"))}" style="color:{MUTANT_COLOURS.get(str(cell.get("status")))}">'
                       f'{_e(cell.get("status"))}</td>')
        rows.append(f"<tr>{''.join(row)}</tr>")
    head = "".join(f"<th>{_e(e)}</th>" for e in experiments)
    return [f"<h2>mutation</h2><p><b>{_e(headline(mutation))}</b></p>",
            f'<table><tr><th>switch off</th><th>mutant</th>{head}</tr>{"".join(rows)}</table>',
            '<p class="small">killed: the hardened arm failed an outcome check with the switch off; survived: it '
            "passed (or failed only on log lines, its exit code or a refusal: mechanisms, not outcomes), explained or "
            "not; not claimed: no experiment of this run turned it off, so it counts as not killed; hover a cell "
            "for why.</p>"]




def write_report(run_dir: Path) -> Path:
    run = load_run(Path(run_dir))
    out = run.dir / "index.html"
    _write_atomic(out, render_report(run))
    return out


