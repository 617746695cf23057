"""How many items stand behind each section's figures, and the `memjudge view` link that shows
them: one line per section, read from the same JSON the section reads (never recounted)."""

from __future__ import annotations

from memjudge.reporting.blocks import Para
from memjudge.reporting.reader import Run


def view_command(run: Run) -> Para:
    name = run.path.resolve().name
    return Para(f"To see the items behind every figure: memjudge view {name} (a local page; with "
                f"--export {name}.html, one file to send). Each section names its items and the view that lists them.")


def _n(v) -> str:
    return f"{round(v):,}" if isinstance(v, (int, float)) else "?"


def items_behind(run: Run, section: str) -> list[Para]:
    """The line for `section` (compare, noise, agreement), or nothing when its JSON lacks the counts."""
    if section == "compare" and (c := run.get("compare")):
        n = ((c.get("write_all_ci") or {}).get("faithfulness") or {}).get("n")
        if n is None:
            return []
        return [Para(f"Items behind these figures: {_n(n)} candidates (judge {c.get('judge')}); in memjudge view, "
                     "the Policies filter lists those each policy keeps or drops (#p.RUN/POLICY=keeps).")]
    if section == "noise" and (nz := run.get("noise")):
        parts = [f"{j.get('judge')} {_n(j.get('items'))} items with two valid replicates, "
                 f"{_n((j.get('items') or 0) * ((j.get('any_flip_rate') or {}).get('value') or 0))} of them flip"
                 for j in nz.get("judges", [])]
        if not parts:
            return []
        return [Para("Items behind these figures: " + "; ".join(parts) + ". In memjudge view: #flips=1 with one judge shown.")]
    if section == "agreement" and (ag := run.get("agreement")):
        pairs = [f"{p.get('a')} and {p.get('b')} {_n(p.get('n'))}" for p in ag.get("pairs", [])]
        if not pairs:
            return []
        return [Para("Items behind these figures (labelled by both judges): " + "; ".join(pairs)
                     + ". In memjudge view: #disagree=1 lists those they disagree on.")]
    return []


__all__ = ["items_behind", "view_command"]
