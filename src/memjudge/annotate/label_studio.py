"""Label Studio both ways: tasks out, a JSON export back in as a gold file.

Out (`memjudge annotate ITEMS --export label-studio --out TASKS.json`): a JSON list of tasks,
each `{"data": {assertion_id, persona_id, category, text, source, ...extra columns}}`, and
beside it `TASKS.label_config.xml`, the labelling config to paste into the project's
Settings → Labeling Interface: the source and the assertion as `Text`, a single `Choices`
control named `verdict` (supported / unsupported / partial, hotkeys s/u/p) and an optional
`TextArea` named `note`.

In (`memjudge import label-studio EXPORT.json --out GOLD.jsonl`): Label Studio's JSON export
(Export → JSON: a list of tasks, each with `data` and `annotations`; an annotation has
`result` regions `{from_name, to_name, type, value}`, `completed_by`, `was_cancelled`,
`created_at`/`updated_at`; format documented at https://labelstud.io/guide/task_format and
https://labelstud.io/guide/export). One gold row per (assertion, annotator): the annotation
updated last (ties: the later in the file). The annotator is `completed_by`: an object's
`email` (else `ls-user-<id>`), or for a bare user id `ls-user-<id>`. Cancelled (skipped)
annotations and annotations without a `verdict` choice are left out and counted; a verdict
outside the three is an error naming the task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from memjudge.annotate.gold import GOLD_FIELDS, VERDICTS
from memjudge.errors import InputError

LABEL_CONFIG = """<View>
  <Header value="Source"/>
  <Text name="source" value="$source"/>
  <Header value="Assertion"/>
  <Text name="text" value="$text"/>
  <Text name="category" value="$category"/>
  <Choices name="verdict" toName="text" choice="single" showInline="true" required="true">
    <Choice value="supported" hotkey="s"/>
    <Choice value="unsupported" hotkey="u"/>
    <Choice value="partial" hotkey="p"/>
  </Choices>
  <TextArea name="note" toName="text" placeholder="note (optional)" maxSubmissions="1" editable="true"/>
</View>
"""

TASK_FIELDS = ["assertion_id", "persona_id", "category", "text", "source"]


def tasks(items: pd.DataFrame) -> list[dict]:
    """Label Studio tasks for items with a `source` column (memjudge.annotate.items.load_items)."""
    from memjudge.formats import frame_records

    cols = TASK_FIELDS + [c for c in items.columns if c not in TASK_FIELDS]
    if "confidence" in cols and items["confidence"].isna().all():  # read_candidates adds it when absent
        cols.remove("confidence")
    return [{"data": rec} for rec in frame_records(items[cols])]


def config_path(tasks_path) -> Path:
    p = Path(tasks_path)
    return p.with_name(p.stem + ".label_config.xml")


def export_tasks(items: pd.DataFrame, out) -> tuple[Path, Path]:
    """Write TASKS.json and TASKS.label_config.xml; returns both paths."""
    from memjudge.formats import write_atomic, write_json

    out = Path(out)
    if out.is_dir():
        raise InputError(out, "is a directory, expected the tasks file to write (e.g. tasks.json)")
    write_json(out, tasks(items))
    cfg = config_path(out)
    write_atomic(cfg, LABEL_CONFIG)
    return out, cfg


# ---------------------------------------------------------------------------------------
# the export, back


def annotator_name(completed_by) -> str:
    if isinstance(completed_by, dict):
        email = completed_by.get("email")
        if isinstance(email, str) and email.strip():
            return email.strip()
        if completed_by.get("id") is not None:
            return f"ls-user-{completed_by['id']}"
    elif isinstance(completed_by, bool):
        pass
    elif isinstance(completed_by, int):
        return f"ls-user-{completed_by}"
    elif isinstance(completed_by, str) and completed_by.strip():
        return completed_by.strip()
    return "ls-user-unknown"


def _region(result: list, name: str, kind: str):
    for r in result:
        if isinstance(r, dict) and r.get("from_name") == name and r.get("type") == kind:
            return r.get("value") or {}
    return None


def read_export(path) -> tuple[pd.DataFrame, dict]:
    """Gold rows (GOLD_FIELDS) from a Label Studio JSON export, and counts of what was read."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "no such file" if not path.exists() else "is a directory, expected a Label Studio JSON export")
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(path, "not valid UTF-8") from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e.msg})", e.lineno) from None
    if not isinstance(data, list):
        raise InputError(path, f"expected Label Studio's JSON export (a list of tasks), found a JSON {type(data).__name__}")
    best: dict[tuple[str, str], tuple] = {}
    counts: dict[str, Any] = {"tasks": len(data), "annotations": 0, "cancelled": 0, "without_verdict": 0, "superseded": 0}
    order = 0
    for k, task in enumerate(data, start=1):
        where = f"task {k}" + (f" (id {task.get('id')})" if isinstance(task, dict) and task.get("id") is not None else "")
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise InputError(path, f"{where}: expected an object with 'data' (Label Studio's JSON export, not JSON-MIN or CSV)")
        aid = task["data"].get("assertion_id")
        if isinstance(aid, bool) or not isinstance(aid, (str, int)) or not str(aid).strip():
            raise InputError(path, f"{where}: no data.assertion_id (were the tasks written by memjudge annotate --export label-studio?)")
        anns = task.get("annotations", task.get("completions")) or []
        if not isinstance(anns, list):
            raise InputError(path, f"{where}: 'annotations' must be a list")
        for ann in anns:
            if not isinstance(ann, dict):
                raise InputError(path, f"{where}: an annotation must be an object")
            counts["annotations"] += 1
            if ann.get("was_cancelled"):
                counts["cancelled"] += 1
                continue
            result = ann.get("result") or []
            value = _region(result if isinstance(result, list) else [], "verdict", "choices")
            choices = value.get("choices") if value is not None else None
            if not choices:
                counts["without_verdict"] += 1
                continue
            if not isinstance(choices, list) or len(choices) != 1 or choices[0] not in VERDICTS:
                raise InputError(path, f"{where}: verdict {choices!r} is not one of {', '.join(VERDICTS)}")
            text = (_region(result, "note", "textarea") or {}).get("text")
            note = "\n".join(map(str, text)) if isinstance(text, list) else (text if isinstance(text, str) else None)
            when = ann.get("updated_at") or ann.get("created_at")
            stamp = pd.to_datetime(when, utc=True, errors="coerce") if when else pd.NaT
            key = (str(aid), annotator_name(ann.get("completed_by")))
            order += 1
            rank = (stamp.value if not pd.isna(stamp) else -(2 ** 62), order)
            row = {"assertion_id": key[0], "verdict": choices[0], "annotator": key[1], "note": note or None,
                   "labelled_at": when if isinstance(when, str) else None}
            if key in best:
                counts["superseded"] += 1
                if rank <= best[key][0]:
                    continue
            best[key] = (rank, k, row)
    rows = [r for _, _, r in sorted(best.values(), key=lambda v: (v[1], v[2]["annotator"]))]
    frame = pd.DataFrame(rows, columns=GOLD_FIELDS)
    counts["gold_rows"] = len(frame)
    counts["annotators"] = sorted(frame["annotator"].unique().tolist())
    return frame, counts


def import_export(path, out) -> dict:
    """Read a Label Studio JSON export and write the gold file `out` (replaced atomically)."""
    from memjudge.formats import frame_records, write_jsonl

    frame, counts = read_export(path)
    if frame.empty:
        raise InputError(path, f"no annotation with a verdict ({counts['annotations']} annotations, "
                               f"{counts['cancelled']} cancelled, {counts['without_verdict']} without a verdict)")
    out = Path(out)
    if out.is_dir():
        raise InputError(out, "is a directory, expected the gold file to write (e.g. gold.jsonl)")
    write_jsonl(out, frame_records(frame))
    return dict(counts, source=str(path), out=str(out))


__all__ = ["LABEL_CONFIG", "TASK_FIELDS", "annotator_name", "config_path", "export_tasks", "import_export", "read_export", "tasks"]
