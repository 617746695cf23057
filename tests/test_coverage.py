"""Coverage answers that are partly right (issue 35): the valid part is kept, the facts left out are
asked again in follow-up calls listing only them, what is still missing is null with its own error;
and the per-fact coverage rubric (one call per fact, with its BM25-closest candidates).

Through the fake OpenAI-compatible server and the real openai SDK client, so every request
counted here is one HTTP request."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from fake_server import Fault
from memjudge.errors import InputError, UsageError
from memjudge.judges.panel import judge_config
from memjudge.judges.rubrics import load_rubric, rubric_from_toml
from memjudge.scoring.answers import LEFT_OUT, MAX_FOLLOWUPS, REPEATED
from memjudge.scoring.engine import score_run
from memjudge.scoring.plan import closest_candidates
from scripted_judge import with_run_options

JUDGE = "openai:gpt-4o-mini"

CANDIDATES = pd.DataFrame({
    "persona_id": ["p1"] * 4,
    "assertion_id": ["a1", "a2", "a3", "a4"],
    "category": ["hobby", "job", "home", "pet"],
    "text": ["Plays the cello on weekends.", "Works as a nurse at the city hospital.", "Lives in Leeds.",
             "Has a grey cat called Mochi."],
})
SOURCES = pd.DataFrame({"persona_id": ["p1"], "source": ["I play the cello. I am a nurse. I moved to Leeds. Mochi is my cat."]})
FACTS = pd.DataFrame({
    "persona_id": ["p1"] * 4,
    "fact_id": ["f1", "f2", "f3", "f4"],
    "text": ["plays the cello", "works as a nurse", "lives in Leeds", "has a cat"],
})
# The right answer for each fact.
TRUTH = {"f1": ["a1"], "f2": ["a2"], "f3": ["a3"], "f4": ["a4"]}


def listed(user: str, name: str) -> list[tuple[str, str]]:
    m = re.search(rf"<<<{name}\n(.*?)\n?{name}>>>", user, re.DOTALL)
    return [(e["id"], e["text"]) for e in map(json.loads, m.group(1).split("\n"))] if m else []


class Scripted:
    """Answers request i with script[i](facts listed in the prompt) (the last one from then on);
    records which facts each request listed."""

    def __init__(self, *script):
        self.script = list(script)
        self.asked: list[list[str]] = []

    def __call__(self, server, req):
        facts = [fid for fid, _ in listed(req.user or "", "FACTS")]
        self.asked.append(facts)
        step = self.script[min(len(self.asked), len(self.script)) - 1]
        return json.dumps({"facts": step(facts)})


def answer(*, leave_out=(), repeat=(), invent=None, invent_assertion=None):
    def step(facts):
        out = [{"fact_id": f, "fact": f, "covered_by": list(TRUTH[f])} for f in facts if f not in leave_out]
        out += [{"fact_id": f, "fact": f, "covered_by": []} for f in repeat if f in facts]
        if invent:
            out.append({"fact_id": invent, "fact": "made up", "covered_by": []})
        if invent_assertion and out:
            out[0]["covered_by"].append(invent_assertion)
        return out
    return step


def run(server, tmp_path, name="run", rubric="coverage", **kw):
    return score_run(CANDIDATES, SOURCES, judge_config(JUDGE, base_url=server.openai_base_url), rubric=rubric,
                     facts=FACTS, out=tmp_path / name, cache_dir=tmp_path / "cache", progress=False,
                     **with_run_options(kw))


def by_fact(result) -> dict[str, dict]:
    return {r["fact_id"]: r for r in result.coverage.to_dict("records")}


def journal(tmp_path, name="run") -> list[dict]:
    return [json.loads(x) for x in (tmp_path / name / "journal.jsonl").read_text().splitlines() if x.strip()]


def test_an_answer_missing_facts_keeps_the_rest_and_asks_only_for_them(fake_server, tmp_path):
    # 1st answer leaves out f3 and f4; the follow-up (listing only them) answers f3; the second
    # follow-up (listing only f4) leaves it out again: f4 ends null with its own error.
    fake_server.answer_fn = script = Scripted(answer(leave_out={"f3", "f4"}), answer(leave_out={"f4"}), answer(leave_out={"f4"}))
    res = run(fake_server, tmp_path)
    assert script.asked == [["f1", "f2", "f3", "f4"], ["f3", "f4"], ["f4"]]
    assert fake_server.count() == 1 + MAX_FOLLOWUPS == res.summary.requests
    assert res.summary.followups == 2 and res.summary.reasks == 0 and res.summary.facts_unanswered == 1
    rows = by_fact(res)
    assert {f: rows[f]["covered_by"] for f in ("f1", "f2", "f3")} == {f: TRUTH[f] for f in ("f1", "f2", "f3")}
    assert all(rows[f]["error"] is None for f in ("f1", "f2", "f3"))
    assert rows["f4"]["covered_by"] is None
    assert rows["f4"]["error"] == (f"no valid answer for this fact after {MAX_FOLLOWUPS} follow-up calls (follow-up 2: no fact "
                                   "of the list was answered (facts missing from the answer: f4))")
    # The journal holds the kept part (last line of the key wins), f4 marked unanswered.
    last = journal(tmp_path)[-1]
    assert [f["fact_id"] for f in last["answer"]["facts"]] == ["f1", "f2", "f3"] and last["unanswered"] == {"f4": LEFT_OUT}

    # A rerun (the judge now answers) asks only for f4, in one request; a third run asks nothing.
    fake_server.reset()
    fake_server.answer_fn = script = Scripted(answer())
    res = run(fake_server, tmp_path)
    assert script.asked == [["f4"]] and fake_server.count() == 1
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH and res.summary.facts_unanswered == 0
    fake_server.reset()
    res = run(fake_server, tmp_path)
    assert fake_server.count() == 0 and res.summary.requested == 0
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH
    # Another run folder, the same cache: the completed answer comes from the cache.
    res = run(fake_server, tmp_path, name="elsewhere")
    assert fake_server.count() == 0 and res.summary.cached == 1 and {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH


def test_a_partial_answer_from_the_cache_is_completed_by_another_run(fake_server, tmp_path):
    # Every answer leaves out f4: after the first run only the cache knows the kept part.
    fake_server.answer_fn = Scripted(answer(leave_out={"f4"}))
    run(fake_server, tmp_path)
    assert fake_server.count() == 1 + MAX_FOLLOWUPS
    fake_server.reset()
    fake_server.answer_fn = script = Scripted(answer())
    res = run(fake_server, tmp_path, name="other")  # a fresh run folder: no journal, the cache's partial answer
    assert script.asked == [["f4"]] and {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH


def test_an_answer_inventing_an_id_is_rejected_whole_and_asked_again(fake_server, tmp_path):
    # A fact id that is not in the list: the answer is not kept (not even its valid facts); the
    # re-ask (the whole call, with a note) answers properly.
    fake_server.answer_fn = script = Scripted(answer(invent="f9"), answer())
    res = run(fake_server, tmp_path)
    assert script.asked == [["f1", "f2", "f3", "f4"]] * 2 and fake_server.count() == 2
    assert "unknown fact ids in the answer: f9" in fake_server.requests[1].user
    assert res.summary.reasks == 1 and res.summary.followups == 0
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH

    # An invented assertion id, every time: re-asked twice, then every fact is null with that error.
    fake_server.reset()
    fake_server.answer_fn = Scripted(answer(invent_assertion="a99"))
    res = run(fake_server, tmp_path, name="bad", use_cache=False)
    assert fake_server.count() == 3 and res.summary.followups == 0
    rows = by_fact(res)
    assert all(r["covered_by"] is None and "unknown assertion ids for fact 'f1': a99" in r["error"] for r in rows.values())
    assert not (tmp_path / "bad" / "journal.jsonl").exists() or journal(tmp_path, "bad") == []


def test_an_answer_repeating_a_fact_keeps_the_others_and_asks_for_that_one(fake_server, tmp_path):
    # f2 twice (a right and a wrong list): neither is kept; the follow-up lists only f2.
    fake_server.answer_fn = script = Scripted(answer(repeat={"f2"}), answer())
    res = run(fake_server, tmp_path)
    assert script.asked == [["f1", "f2", "f3", "f4"], ["f2"]] and fake_server.count() == 2
    assert res.summary.followups == 1 and {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH
    first = journal(tmp_path)[0]
    assert first["unanswered"] == {"f2": REPEATED}

    # Repeated every time: f2 ends null, saying so; the others are kept.
    fake_server.reset()
    fake_server.answer_fn = Scripted(answer(repeat={"f2"}))
    res = run(fake_server, tmp_path, name="again", use_cache=False)
    rows = by_fact(res)
    assert fake_server.count() == 1 + MAX_FOLLOWUPS
    assert rows["f2"]["covered_by"] is None and REPEATED in rows["f2"]["error"]
    assert all(rows[f]["covered_by"] == TRUTH[f] for f in ("f1", "f3", "f4"))


def test_an_answer_keeping_no_fact_is_re_asked(fake_server, tmp_path):
    fake_server.answer_fn = script = Scripted(answer(leave_out={"f1", "f2", "f3", "f4"}), answer())
    res = run(fake_server, tmp_path)
    assert fake_server.count() == 2 and res.summary.reasks == 1 and len(script.asked) == 2
    assert "no fact of the list was answered" in fake_server.requests[1].user
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_batch_asks_left_out_facts_in_follow_up_jobs_and_a_rerun_asks_only_for_them(fake_server, tmp_path, monkeypatch, provider):
    # As online (the first test above), through the batch API: each follow-up goes in the next
    # batch job (batch prices, no online request), and a rerun's batch job lists only what is missing.
    from memjudge.judges import JudgeConfig

    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_S", "0.002")
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_MAX_S", "0.02")
    spec, url = (JUDGE, fake_server.openai_base_url) if provider == "openai" else ("gemini:gemini-2.5-flash", fake_server.url)
    judge = JudgeConfig(spec=spec, base_url=url, price_input_per_mtok=1.0, price_output_per_mtok=4.0)
    online_route = "openai.chat" if provider == "openai" else "gemini.generate"

    def batch_run(name="run", **kw):
        return score_run(CANDIDATES, SOURCES, judge, rubric="coverage", facts=FACTS, out=tmp_path / name,
                         cache_dir=tmp_path / "cache", progress=False, **with_run_options({"batch": True, **kw}))

    def creates():
        return fake_server.count(route=f"{provider}.batches.create")

    fake_server.answer_fn = script = Scripted(answer(leave_out={"f3", "f4"}), answer(leave_out={"f4"}), answer(leave_out={"f4"}))
    res = batch_run()
    assert script.asked == [["f1", "f2", "f3", "f4"], ["f3", "f4"], ["f4"]]
    assert creates() == 1 + MAX_FOLLOWUPS and fake_server.count(route=online_route) == 0
    s = res.summary
    assert (s.requests, s.followups, s.reasks, s.facts_unanswered) == (1 + MAX_FOLLOWUPS, MAX_FOLLOWUPS, 0, 1)
    assert s.cost_usd == pytest.approx(0.5 * (s.tokens["input_tokens"] * 1.0 + s.tokens["output_tokens"] * 4.0) / 1e6) and s.cost_usd > 0
    rows = by_fact(res)
    assert {f: rows[f]["covered_by"] for f in ("f1", "f2", "f3")} == {f: TRUTH[f] for f in ("f1", "f2", "f3")}
    assert rows["f4"]["covered_by"] is None
    assert rows["f4"]["error"] == (f"no valid answer for this fact after {MAX_FOLLOWUPS} follow-up calls (follow-up 2: no fact "
                                   "of the list was answered (facts missing from the answer: f4))")
    last = journal(tmp_path)[-1]
    assert [f["fact_id"] for f in last["answer"]["facts"]] == ["f1", "f2", "f3"] and last["unanswered"] == {"f4": LEFT_OUT}
    assert last["followups"] == 1 and 0 < last["usage"]["input_tokens"] < s.tokens["input_tokens"]

    # The same rows, tokens and kept record as online with the same answers.
    fake_server.answer_fn = Scripted(answer(leave_out={"f3", "f4"}), answer(leave_out={"f4"}), answer(leave_out={"f4"}))
    online = batch_run("online", batch=False, use_cache=False)
    pd.testing.assert_frame_equal(res.coverage.drop(columns="cached"), online.coverage.drop(columns="cached"))
    assert online.summary.tokens == s.tokens and journal(tmp_path, "online")[-1]["usage"] == last["usage"]
    kept_usage = last["usage"]

    # A rerun (the judge now answers) asks only for f4, in one batch job; a third run asks nothing.
    fake_server.reset()
    fake_server.answer_fn = script = Scripted(answer())
    res = batch_run()
    assert script.asked == [["f4"]] and creates() == 1 and fake_server.count(route=online_route) == 0
    assert res.summary.followups == 1 and res.summary.facts_unanswered == 0
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH
    last = journal(tmp_path)[-1]
    assert last["usage"] == {k: kept_usage[k] + res.summary.tokens[k] for k in kept_usage} and last["followups"] == 2
    fake_server.reset()
    res = batch_run()
    assert fake_server.count() == 0 and res.summary.requested == 0
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH


def test_a_failed_batch_follow_up_goes_online_with_fallback(fake_server, tmp_path, monkeypatch):
    # The follow-up's batch line fails (a 5xx, every time): with batch_fallback "online" it is
    # asked online, and the kept record's usage is the batch request's plus the online follow-up's.
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_S", "0.002")
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_MAX_S", "0.02")
    fake_server.enqueue(Fault.server_error(), route="openai.batch_line", when=lambda req: "plays the cello" not in (req.user or ""),
                        times=None)
    fake_server.answer_fn = script = Scripted(answer(leave_out={"f4"}), answer())
    res = run(fake_server, tmp_path, batch=True, batch_fallback="online")
    assert script.asked == [["f1", "f2", "f3", "f4"], ["f4"]] and "plays the cello" not in fake_server.requests[-1].user
    assert fake_server.count(route="openai.batches.create") == 2 and fake_server.count(route="openai.chat") == 1
    s = res.summary
    assert (s.requests, s.followups, s.batch["online"], s.facts_unanswered) == (3, 2, 1, 0)
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH
    last = journal(tmp_path)[-1]
    assert last["followups"] == 1 and last["usage"] == s.tokens  # the failed line has no usage


# ---------------------------------------------------------------------------------------
# the per-fact form


def test_per_fact_rubric_asks_one_call_per_fact_with_its_closest_candidates(fake_server, tmp_path):
    rub = load_rubric("coverage-fact")
    assert rub.kind == "coverage" and rub.form == "fact" and rub.candidates == 5
    fake_server.answer_fn = script = Scripted(answer())
    res = run(fake_server, tmp_path, rubric="coverage-fact")
    assert sorted(script.asked) == [["f1"], ["f2"], ["f3"], ["f4"]] and fake_server.count() == 4
    assert {f: r["covered_by"] for f, r in by_fact(res).items()} == TRUTH
    # The source comes first (the shared prefix), the fact and its candidates last, best first.
    for req in fake_server.requests:
        user = req.user
        assert user.index("<<<SOURCE") < user.index("<<<FACTS") < user.index("<<<ASSERTIONS")
        fact = listed(user, "FACTS")[0][1]
        shown = [a for a, _ in listed(user, "ASSERTIONS")]
        assert shown == [a["id"] for a in closest_candidates(fact, CANDIDATES.rename(columns={"assertion_id": "id"}).to_dict("records"), 5)]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["rubric"]["form"] == "fact" and config["rubric"]["candidates"] == 5
    # The form is part of the cache key: the persona form asks again (one call for the persona).
    fake_server.reset()
    run(fake_server, tmp_path, name="persona")
    assert fake_server.count() == 1
    fake_server.reset()
    run(fake_server, tmp_path, rubric="coverage-fact", name="again")
    assert fake_server.count() == 0


def test_per_fact_candidates_are_the_bm25_top_k():
    assertions = [{"id": f"a{i}", "text": t} for i, t in enumerate([
        "Enjoys hiking in the hills.", "Owns a grey cat.", "Lives in Leeds with a cat and a dog.", "Works as a nurse.",
        "Has a cat named Mochi, a grey cat."])]
    # Hand-worked order for "grey cat": a1 and a4 hold both terms, a1 in fewer words (a4's second
    # "cat" does not make up for its length); a2 holds "cat" only; a0 and a3 neither (file order).
    assert [a["id"] for a in closest_candidates("has a grey cat", assertions, 5)] == ["a1", "a4", "a2", "a0", "a3"]
    assert [a["id"] for a in closest_candidates("has a grey cat", assertions, 2)] == ["a1", "a4"]
    rank_bm25 = pytest.importorskip("rank_bm25")
    from memjudge.judges.local_premise import tokens

    ref = rank_bm25.BM25Okapi([tokens(a["text"]) for a in assertions]).get_scores(tokens("lives with a dog in Leeds"))
    expected = sorted(range(len(assertions)), key=lambda i: (-ref[i], i))[:3]
    assert [a["id"] for a in closest_candidates("lives with a dog in Leeds", assertions, 3)] == [f"a{i}" for i in expected]


def test_per_fact_rubric_needs_reference_facts_and_a_valid_k(tmp_path):
    with pytest.raises(UsageError, match="needs --facts"):
        score_run(CANDIDATES, SOURCES, judge_config(JUDGE, base_url="http://127.0.0.1:9/v1"), rubric="coverage-fact",
                  out=tmp_path / "x", progress=False)
    from importlib import resources

    src = (resources.files("memjudge._rubrics") / "coverage-fact.toml").read_text()
    for bad, why in ((src.replace("candidates = 5", "candidates = 0"), "integer >= 1"),
                     (src.replace('form = "fact"', 'form = "each"'), "form must be one of"),
                     (src.replace('form = "fact"\n', ""), "'candidates' is for form")):
        with pytest.raises(InputError, match=why):
            rubric_from_toml(bad, "r.toml")
    support = (resources.files("memjudge._rubrics") / "support.toml").read_text()
    with pytest.raises(InputError, match="for coverage rubrics"):
        rubric_from_toml(support.replace('kind = "support"', 'kind = "support"\nform = "fact"'), "s.toml")


# ---------------------------------------------------------------------------------------
# coverage labels against a reference map; the coverage threshold from gold coverage


def _cov(rows):
    return pd.DataFrame(rows, columns=["persona_id", "fact_id", "covered_by"])


CANDS2 = pd.DataFrame({"persona_id": ["p1", "p1", "p1", "p2", "p2"], "assertion_id": ["a1", "a2", "a3", "b1", "b2"],
                       "category": ["x", "y", "x", "x", "y"]})
REFERENCE = _cov([("p1", "f1", ["a1"]), ("p1", "f2", ["a2", "a3"]), ("p1", "f3", []), ("p2", "g1", ["b1"]),
                  ("p2", "g2", []), ("p2", "g3", ["b2"])])
JUDGED = _cov([("p1", "f1", ["a1", "a2"]), ("p1", "f2", ["a2"]), ("p1", "f3", []), ("p2", "g1", []),
               ("p2", "g2", ["b2"]), ("p2", "g3", None)])


def test_coverage_agreement_against_sklearn():
    from sklearn.metrics import cohen_kappa_score

    from memjudge.stats.coverage import coverage_agreement, coverage_pairs

    pairs, unanswered = coverage_pairs(JUDGED, REFERENCE, CANDS2)
    assert unanswered == 1 and len(pairs) == 3 * 3 + 2 * 2  # g3 (no valid answer) is left out, not "not covered"
    ag = coverage_agreement(JUDGED, REFERENCE, CANDS2)
    j, r = pairs["judge"].astype(int), pairs["reference"].astype(int)
    assert ag["pairs"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(j, r))
    assert ag["pairs"]["percent_agreement"] == pytest.approx((j == r).mean())
    # hand-worked: 13 pairs; both 2 (f1-a1, f2-a2), judge only 2 (f1-a2, g2-b2), reference only 2 (f2-a3, g1-b1)
    assert ag["pairs"]["confusion"] == {"both": 2, "judge_only": 2, "reference_only": 2, "neither": 7}
    for cat, g in pairs.groupby("category"):
        assert ag["pairs_by_category"][cat]["cohen_kappa"] == pytest.approx(
            cohen_kappa_score(g["judge"].astype(int), g["reference"].astype(int)))
    # facts: covered at all -- judge f1 f2 g2 / reference f1 f2 g1, over the 5 answered facts
    assert ag["n_facts"] == 5 and ag["coverage_rate"] == {"judge": pytest.approx(3 / 5), "reference": pytest.approx(3 / 5)}
    fj, fr = [1, 1, 0, 0, 1], [1, 1, 0, 1, 0]
    assert ag["facts"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(fj, fr))


def test_calibrate_coverage_threshold_from_gold_coverage(tmp_path, cli):
    from memjudge.judges.panel import load_panel

    rows = [
        {"persona_id": "p1", "fact_id": "f1", "covered_by": ["a1"], "judge": "local:qwen2.5-coder-1.5b", "replicate": 0,
         "candidate_scores": {"a1": 2.0, "a2": 0.4, "a3": -1.0}},
        {"persona_id": "p1", "fact_id": "f2", "covered_by": ["a2"], "judge": "local:qwen2.5-coder-1.5b", "replicate": 0,
         "candidate_scores": {"a2": 1.5, "a3": 0.9, "a1": -2.0}},
        {"persona_id": "p1", "fact_id": "f3", "covered_by": [], "judge": "local:qwen2.5-coder-1.5b", "replicate": 0,
         "candidate_scores": {"a1": 0.1, "a2": -0.5, "a3": -0.2}},
    ]
    judged = tmp_path / "coverage.jsonl"
    judged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ref = tmp_path / "gold_coverage.jsonl"
    ref.write_text("".join(json.dumps(r) + "\n" for r in [
        {"persona_id": "p1", "fact_id": "f1", "covered_by": ["a1"]},
        {"persona_id": "p1", "fact_id": "f2", "covered_by": ["a2", "a3"]},
        {"persona_id": "p1", "fact_id": "f3", "covered_by": []}]))
    panel = tmp_path / "judges.toml"
    r = cli("calibrate", judged, "--coverage", "--gold", ref, "--judge", "local:qwen2.5-coder-1.5b", "--panel", panel, "--json")
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)
    # positives 2.0, 1.5, 0.9 ; negatives 0.4, -1.0, -2.0, 0.1, -0.5, -0.2: any cut in (0.4, 0.9] separates them
    assert cal["n"] == 9 and cal["n_supported"] == 3 and cal["balanced_accuracy"] == 1.0 and cal["auc"] == 1.0
    assert 0.4 < cal["threshold"] <= 0.9
    cfg = load_panel(panel)["local:qwen2.5-coder-1.5b"]
    assert cfg.options == {"coverage_threshold": cal["threshold"]}
    # A support calibration afterwards keeps it (and the other way round).
    from memjudge.judges.panel import write_threshold

    write_threshold(panel, "local:qwen2.5-coder-1.5b", 0.25)
    assert load_panel(panel)["local:qwen2.5-coder-1.5b"].options == {"coverage_threshold": cal["threshold"], "threshold": 0.25}
    # coverage rows without scores: one line, exit status 2
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"persona_id": "p1", "fact_id": "f1", "covered_by": ["a1"], "judge": "x"}) + "\n")
    r = cli("calibrate", plain, "--coverage", "--gold", ref, "--judge", "x", "--panel", panel)
    assert r.returncode == 2 and "no candidate_scores" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_calibrate_coverage_rate_matches_the_share_of_facts_covered(tmp_path, cli):
    """--target coverage_rate: the threshold at which the judge covers as many facts as the
    reference does (a fact is covered when its best candidate's read reaches the threshold).
    Hand-worked: best reads 2.0, 1.0, 0.5, -1.0 (and a fact shown no candidate); the reference
    covers 2 of 5 facts. The candidate cuts -2, -0.25, 0.75, 1.5, 3 cover 4, 3, 2, 1, 0 facts:
    only 0.75 covers 2."""
    from memjudge.judges.panel import load_panel

    judge = "local:qwen2.5-coder-1.5b"
    best = {"f1": 2.0, "f2": 1.0, "f3": 0.5, "f4": -1.0}
    rows = [{"persona_id": "p1", "fact_id": f, "covered_by": [], "judge": judge, "replicate": 0,
             "candidate_scores": {"a1": s, "a2": s - 3.0}} for f, s in best.items()]
    rows.append({"persona_id": "p1", "fact_id": "f5", "covered_by": [], "judge": judge, "replicate": 0, "candidate_scores": {}})
    judged = tmp_path / "coverage.jsonl"
    judged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ref = tmp_path / "gold_coverage.jsonl"
    covered = {"f1": ["a1"], "f2": [], "f3": ["a1"], "f4": [], "f5": []}
    ref.write_text("".join(json.dumps({"persona_id": "p1", "fact_id": f, "covered_by": c}) + "\n" for f, c in covered.items()))
    panel = tmp_path / "judges.toml"
    r = cli("calibrate", judged, "--coverage", "--target", "coverage_rate", "--gold", ref, "--judge", judge,
            "--panel", panel, "--json")
    assert r.returncode == 0, r.stderr
    cal = json.loads(r.stdout)
    assert cal["target"] == "coverage_rate" and cal["threshold"] == pytest.approx(0.75)
    assert cal["n"] == 5 and cal["n_supported"] == 2 and cal["target_value"] == pytest.approx(0.4)
    # facts f1, f2 covered by the judge; f1, f3 by the reference: 3 of 5 agree
    assert cal["accuracy"] == pytest.approx(0.6) and cal["balanced_accuracy"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert load_panel(panel)[judge].options == {"coverage_threshold": cal["threshold"]}
    # Without --coverage the target is a usage error (it is a rate of facts).
    r = cli("calibrate", judged, "--target", "coverage_rate", "--gold", ref, "--judge", judge, "--panel", panel)
    assert r.returncode == 2 and "--coverage" in r.stderr and len(r.stderr.strip().splitlines()) == 1
