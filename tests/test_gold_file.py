"""The gold file of `memjudge annotate`: format, durability, resume, the server's refusals, and
the file feeding `memjudge agreement --gold` (one rater per annotator) and `calibrate --gold`.

The HTTP API is driven with Starlette's TestClient (in-process); the real browser and a real
server process are in tests/test_annotate.py.
"""

from __future__ import annotations

import json
import os
import socket

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, roc_auc_score
from starlette.testclient import TestClient

from memjudge.annotate.gold import GoldWriter, gold_raters, read_gold_rows, repair_tail
from memjudge.annotate.items import load_items
from memjudge.cli import main
from memjudge.errors import InputError
from memjudge.formats import read_gold, read_labels
from memjudge.web.annotate import Session, create_app

N = 24
RNG = np.random.default_rng(7)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def items(tmp_path):
    rows = [{"assertion_id": f"a{i:02d}", "persona_id": f"p{i % 6}", "category": ["facts", "values"][i % 2],
             "text": f"assertion {i}", "source": f"source of persona p{i % 6}", "inclusion_prob": 0.5} for i in range(N)]
    return _jsonl(tmp_path / "items.jsonl", rows)


def _client(items_path, gold, annotator, judge=None) -> tuple[Session, TestClient]:
    session = Session(load_items(items_path), gold, annotator, judge=judge, token="T0KEN")
    return session, TestClient(create_app(session))


def _label(client, session, i, verdict, note=None, token="T0KEN"):
    return client.post("/api/label", headers={"X-Memjudge-Token": token},
                       json={"index": i, "assertion_id": session.ids[i], "verdict": verdict, "note": note})


# ---------------------------------------------------------------------------------------
# format and durability


def test_rows_are_appended_and_fsynced_before_append_returns(tmp_path, monkeypatch):
    gold = tmp_path / "sub" / "gold.jsonl"
    seen = []
    real_fsync = os.fsync

    def fsync(fd):
        real_fsync(fd)
        if gold.exists():
            seen.append(gold.read_text(encoding="utf-8").count("\n"))

    monkeypatch.setattr(os, "fsync", fsync)
    with GoldWriter(gold, "alice") as w:
        r1 = w.append("a1", "supported")
        r2 = w.append("a1", "unsupported", "changed my mind — «quoted»")
    assert seen[-2:] == [1, 2]  # each row is in the file when its fsync runs
    rows = [json.loads(x) for x in gold.read_text(encoding="utf-8").splitlines()]
    assert rows == [r1, r2]
    assert list(rows[0]) == ["assertion_id", "verdict", "annotator", "note", "labelled_at"]
    assert rows[0]["note"] is None and rows[1]["note"] == "changed my mind — «quoted»"
    assert pd.Timestamp(rows[1]["labelled_at"]) >= pd.Timestamp(rows[0]["labelled_at"])


def test_two_writers_on_one_file_at_once_lose_no_row(tmp_path):
    """Two annotators appending to one file at the same time: each row lands whole (O_APPEND)."""
    import threading

    gold = tmp_path / "gold.jsonl"
    writers = [GoldWriter(gold, name) for name in ("alice", "bob")]
    note = "x" * 3000  # rows longer than a small buffer

    def work(w):
        for i in range(150):
            w.append(f"a{i}", "supported", note)

    threads = [threading.Thread(target=work, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in writers:
        w.close()
    g = read_gold(gold)  # every line is a whole JSON row
    assert len(gold.read_text(encoding="utf-8").splitlines()) == 300
    assert g.groupby("annotator").size().to_dict() == {"alice": 150, "bob": 150}


def test_read_gold_takes_the_latest_row_per_assertion_and_annotator(tmp_path):
    gold = _jsonl(tmp_path / "gold.jsonl", [
        {"assertion_id": "a", "verdict": "supported", "annotator": "alice"},
        {"assertion_id": "a", "verdict": "unsupported", "annotator": "bob"},
        {"assertion_id": "b", "verdict": "partial", "annotator": "alice"},
        {"assertion_id": "a", "verdict": "partial", "annotator": "alice"},
        {"assertion_id": "b", "verdict": "supported", "annotator": "alice"},
    ])
    g = read_gold(gold)
    assert sorted(zip(g["assertion_id"], g["annotator"], g["verdict"])) == [
        ("a", "alice", "partial"), ("a", "bob", "unsupported"), ("b", "alice", "supported")]
    # without an annotator column an assertion is still unique
    plain = _jsonl(tmp_path / "plain.jsonl", [{"assertion_id": "a", "verdict": "supported"}, {"assertion_id": "a", "verdict": "partial"}])
    with pytest.raises(InputError, match=r"plain.jsonl:2: duplicate assertion_id 'a' \(first at line 1\)"):
        read_gold(plain)
    bad = _jsonl(tmp_path / "bad.jsonl", [{"assertion_id": "a", "verdict": "supported", "annotator": "x"},
                                          {"assertion_id": "b", "verdict": "supported", "annotator": None}])
    with pytest.raises(InputError, match=r"bad.jsonl:2: missing or empty 'annotator'"):
        read_gold(bad)


def test_a_torn_last_line_is_cut_off_and_the_session_resumes(tmp_path, items):
    gold = tmp_path / "gold.jsonl"
    session, client = _client(items, gold, "alice")
    for i, v in enumerate(["supported", "unsupported", "partial"]):
        assert _label(client, session, i, v).status_code == 200
    session.close()
    good = gold.read_bytes()
    gold.write_bytes(good + b'{"assertion_id": "a03", "verdict": "supp')  # a write cut off by a kill
    again, _ = _client(items, gold, "alice")
    assert "dropped an incomplete last line" in again.writer.repaired
    assert gold.read_bytes() == good
    assert again.resume_index() == 3
    again.close()
    # a complete row that lost only its newline is kept
    gold.write_bytes(good + b'{"assertion_id": "a03", "verdict": "supported", "annotator": "alice"}')
    assert repair_tail(gold) == "added the missing newline after its last row"
    assert len(read_gold_rows(gold)) == 4


def test_resume_is_per_annotator_and_in_input_order(tmp_path, items):
    gold = tmp_path / "gold.jsonl"
    alice, ca = _client(items, gold, "alice")
    for i in (0, 1, 3):  # item 2 skipped
        assert _label(ca, alice, i, "supported").status_code == 200
    bob, cb = _client(items, gold, "bob")  # same file, another annotator
    assert bob.resume_index() == 0
    assert cb.get("/api/state", params={"token": "T0KEN"}).json()["resume"] == 0
    assert _label(cb, bob, 0, "unsupported").status_code == 200
    again, cc = _client(items, gold, "alice")
    state = cc.get("/api/state", headers={"X-Memjudge-Token": "T0KEN"}).json()
    assert (state["resume"], state["labelled"], state["total"]) == (2, 3, N)
    item = cc.get("/api/item/1", params={"token": "T0KEN"}).json()
    assert (item["assertion_id"], item["verdict"]) == ("a01", "supported")
    assert "judge" not in item  # blind by default
    for s in (alice, bob, again):
        s.close()


# ---------------------------------------------------------------------------------------
# the server refuses without the token, and refuses malformed requests, writing nothing


BAD_POSTS = [
    ({}, 403, None),                                            # no token
    ({"X-Memjudge-Token": "wrong"}, 403, None),
    ({"X-Memjudge-Token": "T0KEN", "Content-Type": "text/plain"}, 415, b'{"index": 0}'),
    ({"X-Memjudge-Token": "T0KEN", "Content-Type": "application/json"}, 400, b"{nope"),
    ({"X-Memjudge-Token": "T0KEN", "Content-Type": "application/json"}, 400, b"[1, 2]"),
    ({"X-Memjudge-Token": "T0KEN", "Content-Type": "application/json"}, 400, b"\xff\xfe"),
    ({"X-Memjudge-Token": "T0KEN", "Content-Type": "application/json"}, 413, b'{"note": "' + b"x" * 70000 + b'"}'),
]
BAD_BODIES = [
    ({"index": 0, "assertion_id": "a00"}, 400),                                      # no verdict
    ({"index": 0, "assertion_id": "a00", "verdict": "supported", "extra": 1}, 400),  # unknown field
    ({"index": True, "assertion_id": "a01", "verdict": "supported"}, 400),
    ({"index": "0", "assertion_id": "a00", "verdict": "supported"}, 400),
    ({"index": N, "assertion_id": "a00", "verdict": "supported"}, 400),
    ({"index": -1, "assertion_id": "a00", "verdict": "supported"}, 400),
    ({"index": 0, "assertion_id": "a01", "verdict": "supported"}, 409),              # stale page
    ({"index": 0, "assertion_id": "a00", "verdict": "skip"}, 400),
    ({"index": 0, "assertion_id": "a00", "verdict": "Supported"}, 400),
    ({"index": 0, "assertion_id": "a00", "verdict": "supported", "note": 3}, 400),
    ({"index": 0, "assertion_id": "a00", "verdict": "supported", "note": "x" * 5001}, 400),
]


def test_refused_requests_write_nothing(tmp_path, items):
    gold = tmp_path / "gold.jsonl"
    session, client = _client(items, gold, "alice")
    body = json.dumps({"index": 0, "assertion_id": "a00", "verdict": "supported"}).encode()
    for headers, status, raw in BAD_POSTS:
        headers = {"Content-Type": "application/json", **headers}
        assert client.post("/api/label", headers=headers, content=raw if raw is not None else body).status_code == status, headers
    # the token in the query string does not authorise a post
    assert client.post("/api/label?token=T0KEN", headers={"Content-Type": "application/json"}, content=body).status_code == 403
    for data, status in BAD_BODIES:
        assert client.post("/api/label", headers={"X-Memjudge-Token": "T0KEN"}, json=data).status_code == status, data
    assert client.get("/api/label", params={"token": "T0KEN"}).status_code == 405
    assert client.get("/api/item/999", params={"token": "T0KEN"}).status_code == 404
    for path in ("/", "/api/state", "/api/item/0"):
        assert client.get(path).status_code == 403
        assert client.get(path, params={"token": "T0KE"}).status_code == 403
    assert gold.read_bytes() == b""
    assert session.decisions == {}
    page = client.get("/", params={"token": "T0KEN"})
    assert page.status_code == 200 and "<title>memjudge annotate</title>" in page.text
    assert "script-src 'nonce-" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer" and page.headers["cache-control"] == "no-store"
    assert _label(client, session, 0, "supported", "  ok  ").json()["row"]["note"] == "ok"
    session.close()


def test_show_judge_sends_the_judges_answers(tmp_path, items):
    from memjudge.annotate.items import judge_views

    labels = _jsonl(tmp_path / "labels.jsonl", [
        {"assertion_id": "a00", "persona_id": "p0", "category": "facts", "judge": "sim:j", "rubric": "support",
         "replicate": r, "verdict": v, "evidence": ["quote one", "quote two"]} for r, v in ((1, "unsupported"), (0, "supported"))])
    session, client = _client(items, tmp_path / "gold.jsonl", "alice", judge=judge_views([labels]))
    item = client.get("/api/item/0", params={"token": "T0KEN"}).json()
    assert item["judge"] == [{"judge": "sim:j", "rubric": "support", "verdict": "supported",
                              "evidence": "quote one … quote two", "rationale": None}]
    assert client.get("/api/item/1", params={"token": "T0KEN"}).json()["judge"] == []
    session.close()


# ---------------------------------------------------------------------------------------
# CLI errors


def test_cli_input_errors(tmp_path, items, capsys):
    no_source = _jsonl(tmp_path / "nosrc.jsonl", [{"assertion_id": "a", "persona_id": "p", "category": "c", "text": "t"}])
    assert main(["annotate", str(no_source), "--out", str(tmp_path / "g.jsonl")]) == 2
    assert "nosrc.jsonl: no 'source' column: give the sources with --sources SOURCES" in capsys.readouterr().err
    sources = _jsonl(tmp_path / "sources.jsonl", [{"persona_id": "q", "source": "s"}])
    assert main(["annotate", str(no_source), "--sources", str(sources), "--out", str(tmp_path / "g.jsonl")]) == 2
    assert "nosrc.jsonl:1: persona 'p' has no source in" in capsys.readouterr().err
    assert main(["annotate", str(items), "--out", str(tmp_path / "g.jsonl"), "--port", "70000"]) == 2
    assert "--port must be in 0..65535" in capsys.readouterr().err
    not_mine = _jsonl(tmp_path / "old_gold.jsonl", [{"assertion_id": "a00", "verdict": "supported"}])
    assert main(["annotate", str(items), "--out", str(not_mine), "--no-browser", "--port", "0"]) == 2
    assert "old_gold.jsonl: has no 'annotator' column" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert main(["annotate", str(items), "--out", str(tmp_path / "g.jsonl"), "--no-browser", "--port", str(port)]) == 2
        assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert not (tmp_path / "g.jsonl").exists() or (tmp_path / "g.jsonl").read_bytes() == b""


# ---------------------------------------------------------------------------------------
# the gold file feeds agreement (one rater per annotator) and calibrate


def _judge_labels(tmp_path, items_path):
    it = pd.read_json(items_path, lines=True)
    truth = RNG.random(len(it)) < 0.6
    score = np.where(truth, 1.0, -1.0) + RNG.normal(0, 1.0, len(it))
    rows = [{"assertion_id": a, "persona_id": p, "category": c, "judge": "sim:j", "rubric": "support@abcd1234",
             "replicate": 0, "verdict": "supported" if s > 0 else "unsupported", "judge_score": float(s)}
            for a, p, c, s in zip(it["assertion_id"], it["persona_id"], it["category"], score)]
    return _jsonl(tmp_path / "labels.jsonl", rows), truth


def test_two_annotators_are_two_raters_in_agreement(tmp_path, items, capsys):
    labels, truth = _judge_labels(tmp_path, items)
    gold = tmp_path / "gold.jsonl"
    alice, ca = _client(items, gold, "alice")
    bob, cb = _client(items, gold, "bob")
    va = np.where(truth, "supported", "unsupported")
    vb = va.copy()
    vb[[1, 4, 9, 15]] = np.where(vb[[1, 4, 9, 15]] == "supported", "unsupported", "supported")
    vb[20] = "partial"
    for i in range(N):
        assert _label(ca, alice, i, "partial" if i == 3 else va[i]).status_code == 200
        if i < N - 2:  # bob leaves two items unlabelled
            assert _label(cb, bob, i, vb[i]).status_code == 200
    assert _label(ca, alice, 3, va[3]).status_code == 200  # alice changes her mind
    alice.close(), bob.close()

    assert main(["agreement", str(labels), "--gold", str(gold), "--json", "--bootstrap", "50"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["judges"] == ["human:alice", "human:bob", "sim:j"]
    assert res["gold"] == []  # several annotators: raters, not one gold column
    pair = next(p for p in res["pairs"] if (p["a"], p["b"]) == ("human:alice", "human:bob"))
    assert pair["n"] == N - 2
    assert pair["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(va[: N - 2], vb[: N - 2]))
    assert pair["percent_agreement"]["value"] == pytest.approx(np.mean(va[: N - 2] == vb[: N - 2]))
    judge = read_labels(labels).set_index("assertion_id")["verdict"]
    pj = next(p for p in res["pairs"] if (p["a"], p["b"]) == ("human:alice", "sim:j"))
    assert pj["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(va, judge.loc[[f"a{i:02d}" for i in range(N)]].to_numpy()))

    # one annotator: the gold column, as before
    g1 = read_gold(gold)
    only_alice = _jsonl(tmp_path / "alice.jsonl", g1[g1["annotator"] == "alice"].to_dict("records"))
    assert main(["agreement", str(labels), "--gold", str(only_alice), "--json", "--bootstrap", "50"]) == 0
    res1 = json.loads(capsys.readouterr().out)
    assert res1["judges"] == ["sim:j"] and res1["gold"][0]["n"] == N
    assert res1["gold"][0]["accuracy"]["value"] == pytest.approx(np.mean(judge.loc[[f"a{i:02d}" for i in range(N)]].to_numpy() == va))


def test_gold_raters_leaves_out_unknown_assertions():
    labels = pd.DataFrame({"assertion_id": ["a", "b"], "persona_id": ["p", "q"], "category": ["c", "c"], "judge": "j",
                           "rubric": "support", "replicate": 0, "verdict": ["supported", "unsupported"]})
    gold = pd.DataFrame({"assertion_id": ["a", "z"], "verdict": ["partial", "supported"], "annotator": ["al", "al"]})
    rows, notes = gold_raters(gold, labels, "majority")
    assert rows.to_dict("records") == [{"assertion_id": "a", "persona_id": "p", "category": "c", "judge": "human:al",
                                        "rubric": "support", "replicate": 0, "verdict": "partial"}]
    assert notes == ["1 gold rows name assertions absent from the labels (left out)"]


def test_annotate_gold_feeds_calibrate(tmp_path, items, capsys):
    labels, truth = _judge_labels(tmp_path, items)
    gold = tmp_path / "gold.jsonl"
    s, c = _client(items, gold, "alice")
    v = np.where(truth, "supported", "unsupported").astype(object)
    for i in range(N):
        assert _label(c, s, i, "unsupported" if i == 0 else v[i]).status_code == 200
    assert _label(c, s, 0, v[0]).status_code == 200  # changed mind: the latest row counts
    assert _label(c, s, 5, "partial").status_code == 200  # partial: not a class for calibration
    s.close()
    assert main(["calibrate", str(labels), "--gold", str(gold), "--judge", "sim:j",
                 "--panel", str(tmp_path / "judges.toml"), "--json"]) == 0
    cal = json.loads(capsys.readouterr().out)
    keep = np.arange(N) != 5
    scores = read_labels(labels)["judge_score"].to_numpy()
    assert cal["n"] == N - 1
    assert cal["n_supported"] == int(truth[keep].sum())
    assert cal["auc"] == pytest.approx(roc_auc_score(truth[keep], scores[keep]))


def test_binds_to_loopback_by_default():
    from memjudge.cli import build_parser
    from memjudge.web.app import bind, url_for

    args = build_parser().parse_args(["annotate", "items.jsonl", "--out", "gold.jsonl"])
    assert (args.host, args.port, args.no_browser, args.show_judge) == ("127.0.0.1", 8765, False, None)
    sock = bind(args.host, 0)
    try:
        host, port = sock.getsockname()[:2]
        assert host == "127.0.0.1" and port > 0
        assert url_for(sock, args.host, "tok") == f"http://127.0.0.1:{port}/?token=tok"
    finally:
        sock.close()
