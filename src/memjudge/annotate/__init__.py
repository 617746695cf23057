"""Gold labels by hand: `memjudge annotate` (a local labelling page) and Label Studio in and out.

- `gold`: the gold file (append-only JSONL, one decision per line, fsynced before the page
  moves on; the latest row per (assertion_id, annotator) counts) and its readers.
- `items`: what is labelled — a candidates-like file with its sources and, on request, the
  judge's verdicts.
- the page and its server are the annotate mode of `memjudge.web`.
- `label_studio`: tasks JSON + labelling config for Label Studio, and its JSON export read
  back as a gold file (`memjudge import label-studio`).
"""

from memjudge.annotate.gold import GOLD_FIELDS, VERDICTS, GoldWriter, gold_raters, latest_gold, read_gold_rows

__all__ = ["GOLD_FIELDS", "VERDICTS", "GoldWriter", "gold_raters", "latest_gold", "read_gold_rows"]
