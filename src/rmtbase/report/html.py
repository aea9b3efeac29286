"""``report.html``: one self-contained page per score or comparison (opens offline).

CSS, JavaScript (``rmtbase/report/assets``), data (JSON, :mod:`rmtbase.report.html_data`) and
figures (base64 PNG) are inline. The score page: model and null, verdict heatmap, a head's
drill-down against its null, a sortable head table (:func:`rmtbase.report.tables.head_ranking`),
summary and figures; a collection adds an entry selector."""

from __future__ import annotations

import base64
import html as _html
from importlib import resources

import xarray as xr

from .._version import __version__
from .html_data import DEFAULT_BUDGET, report_data, to_script_json


def _asset(name: str) -> str:
    text = resources.files("rmtbase.report").joinpath("assets", name).read_text("utf-8")
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _img(name: str, png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img alt="{_html.escape(name)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_html.escape(caption)}</figcaption></figure>")


def page(title: str, subtitle: str, body: str, data: dict | None = None) -> str:
    """A whole HTML document: inline CSS, ``body``, the JSON data and the script."""
    script = ""
    if data is not None:
        script = (f'<script type="application/json" id="rmtbase-data">{to_script_json(data)}'
                  f"</script>\n<script>{_asset('report.js')}</script>")
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{_html.escape(title)}</title><style>{_asset('report.css')}</style></head>\n"
        f"<body><header><h1>{_html.escape(title)}</h1><p class=\"sub\">"
        f"{_html.escape(subtitle)}</p></header>\n{body}\n{script}\n</body></html>\n")


def _figures(images: dict, captions: dict, linked=()) -> str:
    if not images and not linked:
        return ""
    figs = "".join(_img(n, png, captions.get(n, n)) for n, png in images.items())
    if linked:  # relative links to the files beside the page (opened from its folder)
        items = "".join(f'<li><a href="{_html.escape(r)}">{_html.escape(r)}</a></li>'
                        for r in linked)
        figs += (f'<details id="more-figures"><summary>{len(linked)} more figures (files '
                 f"beside this page)</summary><ul>{items}</ul></details>")
    return f'<section id="figures"><h2>Figures</h2>{figs}</section>'


def score_html(ds: xr.Dataset, images: dict[str, bytes] | None = None, *,
               summary: str = "", captions: dict | None = None,
               budget: int = DEFAULT_BUDGET, linked=(), sections: str = "") -> str:
    """The page of a score or collection: ``images`` {name: PNG} embedded, ``linked`` figures
    listed, ``summary`` folded, ``sections`` placed before the figures."""
    data = report_data(ds, budget=budget)
    n = len(data["entries"])
    first = data["entries"][0]
    if n == 1:
        title = f"rmtbase score: {ds.attrs.get('model', first['label'])}"
        sub = f"{sum(first['head']['flag'])} of {len(first['head']['flag'])} heads differ " \
              "from the null"
    else:
        title = f"rmtbase score: {n} {ds.attrs.get('collection', 'entrie')}s"
        sub = f"{ds.attrs.get('model', '')} ({data['n_detail']} of {n} with per-statistic detail)"
    body = (
        '<section><div id="entry"></div><h2>Model and null</h2><div id="facts"></div>'
        + (f"<details><summary>summary.txt</summary><pre>{_html.escape(summary)}</pre>"
           "</details>" if summary else "")
        + "</section>\n<section><h2>Per-head verdict</h2><div class=\"row\">"
        "<div id=\"heatmap\"></div><div id=\"detail\"></div></div></section>\n"
        "<section><h2>Heads and their profile</h2><p class=\"note\">In the order of the "
        "rank column (departure from the null in band units, or --sort-by; ties share a "
        "rank); click a column to sort (a profile column sorts by |effect|), a row to show "
        "the head. * flagged on that axis.</p><table id=\"toptable\"></table></section>\n"
        + sections + _figures(images or {}, captions or {}, linked)
        + f"<footer class=\"note\">rmtbase {__version__}</footer>")
    return page(title, sub, body, data)


def table_html(df, title: str = "") -> str:
    """A sortable, sideways-scrolling HTML table of a DataFrame (numbers carry data-v)."""
    import numpy as np

    head = "".join(f"<th>{_html.escape(str(c)).replace('_', '_<wbr>')}</th>"
                   for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for v in rec:
            if isinstance(v, float | np.floating):
                cells.append(f'<td data-v="{float(v)!r}">{float(v):.4g}</td>')
            else:
                text = str(v)
                wide = ' class="w"' if len(text) > 24 else ""
                cells.append(f"<td{wide}>{_html.escape(text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{_html.escape(title)}</caption>" if title else ""
    return (f'<div class="tablewrap"><table class="sortable">{cap}<thead><tr>{head}</tr>'
            "</thead><tbody>" + "".join(rows) + "</tbody></table></div>")


def compare_html(table, images: dict[str, bytes], *, title: str, subtitle: str = "",
                 captions: dict | None = None, notes: str = "") -> str:
    """The comparison page: the flag table (sortable) and the profile figures."""
    body = (f"<section><h2>Heads that differ from the null, per model</h2>{table_html(table)}"
            f"<p class=\"note\">{_html.escape(notes)}</p></section>\n"
            + _figures(images, captions or {})
            + f"<footer class=\"note\">rmtbase {__version__}</footer>")
    return page(title, subtitle, body, {"entries": [], "refs": {}, "scale": {}})


__all__ = ["compare_html", "page", "score_html", "table_html"]
