"""What every page shares: the style sheet, escaping, verdict badges, the page frame."""
from __future__ import annotations

import html
import os
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from .model import VERDICT_COLOURS, _number

# -- index.html ------------------------------------------------------------------------------------------------
CSS = """
*{box-sizing:border-box}
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1500px;
     padding:12px 18px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #d0d7de}
h3{font-size:14px;margin:14px 0 4px}
a{color:#0969da}
.banner{padding:10px 14px;border-radius:6px;color:#fff;display:flex;gap:18px;align-items:baseline;flex-wrap:wrap}
.banner .meta{font-size:12px;opacity:.95}
.v{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-weight:600;font-size:11px}
table{border-collapse:collapse;margin:6px 0;max-width:100%}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.check{overflow-wrap:anywhere}.check .exp{color:#57606a}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:6px}
.plot{border:1px solid #eaeef2;border-radius:4px;min-height:120px}
.plot svg{width:100%;height:auto;display:block}
.plot.nodata{display:flex;flex-direction:column;justify-content:center;align-items:center;color:#6e7781;
             background:#f6f8fa}
.plot.nodata .title{font-size:11px}
.small{font-size:12px;color:#57606a}
.err{color:#cf222e}
code,.log{font:11px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace}
td.log{max-width:800px;white-space:pre-wrap;word-break:break-all}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
.disc{margin:4px 0;overflow-wrap:anywhere}
.disc-not_discriminating{color:#cf222e;font-weight:700;background:#ffebe9;border-left:4px solid #cf222e;
                         padding:3px 8px}
.disc-inconclusive{color:#9a6700;font-weight:600;background:#fff8c5;border-left:4px solid #9a6700;padding:3px 8px}
.disc-waived,.disc-not_run{color:#57606a}
.failures{border:2px solid #cf222e;border-radius:6px;padding:2px 12px 8px;margin:10px 0;background:#fff8f8}
.failures h2{color:#cf222e;border:0;margin:8px 0 4px}
.failures.none{border-color:#1a7f37;background:#f6fff8}.failures.none h2{color:#1a7f37}
.failures ul{margin:2px 0;padding-left:20px}.failures li{margin:3px 0;overflow-wrap:anywhere}
.failures .msg{color:#57606a;font-size:12px}
.not-recovered{color:#cf222e;font-weight:700}
td.not-recovered{background:#ffebe9}
.flaky{border-left:4px solid #9a6700;background:#fff8c5;padding:2px 10px;margin:8px 0}
.flaky h2{color:#9a6700;border:0}
details.passed summary{cursor:pointer;color:#1a7f37;font-size:12px}
.run-facts summary{cursor:pointer;font-weight:600}.facts th{width:8em}
.wall{color:#57606a;font-size:11px;white-space:nowrap}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(verdict: str) -> str:
    return f'<span class="v v-{_e(verdict)}" style="background:{VERDICT_COLOURS.get(verdict, "#6e7781")}">' \
           f"{_e(verdict)}</span>"


def _seconds(value: object) -> str:
    number = _number(value)
    return "–" if number is None else f"{number:.1f} s"


def _count(value: object) -> str:
    number = _number(value)
    return "–" if number is None else str(int(number))


def _link(run_dir: Path, relative: object, text: object | None = None) -> str:
    """A relative link to a file of the run; plain text when the path leaves the run directory."""
    path = str(relative or "")
    label = _e(text if text is not None else path)
    if not path or os.path.isabs(path) or ".." in Path(path).parts:
        return label
    return f'<a href="{_e(quote(path))}">{label}</a>'



def _duration(meta: dict) -> str:
    try:
        seconds = (datetime.fromisoformat(meta["ended"]) - datetime.fromisoformat(meta["started"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return ""
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'  # no favicon request: the page makes no request at all
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n")


