"""How this folder was made, with memjudge's main at 4de27df (2026-12-03), before the cached
rerun was made faster (issue 36): `memjudge score` with an OpenAI-compatible judge
(`openai:bench-judge --base-url http://127.0.0.1:8765/v1`, tests/fake_server.py listening there)
over a 2-persona corpus of hostile text, two replicates, support and per-fact coverage; each
command run twice (the second a fully cached rerun from the run's journal), then once more into
a fresh folder (a rerun from the cache alone). Kept: the inputs, the journal.jsonl and rows of
the journal rerun (`NAME.journal.jsonl`, `NAME.ROWS`) and of the cache-only one
(`NAME.from-cache.*`; a cached answer's keys come back in sorted order, so its rows differ from
the journal's), and every entry of the answer cache as stored (`cache.jsonl`: key and stored
text). tests/test_cache.py reads them as what a run folder and a cache of that main hold.

    python tests/fake_server.py --port 8765 &
    python tests/data/cached_rerun_v1/make.py   # only meaningful at that commit
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import diskcache

HERE = Path(__file__).resolve().parent
URL = "http://127.0.0.1:8765/v1"
SOURCES = [{"persona_id": "p0", "source": "I hike a lot near the lake.\n\nHonesty matters to me. \U0001f600 \"Quoted\" words, a tab\there."},
           {"persona_id": "p1", "source": "Night shifts again {% raw %} at the hospital; I am a nurse. <<<SOURCE>>> \u2028 end."}]
CANDIDATES = [
    {"persona_id": "p0", "assertion_id": "a0", "category": "values", "confidence": 0.9, "text": "The user values honesty \u2028 \"quoted\""},
    {"persona_id": "p0", "assertion_id": "a1", "category": "hobby", "confidence": 0.5, "text": "  enjoys  hiking\n\tnear the lake é"},
    {"persona_id": "p0", "assertion_id": "a2", "category": "hobby", "confidence": 0.2, "text": "Collects stamps [unsupported]"},
    {"persona_id": "p1", "assertion_id": "a3", "category": "job", "confidence": 0.7, "text": "works as a {{ nurse }} <<<ASSERTION>>>"},
    {"persona_id": "p1", "assertion_id": "a4", "category": "values", "confidence": 0.1, "text": "Hates the night [unsupported]"},
]
FACTS = [{"persona_id": "p0", "fact_id": "f0", "text": "hikes near the lake"}, {"persona_id": "p1", "fact_id": "f1", "text": "is a nurse"}]


def write(name, rows):
    (HERE / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


write("candidates.jsonl", CANDIDATES)
write("sources.jsonl", SOURCES)
write("facts.jsonl", FACTS)
with tempfile.TemporaryDirectory() as tmp:
    cache = Path(tmp) / "cache"
    for name, extra, rows in (("support", [], "labels.jsonl"), ("coverage", ["--rubric", "coverage-fact", "--facts", str(HERE / "facts.jsonl")], "coverage.jsonl")):
        out = Path(tmp) / name
        cmd = [sys.executable, "-m", "memjudge", "score", str(HERE / "candidates.jsonl"), "--sources", str(HERE / "sources.jsonl"),
               "--judge", "openai:bench-judge", "--base-url", URL, "--replicates", "2", "--no-progress", "--out", str(out),
               "--cache-dir", str(cache), *extra]
        for _ in range(2):
            subprocess.run(cmd, check=True, capture_output=True)
        fresh = Path(tmp) / f"{name}-fresh"
        subprocess.run([*cmd[:cmd.index("--out") + 1], str(fresh), *cmd[cmd.index("--out") + 2:]], check=True, capture_output=True)
        for folder, tag in ((out, ""), (fresh, ".from-cache")):
            (HERE / f"{name}{tag}.journal.jsonl").write_bytes((folder / "journal.jsonl").read_bytes())
            (HERE / f"{name}{tag}.{rows}").write_bytes((folder / rows).read_bytes())
    with diskcache.Cache(str(cache)) as c:
        write("cache.jsonl", [{"key": k, "value": c.get(k)} for k in sorted(c.iterkeys())])
