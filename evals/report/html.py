"""The pieces every report page shares: the page shell, inline images, tables that sort on a click.

Why hand-written HTML: the page must work offline and from a file:// URL, so there are no external
assets: the CSS and the sort script are inline and every image is a base64 data URI (the PNGs are
also written next to the page for reuse). The tables follow KernelBench's plain result tables.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

CSS = """
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif; margin: 24px auto;
       max-width: 1200px; color: #1a1a1a; padding: 0 16px; }
h1 { font-size: 22px; border-bottom: 3px solid #76b900; padding-bottom: 6px; }
h2 { font-size: 17px; margin-top: 28px; }
p.note { color: #555; font-size: 13px; }
figure { margin: 12px 0; } figure img { max-width: 100%; border: 1px solid #e3e3e3; }
figcaption { font-size: 12px; color: #555; }
table { border-collapse: collapse; font-size: 12.5px; margin: 8px 0; }
th, td { border: 1px solid #cfcfcf; padding: 3px 8px; text-align: left; }
th { background: #f2f2f2; cursor: pointer; user-select: none; white-space: nowrap; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
td.num { text-align: right; font-family: "DejaVu Sans Mono", Menlo, monospace; }
tr:nth-child(even) td { background: #fafafa; }
.good { color: #2e7d32; font-weight: 600; } .bad { color: #c62828; }
"""

SORT_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, column) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var descending = th.classList.contains('sorted-asc');
      table.querySelectorAll('th').forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
      th.classList.add(descending ? 'sorted-desc' : 'sorted-asc');
      function key(row) {
        var cell = row.cells[column];
        var value = cell.getAttribute('data-value');
        if (value === null) { return cell.textContent.trim().toLowerCase(); }
        return value === '' ? -Infinity : parseFloat(value);
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var order = x < y ? -1 : (x > y ? 1 : 0);
        return descending ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, an optional sort value (numbers sort numerically), link and class."""

    text: str
    value: float | None = None
    numeric: bool = False
    href: str | None = None
    css: str = ""

    def render(self) -> str:
        classes = " ".join(c for c in ("num" if self.numeric else "", self.css) if c)
        attrs = f' class="{classes}"' if classes else ""
        if self.numeric:
            attrs += f' data-value="{"" if self.value is None else repr(float(self.value))}"'
        body = html.escape(self.text)
        if self.href:
            body = f'<a href="{html.escape(self.href, quote=True)}">{body}</a>'
        return f"<td{attrs}>{body}</td>"


def number(value: float | None, spec: str, suffix: str = "", css: str = "") -> Cell:
    if value is None:
        return Cell("-", None, numeric=True)
    return Cell(format(value, spec) + suffix, float(value), numeric=True, css=css)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Cell]], sortable: bool = True, ident: str = ""
) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(c.render() for c in row) + "</tr>" for row in rows)
    attrs = (' class="sortable"' if sortable else "") + (f' id="{ident}"' if ident else "")
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>"


def image(png: bytes, alt: str, caption: str = "") -> str:
    """An inline PNG (data URI) with a caption: the page needs no file next to it."""
    data = base64.b64encode(png).decode("ascii")
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return (
        f'<figure><img alt="{html.escape(alt, quote=True)}" src="data:image/png;base64,{data}">{cap}</figure>'
    )


def page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n{body}\n<script>{SORT_SCRIPT}</script>\n</body></html>\n"
    )


def escape(text: str) -> str:
    return html.escape(text)
