"""Two more reads tried for the embedded judge's weak spot, wrong-person attribution (a friend's
trait asserted of the user), measured on the tuning corpus only and not adopted.

    python bench/attribution_probes.py scores   # the two reads of dev's first 40 items per kind (resumable)
    python bench/attribution_probes.py report   # AUC per kind beside the judge's saved rubric3 verdict

- `swap`: the same rubric prompt with the assertion said of someone else ("Someone the user
  mentions (not the user themself): makes pottery."). If the model read who a fact is about, a
  wrong-person item would be better supported swapped than as written, and a supported one worse.
- `third`: the verdict over the source with its first person rewritten as "the user" ("My roommate
  Julia makes pottery." -> "The user's roommate Julia makes pottery."), so that the user and the
  friend are named in the words the assertion uses.

Items: the generated corpus `dev` (seed 11), the first 40 of each kind in the bench's order
(153: 40 supported, 40 over-inference, 32 fabrication, 22 contradiction, 19 wrong person).
Scores are saved in bench/results/attribution_probes_dev.jsonl; `report` never runs the model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_judge as lj  # noqa: E402

OUT = lj.RESULTS / "attribution_probes_dev.jsonl"
PER_KIND = 40
OTHER = "Someone the user mentions (not the user themself)"
SUBJECT = re.compile(r"^(The user|User|The author)('s)?\s+")
FIRST_PERSON = [(r"\bI'm\b", "the user is"), (r"\bI've\b", "the user has"), (r"\bI'll\b", "the user will"),
                (r"\bI'd\b", "the user would"), (r"\bI\b", "the user"), (r"\bmy\b", "the user's"),
                (r"\bMy\b", "The user's"), (r"\bme\b", "the user"), (r"\bmyself\b", "the user themself"),
                (r"\bmine\b", "the user's")]


def swapped(assertion: str) -> str:
    """The assertion said of someone the user mentions instead of the user."""
    text = assertion.strip()
    m = SUBJECT.match(text)
    if m:
        return f"{OTHER}{m.group(2) or ''} {text[m.end():]}"
    return f"{OTHER}: {text[:1].lower()}{text[1:]}"


def third_person(source: str) -> str:
    """The source with its writer's first person rewritten as "the user" (verbs left as written)."""
    for pattern, repl in FIRST_PERSON:
        source = re.sub(pattern, repl, source)
    return re.sub(r"(^|[.!?]\s+|\n)the user", lambda m: m.group(1) + "The user", source)


def items() -> pd.DataFrame:
    df = lj.dataset_items("dev").sort_values(lj.ORDER, kind="stable")
    return df.groupby("kind").head(PER_KIND)


def cmd_scores(_args) -> None:
    from memjudge.judges.rubrics import load_rubric

    done = set()
    if OUT.exists():
        done = {(r["read"], r["assertion_id"]) for r in pd.read_json(OUT, lines=True).to_dict("records")}
    model, rubric = lj.load_default_model(), load_rubric("support")
    # One read at a time over the items in the judge's order, so a persona's calls share their
    # source's KV prefix (alternating the two sources would evaluate each one afresh).
    with OUT.open("a", encoding="utf-8") as out:
        for read in ("swap", "third"):
            for row in items().to_dict("records"):
                if (read, row["assertion_id"]) in done:
                    continue
                source = third_person(row["source"]) if read == "third" else row["source"]
                assertion = swapped(row["text"]) if read == "swap" else row["text"]
                prompt = lj.render(rubric, {**row, "source": source, "text": assertion})
                log_odds = model.score(prompt, source=source, assertion=assertion).log_odds
                out.write(json.dumps({"read": read, "assertion_id": row["assertion_id"], "kind": row["kind"],
                                      "gold": row["gold"], "log_odds": log_odds}) + "\n")
                out.flush()


def cmd_report(_args) -> None:
    probes = pd.read_json(OUT, lines=True).pivot(index=["assertion_id", "kind", "gold"], columns="read",
                                                 values="log_odds").dropna().reset_index()
    verdicts = lj.load_scores("dev", "rubric3")[["assertion_id", "judge_score"]]
    df = probes.merge(verdicts, on="assertion_id")
    reads = {"verdict (rubric3, as saved)": df["judge_score"],
             "swap alone, negated": -df["swap"],
             "verdict - swap": df["judge_score"] - df["swap"],
             "verdict - max(0, swap - verdict)": df["judge_score"] - np.maximum(0, df["swap"] - df["judge_score"]),
             "third (rewritten source)": df["third"]}
    print(f"dev (seed 11), first {PER_KIND} items per kind: {len(df)} items; AUC against gold, pooled and per "
          "unsupported kind (vs the supported items)")
    rows = []
    for name, s in reads.items():
        read = df.assign(judge_score=s)
        per_kind = {r["kind"]: r["AUC vs supported"] for r in lj.kind_rows("dev", read, 0.0) if r["kind"] != "supported"}
        rows.append({"read": name, "all": lj.auc(s, read["gold"] == "supported"), **per_kind})
    print(lj.table(rows))
    print("\nmean log-odds per kind:")
    print(df.groupby("kind")[["judge_score", "swap", "third"]].mean().to_string(float_format=lambda v: f"{v:+.3f}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("scores").set_defaults(fn=cmd_scores)
    sub.add_parser("report").set_defaults(fn=cmd_report)
    args = parser.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
