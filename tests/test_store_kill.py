"""Nothing paid twice after a kill, whatever folder the rerun writes to (issue 53).

A judge whose answers cost money (`Judge.costly`: openai:, anthropic:, every network judge)
has each answer in the cache before its journal line is written (store.py), so right after a
SIGKILL at any moment the cache holds every answer the killed run's journal holds, and a run
into a *new* folder that shares the cache asks none of them again (counted at the fake server).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from scripted_judge import candidates_frame, sources_frame

N = 16
SPECS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-haiku-4-5"}


def _journal_keys(out: Path) -> set[str]:
    keys = set()
    path = out / "journal.jsonl"
    for line in path.read_bytes().split(b"\n") if path.exists() else []:
        try:
            keys.add(json.loads(line)["key"])
        except (ValueError, KeyError):
            pass  # the line a kill cut short
    return keys


@pytest.mark.timeout(600)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_sigkill_then_a_run_into_a_new_folder_pays_for_nothing_answered(tmp_path, fake_server, provider):
    import kill_target
    from memjudge.scoring.cache import AnswerCache

    cand, src = tmp_path / "candidates.jsonl", tmp_path / "sources.jsonl"
    candidates_frame(N).to_json(cand, orient="records", lines=True)
    sources_frame(N).to_json(src, orient="records", lines=True)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(kill_target.PRELOAD)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    fake_server.latency_s = 0.03
    url = fake_server.openai_base_url if provider == "openai" else fake_server.url

    def start(out, cache):
        argv = ["score", str(cand), "--sources", str(src), "--judge", SPECS[provider], "--base-url", url,
                "--out", str(out), "--cache-dir", str(cache), "--concurrency", "4", "--no-progress", "--json"]
        p = ctx.Process(target=kill_target.score, args=(argv, str(tmp_path / "children.log")))
        p.start()
        return p

    kills = journaled = reasked = episodes = 0
    while kills < 12 and episodes < 30:
        episodes += 1
        out, cache = tmp_path / f"run{episodes}", tmp_path / f"cache{episodes}"
        p = start(out, cache)
        target = rng.randint(1, N - 1)
        deadline = time.monotonic() + 30
        while len(_journal_keys(out)) < target and p.is_alive() and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.02))
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.join(30)
        if p.exitcode != -signal.SIGKILL:
            continue
        kills += 1
        known = _journal_keys(out)
        journaled += len(known)
        # right after the kill, before anything reads either: the cache holds the journal's answers
        with AnswerCache(cache) as c:
            missing = [k for k in known if k not in c]
        assert not missing, (seed, episodes, len(missing))
        assert fake_server.wait_idle(), (seed, episodes)
        fake_server.reset()
        # a NEW folder, the same cache: only the calls the killed run had not answered are asked
        p = start(tmp_path / f"new{episodes}", cache)
        p.join(120)
        assert p.exitcode == 0, (seed, (tmp_path / "children.log").read_text()[-2000:])
        summary = json.loads((tmp_path / f"new{episodes}" / "summary.json").read_text())
        assert summary["cached"] >= len(known) and summary["errors"] == 0, (seed, episodes)
        asked = fake_server.count()
        assert asked == N - summary["cached"], (seed, episodes)
        reasked += max(0, asked - (N - len(known)))
    assert kills >= 8, (seed, kills, episodes)
    assert reasked == 0
    print(f"{provider}: {kills} SIGKILLs, {journaled} answers in the killed runs' journals, {reasked} asked again "
          f"by runs into new folders (seed {seed})")
