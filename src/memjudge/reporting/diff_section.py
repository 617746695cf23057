"""The report's section for `diff.json` (`memjudge diff BASE NEW --out NEW`): the comparison
with a base run, as the diff wrote it (the table is `memjudge.diff.text.rows` of the JSON)."""

from __future__ import annotations

from memjudge._util.text import pvalue
from memjudge.diff.text import margin_points
from memjudge.reporting.blocks import Bullets, Heading, Note, Table
from memjudge.reporting.reader import Run

__all__ = ["diff_blocks"]


def diff_blocks(run: Run) -> list:
    from memjudge.diff.text import HEAD, rows

    d = run.get("diff")
    if not d:
        return []
    mode = "same candidates, item-paired" if d.get("mode") == "items" else "same personas, other candidates"
    blocks: list = [Heading("Compared with a base run"),
                    Table(f"NEW - BASE ({mode}; judge {d.get('judge')}; {d.get('personas_common', 0):,} common personas, "
                          f"{len(d.get('personas_only_base') or []):,} only in BASE and "
                          f"{len(d.get('personas_only_new') or []):,} only in NEW, left out). Rates in percent, "
                          f"differences in points, 95% persona-bootstrap intervals (common personas resampled "
                          f"jointly). BASE: {d.get('base_run')}. Data: diff.json.", HEAD, rows(d))]
    facts = []
    m = d.get("mcnemar")
    if m:
        facts.append(f"McNemar's exact test: b = {m['b']:,} supported in BASE only, c = {m['c']:,} in NEW only "
                     f"(of {m['pairs']:,} pairs), p = {pvalue(m['p_value'])}; {len(d.get('changed') or []):,} "
                     f"item(s) changed verdict.")
    c = d.get("counts")
    if c:
        facts.append(f"Candidates: BASE {c['candidates']['base']:,}, NEW {c['candidates']['new']:,}.")
    if d.get("judges"):
        agree = d.get("judges_agree_on_sign")
        facts.append("Each judge's difference: " + ", ".join(
            f"{j['judge']} {100 * j['overall']['difference']['value']:+.2f} points"
            for j in d["judges"] if j["overall"]["difference"]["value"] is not None)
            + ("; they agree on the sign." if agree else "; they do not agree on the sign."))
    if facts:
        blocks.append(Bullets(facts))
    g = d.get("gate")
    if g:
        blocks.append(Note(f"CI gate ({g['rule'].replace('_', '-')} {margin_points(g['margin'])}): {g['reason']}"))
    return blocks
