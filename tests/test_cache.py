"""The answer cache: the key changes with exactly what changes an answer, eviction is off
and stays off, and no API key ever reaches the disk."""

from __future__ import annotations

import json
import random
from pathlib import Path

import diskcache
import pytest

from memjudge.judges import JudgeConfig, Prompt
from memjudge.judges.panel import judge_config
from memjudge.judges.rubrics import load_rubric
from memjudge.scoring.cache import AnswerCache, cache_key, resolve_cache_dir
from memjudge.scoring.engine import score_run
from scripted_judge import ScriptedJudge, candidates_frame, sources_frame

ROOT = Path(__file__).resolve().parents[1]
N = 12


def run(judge, cache_dir, out, cands=None, **kw):
    cands = candidates_frame(N) if cands is None else cands
    return score_run(cands, sources_frame(N), judge, cache_dir=cache_dir, out=out, progress=False, **kw)


def test_key_is_canonical_and_sensitive_to_each_component():
    ident = {"spec": "openai:m", "model": "m", "base_url": None, "params": {"temperature": 0.0, "seed": None}}
    rub = {"name": "support", "template_sha256": "ab", "schema": {"type": "object"}}
    p = Prompt("sys", "user")
    k = cache_key(ident, rub, p, 0)
    assert len(k) == 64 and int(k, 16) >= 0
    # dict order does not matter (canonical JSON)
    assert cache_key(dict(reversed(list(ident.items()))), dict(reversed(list(rub.items()))), p, 0) == k
    changed = [
        cache_key({**ident, "spec": "openai:m2", "model": "m2"}, rub, p, 0),
        cache_key({**ident, "base_url": "http://h/v1"}, rub, p, 0),
        cache_key({**ident, "params": {"temperature": 0.5, "seed": None}}, rub, p, 0),
        cache_key({**ident, "params": {"temperature": 0.0, "seed": 1}}, rub, p, 0),
        cache_key(ident, {**rub, "template_sha256": "ac"}, p, 0),
        cache_key(ident, {**rub, "schema": {"type": "object", "x": 1}}, p, 0),
        cache_key(ident, rub, Prompt("sys ", "user"), 0),
        cache_key(ident, rub, Prompt("sys", "user."), 0),
        cache_key(ident, rub, p, 1),
    ]
    assert len(set(changed)) == len(changed) and k not in changed


def test_engine_key_sensitivity(tmp_path):
    """Model, base URL, each generation parameter, rubric text and replicate each cost new
    requests; concurrency, rpm, row order, output folder and progress cost none."""
    cache = tmp_path / "cache"
    base = ScriptedJudge("scripted:m1")
    run(base, cache, tmp_path / "r0")
    assert base.requests == N

    same = [
        dict(judge=JudgeConfig(spec="scripted:m1", concurrency=1, rpm=100000.0, tpm=1e9), out=tmp_path / "r1"),
        dict(judge=JudgeConfig(spec="scripted:m1", max_attempts=2, timeout_s=5), out=tmp_path / "r2",
             cands=candidates_frame(N).sample(frac=1.0, random_state=3)),
        dict(judge=JudgeConfig(spec="scripted:m1", price_input_per_mtok=1.0), out=tmp_path / "r3", replicates=1),
    ]
    for case in same:
        j = ScriptedJudge(case.pop("judge"))
        r = run(j, cache, **case)
        assert j.requests == 0, case
        assert r.summary.cached == N and (r.labels["cached"]).all()

    different = {
        "model": JudgeConfig(spec="scripted:m2"),
        "base_url": JudgeConfig(spec="scripted:m1", base_url="http://127.0.0.1:1/v1"),
        "temperature": JudgeConfig(spec="scripted:m1", temperature=0.7),
        "seed": JudgeConfig(spec="scripted:m1", seed=7),
        "max_output_tokens": JudgeConfig(spec="scripted:m1", max_output_tokens=99),
        "thinking_budget": JudgeConfig(spec="scripted:m1", thinking_budget=0),
        "options": JudgeConfig(spec="scripted:m1", options={"threshold": 1}),
    }
    for name, cfg in different.items():
        j = ScriptedJudge(cfg)
        run(j, cache, tmp_path / f"d-{name}")
        assert j.requests == N, name

    text = (ROOT / "rubrics" / "support.toml").read_text().replace("a plausible inference", "a likely inference")
    edited = tmp_path / "support-edited.toml"
    edited.write_text(text)
    j = ScriptedJudge("scripted:m1")
    r = run(j, cache, tmp_path / "d-rubric", rubric=str(edited))
    assert j.requests == N and set(r.labels["rubric"]) == {load_rubric(str(edited)).id} != {load_rubric("support").id}

    j = ScriptedJudge("scripted:m1")
    run(j, cache, tmp_path / "d-rep", replicates=3)
    assert j.requests == 2 * N  # replicates 1 and 2 are new, replicate 0 is the cached one
    assert sorted({c.replicate for c in j.calls}) == [1, 2]


def test_only_valid_answers_are_cached(tmp_path):
    from memjudge.judges import JudgeAnswer

    j = ScriptedJudge(script=lambda call, n: JudgeAnswer(text=None, finish_reason="safety"))
    r = run(j, tmp_path / "c", tmp_path / "o")
    assert r.labels["verdict"].isna().all() and len(AnswerCache(tmp_path / "c")) == 0


def test_eviction_off_and_persisted(tmp_path):
    d = tmp_path / "cache"
    # A cache first created with diskcache's evicting defaults and a tiny limit...
    with diskcache.Cache(str(d), size_limit=50_000, eviction_policy="least-recently-stored") as dc:
        assert dc.eviction_policy == "least-recently-stored"
    # ...is switched to no eviction by memjudge, and the setting persists in the cache.
    with AnswerCache(d) as c:
        assert c.stats()["eviction_policy"] == "none"
        blob = "x" * 20_000
        for i in range(200):  # 4 MB, 80 times the old limit
            c.set(f"{i:064x}", {"answer": {"verdict": "supported"}, "pad": blob})
        assert len(c) == 200
    with diskcache.Cache(str(d)) as dc:  # reopened with no arguments: stored settings apply
        assert dc.eviction_policy == "none" and dc.size_limit >= 2**60 and len(dc) == 200
    with AnswerCache(d) as c:
        assert all(c.get(f"{i:064x}")["pad"] == blob for i in range(200))


def test_evicting_defaults_would_lose_entries(tmp_path):
    """The control: the same writes under an evicting policy do lose entries."""
    with diskcache.Cache(str(tmp_path / "ev"), size_limit=50_000, eviction_policy="least-recently-stored", cull_limit=10) as dc:
        for i in range(200):
            dc.set(f"{i:064x}", json.dumps({"pad": "x" * 20_000}))
        assert len(dc) < 200


def test_cache_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMJUDGE_CACHE_DIR", str(tmp_path / "env"))
    assert resolve_cache_dir() == tmp_path / "env"
    assert resolve_cache_dir(tmp_path / "flag") == tmp_path / "flag"
    monkeypatch.delenv("MEMJUDGE_CACHE_DIR")
    assert resolve_cache_dir() == Path.home() / ".cache" / "memjudge"


def test_cache_stats_and_clear_cli(cli, tmp_path):
    d = tmp_path / "c"
    with AnswerCache(d) as c:
        c.set("a" * 64, {"answer": {}})
        c.set("b" * 64, {"answer": {}})
    r = cli("cache", "stats", "--cache-dir", d, "--json")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    assert stats["entries"] == 2 and stats["eviction_policy"] == "none" and stats["directory"] == str(d)
    r = cli("cache", "stats", env={"MEMJUDGE_CACHE_DIR": str(d)})
    assert r.returncode == 0 and "2 answers" in r.stdout
    # Paid answers: without a terminal to ask, clear refuses unless --yes.
    r = cli("cache", "clear", "--cache-dir", d, "--json")
    assert r.returncode == 2 and "--yes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert json.loads(cli("cache", "stats", "--cache-dir", d, "--json").stdout)["entries"] == 2
    r = cli("cache", "clear", "--cache-dir", d, "--json", "--yes")
    assert json.loads(r.stdout)["removed"] == 2
    assert json.loads(cli("cache", "stats", "--cache-dir", d, "--json").stdout)["entries"] == 0


SENTINELS = {"OPENAI_API_KEY": "sk-SENTINEL-openai-0123456789abcdef", "GEMINI_API_KEY": "AIzaSENTINEL-gemini-0123456789abcdef"}


def test_no_api_key_on_disk(cli, tmp_path, fake_server):
    from fake_server import Fault

    src = tmp_path / "s.jsonl"
    cand = tmp_path / "c.jsonl"
    sources_frame(N).to_json(src, orient="records", lines=True)
    candidates_frame(N).to_json(cand, orient="records", lines=True)
    cache = tmp_path / "cache"
    # some requests fail for good (401, 400) so error messages are written too
    fake_server.enqueue(Fault.http(401), Fault.http(400), Fault.safety(), times=1)
    for spec, base in (("openai:gpt-4o-mini", fake_server.openai_base_url), ("gemini:gemini-2.5-flash", fake_server.url)):
        r = cli("score", cand, "--sources", src, "--judge", spec, "--base-url", base, "--out", tmp_path / spec.split(":")[0],
                "--cache-dir", cache, "--no-progress", "--parquet", "--replicates", "2", env=SENTINELS)
        assert r.returncode == 0, r.stderr
    # the keys really were used: the server saw them
    seen = " ".join(json.dumps(req.headers) for req in fake_server.requests)
    assert all(v in seen for v in SENTINELS.values())
    errors = [json.loads(x)["error"] for x in (tmp_path / "openai" / "labels.jsonl").read_text().splitlines()]
    assert sum(e is not None for e in errors) >= 1  # error messages were written and checked too
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "labels.jsonl" for p in files) and any(p.parent == cache for p in files)
    for p in files:
        data = p.read_bytes()
        for v in SENTINELS.values():
            assert v.encode() not in data, p
            assert v[8:24].encode() not in data, p


def test_the_key_holds_the_endpoint_actually_used(tmp_path, monkeypatch):
    """Item 2: flag, environment (OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL) and panel file all
    name the endpoint in the key and config.json; `…/v1` and `…/v1/` are one endpoint; two
    servers never share answers."""
    from fake_server import FakeServer
    from memjudge.judges import make_judge

    env_var = {"openai": "OPENAI_BASE_URL", "gemini": "GOOGLE_GEMINI_BASE_URL"}
    spec = {"openai": "openai:gpt-4o-mini", "gemini": "gemini:gemini-2.5-flash"}
    with FakeServer() as a, FakeServer() as b:
        url = {"openai": (a.openai_base_url, b.openai_base_url), "gemini": (a.url, b.url)}
        for provider in ("openai", "gemini"):
            url_a, url_b = url[provider]
            cache = tmp_path / provider / "cache"

            def go(out, base_url=None, judges_file=None):
                a.reset()
                b.reset()
                score_run(candidates_frame(N), sources_frame(N),
                          judge_config(spec[provider], base_url=base_url, judges_file=judges_file), cache_dir=cache,
                          out=tmp_path / provider / out, progress=False)
                return a.count(), b.count()

            monkeypatch.setenv(env_var[provider], url_a)
            assert go("env") == (N, 0)
            config = json.loads((tmp_path / provider / "env" / "config.json").read_text())
            assert config["judge"]["base_url"] == url_a and config["judge"]["endpoint"] == url_a
            monkeypatch.delenv(env_var[provider])
            assert go("flag", base_url=url_a + "/") == (0, 0)  # the same endpoint, one slash apart
            panel = tmp_path / provider / "judges.toml"
            panel.write_text(f'[[judge]]\nspec = "{spec[provider]}"\nbase_url = "{url_a}"\n')
            assert go("panel", judges_file=panel) == (0, 0)
            monkeypatch.setenv(env_var[provider], url_b + "/")
            assert go("other-server") == (0, N)  # another server: its own answers
            monkeypatch.delenv(env_var[provider])

    # without any base URL the key is what it always was (null: the SDK's default endpoint),
    # and naming that default explicitly is the same endpoint
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    monkeypatch.setenv("GEMINI_API_KEY", "test-0123456789")
    for s, default in (("openai:gpt-4o-mini", "https://api.openai.com/v1"), ("gemini:gemini-2.5-flash", "https://generativelanguage.googleapis.com")):
        plain, explicit = make_judge(s), make_judge(s, base_url=default + "/")
        assert plain.identity()["base_url"] is None and plain.identity() == explicit.identity()
        assert plain.endpoint == explicit.endpoint == default


def test_cache_dir_is_reported_even_when_the_cache_is_empty(tmp_path, fake_server, capsys):
    """Item 10: an empty cache is falsy; config.json and summary.json still name it."""
    from fake_server import Fault
    from memjudge import cli as memjudge_cli

    cand, src = tmp_path / "c.jsonl", tmp_path / "s.jsonl"
    candidates_frame(4).to_json(cand, orient="records", lines=True)
    sources_frame(4).to_json(src, orient="records", lines=True)
    fake_server.enqueue(Fault.http(400), times=None)  # no answer: the cache stays empty
    args = ["score", str(cand), "--sources", str(src), "--judge", "openai:gpt-4o-mini", "--base-url", fake_server.openai_base_url,
            "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run"), "--no-progress", "--json"]
    assert memjudge_cli.main(args + ["--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["cache_dir"] == str(tmp_path / "cache")
    # every call failed: exit 2 (issue 20), the run's files written all the same
    assert memjudge_cli.main(args) == 2
    capsys.readouterr()
    for name in ("config.json", "summary.json"):
        assert json.loads((tmp_path / "run" / name).read_text())["cache_dir"] == str(tmp_path / "cache"), name


def test_cache_stats_and_clear_do_not_create_a_missing_cache(cli, tmp_path):
    """Item 10: looking at a cache that is not there reports it empty and leaves no folder."""
    missing = tmp_path / "no" / "cache"
    r = cli("cache", "stats", "--cache-dir", missing, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["entries"] == 0 and json.loads(r.stdout)["directory"] == str(missing)
    r = cli("cache", "clear", "--cache-dir", missing, "--json", "--yes")
    assert r.returncode == 0 and json.loads(r.stdout)["removed"] == 0
    assert not (tmp_path / "no").exists()


def test_keymaker_equals_cache_key_and_pins_the_keys_of_existing_caches():
    """The planner's KeyMaker writes the judge's and rubric's parts once and each prompt once for
    all its replicates; its keys must be cache_key's, bit for bit, or every cached answer of an
    existing cache would be a miss (paid again). The literal was written by cache_key before
    KeyMaker existed."""
    from memjudge.scoring.cache import KeyMaker

    ident = {"spec": "openai:m", "model": "m", "base_url": None, "params": {"temperature": 0.0, "seed": None}}
    rub = {"name": "support", "template_sha256": "ab", "schema": {"type": "object"}}
    hostile = Prompt("sys \u2028 \"x\"", "user é <<<")
    assert cache_key(ident, rub, hostile, 1) == "e171c6e548c3852a2370e18e390f303ba313b95fd659f16944b34101fefcf91c"
    km = KeyMaker(ident, rub)
    prompts = [hostile, Prompt("", ""), Prompt("a\\b", "\x00\U0001f600 }{\",:"), Prompt("s" * 5000, "u\n\t" * 300)]
    for p in prompts:
        assert km.keys(p, [0, 1, 7]) == [cache_key(ident, rub, p, r) for r in (0, 1, 7)]
    real = load_rubric("support")
    km = KeyMaker(ident, real.cache_identity())
    p = real.render_support(source="I moved to Zurich.", assertion="lives in Zurich", category="location")
    assert km.keys(p, range(3)) == [cache_key(ident, real.cache_identity(), p, r) for r in range(3)]


def test_the_planned_keys_of_a_fixed_run_are_those_of_existing_caches():
    """The keys plan_calls gives a fixed run (an OpenAI-compatible judge, support and both
    coverage rubrics, two replicates, prompts with quotes, line separators, template syntax and
    emoji): any change to rendering, canonical JSON or hashing that moved one of them would make
    every answer of an existing cache a miss, paid again. The literals were written by main at
    4de27df, before the cached rerun was made faster (issue 36)."""
    import pandas as pd

    from memjudge.judges import make_judge
    from memjudge.scoring.plan import plan_calls

    cands = pd.DataFrame([
        {"persona_id": "p0", "assertion_id": "a0", "category": "values", "text": "The user values honesty \u2028 \"quoted\""},
        {"persona_id": "p0", "assertion_id": "a1", "category": "hobby", "text": "  enjoys  hiking\n\tnear the lake é"},
        {"persona_id": "p1", "assertion_id": "a2", "category": "job", "text": "works as a {{ nurse }} <<<ASSERTION>>>"},
    ])
    srcs = pd.DataFrame({"persona_id": ["p0", "p1"],
                         "source": ["I hike a lot.\n\nHonesty matters to me. \U0001f600", "Night shifts again {% raw %}."]})
    facts = pd.DataFrame([{"persona_id": "p0", "fact_id": "f0", "text": "hikes"}, {"persona_id": "p1", "fact_id": "f1", "text": "nurse"}])
    judge = make_judge(judge_config("openai:bench-judge", base_url="http://127.0.0.1:8765/v1"))
    support = load_rubric("support")
    plan = plan_calls(judge, support, cands, srcs, None, 2, {})
    assert [(item["assertion_id"], r, key) for key, item, r, _ in plan.slots] == [
        ("a0", 0, "9dc727bb012326e2525d260c1981b35e62f8a1c18a0570074f0cab99af9dc29d"),
        ("a0", 1, "7e0d7d061dd200fb639988a1c7b8af0ff165f771d404bb3357c8b18f847d4262"),
        ("a1", 0, "f6613a584b09b2c56ed6b2dab5ac095a0c8887ab7ee94ba7a5817d79b94cd500"),
        ("a1", 1, "4ee8d30b326c1222fc68e1ddfdb84bca5c009211c675789ebc3ec32e08ffaa7c"),
        ("a2", 0, "4ce76a3730b59567db853cec5e5a806cc67a5ffbfd1f78b0fccd4b6e462a52ac"),
        ("a2", 1, "8b8b0c7556420a2e7a8883a42cc85719edb7626661c7e3a1f9e371801c371b03"),
    ]
    # the planner's keys are cache_key's of the whole rendered prompt
    for (key, _item, r, _), row in zip(plan.slots, [row for row in cands.itertuples() for _ in range(2)]):
        prompt = support.render_support(source=dict(zip(srcs.persona_id, srcs.source))[row.persona_id], assertion=row.text,
                                        category=row.category)
        assert key == cache_key(judge.call_identity("support"), support.cache_identity(), prompt, r)
    coverage = [key for key, *_ in plan_calls(judge, load_rubric("coverage"), cands, srcs, facts, 2, {}).slots]
    assert coverage == ["b87f2bf3e7c31dfdc8022363a9a83865f8f52e2d6b6cbdd3100c7adb73b8fe71",
                        "8b22fe9cfba93d752cde4932758ba73d7f72f536c29e2c92526b3f8fcbd8a869",
                        "237eb9c4b6563035fdf94c258dbf2c27cce830c9df5aa867a8f02954b79255c9",
                        "54575c98d70418073b85f736fa637c5af201cb9371061d6239e58341c4a27f54"]
    per_fact = [key for key, *_ in plan_calls(judge, load_rubric("coverage-fact"), cands, srcs, facts, 2, {}).slots]
    assert per_fact == ["e33463c70c16db7d0758869847986e769f83c68822179bd93e41076db823becd",
                        "c560934593f694ef8da26c2b626e05dc97b0b3d962d0460bed2f2a96e42aeeab",
                        "27038e31c6114b8df7370e3cda88567eac833d7e7e2826bda848ab313c2c49c1",
                        "e90ca27ed25b45280f3e630e9de20e6c2f40e9458135b95774a4d9405aa8c149"]


def test_keymaker_with_a_shared_prefix_equals_cache_key():
    """The planner hashes a persona's shared part of the user message once (KeyMaker.keys'
    `user_prefix`) and continues the hash with each prompt's rest; for any prompt and any
    prefix, one it starts with or not, the keys are cache_key's."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    from memjudge.scoring.cache import KeyMaker

    ident = {"spec": "openai:m", "model": "m", "base_url": None, "params": {"temperature": 0.0, "seed": None}}
    rub = {"name": "support", "template_sha256": "ab", "schema": {"type": "object"}}
    chars = st.sampled_from(["\"", "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "\u2028", "é", "\U0001f600", "a", " ", "}", ","])
    text = st.lists(chars | st.text(max_size=4), max_size=10).map("".join)

    @hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
    @hypothesis.given(system=text, prefix=text, rests=st.lists(text, min_size=1, max_size=4), other=text)
    def check(system, prefix, rests, other):
        km = KeyMaker(ident, rub)
        for user in [prefix + rest for rest in rests] + [other]:
            p = Prompt(system, user)
            assert km.keys(p, [0, 3], prefix) == [cache_key(ident, rub, p, r) for r in (0, 3)]

    check()


def test_bulk_writes_equal_diskcache_key_by_key(tmp_path):
    """set_many inserts a chunk of answers in one statement: the Cache table (every column but
    the times, rows in key order) and diskcache's count and size must be what diskcache's own
    `set` makes key by key (in key order, as set_many writes them), with keys given out of
    order, keys stored before (replaced), a key given twice (its last value), long answers
    (kept in files), and a cache with statistics (not bulk-written)."""
    long = {"answer": {"verdict": "supported", "evidence": "x" * 70_000}}
    keys = [f"{i:064x}" for i in range(2000)]
    random.Random(0).shuffle(keys)
    items = [(k, {"answer": {"i": i, "t": "é"}}) for i, k in enumerate(keys)] + [(keys[3], {"answer": "again"}), ("f" * 64, long)]

    def table(cache):
        rows = cache._cache._sql("SELECT key, raw, expire_time, access_count, tag, size, mode, filename IS NULL, value FROM Cache"
                                 " ORDER BY rowid").fetchall()
        return rows, cache._cache._sql("SELECT key, value FROM Settings WHERE key IN ('count', 'size')").fetchall()

    for statistics in (False, True):
        with AnswerCache(tmp_path / f"bulk{statistics}") as bulk, AnswerCache(tmp_path / f"one{statistics}") as one:
            for cache in (bulk, one):
                cache._cache.statistics = statistics
                cache.set(keys[10], {"answer": "before"})
            bulk.set_many(items)
            for k, record in sorted(items, key=lambda item: item[0]):  # stable: keys[3]'s two values in their order
                one.set(k, record)
            assert table(bulk) == table(one)
            assert bulk.get(keys[3]) == {"answer": "again"} and bulk.get("f" * 64) == long and len(bulk) == 2001
    # keys that do not sort together (str and tuple): written in arrival order through diskcache
    with AnswerCache(tmp_path / "mixed") as mixed:
        mixed.set_many(iter([("b" * 64, {"answer": 1}), (("tuple", "key"), {"answer": 2}), ("a" * 64, {"answer": 3})]))
        assert [mixed.get(k) for k in ("b" * 64, ("tuple", "key"), "a" * 64)] == [{"answer": 1}, {"answer": 2}, {"answer": 3}]


def test_bulk_reads_equal_diskcache_key_by_key(tmp_path):
    """get_many and missing read thousands of keys a few queries at a time (diskcache's own
    fast path, in bulk); they must find exactly what diskcache finds key by key: answers
    stored in the table and in files (long ones), none for absent, damaged or foreign
    entries, and the same through the key-by-key path a cache with statistics takes."""
    long = {"answer": {"verdict": "supported", "evidence": "x" * 70_000}}
    with AnswerCache(tmp_path / "c") as cache:
        keys = [f"{i:064x}" for i in range(2000)]
        cache.set_many((k, {"answer": {"i": i}}) for i, k in enumerate(keys[:1500]))
        cache.set("f" * 64, long)
        cache._cache.set("e" * 64, "not json")
        cache._cache.set("c" * 64, '{"a": [1')  # halves that would join into one answer
        cache._cache.set("b" * 64, '2]}')
        cache._cache.set("a" * 64, "7")
        cache._cache.set(("tuple", "key"), "{}")
        asked = keys + ["f" * 64, "e" * 64, "d" * 64, keys[0]]
        got = cache.get_many(asked)
        assert got == {k: cache.get(k) for k in asked if cache.get(k) is not None}
        assert len(got) == 1501 and cache.get_many(["c" * 64, "b" * 64, "a" * 64, keys[1]]) == {"a" * 64: 7, keys[1]: {"answer": {"i": 1}}}
        assert len(got) == 1501 and got["f" * 64] == long and got[keys[7]] == {"answer": {"i": 7}}
        assert cache.missing(asked) == [k for k in asked if k not in cache]
        cache._cache.statistics = True  # not fast-path readable: key by key, same answers
        assert cache.get_many(asked) == got and cache.missing(asked) == [k for k in asked if k not in cache]


V1 = ROOT / "tests" / "data" / "cached_rerun_v1"


@pytest.mark.parametrize("rubric, rows", [("support", "labels.jsonl"), ("coverage-fact", "coverage.jsonl")])
def test_a_run_folder_and_a_cache_written_by_main_keep_every_hit(tmp_path, rubric, rows):
    """tests/data/cached_rerun_v1 holds what memjudge's main at 4de27df wrote (make.py): a run
    folder's journal and rows, and its answer cache entry by entry, for an OpenAI-compatible
    judge. Rerun from that journal, and from that cache alone in a fresh folder, every answer is
    found (no request: nothing listens at the judge's address), and the rows and the journal
    written are the same bytes as main's."""
    name = "support" if rubric == "support" else "coverage"
    judge = judge_config("openai:bench-judge", base_url="http://127.0.0.1:8765/v1")
    facts = V1 / "facts.jsonl" if rubric != "support" else None
    kept = (V1 / f"{name}.{rows}").read_bytes()
    calls = len(kept.splitlines())

    def rerun(out, cache_dir):
        return score_run(V1 / "candidates.jsonl", V1 / "sources.jsonl", judge, rubric=rubric, facts=facts, replicates=2, out=out,
                         cache_dir=cache_dir, progress=False).summary

    run = tmp_path / "run"
    run.mkdir()
    (run / "journal.jsonl").write_bytes((V1 / f"{name}.journal.jsonl").read_bytes())
    s = rerun(run, tmp_path / "empty-cache")
    assert (s.requested, s.resumed, s.cached, s.errors) == (0, calls, 0, 0)
    assert (run / rows).read_bytes() == kept

    cache_dir = tmp_path / "main-cache"
    with diskcache.Cache(str(cache_dir)) as c:  # the entries as main stored them, text for text
        for line in (V1 / "cache.jsonl").read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            c.set(entry["key"], entry["value"])
    s = rerun(tmp_path / "fresh", cache_dir)
    assert (s.requested, s.resumed, s.cached, s.errors) == (0, 0, calls, 0)
    assert (tmp_path / "fresh" / rows).read_bytes() == (V1 / f"{name}.from-cache.{rows}").read_bytes()
    assert (tmp_path / "fresh" / "journal.jsonl").read_bytes() == (V1 / f"{name}.from-cache.journal.jsonl").read_bytes()


def test_a_run_that_wrote_answers_leaves_the_cache_checkpointed(cli, tmp_path, fake_server):
    """The program collects what the run left in cycles before it freezes the collector and
    exits (memjudge.cli.run): the cache writer threads' SQLite connections are closed, the last
    one checkpointing the write-ahead log, as when the interpreter collected them itself."""
    src, cand, cache = tmp_path / "s.jsonl", tmp_path / "c.jsonl", tmp_path / "cache"
    sources_frame(N).to_json(src, orient="records", lines=True)
    candidates_frame(N).to_json(cand, orient="records", lines=True)
    r = cli("score", cand, "--sources", src, "--judge", "openai:m", "--base-url", fake_server.openai_base_url,
            "--out", tmp_path / "run", "--cache-dir", cache, "--no-progress", "--replicates", "2")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in cache.iterdir()) == ["cache.db"]
    with AnswerCache(cache) as c:
        assert len(c) == 2 * N
