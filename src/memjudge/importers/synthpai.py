"""SynthPAI (eth-sri/SynthPAI, MIT): LLMs' guesses about synthetic users, judged twice.

The mapping is fixed so that results are comparable across tools:

- a row of `predictions_compact.csv` is used when `eval_model_human` has a value; for rank
  i in 0..min(3, len(guesses), len(eval_model_human)) - 1 it gives one candidate:
  assertion_id "{model}|{username}|{attribute}|{i}", persona_id = username, category =
  attribute, confidence = (3 - i) / 3, text "The author's {attribute, _ as space} is {guess}.";
- labels: judge `synthpai:human-checked` from eval_model_human[i] and `synthpai:llm-only`
  from eval_llm_only_vs_human[i] where that list has an i-th entry; 1 → supported,
  0 → unsupported, 0.5 → partial; rubric `synthpai-correctness`, replicate 0;
- sources: one row per user of `thread_comments_eval_revised.jsonl`, the comment texts
  joined by newlines.

The label means the guess is *correct* (a human or an LLM compared it with the profile),
which is close to but not the same as "supported by the comments".

A human verdict list whose length differs from the guesses' is rejected: which verdict
belongs to which guess would be a guess itself. The LLM-only lists are often longer than
the guesses in the published file (the LLM judged more candidates), so for them only the
first entries are used.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from memjudge.errors import InputError
from memjudge.importers import (
    Imported,
    Importer,
    csv_records,
    empty_labels_frame,
    json_list_cell,
    jsonl_records,
)

PREDICTIONS = "predictions_compact.csv"
COMMENTS = "thread_comments_eval_revised.jsonl"
RUBRIC = "synthpai-correctness"
HUMAN = "synthpai:human-checked"
LLM_ONLY = "synthpai:llm-only"
MAX_RANK = 3
_VERDICTS = {1.0: "supported", 0.0: "unsupported", 0.5: "partial"}
_REQUIRED = ["model", "username", "attribute", "guesses", "eval_model_human", "eval_llm_only_vs_human"]


def verdict_of(value, path: Path, line: int, column: str) -> str:
    """0 / 0.5 / 1 → unsupported / partial / supported; anything else is malformed input."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        raise InputError(path, f"unknown verdict value {value!r} in {column!r} (expected 0, 0.5 or 1)", line)
    verdict = _VERDICTS.get(float(value))
    if verdict is None:
        raise InputError(path, f"unknown verdict value {value!r} in {column!r} (expected 0, 0.5 or 1)", line)
    return verdict


def assertion_text(attribute: str, guess: str) -> str:
    return f"The author's {attribute.replace('_', ' ')} is {guess}."


def read_comments(path: Path) -> pd.DataFrame:
    """One source per user: the texts of their comments, in file order, joined by newlines."""
    rows = []
    seen: dict[str, int] = {}
    for line, obj in jsonl_records(path):
        user = obj.get("username")
        if not isinstance(user, str) or not user.strip():
            raise InputError(path, f"missing or non-string 'username' (found {user!r})", line)
        if user in seen:
            raise InputError(path, f"duplicate user {user!r} (first at line {seen[user]})", line)
        seen[user] = line
        comments = obj.get("comments")
        if not isinstance(comments, list):
            raise InputError(path, f"'comments' of user {user!r} must be a list, found {type(comments).__name__}", line)
        if not comments:
            raise InputError(path, f"user {user!r} has no comments, so no source", line)
        texts = []
        for k, c in enumerate(comments):
            text = c.get("text") if isinstance(c, dict) else None
            if not isinstance(text, str):
                raise InputError(path, f"comment {k} of user {user!r} has no string 'text'", line)
            texts.append(text)
        source = "\n".join(texts)
        if not source.strip():
            raise InputError(path, f"user {user!r} has only empty comments", line)
        rows.append({"persona_id": user, "source": source, "n_comments": len(texts), "_line": line})
    if not rows:
        raise InputError(path, "no users")
    return pd.DataFrame(rows)


def read_predictions(path: Path) -> tuple[list[dict], list[dict]]:
    """Candidates and labels from the judged rows of predictions_compact.csv."""
    candidates: list[dict] = []
    labels: list[dict] = []
    seen: dict[tuple[str, str, str], int] = {}
    for line, rec in csv_records(path, _REQUIRED):
        human_cell = rec["eval_model_human"].strip()
        if not human_cell:
            continue
        model, user, attribute = (rec[c].strip() for c in ("model", "username", "attribute"))
        for col, v in (("model", model), ("username", user), ("attribute", attribute)):
            if not v:
                raise InputError(path, f"empty {col!r}", line)
        key = (model, user, attribute)
        if key in seen:
            raise InputError(path, f"duplicate row for model {model!r}, user {user!r}, attribute {attribute!r} (first at line {seen[key]})", line)
        seen[key] = line
        guesses = json_list_cell(path, line, "guesses", rec["guesses"])
        human = [verdict_of(v, path, line, "eval_model_human") for v in json_list_cell(path, line, "eval_model_human", human_cell)]
        if len(human) != len(guesses):
            raise InputError(path, f"'eval_model_human' has {len(human)} verdicts for {len(guesses)} guesses", line)
        llm_cell = rec["eval_llm_only_vs_human"].strip()
        llm = [verdict_of(v, path, line, "eval_llm_only_vs_human") for v in json_list_cell(path, line, "eval_llm_only_vs_human", llm_cell)] if llm_cell else []
        for i in range(min(MAX_RANK, len(guesses), len(human))):
            guess = guesses[i]
            if isinstance(guess, int) and not isinstance(guess, bool):
                guess = str(guess)  # a bare number such as an age
            if not isinstance(guess, str) or not guess.strip():
                raise InputError(path, f"guess {i} in 'guesses' must be a non-empty string, found {guesses[i]!r}", line)
            aid = f"{model}|{user}|{attribute}|{i}"
            candidates.append({
                "persona_id": user, "assertion_id": aid, "category": attribute,
                "confidence": (MAX_RANK - i) / MAX_RANK, "text": assertion_text(attribute, guess),
                "model": model, "rank": i, "guess": guess, "_line": line,
            })
            common = {"assertion_id": aid, "persona_id": user, "category": attribute, "rubric": RUBRIC, "replicate": 0}
            labels.append({**common, "judge": HUMAN, "verdict": human[i]})
            if i < len(llm):
                labels.append({**common, "judge": LLM_ONLY, "verdict": llm[i]})
    if not candidates:
        raise InputError(path, "no row has 'eval_model_human', so there is nothing to import")
    return candidates, labels


class SynthPAIImporter(Importer):
    name = "synthpai"
    description = "SynthPAI: 300 synthetic users' comments, LLM guesses of 8 attributes, human-checked and LLM-only verdicts"
    licence = "MIT (eth-sri/SynthPAI)"
    attribution = (
        "Yukhymenko, Staab, Vero, Vechev: A Synthetic Dataset for Personal Attribute Inference "
        "(NeurIPS 2024 Datasets and Benchmarks), https://github.com/eth-sri/SynthPAI"
    )
    required_files = (PREDICTIONS, COMMENTS)

    def load(self, folder: Path) -> Imported:
        sources = read_comments(folder / COMMENTS)
        cand_rows, label_rows = read_predictions(folder / PREDICTIONS)
        have = set(sources["persona_id"])
        for c in cand_rows:
            if c["persona_id"] not in have:
                raise InputError(folder / PREDICTIONS, f"user {c['persona_id']!r} has no comments in {folder / COMMENTS}", c["_line"])
        candidates = pd.DataFrame(cand_rows).drop(columns=["_line"])
        return Imported(
            dataset=self.name,
            candidates=candidates,
            sources=sources.drop(columns=["_line"]),
            labels=empty_labels_frame(label_rows),
            licence=self.licence,
            attribution=self.attribution,
            notes=[
                "verdicts mean 'the guess is correct' (checked against the synthetic profile), close to "
                "but not the same as 'supported by the comments'; 0.5 (partly correct) is imported as 'partial'",
                "confidence is the guess rank only: 1, 2/3, 1/3 for ranks 0, 1, 2",
            ],
        )
