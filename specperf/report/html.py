"""Sections → one self-contained report.html: inline CSS, charts as base64 PNG data URIs, no
script and no external reference, so it opens offline from a CI artefact or an e-mail."""

from __future__ import annotations

import base64
import re

from jinja2 import Environment, select_autoescape

from specperf.report.sections import Chart, Section, Table, Text

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1f24}
header{background:#24292f;color:#fff;padding:16px 28px}
header h1{margin:0;font-size:22px} header p{margin:4px 0 0;color:#c9d1d9;font-size:13px}
nav{padding:10px 28px;border-bottom:1px solid #d0d7de;font-size:13px}
nav a{margin-right:14px;color:#0969da;text-decoration:none}
main{padding:0 28px 40px} section{margin-top:28px}
h2{border-bottom:1px solid #d0d7de;padding-bottom:4px;font-size:19px}
h3{font-size:14px;margin:18px 0 6px}
p.intro{color:#57606a;font-size:13px;max-width:1100px}
table.data{border-collapse:collapse;font-size:12px;margin:4px 0 12px}
table.data th,table.data td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;
 font-variant-numeric:tabular-nums}
table.data th{background:#f6f8fa}
td.bad{background:#ffebe9;color:#a40e26;font-weight:600}
td.good{color:#1a7f37} td.warn{background:#fff8c5}
.missing{color:#6e7781;font-style:italic;font-size:13px}
.warning{background:#fff8c5;padding:4px 8px;font-size:13px}
.note{font-size:13px}
figure{margin:8px 0 16px} figure img{max-width:100%;border:1px solid #d0d7de}
figcaption{font-size:12px;color:#57606a}
.scroll{overflow-x:auto}
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title><style>{{ css }}</style></head>
<body>
<header><h1>{{ title }}</h1><p>{{ subtitle }}</p></header>
<nav>{% for s in sections %}<a href="#{{ s.id }}">{{ s.title }}</a>{% endfor %}</nav>
<main>
{% for s in sections %}
<section id="{{ s.id }}" data-section="{{ s.id }}"
 data-has-data="{{ 'yes' if s.has_data else 'no' }}">
<h2>{{ s.title }}</h2>
{% if s.intro %}<p class="intro">{{ s.intro }}</p>{% endif %}
{% if s.empty %}<p class="missing">No data: {{ s.empty }}</p>{% else %}
{% for p in s.parts %}
{% if p.kind_ == "table" %}<h3>{{ p.caption }}</h3>
<div class="scroll">{{ p.html | safe }}</div>
{% elif p.kind_ == "chart" %}<figure><img id="{{ p.id }}" class="chart" alt="{{ p.caption }}"
 src="data:image/png;base64,{{ p.b64 }}"><figcaption>{{ p.caption }}</figcaption></figure>
{% else %}<p class="{{ p.kind }}">{% if p.kind == "missing" %}No data: {% endif %}
{{- p.text }}</p>{% endif %}
{% endfor %}{% endif %}
</section>
{% endfor %}
</main></body></html>
"""

# Cell texts that get a color (verdicts of the comparison and the guards).
BAD = ("FAIL", "REGRESSION", "regression", "fail", "failed", "error")
WARN = ("stale", "not evaluated", "xfail", "expected failure", "missing", "drift", "blocked")
GOOD = ("pass", "PASS", "ok", "improvement", "improved")


def _classify(html: str) -> str:
    def repl(m: re.Match[str]) -> str:
        text = m.group(1)
        low = text.strip().lower()
        cls = (
            "bad"
            if low in {b.lower() for b in BAD}
            else "warn"
            if any(low.startswith(w) for w in WARN)
            else "good"
            if low in {g.lower() for g in GOOD}
            else None
        )
        return f'<td class="{cls}">{text}</td>' if cls else m.group(0)

    return re.sub(r"<td>([^<]{1,40})</td>", repl, html)


def _view(p: Table | Chart | Text) -> dict[str, object]:
    if isinstance(p, Table):
        html = p.frame.to_html(
            index=False, table_id=p.id, classes="data", border=0, escape=True, na_rep="—"
        )
        return {"kind_": "table", "caption": p.caption, "html": _classify(html), "id": p.id}
    if isinstance(p, Chart):
        b64 = base64.b64encode(p.png).decode("ascii")
        return {"kind_": "chart", "caption": p.caption, "b64": b64, "id": p.id}
    return {"kind_": "text", "kind": p.kind, "text": p.text}


def render(sections: list[Section], *, title: str, subtitle: str) -> str:
    env = Environment(autoescape=select_autoescape(default=True), trim_blocks=True)
    views = [
        {
            "id": s.id,
            "title": s.title,
            "intro": s.intro,
            "empty": s.empty,
            "has_data": s.has_data,
            "parts": [_view(p) for p in s.parts],
        }
        for s in sections
    ]
    return env.from_string(TEMPLATE).render(title=title, subtitle=subtitle, css=CSS, sections=views)
