"""The document rendered as one self-contained HTML page: figures inlined as base64 PNG,
every string from data escaped."""

from __future__ import annotations

import base64
import html

from memjudge.reporting.blocks import Bullets, FigureBlock, Heading, Note, Para, Table, numeric_columns

_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1a1a1a;line-height:1.45}
h1{font-size:1.6rem;border-bottom:2px solid #0072B2;padding-bottom:.3rem}h2{font-size:1.25rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.88rem}
th,td{border-bottom:1px solid #ddd;padding:.25rem .6rem;font-variant-numeric:tabular-nums}
.n{text-align:right}.t{text-align:left}th{border-bottom:2px solid #555}
caption{caption-side:top;text-align:left;font-weight:600;padding-bottom:.3rem}
.tnote{font-size:.82rem;color:#444;margin-top:-.6rem;max-width:55rem}
.note{background:#fff6e5;border-left:4px solid #E69F00;padding:.5rem .8rem}
figure{margin:1rem 0}figure img{max-width:100%;height:auto}figcaption{font-size:.85rem;color:#333}
"""


def to_html(blocks: list) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{e(next((b.text for b in blocks if isinstance(b, Heading)), 'memjudge report'))}</title>",
           f"<style>{_CSS}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{e(b.text)}</p>")
        elif isinstance(b, Note):
            out.append(f'<p class="note"><strong>Note.</strong> {e(b.text)}</p>')
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{e(t)}</li>" for t in b.items) + "</ul>")
        elif isinstance(b, Table):
            align = ['class="n"' if n else 'class="t"' for n in numeric_columns(b)]
            rows = "".join("<tr>" + "".join(f"<td {a}>{e(c)}</td>" for a, c in zip(align, r)) + "</tr>"
                           for r in b.rows)
            out.append(f"<table><caption>{e(b.caption)}</caption><thead><tr>"
                       + "".join(f"<th {a}>{e(h)}</th>" for a, h in zip(align, b.header))
                       + f"</tr></thead><tbody>{rows}</tbody></table>")
            if b.notes:
                out.append(f'<p class="tnote">{e(b.notes)}</p>')
        elif isinstance(b, FigureBlock):
            data = base64.b64encode(b.path.read_bytes()).decode("ascii")
            out.append(f'<figure><img alt="{e(b.caption, quote=True)}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{e(b.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
