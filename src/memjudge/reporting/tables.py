"""The report's tables and the sections made of them: Table 1 (with its PPI++ column), the
noise, agreement, panel, robustness and calibration tables, the judge-corrected estimates
and the run's own description (inventory, configuration, scoring, corpus)."""

from __future__ import annotations

import json

import pandas as pd

from memjudge._util.text import (
    FOLD_INTERVAL,
    MISSING,
    PERSONA_INTERVAL,
    coef,
    count,
    estimate,
    num,
    pct,
    probability,
    pts,
    pvalue,
)
from memjudge.formats.estimate import Estimate
from memjudge.reporting.blocks import (
    Bullets,
    FigureBlock,
    Heading,
    Note,
    Para,
    Table,
)
from memjudge.reporting.findings import config_line, estimate_sentence, ordering_summary
from memjudge.reporting.frames import (
    METHODS,
    calibration_frame,
    emphasised_category,
    fold_count,
    robustness_units,
    sd,
    support_rates,
    unit_holds,
    value,
)
from memjudge.reporting.reader import (
    METRIC_NAMES,
    METRICS_ORDER,
    PARTS,
    POLICY_NAMES,
    QUIET_PARTS,
    Run,
    judge_label,
    simulated_gold,
)
from memjudge.stats.noise import BY_CONSTRUCTION


def _with_ci(x, est) -> str:
    """A full-sample rate in percent with the interval of its stored `Estimate` (write_all_ci)."""
    e = Estimate.from_dict(est)
    return estimate(Estimate(num(x), e.lo, e.hi))


def mean_sd(entry) -> str:
    """A fold mean ± SD ``{"value", "sd"}`` in percent."""
    s = sd(entry)
    return pct(value(entry)) + (f" ± {pct(s)}" if s is not None else "")


def paired_ci(p) -> str:
    """A paired difference (an `Estimate` with same_sign, nb_lo, nb_hi) in signed points, its
    percentile interval in brackets."""
    return estimate(Estimate.from_dict(p), pts)


def table1(c: dict, judge_note: str = "", number: str = "1", run: Run | None = None) -> Table:
    """Table 1 as the paper lays it out: fold mean ± SD in percent, change against write-all in
    points, then (spec §8) each policy's paired per-fold change against write-all and the paired
    targeted − global row, with 95% intervals in brackets; write-all carries its persona-cluster
    bootstrap interval when compare.json has one."""
    header = ["Policy", "Faithfulness (%)", "Retention (%)", "Est. coverage (%)", "Δ faith. vs write-all (pts)",
              "Δ coverage vs write-all (pts)"]
    rows = []
    wa = c.get("write_all") or {}
    wa_ci = ci if isinstance(ci := c.get("write_all_ci"), dict) else {}
    # write_all_ci's estimates are the full-sample figures of write_all with their intervals
    rows.append(["Write-all (full sample)", _with_ci(wa.get("faithfulness"), wa_ci.get("faithfulness")),
                 pct(wa.get("retention")), _with_ci(wa.get("coverage"), wa_ci.get("coverage")), MISSING, MISSING])
    pols = c.get("policies") or {}
    gate = c.get("gate")
    gate_s = ", ".join(map(str, gate)) if isinstance(gate, list) else (str(gate) if gate else "")

    def ms(pol, m):
        return mean_sd(pol.get(m))

    name: str  # a policy's key in compare.json (JSON keys are strings)
    for name in [n for n in ("global", "targeted", "per_category") if n in pols] + \
                [n for n in pols if n not in ("write_all", "global", "targeted", "per_category")]:
        pol = pols[name]
        label = POLICY_NAMES.get(name, name)
        if name == "targeted" and gate_s:
            label = f"Targeted ({gate_s})"
        rows.append([label, ms(pol, "faithfulness"), ms(pol, "retention"), ms(pol, "coverage"),
                     pts(pol.get("delta_faithfulness")), pts(pol.get("delta_coverage"))])
    vs_wa = vw if isinstance(vw := c.get("paired_vs_write_all"), dict) else {}
    n_folds = fold_count(c)
    same = []
    for name in [n for n in ("global", "targeted", "per_category") if n in vs_wa] + \
                [n for n in vs_wa if n not in ("global", "targeted", "per_category")]:
        ch = vs_wa[name] if isinstance(vs_wa[name], dict) else {}
        rows.append([f"{POLICY_NAMES.get(name, name)} − write-all (paired)", paired_ci(ch.get("faithfulness")),
                     paired_ci(ch.get("retention")), paired_ci(ch.get("coverage")), "", ""])
        counts = [f"{METRIC_NAMES[m]} {count(ch[m]['same_sign'])}/{n_folds}" for m in METRICS_ORDER
                  if isinstance(ch.get(m), dict) and num(ch[m].get("same_sign")) is not None and n_folds]
        if counts:
            same.append(f"{POLICY_NAMES.get(name, name).lower()}: " + ", ".join(counts))
    paired = c.get("paired") or {}
    if paired:
        rows.append(["Targeted − global (paired)", paired_ci(paired.get("faithfulness")),
                     paired_ci(paired.get("retention")), paired_ci(paired.get("coverage")), "", ""])
    nb = []
    for m in ("faithfulness", "retention", "coverage"):
        p = paired.get(m) if isinstance(paired.get(m), dict) else None
        if p and num(p.get("nb_lo")) is not None and num(p.get("nb_hi")) is not None:
            s = f"{METRIC_NAMES[m]} {pts(p['nb_lo'])} to {pts(p['nb_hi'])}"
            if num(p.get("same_sign")) is not None and n_folds:
                s += f" (same sign in {count(p['same_sign'])}/{n_folds} folds)"
            nb.append(s)
    notes = ("Entries are fold means ± standard deviations over held-out folds, in percent; Δ columns are changes "
             "of the fold mean against write-all in points. Write-all is the fixed full-sample reference"
             + (" (brackets: 95% persona-cluster bootstrap interval)" if wa_ci else "") + ". ")
    if vs_wa:
        notes += ("Rows '… − write-all (paired)': the change against write-all on the same held-out personas, "
                  "mean of the per-fold changes in points. ")
    notes += ("Brackets in the paired rows are paired 95% intervals (2.5–97.5 percentiles of per-fold "
              "differences). Post-threshold coverage is estimated.")
    if same:
        notes += " Folds with the sign of the mean change against write-all: " + "; ".join(same) + "."
    if nb:
        notes += " Nadeau–Bengio corrected 95% intervals (targeted − global): " + "; ".join(nb) + "."
    if c.get("strict_binary"):
        notes += (" Strict binary: verdicts other than supported/unsupported are left out of faithfulness "
                  "(counted in retention).")
    run_notes = [str(n) for n in c.get("notes") or []]
    if run_notes:
        notes += " Notes: " + "; ".join(run_notes) + "."
    elif c.get("write_all") is not None and num((c.get("write_all") or {}).get("coverage")) is None:
        notes += f" No coverage file was given, so coverage is {MISSING}."
    cap = f"Table {number}. Held-out retention policies{judge_note}. Data: compare.json — {config_line(c, run)}."
    return Table(cap, header, rows, notes)


def table1_ppi(t: Table, c: dict, simulated: bool = False) -> Table:
    """Table 1 with the PPI++ faithfulness column (fold mean ± SD) when compare.json has a
    ``gold`` block (`memjudge compare --gold`); the table unchanged otherwise."""
    gold = c.get("gold")
    if not isinstance(gold, dict) or not isinstance(gold.get("policies"), dict):
        return t
    by_label = {"Write-all (full sample)": "write_all", "Targeted − global (paired)": "paired"}
    for name in gold["policies"]:
        by_label[POLICY_NAMES.get(name, name)] = name
    gate = c.get("gate")
    if isinstance(gate, list) and gate:
        by_label[f"Targeted ({', '.join(map(str, gate))})"] = "targeted"
    elif isinstance(gate, str) and gate:
        by_label[f"Targeted ({gate})"] = "targeted"
    rows = []
    for r in t.rows:
        key = by_label.get(r[0])
        if key == "write_all":
            cell = pct((gold.get("write_all") or {}).get("ppi"))
        elif key == "paired":
            cell = paired_ci((gold.get("paired") or {}).get("ppi"))
        elif key is not None:
            cell = mean_sd((gold["policies"].get(key) or {}).get("ppi"))
        else:
            cell = ""
        rows.append(r[:2] + [cell] + r[2:])
    n = count(gold.get("n_matched"))
    missing = {k: v.get("folds_without_gold") for k, v in gold["policies"].items()
               if isinstance(v, dict) and num(v.get("folds_without_gold"))}
    note = (f" PPI++ faithfulness: the same held-out retained sets, their support rate estimated from {n} "
            f"{'simulated ' if simulated else ''}gold labels and the judge's verdicts on the rest (prediction-powered "
            "inference, power-tuned λ); thresholds are still fitted on the judge's labels.")
    if missing:
        note += " Folds whose retained set held no gold item have no PPI++ figure: " + ", ".join(
            f"{POLICY_NAMES.get(k, k)} {count(v)}" for k, v in missing.items()) + "."
    header = t.header[:2] + ["Faithfulness, PPI++ (%)"] + t.header[2:]
    return Table(t.caption, header, rows, t.notes + note)


def noise_tables(run: Run) -> list[Table]:
    noise = run.get("noise") or {}
    judges = noise.get("judges", [])
    rows = [[judge_label(j["judge"], run), str(j.get("rubric", "")), count(j.get("items")), count(j.get("replicates")),
             count(j.get("excluded_null")),
             BY_CONSTRUCTION if j.get("by_construction") else estimate(Estimate.from_dict(j.get("flip_rate"))),
             estimate(Estimate.from_dict(j.get("any_flip_rate")))] for j in judges]
    out = [Table("Judge re-score noise. Data: noise.json (labels with ≥ 2 valid replicates per item).",
                 ["Judge", "Rubric", "Items", "Replicates", "Excluded null", "Flip rate (%) [95% CI]",
                  "Items with any flip (%) [95% CI]"], rows,
                 "Flip rate: probability that two replicates of an item differ, averaged over items. Intervals: "
                 "persona-cluster bootstrap."
                 + (" By construction: a deterministic judge, whose replicates after the first are copies of replicate 0 "
                    "(labels' replicate_of)." if any(j.get("by_construction") for j in judges) else ""))]
    cats = list(dict.fromkeys(c for j in judges for c in (j.get("by_category") or {})))
    if cats:
        crow = []
        for c in cats:
            row = [c]
            for j in judges:
                d = (j.get("by_category") or {}).get(c)
                row.append(estimate(Estimate.from_dict(d.get("flip_rate"))) + f" (n={count(d.get('items'))})"
                           if isinstance(d, dict) else MISSING)
            crow.append(row)
        out.append(Table("Flip rate by category, % [95% CI] (items). Data: noise.json.",
                         ["Category"] + [judge_label(j["judge"], run) for j in judges], crow))
    return out


def agreement_tables(run: Run) -> list[Table]:
    agr = run.get("agreement") or {}
    out = []
    rows = []
    for p in agr.get("pairs", []):
        rows.append([judge_label(p["a"], run), judge_label(p["b"], run), count(p.get("n")),
                     estimate(Estimate.from_dict(p.get("percent_agreement"))),
                     estimate(Estimate.from_dict(p.get("cohen_kappa")), coef),
                     estimate(Estimate.from_dict(p.get("gwet_ac1")), coef),
                     coef(value(p.get("positive_agreement"))), coef(value(p.get("negative_agreement")))])
    notes = []
    for key, name in (("krippendorff_alpha", "Krippendorff's α (nominal, all judges)"),
                      ("fleiss_kappa", "Fleiss' κ (items every judge labelled)")):
        if key in agr:
            notes.append(f"{name}: {estimate(Estimate.from_dict(agr[key]), coef)}")
    if agr.get("items") is not None:
        notes.append(f"items: {count(agr['items'])}")
    if rows or notes:
        out.append(Table("Agreement between judges on shared items. Data: agreement.json.",
                         ["Judge A", "Judge B", "n", "Agreement (%) [95% CI]", "Cohen's κ [95% CI]",
                          "Gwet's AC1 [95% CI]", "Pos. agr.", "Neg. agr."], rows,
                         ("; ".join(notes) + ".") if notes else ""))
    gold = agr.get("gold") or []
    if gold:
        out.append(Table("Judges against gold labels. Data: agreement.json.",
                         ["Judge", "n", "Accuracy (%)", "Cohen's κ", "Precision of unsupported",
                          "Recall of unsupported"],
                         [[judge_label(g.get("judge"), run), count(g.get("n")), pct(value(g.get("accuracy"))),
                           coef(value(g.get("cohen_kappa"))), coef(value(g.get("unsupported_precision"))),
                           coef(value(g.get("unsupported_recall")))] for g in gold if isinstance(g, dict)]))
    return out


def panel_blocks(run: Run, figures: dict) -> list:
    """The judge-panel section (panel.json): consensus, prior, each judge's error rates."""
    pan = run.get("panel")
    if not pan:
        return []

    def ci(e):
        return estimate(Estimate.from_dict(e), coef)

    out: list = [Heading("Judge panel")]
    if pan.get("simulated"):
        out.append(Note("Simulated: the panel's judges are simulated judges with declared error rates."))
    prior = pan.get("prior") or {}
    verdicts = pan.get("verdicts") or {}
    text = (f"{pan.get('judge', 'The panel')}: {count(pan.get('n_items'))} items, {len(pan.get('judges', []))} judges"
            + (f", {count(pan.get('iterations'))} EM iterations" if pan.get("method") != "majority" else "")
            + ". Class prior: " + ", ".join(f"{k} {coef(v)}" for k, v in prior.items())
            + (". Consensus verdicts: " + ", ".join(f"{k} {count(v)}" for k, v in verdicts.items()) if verdicts else "")
            + ".")
    out.append(Para(text))
    errs = pan.get("judge_errors", [])
    gold = any(r.get("gold_sensitivity") for r in errs)
    header = ["Judge", "Sensitivity [95% CI]", "Specificity [95% CI]"]
    if gold:
        header += ["Gold sensitivity [95% CI]", "Gold specificity [95% CI]"]
    rows = []
    for r in errs:
        row = [judge_label(r["judge"], run), ci(r.get("sensitivity")), ci(r.get("specificity"))]
        if gold:
            row += [ci(r.get("gold_sensitivity")), ci(r.get("gold_specificity"))]
        rows.append(row)
    defs = pan.get("definitions") or {}
    if not any(value(r.get("sensitivity")) is not None for r in errs):
        out.append(Para("Majority vote has no latent model, so it estimates no error rates "
                        "(memjudge panel --method dawid-skene or one-coin does)."))
        return out
    out.append(Table(f"Each judge's error rates estimated by the panel ({pan.get('method')}) without gold"
                     + (", beside the same measured on gold labels" if gold else "") + ". Data: panel.json.",
                     header, rows, "; ".join(f"{k}: {v}" for k, v in defs.items())))
    g = pan.get("gold") or {}
    if g.get("accuracy"):
        out.append(Table(f"Accuracy against gold ({count(g.get('n_items'))} items with gold). Data: panel.json.",
                         ["Judge", "Accuracy [95% CI]"],
                         [[judge_label(k, run), ci(v)] for k, v in g["accuracy"].items()]))
    cats = pan.get("by_category") or []
    if cats:
        crow = [[str(c.get("category")), judge_label(r["judge"], run), count(r.get("n_items")),
                 ci(r.get("sensitivity")), ci(r.get("specificity"))]
                for c in cats for r in c.get("judge_errors", [])]
        out.append(Table("Error rates per category (a separate fit per category). Data: panel.json.",
                         ["Category", "Judge", "Items", "Sensitivity [95% CI]", "Specificity [95% CI]"], crow))
    if "panel_errors" in figures:
        out.append(FigureBlock(*figures["panel_errors"]))
    return out


def robustness_tables(run: Run) -> list[Table]:
    rob = run.get("robustness") or {}
    out = []
    units = robustness_units(run)
    # every unit as a column while that stays readable; otherwise each judge's first replicate
    primary_only = len(units) > 6
    rates = support_rates(run, primary_only=primary_only)
    if not rates.empty:
        judges = list(dict.fromkeys(rates["judge"]))
        cats = list(dict.fromkeys(rates["category"]))
        rows = []
        for c in cats:
            row = [c]
            for j in judges:
                r = rates[(rates["judge"] == j) & (rates["category"] == c)]
                row.append(estimate(Estimate(r["rate"].iloc[0], r["lo"].iloc[0], r["hi"].iloc[0]))
                           if not r.empty else MISSING)
            rows.append(row)
        overall = {}  # column name as in support_rates → the unit's overall rate
        for u in units:
            if u["overall"] is not None and (u["primary"] or not primary_only):
                overall[judge_label(u["judge"], run) if primary_only else u["label"]] = u["overall"]
        if overall:
            rows.append(["Overall (all categories)"] + [
                estimate(overall[j]) if j in overall else MISSING
                for j in judges])
        out.append(Table(f"Support by category and overall, % [{PERSONA_INTERVAL}]. Data: robustness.json.",
                         ["Category"] + judges, rows,
                         "Support rate = supported / valid verdicts"
                         + (" (strict binary: verdicts other than supported/unsupported left out)"
                            if rob.get("strict_binary") else
                            "; a verdict other than supported/unsupported (e.g. partial) counts as not supported")
                         + "."))
    yn = {True: "yes", False: "no", None: MISSING}
    jrows = []
    for u in units:
        low = u["lowest"]
        rate = next((c["rate"] for c in u["categories"] if c["category"] == low), None)
        low_s = f"{low} ({pct(rate)}%)" if rate is not None else (str(low) if low else MISSING)
        t = u["table"] or {}
        pols, paired = t.get("policies") or {}, t.get("paired") or {}
        faith = {p: pct(value((pols.get(p) or {}).get("faithfulness"))) for p in ("global", "targeted")}
        h = unit_holds(u)
        jrows.append([u["label"], low_s, ", ".join(u["gated"] or []) or MISSING, probability(u["p_gated_lowest"]),
                      f"{faith['global']} / {faith['targeted']}", paired_ci(paired.get("faithfulness")),
                      paired_ci(paired.get("coverage")),
                      yn[h["faithfulness"]], yn[h["coverage"]]])
    if jrows:
        out.append(Table(f"Robustness across judges. Data: robustness.json — {config_line(rob, run)}.",
                         ["Judge", "Lowest category (%)", "Gated", "P(gated is lowest)",
                          "Faith. global / targeted (%)", "Targeted − global faith. (pts)",
                          "Targeted − global coverage (pts)", "Targeted ≥ global: faith.", "coverage"], jrows,
                         "Thresholds refit under each judge's labels; faithfulness are held-out fold means; "
                         f"brackets: {FOLD_INTERVAL}; P(gated is lowest): the share of persona-bootstrap "
                         "resamples in which a gated category has the lowest support (a fraction). "
                         + (ordering_summary(run) or "")))
    trows = []
    for t in rob.get("kendall") or []:
        a, b = (t.get("judge_a"), t.get("judge_b")) if isinstance(t, dict) else (None, None)
        if a is not None and b is not None:
            trows.append([judge_label(a, run), judge_label(b, run), coef(t.get("tau")),
                          pvalue(t.get("p_value")), count(t.get("n_categories"))])
    if trows:
        out.append(Table("Kendall's τ-b between judges' category support rates. Data: robustness.json.",
                         ["Judge A", "Judge B", "τ-b", "p-value", "Categories"], trows))
    return out


def calibration_table(run: Run) -> Table | None:
    """The emphasised (gated) category's bins, when calibration.json has it."""
    cal = calibration_frame(run)
    cat = None if cal.empty else emphasised_category(run, cal)
    if cat is None:
        return None
    sub = cal[cal["category"] == cat].sort_values("lo", kind="stable")
    # Column by column, the values itertuples gives: pandas-stubs types its fields as any scalar.
    columns = zip(sub["lo"], sub["hi"], sub["n"], sub["rate"], sub["ci_lo"], sub["ci_hi"])
    rows = [[coef(lo, 2) if lo == hi else f"{coef(lo, 2)}–{coef(hi, 2)}", count(n),
             estimate(Estimate(rate, ci_lo, ci_hi))] for lo, hi, n, rate, ci_lo, ci_hi in columns]
    judge = (run.get("calibration") or {}).get("judge")
    jn = f" (judge {judge_label(judge, run)})" if judge else ""
    return Table(f"Calibration of the {cat} category{jn}: support by confidence bin. Data: calibration.json.",
                 ["Confidence bin", "Candidates", "Support (%) [95% CI]"], rows)


def corrected_section(run: Run, figures: dict) -> list:
    """The "Judge-corrected estimates" section: estimate.json's three intervals per group (table,
    forest plot, sentences) and compare.json's PPI++ ordering; names `memjudge estimate` when
    estimate.json is absent."""
    est, gold = run.get("estimate"), (run.get("compare") or {}).get("gold")
    rob_ppi = ((run.get("robustness") or {}).get("summary") or {}).get("faithfulness_ppi")
    if not est and not isinstance(gold, dict) and not isinstance(rob_ppi, dict):
        return []
    simulated = simulated_gold(run)
    blocks: list = [Heading("Judge-corrected estimates")]
    if simulated:
        blocks.append(Note("Simulated gold: the \"hand labels\" here are the generated corpus's construction truth "
                           "on a random sample, standing in for a person's labels. The corrected figures show what "
                           "a real gold sample of that size would do; they are not a study of real data."))
    if est:
        groups = [g for g in est.get("groups") or [] if isinstance(g, dict)]
        iv = "persona-cluster bootstrap" if est.get("interval") == "bootstrap" else "iid CLT"
        blocks.append(Para(
            f"Judge {judge_label(est.get('judge', ''), run)}; {count(est.get('n_gold'))} gold labels on "
            f"{count(est.get('n_items'))} items" + (" (weighted by their inclusion probabilities)" if est.get("weighted")
                                                     else "") +
            f". Judge only: the judge's labels, as every other figure of this report. Gold only: the gold labels "
            f"alone. PPI++: the gold labels corrected by the judge's labels on everything (prediction-powered "
            f"inference; valid whatever the judge's errors, narrower than gold only when the judge is informative). "
            f"Effective gold n: how many gold labels alone would give the PPI++ interval's precision. "
            f"Intervals: 95% {iv}."))
        rows = []
        for g in groups:
            rows.append([str(g.get("group")), count(g.get("n_items")), count(g.get("n_gold")),
                         pct(g.get("judge_accuracy_on_gold")),
                         *[estimate(Estimate.from_dict(g.get(m))) for m, _ in METHODS],
                         coef(g.get("ppi_lambda"), 2), count(g.get("effective_gold_n"))])
        blocks.append(Table("Support rate three ways, % [95% CI]. Data: estimate.json.",
                            ["Group", "Items", "Gold", "Judge accuracy on gold (%)", "Judge only", "Gold only",
                             "PPI++", "λ", "Effective gold n"], rows,
                            f"λ = 1 is plain PPI, λ = 0 gold only. {MISSING}: undefined (e.g. a group without gold)."))
        if "ppi_forest" in figures:
            blocks.append(FigureBlock(*figures["ppi_forest"]))
        sentences = [s for s in (estimate_sentence(g, simulated) for g in groups) if s]
        if sentences:
            blocks.append(Bullets(sentences))
        for n in est.get("notes") or []:
            blocks.append(Note(str(n)))
    else:
        blocks.append(Note(f"estimate.json is absent: {PARTS['estimate.json'][1]} writes the support rates "
                           "judge only, gold only and PPI++."))
    if isinstance(gold, dict):
        from memjudge.comparison.gold import ordering_sentence

        wa = gold.get("write_all") or {}
        blocks.append(Para(
            f"Retention policies (compare --gold): Table 1's PPI++ column estimates each policy's held-out "
            f"faithfulness with {count(gold.get('n_matched'))} {'simulated ' if simulated else ''}gold labels; "
            f"write-all {pct(wa.get('judge'))}% by the judge, {pct(wa.get('ppi'))}% corrected. "
            + ordering_sentence(gold.get("ordering") or {}, (gold.get("paired") or {}).get("ppi"))))
    if isinstance(rob_ppi, dict) and num(rob_ppi.get("judges_defined")):
        n_j = count(((run.get("robustness") or {}).get("summary") or {}).get("judges"))
        blocks.append(Para(
            f"Across judges (robustness --gold): PPI++ puts targeted ≥ global on held-out faithfulness under "
            f"{count(rob_ppi.get('judges'))} of {count(rob_ppi.get('judges_defined'))} judges' labels; each judge's own "
            f"ordering survives the correction for {count(rob_ppi.get('survives_judges'))} of {n_j} judges. "
            "Data: robustness.json (summary.faithfulness_ppi)."))
    return blocks


def inventory(run: Run) -> tuple[Table, list[str], list[str]]:
    present, absent, rows = [], [], []
    for name, (part, cmd) in PARTS.items():
        if part in run.data:
            present.append(part)
            obj = run.data[part]
            if isinstance(obj, pd.DataFrame):
                what = f"{len(obj):,} rows"
            else:
                what = ", ".join(list(obj)[:8]) + (", …" if len(obj) > 8 else "")
            rows.append([name, "present", what])
        elif part not in QUIET_PARTS:
            absent.append(part)
            rows.append([name, "absent", f"written by {cmd}"])
    return Table("Contents of the run directory.", ["File", "Status", "Holds / how to produce it"], rows), present, absent


def labels_summary(run: Run) -> Table | None:
    lab = run.get("labels")
    if lab is None or lab.empty:
        return None
    rows = []
    for (judge, rubric), g in lab.groupby(["judge", "rubric"], sort=False):
        rows.append([judge_label(judge, run), str(rubric), f"{g['assertion_id'].nunique():,}",
                     f"{g['persona_id'].nunique():,}", f"{g['replicate'].nunique():,}",
                     f"{int(g['verdict'].isna().sum()):,}"])
    return Table("Labels in this run (counts of rows, not statistics). Data: labels.jsonl.",
                 ["Judge", "Rubric", "Assertions", "Personas", "Replicates", "Null verdicts"], rows)


def _flatten(obj: dict, prefix: str = "", depth: int = 2) -> list[list[str]]:
    """key.sub → value rows; deeper structures as (shortened) JSON; unset (null) keys left out."""
    rows = []
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if v is None:
            continue
        if isinstance(v, dict) and depth > 1 and v:
            rows += _flatten(v, key + ".", depth - 1)
            continue
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False)
        v = str(v)
        rows.append([key, v if len(v) <= 100 else v[:97] + "..."])
    return rows


def config_table(run: Run) -> Table | None:
    cfg = run.get("configuration")
    if not cfg:
        return None
    return Table("Run configuration. Data: config.json.", ["Key", "Value"], _flatten(cfg))


def key_table(run: Run, part: str, caption: str) -> Table | None:
    obj = run.get(part)
    return Table(caption, ["Key", "Value"], _flatten(obj)) if obj else None


def scoring_table(run: Run) -> Table | None:
    summ = run.get("scoring")
    if not summ:
        return None
    return Table("Scoring summary (calls, tokens, cost). Data: summary.json.", ["Key", "Value"], _flatten(summ))


def simulation_table(run: Run) -> Table | None:
    sim = run.get("simulation")
    summ = (sim or {}).get("summary")
    if not isinstance(summ, dict):
        return None
    rows = []
    for k, v in summ.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a} {b:,}" if isinstance(b, int) else f"{a} {b}" for a, b in v.items())
        elif isinstance(v, float):
            v = f"{pct(v)}%"
        elif isinstance(v, int):
            v = f"{v:,}"
        rows.append([str(k), str(v)])
    return Table("Simulated corpus (construction truth, not a judge). Data: simulate.json.", ["Quantity", "Value"], rows)
