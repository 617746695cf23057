"""The report's section on a judge's coverage labels against a reference map (the demo's
`coverage_judge.json`, written by `memjudge.stats.coverage.coverage_agreement`): what Table 1's
estimated coverage rests on, and how good the judge that labelled coverage is at it."""

from __future__ import annotations

from memjudge._util.text import coef, count, pct
from memjudge.reporting.blocks import Heading, Para, Table
from memjudge.reporting.reader import Run


def rests_on(q: dict) -> str:
    """One sentence: where Table 1's estimated coverage comes from."""
    n, total = len(q.get("personas") or []), q.get("personas_total")
    if q.get("table1_coverage") == "judge":
        return (f"Estimated coverage (Table 1) rests on {q.get('judge')}'s coverage labels ({q.get('rubric')}, "
                f"{count(q.get('facts_judged'))} reference facts of all {count(total)} personas).")
    return (f"Estimated coverage (Table 1) rests on the corpus's construction map (simulated truth), not on a judge: "
            f"{q.get('judge')} labelled the coverage of {count(n)} of {count(total)} personas only "
            f"({count(q.get('facts_judged'))} facts), and is scored against that map below.")


def coverage_blocks(run: Run) -> list:
    q = run.get("coverage_judge")
    if not q or not q.get("pairs"):
        return []
    pairs, facts, rate = q["pairs"], q.get("facts") or {}, q.get("coverage_rate") or {}
    rows = [["All pairs (fact × candidate)", count(pairs["n"]), pct(pairs["percent_agreement"], 1), coef(pairs["cohen_kappa"]),
             coef(pairs["positive_agreement"])]]
    rows += [[f"Pairs, candidates of category {c}", count(v["n"]), pct(v["percent_agreement"], 1), coef(v["cohen_kappa"]),
              coef(v["positive_agreement"])] for c, v in (q.get("pairs_by_category") or {}).items()]
    rows.append(["Facts (covered by any candidate)", count(facts.get("n")), pct(facts.get("percent_agreement"), 1),
                 coef(facts.get("cohen_kappa")), coef(facts.get("positive_agreement"))])
    note = (f"Coverage rate (facts stated by at least one candidate): judge {pct(rate.get('judge'), 1)}%, construction map "
            f"{pct(rate.get('reference'), 1)}%; {count(q.get('facts_unanswered'))} facts without a valid answer, left out. "
            f"Coverage threshold {coef(q.get('coverage_threshold'), 2)} on the read's log-odds. {q.get('note', '')}")
    return [Heading(f"Coverage by {q.get('judge')} against the construction map"), Para(rests_on(q)),
            Table("The embedded judge's coverage labels against the corpus's construction map (simulated truth). "
                  "Data: coverage_judge.json.", ["Unit", "n", "Agreement (%)", "Cohen's κ", "Positive agreement"], rows, note)]


__all__ = ["coverage_blocks", "rests_on"]
