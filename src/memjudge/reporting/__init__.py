"""`memjudge report`: a run directory's JSON turned into Markdown, HTML and figures.

The report never recomputes a statistic. Every number it prints or draws is read from the
files the analysis commands wrote with `--out RUN_DIR`:

- `config.json`, `labels.jsonl`, `coverage.jsonl` (`memjudge score` / `memjudge simulate`),
- `noise.json` and `agreement.json` (`memjudge noise` / `memjudge agreement`),
- `compare.json`, `sweep.json`, `calibration.json` (`memjudge compare`),
- `robustness.json` (`memjudge robustness`),
- `panel.json` (`memjudge panel`).
- `estimate.json` (`memjudge estimate`) and the ``gold`` block of `compare.json`
  (`memjudge compare --gold`): the "Judge-corrected estimates" section.

Any of them may be absent: the report covers the parts present and says which are missing
and which command writes them.

Layout, one concept a module, imports running down this list:

- `reader`: the run folder reader (`load_run` → `Run`) and the facts about a run,
- `frames`: tidy frames read from the JSON (the figures' and tables' inputs),
- `blocks`: the document model (heading, paragraph, table, figure, note),
- `findings`: the sentences (what was done, caveats, findings),
- `tables`: the tables and the sections made of them,
- `figures`: the figures as pure functions of tidy frames; `run_figures`: which a run gets,
- `document`: the assembled document, its Markdown and `report()`; `html`: its HTML page.
"""

from memjudge.reporting.document import ReportResult, parse_formats, report

__all__ = ["ReportResult", "parse_formats", "report"]
