"""`memjudge diff` as text: the terminal table and the Markdown summary a CI job posts. Both are
views of the `DiffResult`'s own figures (rates in percent, differences in signed points)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from memjudge._util.text import count, pct, pts, pvalue, with_interval

if TYPE_CHECKING:  # the result renders itself through this module
    from memjudge.diff.result import DiffResult, Figure

__all__ = ["margin_points", "render_markdown", "render_text", "rows"]


def margin_points(m: float) -> str:
    """A gate's margin (a share) in points: 0.02 -> "2 points", 0.01 -> "1 point"."""
    v = round(100 * m, 6)
    return f"{v:g} point{'' if v == 1 else 's'}"


def _rate(f: dict) -> str:
    return with_interval(pct, f.get("value"), f.get("lo"), f.get("hi"))


def _change(f: dict) -> str:
    return with_interval(pts, f.get("value"), f.get("lo"), f.get("hi"))


def _mean(f: Figure) -> str:
    return with_interval(lambda x: f"{x:.2f}", f.value, f.lo, f.hi)


def _mean_change(f: Figure) -> str:
    return with_interval(lambda x: f"{x:+.2f}", f.value, f.lo, f.hi)


def rows(d: dict) -> list[list[str]]:
    """The main table from diff.json's dict (what `memjudge report` shows too): figure, BASE,
    NEW, NEW − BASE (each with its interval), the counts behind BASE and NEW."""
    def row(name: str, t: dict) -> list[str]:
        return [name, _rate(t["base"]), _rate(t["new"]), _change(t["difference"]),
                f"{count(t['base'].get('n'))} / {count(t['new'].get('n'))}"]

    out = [row("support, overall", d["overall"])]
    out += [row(f"support, {c}", t) for c, t in (d.get("by_category") or {}).items()]
    if d.get("coverage"):
        out.append(row("coverage of reference facts", d["coverage"]))
    g = d.get("gold")
    if g:
        what = "PPI++ support" if g.get("method") == "ppi++" else "accuracy on gold"
        out.append(row(f"{what}, overall", g["overall"]))
        out += [row(f"{what}, {c}", t) for c, t in (g.get("by_category") or {}).items()]
    return out


HEAD = ["figure", "BASE", "NEW", "NEW - BASE (points)", "n BASE / NEW"]


def _header(result: DiffResult) -> list[str]:
    lines = [f"memjudge diff ({'same candidates, item-paired' if result.mode == 'items' else 'same personas, other candidates'}): "
             f"judge {result.judge}, {'replicate ' + str(result.replicate) if result.replicate != 'majority' else 'majority of replicates'}",
             f"  BASE {result.base_run or '-'}  NEW {result.new_run or '-'}",
             f"  {result.personas_common:,} common personas; {len(result.personas_only_base):,} only in BASE, "
             f"{len(result.personas_only_new):,} only in NEW (left out); {int(round(100 * result.level))}% intervals: "
             f"persona-cluster bootstrap (expanded percentile), common personas resampled jointly (B = {result.B:,}, "
             f"seed {result.seed})"]
    return lines


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return [fmt.format(*head), *(fmt.format(*r) for r in body)]


def _extras(result: DiffResult) -> list[str]:
    out: list[str] = []
    c = result.counts
    if c is not None:
        out.append(f"candidates: BASE {c.candidates['base']:,}, NEW {c.candidates['new']:,}; per persona "
                   f"BASE {_mean(c.per_persona.base)}, NEW {_mean(c.per_persona.new)}, "
                   f"NEW - BASE {_mean_change(c.per_persona.difference)}; without a valid verdict: "
                   f"BASE {c.null_verdicts['base']:,}, NEW {c.null_verdicts['new']:,}")
        if c.by_category:
            out.append("candidates per category (BASE -> NEW): "
                       + ", ".join(f"{k} {v['base']:,} -> {v['new']:,}" for k, v in c.by_category.items()))
    if result.mcnemar is not None:
        m = result.mcnemar
        out.append(f"McNemar (exact): {m.pairs:,} pairs; supported in BASE only b = {m.b:,}, in NEW only c = {m.c:,}; "
                   f"p = {pvalue(m.p_value)}; {len(result.changed or []):,} item(s) changed verdict")
    if result.judges:
        agree = {True: "all agree on the sign", False: "they do not agree on the sign", None: "-"}[result.judges_agree_on_sign]
        out.append("each judge's NEW - BASE (points): "
                   + ", ".join(f"{j.judge} {_change(asdict(j.overall.difference))}" for j in result.judges) + f"; {agree}")
    if result.table1:
        out.append("Table 1 side by side (fold means, BASE -> NEW, points):")
        for policy, metrics in result.table1.items():
            cells = [f"{m} {pct(v['base'])} -> {pct(v['new'])} ({pts(v['difference'])})"
                     for m, v in metrics.items() if v["base"] is not None or v["new"] is not None]
            out.append(f"  {policy}: " + "; ".join(cells))
    if result.gate is not None:
        out.append(f"gate ({result.gate.rule.replace('_', '-')} {margin_points(result.gate.margin)}): {result.gate.reason}")
    out += [f"note: {n}" for n in result.notes]
    return out


def render_text(result: DiffResult) -> str:
    return "\n".join([*_header(result), "", *_table(HEAD, rows(result.to_dict())), "", *_extras(result)]).rstrip()


def render_markdown(result: DiffResult) -> str:
    """A short Markdown summary: the verdict, the table, and the counts (for a CI job to post)."""
    g = result.gate
    title = "memjudge diff"
    if g is not None:
        title += f": {'❌ gate failed' if g.failed else '✅ gate passed'}"
    lines = [f"### {title}", ""]
    if g is not None:
        lines += [f"**{g.rule.replace('_', '-')} {margin_points(g.margin)}**: {g.reason}", ""]
    lines.append(f"Judge `{result.judge}`; {result.personas_common:,} common personas "
                 f"({len(result.personas_only_base):,} only in BASE, {len(result.personas_only_new):,} only in NEW); "
                 f"{'same candidates, item-paired' if result.mode == 'items' else 'same personas, other candidates'}; "
                 f"{int(round(100 * result.level))}% persona-bootstrap intervals.")
    lines += ["", "| " + " | ".join(HEAD) + " |", "|" + "|".join(["---"] + ["---:"] * (len(HEAD) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows(result.to_dict())]
    extras = [x for x in _extras(result) if not x.startswith("gate ")]
    if extras:
        lines += [""] + [f"- {x}" for x in extras]
    return "\n".join(lines) + "\n"
