"""XSumFaith (google-research-datasets/xsum_hallucination_annotations, CC BY 4.0).

`factuality_annotations_xsum_summaries.csv`: summaries of BBC articles by four systems, each
judged `is_factual` yes/no by up to three crowd workers. Mapping: item (assertion_id) =
"{bbcid}|{system}", persona = bbcid, category = system, text = the summary; one label per
annotation with judge = worker_id, yes → supported, no → unsupported, rubric
`xsumfaith-factuality`, replicate 0. The file's `NULL` (no answer) becomes verdict null with
the reason in `error`, as for a judge that gave no valid answer.

worker_id values (wid_0..wid_2) are slots, not fixed people: agreement "between judges" here
is agreement between annotation slots, which suits multi-rater statistics (Fleiss' κ,
Krippendorff's α, Gwet's AC1) but not per-person claims. The article texts are not in the
release, so there are no sources and no confidences: the import is for agreement studies.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memjudge.errors import InputError
from memjudge.importers import Imported, Importer, csv_records, empty_labels_frame

FACTUALITY = "factuality_annotations_xsum_summaries.csv"
RUBRIC = "xsumfaith-factuality"
_VERDICTS = {"yes": "supported", "no": "unsupported"}
_MISSING = "NULL"
_REQUIRED = ["bbcid", "system", "summary", "is_factual", "worker_id"]


def read_factuality(path: Path) -> tuple[list[dict], list[dict]]:
    items: dict[str, dict] = {}
    labels: list[dict] = []
    seen: dict[tuple[str, str], int] = {}
    for line, rec in csv_records(path, _REQUIRED):
        bbcid, system, worker = (rec[c].strip() for c in ("bbcid", "system", "worker_id"))
        for col, v in (("bbcid", bbcid), ("system", system), ("worker_id", worker)):
            if not v:
                raise InputError(path, f"empty {col!r}", line)
        summary = rec["summary"]
        if not summary.strip():
            raise InputError(path, "empty 'summary'", line)
        aid = f"{bbcid}|{system}"
        item = items.get(aid)
        if item is None:
            items[aid] = {"persona_id": bbcid, "assertion_id": aid, "category": system,
                          "confidence": None, "text": summary, "_line": line}
        elif item["text"] != summary:
            raise InputError(path, f"summary of {aid!r} differs from the one at line {item['_line']}", line)
        if (aid, worker) in seen:
            raise InputError(path, f"duplicate annotation of {aid!r} by {worker!r} (first at line {seen[aid, worker]})", line)
        seen[aid, worker] = line
        raw = rec["is_factual"].strip()
        if raw == _MISSING:
            verdict, error = None, "the annotator gave no answer (is_factual = NULL in the source file)"
        elif raw.lower() in _VERDICTS:
            verdict, error = _VERDICTS[raw.lower()], None
        else:
            raise InputError(path, f"unknown 'is_factual' value {raw!r} (expected yes, no or NULL)", line)
        labels.append({"assertion_id": aid, "persona_id": bbcid, "category": system, "judge": worker,
                       "rubric": RUBRIC, "replicate": 0, "verdict": verdict, "error": error})
    if not items:
        raise InputError(path, "no annotations")
    return list(items.values()), labels


class XSumFaithImporter(Importer):
    name = "xsumfaith"
    description = "XSum hallucination annotations: 3 crowd judgements of factuality per summary (no article texts)"
    licence = "CC BY 4.0 (google-research-datasets/xsum_hallucination_annotations)"
    attribution = (
        "Maynez, Narayan, Bohnet, McDonald: On Faithfulness and Factuality in Abstractive "
        "Summarization (ACL 2020), https://github.com/google-research-datasets/xsum_hallucination_annotations"
    )
    required_files = (FACTUALITY,)

    def load(self, folder: Path) -> Imported:
        cand_rows, label_rows = read_factuality(folder / FACTUALITY)
        candidates = pd.DataFrame(cand_rows).drop(columns=["_line"])
        return Imported(
            dataset=self.name,
            candidates=candidates,
            sources=None,
            labels=empty_labels_frame(label_rows),
            licence=self.licence,
            attribution=self.attribution,
            notes=[
                "no sources: the BBC article texts are not part of the release, so only candidates and labels are written",
                "no confidences: for agreement studies, not for policy comparison",
                "judges wid_0..wid_2 are annotation slots, not fixed people",
            ],
        )
