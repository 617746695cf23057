"""`memjudge report`: the document assembled from a run's sections, rendered to Markdown
(here) and HTML (`memjudge.reporting.html`), written beside its figures."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memjudge._util.text import MISSING, coef, count, num, pct
from memjudge.errors import UsageError
from memjudge.reporting.behind import items_behind, view_command
from memjudge.reporting.blocks import (
    Bullets,
    FigureBlock,
    Heading,
    Note,
    Para,
    Table,
    numeric_columns,
)
from memjudge.reporting.cascade_section import cascade_blocks
from memjudge.reporting.diff_section import diff_blocks
from memjudge.reporting.findings import findings, judge_caveats, what_was_done
from memjudge.reporting.html import to_html
from memjudge.reporting.reader import PARTS, Run, is_simulated, load_run, simulated_gold
from memjudge.reporting.run_figures import make_figures
from memjudge.reporting.tables import (
    agreement_tables,
    calibration_table,
    config_table,
    corrected_section,
    inventory,
    key_table,
    labels_summary,
    noise_tables,
    panel_blocks,
    robustness_tables,
    scoring_table,
    simulation_table,
    table1,
    table1_ppi,
)

FORMATS = ("md", "html")


@dataclass
class ReportResult:
    """What `report()` wrote and which parts of the run it found."""

    run_dir: Path
    markdown: Path | None
    html: Path | None
    figures: list[Path]
    present: list[str]
    absent: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def written(self) -> list[Path]:
        return [p for p in (self.markdown, self.html) if p is not None] + list(self.figures)

    def to_dict(self) -> dict:
        return {"run_dir": str(self.run_dir), "markdown": _s(self.markdown), "html": _s(self.html),
                "figures": [str(p) for p in self.figures], "present": self.present, "absent": self.absent,
                "notes": self.notes}


def _s(p):
    return None if p is None else str(p)


def signed(v) -> str:
    """A log-odds threshold, always signed, two decimals."""
    x = num(v)
    return MISSING if x is None else f"{x:+.2f}"


def build_document(run: Run, figures: dict[str, tuple[Path, str]]) -> tuple[list, list[str], list[str]]:
    blocks: list = [Heading("memjudge report", 1),
                    Para(f"Run directory: {run.path.resolve().name}. Every number below is read from the JSON "
                         "files in that directory; none is recomputed here."), view_command(run)]
    inv, present, absent = inventory(run)
    done = what_was_done(run)
    if done:
        blocks += [Heading("What was done"), Bullets(done)]
    for caveat in judge_caveats(run):
        blocks.append(Note(caveat))
    sims = _simulated_judges(run)
    if sims:
        blocks.append(Note("Simulated results: labels from " + ", ".join(sims) + " are simulated (a declared "
                           "noise model, or a generated corpus's construction truth), not a real judge's verdicts."))
    f = findings(run)
    blocks.append(Heading("Findings"))
    blocks.append(Bullets(f) if f else Para("No analysis results (noise, agreement, compare, robustness) in this "
                                            "run, so there are no findings to state."))
    if absent:
        blocks.append(Note("Absent from this run: " + "; ".join(
            f"{n} ({PARTS[n][1]})" for n, (p, _) in PARTS.items() if p in absent) + "."))

    def fig(name):
        if name in figures:
            blocks.append(FigureBlock(*figures[name]))

    blocks += diff_blocks(run)
    blocks += cascade_blocks(run)
    cmp_ = run.get("compare")
    if cmp_ or "faithfulness_vs_coverage" in figures:
        blocks.append(Heading("Retention policies"))
        if cmp_:
            blocks.append(table1_ppi(table1(cmp_, run=run), cmp_, simulated_gold(run)))
            blocks += items_behind(run, "compare")
        fig("faithfulness_vs_coverage")
        fig("fold_differences")
    blocks += corrected_section(run, figures)
    if run.get("robustness") or "calibration" in figures:
        blocks.append(Heading("Category support and robustness across judges"))
        fig("support_by_category")
        blocks += robustness_tables(run)
        fig("calibration")
        ct = calibration_table(run)
        if ct:
            blocks.append(ct)
    if run.get("noise"):
        blocks.append(Heading("Judge noise"))
        blocks += noise_tables(run) + items_behind(run, "noise")
        fig("flip_rate")
    if run.get("agreement"):
        blocks.append(Heading("Agreement between judges"))
        blocks += agreement_tables(run) + items_behind(run, "agreement")
        fig("agreement")
    blocks += panel_blocks(run, figures)
    q = run.get("judge_quality")
    if q:
        blocks.append(Heading("The embedded judge against gold labels"))
        keys: list[tuple[str, str, Callable[[object], str]]] = [("judge", "Judge", str), ("n", "Items (replicate 0)", count), ("auc", "AUC of the log-odds", coef),
                ("balanced_accuracy", "Balanced accuracy at the threshold", coef), ("accuracy", "Accuracy (%)", pct),
                ("threshold", "Threshold (log-odds)", signed),
                ("in_sample_best_threshold", "In-sample best threshold (optimistic)",
                 signed),
                ("in_sample_best_balanced_accuracy", "In-sample best balanced accuracy (optimistic)", coef)]
        rows = [[label, fmt(q[k])] for k, label, fmt in keys if k in q]
        blocks.append(Table("Embedded judge against the corpus's gold labels. Data: local_judge.json.",
                            ["Measure", "Value"], rows, str(q.get("note", ""))))
    from memjudge.reporting.coverage import coverage_blocks

    blocks += coverage_blocks(run)
    blocks.append(Heading("Run"))
    ci = run.get("compare_inputs")
    if ci:
        def show(v):
            # paths relative to the run directory, so that a report moved with its inputs still reads right
            if isinstance(v, list):
                return ", ".join(show(x) for x in v)
            if isinstance(v, str) and os.path.isabs(v) and k in ("candidates", "labels", "coverage"):
                return os.path.relpath(v, run.path.resolve())
            return str(v)

        rows = []
        for k, v in ci.items():
            rows.append([str(k), show(v)])
        blocks.append(Table("Inputs of the policy comparison (paths relative to the run directory). "
                            "Data: compare_inputs.json.", ["Input", "Value"], rows))
    for t in (config_table(run), scoring_table(run), simulation_table(run), labels_summary(run),
              key_table(run, "demo", "Demo timings and corpus (seconds; counts). Data: demo.json."), inv):
        if t is not None:
            blocks.append(t)
    if run.get("coverage") is not None:
        cov = run.get("coverage")
        blocks.append(Para(f"coverage.jsonl: {len(cov):,} reference facts over {cov['persona_id'].nunique():,} "
                           "personas (the fact → assertion map used for estimated coverage)."))
    return blocks, present, absent


def _simulated_judges(run: Run) -> list[str]:
    names: list[str] = []
    for part in ("noise", "agreement", "robustness", "compare", "calibration", "sweep"):
        obj = run.get(part)
        if not obj:
            continue
        text = json.dumps(obj)
        names += re.findall(r'"(sim:[^"]+)"', text)
        if run.simulated_truth and '"gold"' in text:
            names.append("gold")
    lab = run.get("labels")
    if lab is not None:
        names += [j for j in lab["judge"].unique() if is_simulated(j) or (j == "gold" and run.simulated_truth)]
    return list(dict.fromkeys(names))


# Characters that would start markup; `_` only at a word's edge and `](` only as a link's
# middle, so that names like per_category and intervals like [1.09, 4.17] stay readable raw.
_MD_SPECIAL = re.compile(r"([\\`*<>|#]|(?<!\w)_|_(?!\w)|\[(?=[^\]]*\]\())")


def md_escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def to_markdown(blocks: list, base: Path) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + md_escape(b.text))
        elif isinstance(b, Para):
            out.append(md_escape(b.text))
        elif isinstance(b, Note):
            out.append("> **Note.** " + md_escape(b.text))
        elif isinstance(b, Bullets):
            out.append("\n".join("- " + md_escape(t) for t in b.items))
        elif isinstance(b, Table):
            lines = ["**" + md_escape(b.caption) + "**", "",
                     "| " + " | ".join(md_escape(h) for h in b.header) + " |",
                     "|" + "|".join("---:" if num_col else "---" for num_col in numeric_columns(b)) + "|"]
            lines += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in b.rows]
            if b.notes:
                lines += ["", "*" + md_escape(b.notes) + "*"]
            out.append("\n".join(lines))
        elif isinstance(b, FigureBlock):
            rel = b.path.relative_to(base) if b.path.is_relative_to(base) else b.path
            out.append(f"![{md_escape(b.caption)}]({rel.as_posix()})\n\n*{md_escape(b.caption)}*")
    return "\n\n".join(out) + "\n"


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    items = [x.strip().lower() for x in (text.split(",") if isinstance(text, str) else text) if x.strip()]
    bad = [x for x in items if x not in FORMATS]
    if bad or not items:
        raise UsageError(f"report: unknown --format {', '.join(bad) or '(empty)'} (expected md, html or md,html)")
    return tuple(dict.fromkeys(items))


def report(run_dir, formats: str | Sequence[str] = FORMATS, out_dir=None, dpi: int | None = None) -> ReportResult:
    """Write report.md / report.html and the figures (PNG) for a run directory.

    `out_dir` defaults to the run directory itself.
    """
    formats = parse_formats(formats)
    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else run.path
    out.mkdir(parents=True, exist_ok=True)
    figs = make_figures(run, out, dpi=dpi)
    blocks, present, absent = build_document(run, figs)
    md_path = html_path = None
    if "md" in formats:
        md_path = out / "report.md"
        _write(md_path, to_markdown(blocks, out))
    if "html" in formats:
        html_path = out / "report.html"
        _write(html_path, to_html(blocks))
    notes = [f"absent: {p}" for p in absent]
    return ReportResult(run.path, md_path, html_path, [p for p, _ in figs.values()], present, absent, notes)


def _write(path: Path, text: str) -> None:
    from memjudge.formats import write_atomic

    write_atomic(path, text)
