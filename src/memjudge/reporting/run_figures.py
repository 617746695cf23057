"""Which figures a run's data allows, drawn with `memjudge.reporting.figures` and captioned
with what each rests on."""

from __future__ import annotations

from pathlib import Path

from memjudge._util.text import num
from memjudge.reporting.frames import (
    calibration_frame,
    emphasised_category,
    estimate_frame,
    flip_frame,
    fold_diff_frame,
    pair_frame,
    paired_intervals,
    panel_error_frame,
    policy_points,
    support_rates,
    sweep_frame,
)
from memjudge.reporting.reader import Run, gated_categories, judge_label, simulated_gold

FIGURE_FILES = {
    "support_by_category": "fig_support_by_category.png",
    "faithfulness_vs_coverage": "fig_faithfulness_vs_coverage.png",
    "calibration": "fig_calibration.png",
    "flip_rate": "fig_flip_rate.png",
    "agreement": "fig_agreement.png",
    "fold_differences": "fig_fold_differences.png",
    "panel_errors": "fig_panel_errors.png",
    "ppi_forest": "fig_ppi_forest.png",
}


def make_figures(run: Run, out_dir: Path, dpi: int | None = None) -> dict[str, tuple[Path, str]]:
    """Render every figure the run's data allows; returns name -> (path, caption)."""
    import memjudge.reporting.figures as F

    dpi = dpi or F.DPI
    made: dict[str, tuple[Path, str]] = {}
    rates, flips = support_rates(run), flip_frame(run)
    # one colour and hatch per judge across every figure of the report
    styles = F.judge_styles(list(rates["judge"]) + list(flips["judge"]))

    def save(name, fig, caption):
        path = F.save_png(fig, out_dir / FIGURE_FILES[name], dpi=dpi)
        fig.clf()
        made[name] = (path, caption)

    if not rates.empty:
        gated = gated_categories(run)
        save("support_by_category", F.support_by_category(rates, gated, styles=styles),
             "Support by category, one bar per judge, with 95% persona-cluster intervals"
             + (f"; gated category shaded ({', '.join(gated)})" if gated else "") + ". Data: robustness.json.")
    sweep, points = sweep_frame(run), policy_points(run)
    if not sweep.empty or not points.empty:
        has_cov = (sweep["coverage"].notna().any() if not sweep.empty else False) or \
                  (points["coverage"].notna().any() if not points.empty else False)
        x = "coverage" if has_cov else "retention"
        floor = num((run.get("compare") or {}).get("floor") or (run.get("sweep") or {}).get("floor"))
        if not sweep.empty:
            sweep = sweep[sweep[x].notna()]
        if not points.empty:
            points = points[points[x].notna() & points["faithfulness"].notna()]
        tsweep = sweep_frame(run, "targeted")
        tsweep = tsweep[tsweep[x].notna()] if not tsweep.empty else tsweep
        gated_text = ", ".join(gated_categories(run))
        save("faithfulness_vs_coverage",
             F.faithfulness_vs_coverage(sweep, points, floor=floor, x=x, targeted_sweep=tsweep,
                                        targeted_label=f"Targeted threshold sweep ({gated_text})" if gated_text else None,
                                        title=None if x == "coverage" else "Faithfulness vs retention"),
             ("Faithfulness against estimated coverage" if x == "coverage" else
              "Faithfulness against retention (no coverage in this run)")
             + ": the global-threshold sweep on the full sample (curve), write-all and the fitted policies "
             "(held-out fold means ± SD). Data: " + ", ".join(p for p in ("sweep.json", "compare.json")
                                                              if (p[:-5] in run.data)) + ".")
    cal = calibration_frame(run)
    if not cal.empty:
        emph = emphasised_category(run, cal)
        judge = (run.get("calibration") or {}).get("judge")
        save("calibration", F.calibration(cal, emph, title=("Calibration: support by confidence bin"
                                                              + (f" — {judge_label(judge, run)}" if judge else ""))),
             "Support rate by confidence bin within each category"
             + (f"; {emph} emphasised with 95% intervals and counts" if emph else "")
             + "; lower panel: candidates per bin. Data: calibration.json.")
    if flips["flip_rate"].notna().any():
        save("flip_rate", F.flip_rate_by_category(flips, styles=styles),
             "Re-score flip rate by category with 95% persona-cluster intervals, per judge. Data: noise.json.")
    pairs = pair_frame(run)
    if not pairs.empty:
        listed = [judge_label(j, run) for j in (run.get("agreement") or {}).get("judges", [])]
        judges = list(dict.fromkeys(listed + list(pairs["a"]) + list(pairs["b"])))
        save("agreement", F.agreement_matrix(pairs, judges),
             "Pairwise Cohen's κ and Gwet's AC1 between judges. Data: agreement.json.")
    diffs = fold_diff_frame(run)
    if not diffs.empty:
        save("fold_differences", F.fold_differences(diffs, paired_intervals(run)),
             "Per-fold paired differences targeted − global (points), with the mean, the percentile interval and "
             "the Nadeau–Bengio interval. Data: compare.json (folds_detail, paired).")
    pe = panel_error_frame(run)
    if not pe.empty:
        pan = run.get("panel") or {}
        save("panel_errors", F.panel_error_rates(pe),
             f"Each judge's sensitivity and specificity estimated by {pan.get('method', 'the panel')} without gold"
             + (", against the same measured on gold labels (dashed: estimate = measured)" if pe["gold"].notna().any()
                else "") + ", with 95% persona-cluster intervals"
             + (". Simulated judges" if pan.get("simulated") else "") + ". Data: panel.json.")
    corrected_figures(run, save)
    return made


def corrected_figures(run: Run, save) -> None:
    import memjudge.reporting.figures as F

    est = estimate_frame(run)
    if not est.empty and est["value"].notna().any():
        e = run.get("estimate") or {}
        iv = "persona-cluster bootstrap" if e.get("interval") == "bootstrap" else "iid CLT"
        save("ppi_forest", F.ppi_forest(est),
             f"Support rate per group three ways, one above the other: the judge's labels alone "
             f"({judge_label(e.get('judge', ''), run)}), the gold labels alone, and PPI++ combining both; "
             f"95% {iv} intervals." + (" Gold labels: simulated (the corpus's construction truth)."
                                       if simulated_gold(run) else "") + " Data: estimate.json.")
