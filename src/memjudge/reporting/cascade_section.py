"""The report's section for `cascade.json` (`memjudge cascade ... --out DIR`): cost by stage,
the share decided, and what the certificate says (as the cascade wrote it)."""

from __future__ import annotations

from memjudge.reporting.blocks import Bullets, Heading, Note, Table
from memjudge.reporting.reader import Run

__all__ = ["cascade_blocks"]


def _usd(x) -> str:
    return "unknown" if x is None else f"${x:,.4f}"


def cascade_blocks(run: Run) -> list:
    c = run.get("cascade")
    if not c:
        return []
    rows = [[s["judge"], s["confidence"], "trusts nothing" if s["threshold"] is None else f"{s['threshold']:.4g}",
             f"{s['asked']:,}", f"{s['decided']:,}", f"{s['calls']:,}", _usd(s["cost_usd"])] for s in c["stages"]]
    gold = c["gold"]
    who = "people's labels" if gold["kind"] == "people" else "the last stage's labels (agreement with the strongest judge)"
    blocks: list = [Heading("Cascade of judges"),
                    Table(f"Stages in order, cheapest first: each was asked only about the items the stages before it did "
                          f"not trust (asked), and every stage answered the {gold['n']:,} gold items and "
                          f"{c['calibration']['select_items']:,} selection items too (calls, cost). Data: cascade.json.",
                          ["Stage", "Confidence", "Threshold", "Asked", "Decided", "Calls", "Cost"], rows)]
    facts = [f"Decided: {c['decided']:,} of {c['candidates']:,} candidates ({100 * c['decided_share']:.1f}%); "
             f"{c['abstained']:,} abstained, queued for people in {c['queue']} (memjudge annotate opens it).",
             f"Gold: {gold['n']:,} items, {who}; target agreement {c['target']:.3g} at delta {c['delta']:.3g}."]
    if c["cost_usd"] is not None and c["top_judge_cost_usd"]:
        facts.append(f"Cost: {_usd(c['cost_usd'])} with the gold calls, against {_usd(c['top_judge_cost_usd'])} for the last "
                     f"stage on every item ({100 * c['cost_share']:.0f}%).")
    blocks += [Bullets(facts), Note(c["guarantee"])]
    return blocks
