"""The report built from the fixture runs in tests/fixtures/runs: small cuts of real smoke-suite runs (made by
tests/fixtures/make_runs.py; their sources are in tests/fixtures/runs/README.md). index.html, junit.xml, the trend page
and `chaos report`'s command line. Pure: no services, no browser.

The expectations are the real runs' numbers, read from the fixtures' results.json and history.jsonl where a test
checks every arm, and written out where a test pins one fact the report must show."""
from __future__ import annotations

import html
import json
import re
import shutil
import statistics
import xml.etree.ElementTree as ET
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from chaos.checks.judge import judge_run
from chaos.history import HistoryWriter, read_history
from chaos.report import (
    NOT_RECOVERED,
    PANELS,
    Arm,
    arm_figures,
    find_regressions,
    load_timeline,
    main_report,
    write_junit,
    write_report,
    write_trend,
)
from tests.unit.fixture_runs import passed_copy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUN_A = "20261123T081854-smoke-13866"   # the first real smoke run: the cut is FAILED
RUN_B = "20261123T085731-smoke-464"     # the second, 39 minutes later: FAILED since issue 36 (fixture_runs.py)
ARMS_A = [("kafka-broker-disconnect", "hardened"), ("slow-s3-put", "hardened"), ("slow-s3-put", "naive"),
          ("driver-latency", "naive"), ("corrupted-sst", "naive"), ("process-crash", "hardened")]
# Plots drawn per arm with samples: every panel but the state on disk (state_sst_bytes), which these histories predate.
DRAWN = len(PANELS) - 1
ARMS_B = [("kafka-broker-disconnect", "hardened"), ("kafka-broker-disconnect", "naive"), ("slow-s3-put", "hardened"),
          ("driver-latency", "naive"), ("process-crash", "hardened")]


@pytest.fixture
def runs(tmp_path) -> Path:
    """A copy of the fixture run store (the report writes into run directories)."""
    target = tmp_path / "runs"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return target


class Page(HTMLParser):
    """Elements of interest of a page: plot containers and what they hold, links, ids, tags, arm sections."""

    def __init__(self, text: str):
        super().__init__()
        self.plots: list[dict] = []
        self.hrefs: list[str] = []
        self.id_list: list[str] = []
        self.tags: list[str] = []
        self._stack: list[tuple[str, dict | None]] = []
        self._arm: str | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append(tag)
        if "id" in attributes:
            self.id_list.append(attributes["id"])
        if tag == "div" and attributes.get("class") == "arm":
            self._arm = attributes.get("id")
        if tag == "a" and "href" in attributes:
            self.hrefs.append(attributes["href"])
        plot = None
        if tag == "div" and "plot" in (attributes.get("class") or "").split():
            plot = {"panel": attributes.get("data-panel"), "class": attributes["class"], "svgs": 0, "text": "",
                    "arm": self._arm}
            self.plots.append(plot)
        if tag == "svg":
            current = next((p for _, p in reversed(self._stack) if p is not None), None)
            if current is not None:
                current["svgs"] += 1
        if tag not in ("meta", "link", "br", "img", "input", "path", "use", "rect", "line", "circle", "stop"):
            self._stack.append((tag, plot))

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        if "id" in dict(attrs):
            self.id_list.append(dict(attrs)["id"])

    @property
    def ids(self) -> set[str]:
        return set(self.id_list)

    def handle_endtag(self, tag):
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index][0] == tag:
                del self._stack[index:]
                break

    def handle_data(self, data):
        current = next((p for _, p in reversed(self._stack) if p is not None), None)
        if current is not None:
            current["text"] += data


def build(runs: Path, name: str = RUN_A) -> tuple[Path, str]:
    page = write_report(runs / name)
    return page, page.read_text()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """Run A's report, built once for the tests that only read it (a report takes ~0.2 s per plot)."""
    target = tmp_path_factory.mktemp("built") / "runs"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return build(target)


def results(run: str = RUN_A) -> dict:
    return json.loads((FIXTURES / run / "results.json").read_text())


def arm_results(run: str = RUN_A) -> dict[tuple[str, str], dict]:
    return {(e["name"], a["profile"]): a for e in results(run)["experiments"] for a in e["arms"]}


def judgement(run_results: dict) -> list:
    """What the checkers decided, without their wording; of the checks, those the fixtures recorded (a check the
    registry gained since, and the fixtures' specs do not set, is left out: issue 20)."""
    recorded = {c["name"] for run in (RUN_A, RUN_B) for e in results(run)["experiments"] for a in e["arms"]
                for c in a["checks"]}
    return [run_results["verdict"]] + [
        (e["name"], e["verdict"], a["profile"], a["verdict"], a["recovery_s"], a["lost"], a["duplicated"],
         [(c["name"], c["verdict"], c["expected"], c["measured"]) for c in a["checks"] if c["name"] in recorded])
        for e in run_results["experiments"] for a in e["arms"]]


def history(run: str, experiment: str, profile: str) -> list[dict]:
    return read_history(FIXTURES / run / experiment / profile / "history.jsonl")


def section(text: str, anchor: str) -> str:
    """The HTML of one arm (<div class="arm" id=anchor>...) up to the next arm or experiment."""
    start = text.index(f'<div class="arm" id="{anchor}">')
    ends = [i for i in (text.find('<div class="arm"', start + 1), text.find("<section", start)) if i > 0]
    return text[start:min(ends) if ends else len(text)]


def summary_rows(text: str) -> list[str]:
    summary = text[text.index('<table class="summary">'):]
    summary = summary[:summary.index("</table>")]
    return summary.split("<tr>")[2:]  # after the header row


# -- the fixtures themselves -----------------------------------------------------------------------------------
def test_the_fixtures_are_small_cuts_of_completed_real_runs_that_judge_as_recorded(tmp_path):
    files = [p for p in FIXTURES.rglob("*") if p.is_file() and not p.is_symlink()]
    assert sum(p.stat().st_size for p in files) < 1_000_000
    assert not [p for p in files if p.name in ("ledger.jsonl", "sessions.jsonl", "index.html", "junit.xml")
                or p.name.startswith("progress")]
    assert (FIXTURES / "latest").resolve().name == RUN_B
    for run in (RUN_A, RUN_B):
        facts = json.loads((FIXTURES / run / "fixture.json").read_text())
        assert Path(facts["source"]).name == run and run in (FIXTURES / "README.md").read_text()
        meta = json.loads((FIXTURES / run / "run.json").read_text())
        assert meta["status"] == "completed" and meta["suite"] == "smoke" and meta["backend"] == "local"
        # results.json is what the checkers make of the kept files, arm by arm (verdicts, figures, checks)
        copy = tmp_path / run
        shutil.copytree(FIXTURES / run, copy)
        assert judgement(judge_run(copy)) == judgement(results(run))  # a check added since: see judgement
        assert facts["arms"] == {f"{e}/{p}": arm_results(run)[(e, p)]["verdict"] for e, p in arm_results(run)}
        # only the logs a kept history names are kept
        named = {str(r.get("log") or r.get("source")) for h in (FIXTURES / run).glob("*/*/history.jsonl")
                 for r in read_history(h) if r.get("log") or r.get("source")}
        assert {f"logs/{p.name}" for p in (FIXTURES / run / "logs").iterdir()} == named


# -- index.html ------------------------------------------------------------------------------------------------
def test_banner_gives_the_run_verdict_and_what_was_run(built):
    page, text = built
    assert page.name == "index.html" and page.parent.name == RUN_A
    banner = re.search(r'<div class="banner" style="background:([^"]+)"><h1>([A-Z]+)</h1>(.*?)</div>', text).groups()
    assert banner[:2] == ("#cf222e", "FAILED")  # red
    for fact in (RUN_A, "suite smoke", "backend local", "scale 0.4", "status completed",
                 "started 2026-11-23 08:18:54 UTC", "36 min 35 s"):  # run.json: 08:18:54 -> 08:55:29
        assert fact in banner[2], fact
    assert "<title>FAILED · 20261123T081854-smoke-13866</title>" in text


def test_a_row_per_arm_with_each_target_expected_vs_measured_recovery_lost_and_duplicated(built):
    _, text = built
    rows = summary_rows(text)
    want = arm_results()
    assert len(rows) == len(ARMS_A) == len(want)
    for (experiment, profile), row in zip(ARMS_A, rows):
        arm = want[(experiment, profile)]
        assert f'<a href="#{experiment}">{experiment}</a>' in row and f">{profile}</a>" in row
        assert f">{arm['verdict']}</span></td>" in row
        for check in arm["checks"]:  # every target of the arm, with both values
            assert (f"{escape(check['name'])}: <span class=\"exp\">expected</span> {escape(check['expected'])} "
                    f"<span class=\"exp\">measured</span> {escape(check['measured'])}</div>") in row, check["name"]
        numbers = re.findall(r'<td class="num(?: not-recovered)?"[^>]*>([^<]*)</td>', row)
        not_recovered = any(c["name"] == "recovery" and c["verdict"] == "FAILED" for c in arm["checks"])
        recovery = ("not recovered" if not_recovered else "–") if arm["recovery_s"] is None \
            else f"{arm['recovery_s']:.1f} s"
        assert numbers == [recovery, str(arm["lost"]), str(arm["duplicated"])]
    # the real numbers, pinned
    kafka, hardened, _, latency_naive, sst_naive, crash = rows
    # kafka-broker-disconnect's outage heal was followed 1.2 s later by the next fault: not recovered (issue 36)
    assert '<td class="num not-recovered"' in kafka and '<td class="num">4.2 s</td>' in hardened
    assert ">FAILED</span> probe:processed_rate: <span class=\"exp\">expected</span> processed_rate in [1, inf] in " \
           "steady, &lt;= 50% outside <span class=\"exp\">measured</span> 4/7 outside (57%)" in kafka
    assert "recovery: <span class=\"exp\">expected</span> &lt;= 30s <span class=\"exp\">measured</span> not " \
           "recovered" in latency_naive
    assert '<td class="num">22156</td>' in sst_naive  # the naive job lost what was in its corrupted state
    assert ">UNKNOWN</span> environment: <span class=\"exp\">expected</span> no environment error " \
           "<span class=\"exp\">measured</span> 3 error record(s)" in crash and ">FAILED</span></td>" in crash


def test_controls_show_the_signature_they_reproduced_or_that_they_did_not_survive(built):
    _, text = built
    rows = dict(zip(ARMS_A, summary_rows(text)))
    want = arm_results()
    slow = rows[("slow-s3-put", "naive")]
    assert "(control)" in slow and want[("slow-s3-put", "naive")]["signature"].startswith("…WARN ProcessingTime")
    assert f"control reproduced: <code>{escape(want[('slow-s3-put', 'naive')]['signature'])}</code>" in slow
    assert "control reproduced: <code>…Bad table magic number: expected 9863518390377041911" in \
        rows[("corrupted-sst", "naive")]
    # driver-latency's control was expected to survive (spec: expect survives) and did not: not "did not reproduce"
    latency = rows[("driver-latency", "naive")]
    assert "control did not survive (it was expected to)" in latency and "did not reproduce" not in latency
    assert 'title="the control was expected to survive (Spark has no checkpoint acknowledgement' in latency
    for key in (("kafka-broker-disconnect", "hardened"), ("slow-s3-put", "hardened"), ("process-crash", "hardened")):
        assert rows[key].removesuffix("</tbody>").endswith("<td></td></tr>"), key  # a subject has no signature


@pytest.fixture(scope="module")
def built_b(tmp_path_factory) -> tuple[Path, str]:
    target = tmp_path_factory.mktemp("built-b") / "runs"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return build(target, RUN_B)


def test_a_passed_run_is_green_and_a_control_that_survived_too_says_so(tmp_path):
    """Run B made to pass (tests/unit/fixture_runs.py): driver-latency's naive control, expected to survive, survived
    this time, recovered 9.3 s after its first heal (less the pause's 4.1 s), the group of two."""
    run = passed_copy(shutil.copytree(FIXTURES / RUN_B, tmp_path / RUN_B))
    text = write_report(run).read_text()
    assert re.search(r'<div class="banner" style="background:#1a7f37"><h1>PASSED</h1><span>' + RUN_B, text)
    rows = dict(zip([arm for arm in ARMS_B if arm[0] != "process-crash"], summary_rows(text)))
    assert len(rows) == len(summary_rows(text)) == 4
    row = rows[("driver-latency", "naive")]
    assert '<td class="num">9.3 s</td>' in row
    assert ('<span class="small">control survived too: Spark has no checkpoint acknowledgement that can time out: a '
            "slow or paused driver delays every batch") in row
    # "did not" of a failure message; the exits check's expectation says "did not cause" on every arm
    assert "did not" not in row.replace("no exit the harness did not cause", "") and 'class="err"' not in row
    kafka = rows[("kafka-broker-disconnect", "naive")]
    assert "control reproduced: <code>25 lines like …clientId=adminclient-1] Connection to node 1" in kafka
    assert "expected matched 1/1 (25 lines)" in kafka
    assert "environment error" not in text


def test_six_plots_per_arm_each_one_inline_svg_or_no_data(built):
    _, text = built
    page = Page(text)
    plots = [p for p in page.plots if p["panel"]]
    assert len(plots) == len(ARMS_A) * len(PANELS) == 36
    for experiment, profile in ARMS_A:
        mine = [p for p in plots if p["arm"] == f"{experiment}--{profile}"]
        assert [p["panel"] for p in mine] == [p.slug for p in PANELS], (experiment, profile)
        samples = [r for r in history(RUN_A, experiment, profile) if r["type"] == "sample"]
        for plot, panel in zip(mine, PANELS):
            measured = any(s.get(m.key) is not None for s in samples for m in panel.metrics)
            assert ("nodata" not in plot["class"]) == measured, (experiment, profile, panel.slug)
            assert plot["svgs"] == (1 if measured else 0)
            if not measured:
                assert "no data" in plot["text"]
    assert text.count("<svg") == sum(p["svgs"] for p in plots)


def spans(svg: str) -> list[tuple[str, float, float]]:
    """The filled rectangles matplotlib drew (axvspan): (fill colour, opacity, width in SVG units)."""
    found = []
    for match in re.finditer(r'<path d="([^"]+)"[^>]*?style="fill: (#[0-9a-f]{6}); opacity: ([\d.]+)', svg):
        xs = [float(x) for x in re.findall(r"[ML] ([\d.]+) ", match.group(1))]
        found.append((match.group(2), float(match.group(3)), max(xs) - min(xs)))
    return found


def test_fault_windows_phases_and_recovery_are_drawn_in_every_plot_of_an_arm(built):
    _, text = built
    hardened = section(text, "slow-s3-put--hardened")
    svgs = re.findall(r"<svg.*?</svg>", hardened, flags=re.S)
    assert len(svgs) == DRAWN
    for svg in svgs:
        for label in ("F1 network.latency", "F2 network.bandwidth", "steady", "inject", "recover", "recovery 4.2 s"):
            assert label in svg, label
        # both faults shaded in their colours over 24.0 s, the recovery bar (green) over 4.2 s, to scale
        drawn = spans(svg)
        latency, bandwidth = [w for c, o, w in drawn if o == 0.13 and c in ("#d62728", "#ff7f0e")]
        recovery = [w for c, o, w in drawn if (c, o) == ("#1a7f37", 0.8)]
        assert len(recovery) == 1 and latency == pytest.approx(bandwidth, rel=0.01)
        assert latency / recovery[0] == pytest.approx(24.0 / 4.2, rel=0.03)
    # the naive control of driver-latency never recovered: a red bar from the last heal to the end, in every plot
    naive = re.findall(r"<svg.*?</svg>", section(text, "driver-latency--naive"), flags=re.S)
    assert len(naive) == DRAWN
    for svg in naive:
        assert "not recovered" in svg and "F2 process.pause" in svg
        assert [c for c, o, _ in spans(svg) if o == 0.8] == ["#cf222e"]
    # three kills: three windows, and the job's exits as red dotted lines
    crash = section(text, "process-crash--hardened")
    for label in ("F1 process.kill", "F2 process.kill", "F3 process.kill"):
        assert label in crash


def wall(record_wall: str) -> str:
    """The page's wall-clock time of a record (UTC, with the date), as a regex."""
    assert record_wall.endswith("+00:00")
    return re.escape(f'<br><span class="wall">{record_wall[:10]} {record_wall[11:23]} UTC</span>')


def test_the_fault_table_gives_the_recorded_inject_and_heal_times(built):
    _, text = built
    for experiment, profile in ARMS_A:
        table = section(text, f"{experiment}--{profile}")
        table = table[table.index('<table class="faults">'):table.index("</table>", table.index('class="faults"'))]
        injected, healed = {}, {}
        for record in history(RUN_A, experiment, profile):
            if record["type"] == "fault":
                key = (record["name"], record["target"])
                if record["state"] == "injected":
                    injected.setdefault(key, (record["t"], record["wall"]))
                elif record["state"] == "healed":
                    healed[key] = (record["t"], record["wall"])
        assert table.count("<tr>") == 1 + len(injected)
        for (name, target), (start, start_wall) in injected.items():
            end, end_wall = healed[(name, target)]
            assert re.search(rf"<code>{re.escape(name)}</code></td><td>{re.escape(target)}</td><td><code>[^<]*</code>"
                             rf'</td><td class="num">{start:.1f} s{wall(start_wall)}</td>'
                             rf'<td class="num">{end:.1f} s{wall(end_wall)}</td>'
                             rf'<td class="num">{end - start:.1f} s</td>', table), (experiment, profile, name)
    assert re.search(r"<code>process.kill</code></td><td>broker</td><td><code>signal=9, count=1, interval=None"
                     r'</code></td><td class="num">74.3 s<br><span class="wall">2026-11-23 08:52:39.281 UTC</span></td>'
                     r'<td class="num">88.8 s<br><span class="wall">2026-11-23 08:52:53.800 UTC</span></td>', text)


@pytest.mark.parametrize("run, arms, matches", [(RUN_A, ARMS_A, 3 + 4), (RUN_B, ARMS_B, 6)])
def test_log_signatures_link_to_kept_log_files_at_the_matched_line(built, built_b, run, arms, matches):
    page, text = built if run == RUN_A else built_b
    run_dir = page.parent
    checked = 0
    for experiment, profile in arms:
        records = [r for r in history(run, experiment, profile) if r["type"] == "log"]
        arm = section(text, f"{experiment}--{profile}")
        if not records:
            assert "No log signature matched." in arm
            continue
        table = arm[arm.index('<table class="logs">'):arm.index("</table>", arm.index('<table class="logs">'))]
        assert table.count("<tr>") == 1 + len(records)
        for record in records:
            link = f'<a href="{record["source"]}">{record["source"]}</a>:{record["line"]}'
            assert link in table
            # the link works and the line number is the line of the kept log that matched
            lines = (run_dir / record["source"]).read_text().splitlines()
            assert lines[record["line"] - 1] == record["text"], (record["source"], record["line"])
            assert re.search(record["signature"], lines[record["line"] - 1])
            checked += 1
    assert checked == matches  # A: slow-s3-put's and corrupted-sst's naive controls; B: kafka-broker-disconnect's
    assert ('<a href="logs/job-naive-d8d3dc58-2.log">logs/job-naive-d8d3dc58-2.log</a>:453' in text) == (run == RUN_A)


def test_environment_errors_and_job_events_are_listed_with_links_to_driver_logs(built):
    page, text = built
    crash = section(text, "process-crash--hardened")
    errors = re.findall(r'<p class="err">environment error at ([\d.]+) s: (.*?)</p>', crash)
    assert [t for t, _ in errors] == ["79.6", "85.6", "88.7"]
    assert errors[0][1] == ("probe failed: KafkaException: KafkaError{code=_TRANSPORT,val=-195,str=&quot;Failed to "
                            "get metadata: Local: Broker transport failure&quot;}")
    events = re.findall(r"<li>([\d.]+) s: (.*?)</li>", crash)
    assert ("36.3", 'job-driver started — <a href="logs/job-hardened-5d8f258b-2.log">'
                    "logs/job-hardened-5d8f258b-2.log</a>") in events
    assert ("36.3", "job-driver exited (signal 9)") in events and ("74.3", "broker exited (signal 9)") in events
    assert ("117.9", "job-driver exited code 0") in events
    sst = section(text, "corrupted-sst--naive")
    assert "56.5 s: job-driver exited (stopped to corrupt its checkpoint)" in sst
    assert "180.7 s: job-driver exited code 1" in sst


def test_a_compact_schedule_says_which_fault_ended_early_and_how_much_the_phases_moved(tmp_path):
    target = tmp_path / "runs"
    shutil.copytree(FIXTURES, target, symlinks=True)
    path = target / RUN_A / "process-crash" / "hardened" / "history.jsonl"
    records = read_history(path)
    last = records[-1]
    steps = [{"t": last["t"], "wall": last["wall"], "type": "schedule", "fault": 0, "name": "process.kill",
              "target": "job-driver", "saved_s": 12.5, "total_saved_s": 12.5},
             {"t": last["t"], "wall": last["wall"], "type": "schedule", "fault": 1, "saved_s": 3.0,
              "total_saved_s": 15.5}]  # an older record: the fault's index only
    path.write_text("".join(json.dumps(r) + "\n" for r in [*records, *steps]))
    _page, text = build(target)
    crash = section(text, "process-crash--hardened")
    line = re.search(r'<p class="small schedule">(.*?)</p>', crash)
    assert line is not None and line.group(1) == (
        f"compact schedule: process.kill on job-driver done 12.5 s before its window&#x27;s end (at {last['t']:.1f} "
        f"s); the spec&#x27;s fault 1 done 3.0 s before its window&#x27;s end (at {last['t']:.1f} s); the phases "
        "after it moved up by 15.5 s in all")
    assert '<p class="small schedule">' not in section(text, "slow-s3-put--hardened")


def test_links_point_at_files_of_the_run_and_anchors_exist(built):
    page, text = built
    run_dir = page.parent
    page = Page(text)
    local = [h for h in page.hrefs if not h.startswith("#")]
    assert "logs/job-naive-dc32a81e-1.log" in local and "slow-s3-put/hardened/history.jsonl" in local
    for href in local:
        assert (run_dir / unquote(href)).is_file(), href
    # every kept log is linked from the logs section
    logs = text[text.index("<h2>logs</h2>"):]
    assert sorted(re.findall(r'<a href="logs/([^"]+)">', logs)) == sorted(p.name for p in (run_dir / "logs").iterdir())
    for href in page.hrefs:
        if href.startswith("#"):
            assert href[1:] in page.ids, href
    assert len(page.id_list) == len(page.ids), "ids must be unique across the inline SVGs"
    for reference in set(re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', text)):
        assert (reference[0] or reference[1]) in page.ids, reference


def test_text_from_files_is_escaped_and_the_page_loads_nothing(runs):
    results_path = runs / RUN_A / "results.json"
    data = json.loads(results_path.read_text())
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    data["experiments"][0]["arms"][0]["checks"][0]["message"] = hostile
    data["experiments"][0]["arms"][0]["checks"][0]["measured"] = hostile
    results_path.write_text(json.dumps(data))
    history_path = runs / RUN_A / "slow-s3-put" / "naive" / "history.jsonl"
    lines = history_path.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if '"type":"log"' in line.replace(" ", ""))
    record = json.loads(lines[index])
    record["text"] += " <b>bold</b> & <listOffsets>"
    lines[index] = json.dumps(record)
    history_path.write_text("\n".join(lines) + "\n")
    _, text = build(runs)
    assert "<script" not in text and "<img" not in text and "<listOffsets>" not in text and "<b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "but spent 13606 milliseconds &lt;b&gt;bold&lt;/b&gt; &amp; &lt;listOffsets&gt;" in text
    assert "str=&quot;Failed to get metadata" in text  # a real error message, quotes and all
    page = Page(text)
    assert "script" not in page.tags and "iframe" not in page.tags
    assert not re.search(r'(src|href)="(https?:)?//', text), "the page must not load anything"
    assert "@import" not in text and "url(http" not in text


def test_an_arm_without_history_and_a_smoke_run_still_report(runs):
    (runs / RUN_A / "driver-latency" / "naive" / "history.jsonl").unlink()
    _, text = build(runs, RUN_A)
    assert "no history recorded (history.jsonl is missing)" in section(text, "driver-latency--naive")
    assert text.count("<svg") == (len(ARMS_A) - 1) * DRAWN
    smoke = runs / "20261123T000000-stack-smoke-1"
    smoke.mkdir()
    (smoke / "results.json").write_text(json.dumps({"ok": True, "start_s": {"kafka": 11.0}}))
    text = write_report(smoke).read_text()
    assert "<h1>PASSED</h1>" in text and "no experiments" in text


def test_a_torn_last_line_is_dropped_and_a_corrupt_history_is_shown_not_raised(runs):
    history_path = runs / RUN_A / "process-crash" / "hardened" / "history.jsonl"
    samples = len(load_timeline(history_path).samples)
    with open(history_path, "a") as handle:
        handle.write('{"t": 999, "type": "sam')  # a crashed writer
    timeline = load_timeline(history_path)
    assert timeline.problem is None and len(timeline.samples) == samples
    history_path.write_text('{"t": 1, "type": "sample"}\nnot json\n{"t": 2, "type": "sample"}\n')
    _, text = build(runs, RUN_A)
    arm = section(text, "process-crash--hardened")
    assert "history unreadable" in arm and ":2: not JSON" in arm and "<svg" not in arm


# -- junit.xml -------------------------------------------------------------------------------------------------
def test_junit_has_one_case_per_arm_with_the_failed_targets_as_message(runs):
    root = ET.parse(write_junit(runs / RUN_A)).getroot()
    assert root.tag == "testsuites" and root.get("name") == "smoke"
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == \
        ("6", "3", "0", "0")
    assert suite.get("timestamp") == "2026-11-23T08:18:54+00:00"
    cases = [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")]
    assert cases == ARMS_A
    by_key = {(c.get("classname"), c.get("name")): c for c in suite.findall("testcase")}
    want = arm_results()
    for key, case in by_key.items():
        verdict = want[key]["verdict"]
        children = [c.tag for c in case if c.tag not in ("system-out", "properties")]
        assert children == (["failure"] if verdict == "FAILED" else []), key
        out = case.find("system-out").text
        assert f"verdict {verdict}" in out and f"report: index.html#{key[0]}--{key[1]}" in out
        assert f"lost {want[key]['lost']}" in out
        samples = [r["t"] for r in history(RUN_A, *key)]
        assert 30 < float(case.get("time")) <= max(samples) - min(samples), key
    latency = by_key[("driver-latency", "naive")].find("failure")
    assert latency.get("message") == ("recovery: expected <= 30s, measured not recovered; "
                                      "control: expected survives, measured did not survive")
    assert "PASSED lost: expected <= 0, measured 0" in latency.text
    assert by_key[("kafka-broker-disconnect", "hardened")].find("failure").get("message") == \
        "recovery: expected <= 15s, measured not recovered; " \
        "probe:processed_rate: expected processed_rate in [1, inf] in steady, <= 50% outside, measured 4/7 outside " \
        "(57%)"
    crash = by_key[("process-crash", "hardened")].find("failure")
    assert crash.get("message") == "recovery: expected <= 30s, measured not recovered"
    assert "UNKNOWN environment: expected no environment error, measured 3 error record(s)" in crash.text
    assert "control reproduced: …Bad table magic number" in by_key[("corrupted-sst", "naive")].find("system-out").text
    assert "the control was expected to survive" in by_key[("driver-latency", "naive")].find("system-out").text
    assert "recovery 4.2 s" in by_key[("slow-s3-put", "hardened")].find("system-out").text


@pytest.mark.parametrize("verdict, element", [("UNKNOWN", "error"), ("HANG", "error"), ("NODATA", "error"),
                                              ("INTERRUPTED", "skipped"), ("PASSED", None)])
def test_junit_maps_every_verdict(runs, verdict, element):
    """The real runs have PASSED and FAILED arms; the other verdicts are set on process-crash/hardened (which has
    real environment errors in its history)."""
    results_path = runs / RUN_A / "results.json"
    data = json.loads(results_path.read_text())
    arm = next(a for e in data["experiments"] if e["name"] == "process-crash" for a in e["arms"])
    arm["verdict"] = verdict
    results_path.write_text(json.dumps(data))
    suite = ET.parse(write_junit(runs / RUN_A)).getroot().find("testsuite")
    case = suite.find("testcase[@classname='process-crash'][@name='hardened']")
    children = [c.tag for c in case if c.tag not in ("system-out", "properties")]
    assert children == ([element] if element else [])
    if element:
        assert verdict in case.find(element).get("message")
    if verdict == "UNKNOWN":  # the environment's own words, not only "the environment failed"
        message = case.find("error").get("message")
        assert message.startswith("UNKNOWN: the environment failed (not a job failure)")
        assert "Failed to get metadata: Local: Broker transport failure" in message
        assert "Broker: Not leader for partition" in message


# -- trends ----------------------------------------------------------------------------------------------------
def test_regressions_are_worse_than_the_previous_median_by_more_than_the_margin():
    assert find_regressions([10, 10, 13], 0.2, higher_is_better=False) == [False, False, True]
    assert find_regressions([10, 10, 12], 0.2, higher_is_better=False) == [False, False, False]  # not more than
    # the median of 10, 30, 10 is 10 (a mean, 16.7, would let 13 pass)
    assert find_regressions([10, 30, 10, 13], 0.2, higher_is_better=False) == [False, True, False, True]
    assert find_regressions([200, 200, 150], 0.2, higher_is_better=True) == [False, False, True]
    assert find_regressions([None, 10, None, 20], 0.2, higher_is_better=False) == [False, False, False, True]
    assert find_regressions([10, NOT_RECOVERED], 0.2, higher_is_better=False) == [False, True]
    assert find_regressions([NOT_RECOVERED, NOT_RECOVERED], 0.2, higher_is_better=False) == [False, False]


def test_throughput_is_the_events_processed_over_the_steady_phase(tmp_path):
    """Batches that complete every few seconds make the rolling rate 0 in most samples: its median read 0 events/s
    where the job processed 100 events/s on average. The integral of the rate over the phase is what it processed."""
    ticks = iter(range(20))
    with HistoryWriter(tmp_path / "history.jsonl", clock=lambda: next(ticks)) as writer:
        writer.phase("steady", "start")
        for rate in (0, 0, 400, 0, 0, 0, 200, 0):  # t = 1..8: 1000 events over 7 s (trapezoids)
            writer.sample(processed_rate=rate, state_rows=rate)
        writer.phase("steady", "end")
        writer.sample(processed_rate=0, state_rows=900)
    arm = Arm("x", {"profile": "hardened", "recovery_s": None,
                    "checks": [{"name": "recovery", "verdict": "FAILED"}]}, tmp_path,
              load_timeline(tmp_path / "history.jsonl"))
    figures = arm_figures(arm)
    assert figures == {"recovery_s": NOT_RECOVERED, "throughput": pytest.approx(600 / 7), "max_state_rows": 900}
    assert statistics.median([0, 0, 400, 0, 0, 0, 200, 0]) == 0  # what the trend used to show


def steady_throughput(records: list[dict]) -> float:
    """Events processed in the steady phase over its duration: the trapezoid integral of processed_rate."""
    start = next(r["t"] for r in records if r["type"] == "phase" and r["name"] == "steady")
    end = next(r["t"] for r in records if r["type"] == "phase" and r["name"] == "steady" and r["boundary"] == "end")
    points = [(r["t"], r["processed_rate"]) for r in records if r["type"] == "sample" and start <= r["t"] <= end
              and r.get("processed_rate") is not None]
    events = sum((t1 - t0) * (a + b) / 2 for (t0, a), (t1, b) in zip(points, points[1:]))
    return events / (points[-1][0] - points[0][0])


def trend_section(text: str, experiment: str) -> tuple[str, list[str]]:
    """(the experiment's section, its table's body rows)."""
    part = text[text.index(f'<section id="{experiment}">'):]
    part = part[:part.index("</section>")]
    table = part[part.index('<table class="trend">'):part.index("</table>")]
    return part, table.split("<tr>")[2:]


def test_trend_shows_recovery_throughput_and_state_per_arm_and_marks_the_real_regression(runs, tmp_path):
    (runs / "20261123T200000-broken-9").mkdir()  # a run that never wrote results.json is skipped
    (runs / "20261123T200000-broken-9" / "run.json").write_text("{}")
    text = write_trend(runs, tmp_path / "trend.html", margin=0.2).read_text()
    assert re.findall(r'<section id="([^"]+)">', text) == ["corrupted-sst", "driver-latency", "kafka-broker-disconnect",
                                                            "process-crash", "slow-s3-put"]
    assert "<span>2 runs</span>" in text and "broken-9" not in text
    # run B's hardened kafka-broker-disconnect arm held more state than run A's by more than 20 %: the only regression
    rows_a, rows_b = (max(r["state_rows"] for r in history(run, "kafka-broker-disconnect", "hardened")
                          if r["type"] == "sample" and r.get("state_rows") is not None) for run in (RUN_A, RUN_B))
    assert (rows_a, rows_b) == (522, 669) and rows_b > rows_a * 1.2
    # and run B processed less in its steady phase than run A, by more than 20 %, in four arms (118 -> 42 events/s
    # for this one): regressions the median of the rolling rate hid (it read 0 events/s for run A)
    assert text.count('class="num regression"') == 5 and "5 regressions marked" in text
    kafka, rows = trend_section(text, "kafka-broker-disconnect")
    assert [re.search(r">(2026[^<]+)</a>", r).group(1) for r in rows] == [RUN_A, RUN_B]  # in start order, no latest
    assert ('<td class="num regression" style="background:#ffebe9;color:#cf222e"><b>669 ▲ regression</b></td>'
            in rows[1])
    assert '<td class="num">522</td>' in rows[0]
    # recovery: neither judged recovered since issue 36 (a heal followed 1.2 s later by the next fault)
    not_recovered = '<td class="num">not recovered</td>'
    assert rows[0].count(not_recovered) == rows[1].count(not_recovered) == 1
    # throughput: events processed in the steady phase over its duration (run A's rolling rates were mostly 0)
    throughput = [steady_throughput(history(run, "kafka-broker-disconnect", "hardened")) for run in (RUN_A, RUN_B)]
    assert [round(v) for v in throughput] == [118, 42]
    assert '<td class="num">118</td>' in rows[0]
    assert "<b>42 ▲ regression</b>" in rows[1]
    assert ">FAILED</span>" in rows[0] and ">FAILED</span>" in rows[1]
    assert "hardened: regression" in kafka  # the red ✕ in the max state rows plot's legend
    assert len(Page(kafka).plots) == 3 and kafka.count("<svg") == 2  # no recovery time to plot: neither recovered
    # a run that did not recover is worse than any time, and a later recovery is not a regression
    _, crash = trend_section(text, "process-crash")
    assert '<td class="num">not recovered</td>' in crash[0] and '<td class="num">not recovered</td>' in crash[1]
    _, latency = trend_section(text, "driver-latency")
    assert '<td class="num">not recovered</td>' in latency[0] and '<td class="num">not recovered</td>' in latency[1]
    # an experiment kept from one run only has one row
    assert len(trend_section(text, "corrupted-sst")[1]) == 1
    assert f'href="runs/{RUN_A}/index.html"' in text and f'href="runs/{RUN_B}/index.html"' in text
    # +28 %: flagged at a 20 % margin, not at 30 %
    relaxed = write_trend(runs, tmp_path / "relaxed.html", margin=0.3).read_text()
    assert "<b>669 ▲ regression</b>" not in relaxed and '<td class="num">669</td>' in relaxed
    assert "3 regressions marked" in relaxed  # nor process-crash's throughput, 25 % lower (57 -> 43 events/s)


# -- command line ----------------------------------------------------------------------------------------------
def test_cli_writes_report_and_junit(runs, capsys):
    assert main_report([str(runs / RUN_B)]) == 0
    assert (runs / RUN_B / "index.html").is_file() and (runs / RUN_B / "junit.xml").is_file()
    assert capsys.readouterr().out.splitlines() == [f"report: {runs / RUN_B / 'index.html'}",
                                                    f"junit: {runs / RUN_B / 'junit.xml'}"]
    assert main_report(["--trend", str(runs), "--margin", "0.3"]) == 0
    assert (runs / "trend.html").is_file() and "3 regressions marked" in (runs / "trend.html").read_text()


@pytest.mark.parametrize("argv, fragment", [
    (["{runs}/nope"], "is not a directory"),
    (["{runs}/empty"], "is not a run directory (no results.json)"),
    (["{runs}/judged-not"], "judge it first: chaos check"),
    (["--trend", "{runs}/nope"], "is not a directory"),
    ([], "give a RUN_DIR or --trend RUNS_DIR"),
    (["--trend", "{runs}", "--margin", "much"], "is not a number"),
    (["{runs}/" + RUN_A, "--out", "x.html"], "--out is for --trend"),
])
def test_cli_usage_errors_are_one_line_and_exit_2(runs, capsys, argv, fragment):
    (runs / "empty").mkdir()
    (runs / "judged-not").mkdir()
    (runs / "judged-not" / "run.json").write_text("{}")
    assert main_report([a.format(runs=runs) for a in argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and err.startswith("chaos report: ")


def test_the_trend_page_through_the_chaos_command_itself(tmp_path):
    """`chaos report --trend reports/runs` (docs/commands.md's command) failed with "unrecognized arguments: --trend"
    while the report function the tests called worked: the command line is tested itself."""
    import shutil
    import subprocess
    import sys

    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / "20261123T081854-smoke-13866", runs / "20261123T081854-smoke-13866")
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "report", "--trend", str(runs)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (runs / "trend.html").is_file() and "trend:" in done.stdout


def test_each_arm_shows_the_state_it_held_from_its_history_when_its_result_predates_the_record(built):
    from chaos.state_held import describe, peak_state

    _, text = built
    shown = 0
    for experiment, profile in ARMS_A:
        held = peak_state(r for r in history(RUN_A, experiment, profile) if r.get("type") == "sample")
        line = describe(held)
        arm = section(text, f"{experiment}--{profile}")
        if line is None:
            assert "state-held" not in arm
        else:
            assert f'<span class="state-held">{html.escape(line)}</span>' in arm, (experiment, profile)
            assert held["sst_bytes"] is None and "SST" not in line  # these histories predate state_sst_bytes
            shown += 1
    assert shown >= len(ARMS_A) - 1  # every arm whose job completed a batch
