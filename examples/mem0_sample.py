"""Writes examples/data/mem0/: a mem0-style export and the chat transcript it came from, for six
simulated personas (`memjudge simulate --preset paper --seed 0 --personas 6`), so that the import
path can be tried offline with the simulated judge (tests/test_memory_import.py checks that the
shipped files are what this script writes).

- get_all.jsonl: one `Memory.get_all(filters={"user_id": ...})` result per line, {"results": [...]},
  each memory as mem0 returns it (id, memory, hash, metadata, created_at, updated_at, user_id) plus
  the platform's `categories`; the extractor's confidence sits in metadata, where a pipeline that
  passes `metadata=` to `add` keeps it.
- conversations.jsonl: one record per message (persona_id, session_id, role, content, timestamp):
  each piece of the persona's source is a user message in a session of its own, answered by the
  assistant.

Usage: python examples/mem0_sample.py [OUT_DIR]   (default: examples/data/mem0)
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import memjudge


def main(out: Path) -> None:
    corpus = memjudge.simulate(preset="paper", seed=0, personas=6)
    out.mkdir(parents=True, exist_ok=True)
    day = {pid: i for i, pid in enumerate(corpus.sources["persona_id"])}
    lines = []
    for pid, group in corpus.candidates.groupby("persona_id", sort=False):
        results = [{
            "id": r.assertion_id, "memory": r.text, "hash": hashlib.md5(r.text.encode()).hexdigest(),
            "metadata": {"extractor_confidence": round(float(r.confidence), 4)}, "categories": [r.category],
            "created_at": f"2024-05-{10 + day[pid]:02d}T09:30:00-07:00", "updated_at": None, "user_id": pid,
        } for r in group.itertuples()]
        lines.append(json.dumps({"results": results}, ensure_ascii=False))
    (out / "get_all.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    msgs = []
    for pid, source in zip(corpus.sources["persona_id"], corpus.sources["source"]):
        for k, piece in enumerate(source.split("\n\n"), start=1):
            stamp = f"2024-05-{day[pid] + k:02d}T09:00:00-07:00"
            msgs.append({"persona_id": pid, "session_id": f"{pid}-s{k}", "role": "user", "content": piece, "timestamp": stamp})
            msgs.append({"persona_id": pid, "session_id": f"{pid}-s{k}", "role": "assistant", "content": "Thanks for telling me."})
    (out / "conversations.jsonl").write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in msgs), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "data" / "mem0")
