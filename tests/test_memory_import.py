"""`memjudge import mem0|memos|graphiti|langmem|letta FILE --out DIR` (issue #34).

Where a system's package installs here (mem0ai, graphiti-core, letta-client: in the [test] extra),
the records are built with its own classes and serialised as it documents its export; where it does
not (MemOS: its PyPI package is not installable here; LangMem: it pulls in LangChain and LangGraph),
the fixture is the shape its documentation shows, with the link. No network.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memjudge import import_memories, read_labels
from memjudge._util.registry import memory_system_names
from memjudge.errors import InputError, UsageError
from memjudge.importers.memory_systems import load_system
from memjudge.scoring.engine import score_run
from scripted_judge import ScriptedJudge
from test_io import assert_one_line_error, run_inproc

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def dump(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    return path


def test_every_shipped_system_is_a_data_file_that_loads():
    assert memory_system_names() == ["graphiti", "langmem", "letta", "mem0", "memos"]
    for name in memory_system_names():
        preset = load_system(name)
        assert preset.docs.startswith("https://") and preset.confidence
        assert {"assertion_id", "persona_id", "text"} <= set(preset.memories.mapping.columns)


# ---------------------------------------------------------------------------------------
# mem0

# The shape of Memory.get_all() in mem0 v1.1+ (https://docs.mem0.ai/core-concepts/memory-operations/get):
# {"results": [{"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id", ...}]}
MEM0_DOC = {"results": [
    {"id": "892db2ae-06d9-49e5-8b3e-585ef9b85b8e", "memory": "User is planning a trip to Japan next month.",
     "hash": "a5f5d1b0f1e8c5d4", "metadata": None, "created_at": "2024-07-26T10:29:36.630547-07:00",
     "updated_at": None, "user_id": "alex"},
    {"id": "4af9a4e7-7ef0-4aa3-a7c9-2b6a1f6d3b11", "memory": "User is vegetarian.", "hash": "c2b8e1f09ad3",
     "metadata": {"source": "onboarding"}, "created_at": "2024-07-26T10:30:02.120000-07:00",
     "updated_at": "2024-07-27T08:00:00.000000-07:00", "user_id": "alex"},
]}


def test_mem0_get_all_export(tmp_path, capsys):
    src = dump(tmp_path / "mem0.json", MEM0_DOC)
    code, out, err = run_inproc(capsys, "import", "mem0", src, "--out", tmp_path / "imp")
    assert code == 0, err
    rows = read_jsonl(tmp_path / "imp" / "candidates.jsonl")
    assert [r["assertion_id"] for r in rows] == [m["id"] for m in MEM0_DOC["results"]]
    assert {r["persona_id"] for r in rows} == {"alex"} and {r["category"] for r in rows} == {"memory"}
    assert [r["text"] for r in rows] == [m["memory"] for m in MEM0_DOC["results"]]
    assert all(r["confidence"] is None for r in rows)
    assert rows[1]["updated_at"] == "2024-07-27T08:00:00.000000-07:00" and rows[1]["hash"] == "c2b8e1f09ad3"
    assert not (tmp_path / "imp" / "sources.jsonl").exists()
    manifest = json.loads((tmp_path / "imp" / "import.json").read_text())
    assert manifest["confidence"]["with"] == 0 and manifest["confidence"]["note"].startswith("none: mem0")
    assert "confidence: 0 of 2 have one (none: mem0 keeps no confidence" in out


def test_mem0_platform_categories_first_of_them_all_kept(tmp_path):
    # MemoryClient.get_all() on the platform: a list of memories that carry categories
    # (https://docs.mem0.ai/platform/features/custom-categories)
    mems = [{"id": "m1", "memory": "Loves hiking", "user_id": "alex", "categories": ["hobbies", "health"]},
            {"id": "m2", "memory": "Works at Acme", "user_id": "alex", "categories": []},
            {"id": "m3", "memory": "Sister is called Ann", "agent_id": "travel-bot", "categories": None}]
    res = import_memories("mem0", dump(tmp_path / "p.json", mems))
    c = res.candidates
    assert c["category"].tolist() == ["hobbies", "memory", "memory"]
    assert c["categories"].tolist() == [["hobbies", "health"], [], None]
    assert c["persona_id"].tolist() == ["alex", "alex", "travel-bot"]


def test_mem0_records_built_with_its_own_classes(tmp_path, monkeypatch):
    # importing mem0 makes its folder (~/.mem0) and sets up telemetry: a folder of the test's, no telemetry
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0home"))
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    base = pytest.importorskip("mem0.configs.base", reason="mem0ai: in the [test] extra")
    # as Memory._get_all_from_vector_store builds each result: MemoryItem(...).model_dump(exclude={"score"})
    # plus the ids it was stored under; get_all() returns {"results": [...]}
    items = []
    for i, (user, text) in enumerate([("alex", "Lives in Lisbon"), ("alex", "Has two cats"), ("sam", "Is a nurse")]):
        d = base.MemoryItem(id=f"id-{i}", memory=text, hash=f"h{i}", created_at=T0.isoformat(), updated_at=None).model_dump(exclude={"score"})
        d["user_id"] = user
        items.append(d)
    path = tmp_path / "mem0.jsonl"  # one get_all() per user, one per line
    path.write_text("".join(json.dumps({"results": [d for d in items if d["user_id"] == u]}) + "\n" for u in ("alex", "sam")))
    c = import_memories("mem0", path).candidates
    assert c["assertion_id"].tolist() == ["id-0", "id-1", "id-2"]
    assert c["persona_id"].tolist() == ["alex", "alex", "sam"]
    assert c["created_at"].tolist() == [T0.isoformat()] * 3


# ---------------------------------------------------------------------------------------
# MemOS (fixture: the TextualMemoryItem fields of
# https://memos-docs.openmem.net/open_source/modules/memories/general_textual_memory and
# https://memos-docs.openmem.net/open_source/modules/memories/tree_textual_memory)

MEMOS_ITEMS = [
    {"id": "5f1c6d7e-0000-4000-8000-000000000001", "memory": "The user loves tomatoes.",
     "metadata": {"user_id": "u42", "session_id": "sess-1", "type": "opinion", "memory_time": "2025-01-01", "source": "conversation",
                  "confidence": 90.0, "entities": ["tomatoes"], "tags": ["food"], "visibility": "private",
                  "updated_at": "2025-01-01T12:00:00"}},
    {"id": "5f1c6d7e-0000-4000-8000-000000000002", "memory": "The user moved to Berlin in 2023.",
     "metadata": {"user_id": "u42", "memory_type": "LongTermMemory", "status": "activated", "confidence": 75.5,
                  "sources": ["user: I moved to Berlin two years ago"], "created_at": "2025-01-02T09:00:00",
                  "updated_at": "2025-01-02T09:00:00", "embedding": [0.1, 0.2, 0.3], "key": "moved to Berlin"}},
]


def test_memos_items_with_confidence_scaled_to_one(tmp_path):
    res = import_memories("memos", dump(tmp_path / "memos.json", MEMOS_ITEMS), out=tmp_path / "imp")
    c = res.candidates
    assert c["confidence"].tolist() == pytest.approx([0.90, 0.755])
    assert c["category"].tolist() == ["opinion", "LongTermMemory"]
    assert c["persona_id"].tolist() == ["u42", "u42"]
    assert c["provenance"].tolist() == [None, ["user: I moved to Berlin two years ago"]]
    assert "embedding" not in c["metadata"].iloc[1]  # left out: a vector is not evidence
    assert res.summary()["confidence"]["with"] == 2


def test_memos_tree_get_all_nodes_and_edges(tmp_path):
    doc = {"nodes": MEMOS_ITEMS, "edges": [{"source": MEMOS_ITEMS[0]["id"], "target": MEMOS_ITEMS[1]["id"], "type": "RELATE_TO"}]}
    c = import_memories("memos", dump(tmp_path / "tree.json", doc)).candidates
    assert c["assertion_id"].tolist() == [m["id"] for m in MEMOS_ITEMS]


def test_memos_confidence_out_of_range_names_the_line(tmp_path):
    bad = json.loads(json.dumps(MEMOS_ITEMS))
    bad[1]["metadata"]["confidence"] = 250
    path = dump(tmp_path / "memos.json", bad)
    line = path.read_text().splitlines().index("  {", 2) + 1  # the second item's opening brace
    with pytest.raises(InputError) as e:
        import_memories("memos", path)
    assert e.value.line == line and "[0, 1]" in e.value.message


# ---------------------------------------------------------------------------------------
# Graphiti


def graphiti_export(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GRAPHITI_TELEMETRY_ENABLED", "false")  # only Graphiti() reports, and none is made here
    edges_mod = pytest.importorskip("graphiti_core.edges", reason="graphiti-core: in the [test] extra")
    from graphiti_core.nodes import EpisodeType, EpisodicNode

    ep1 = EpisodicNode(name="chat-1", group_id="alice", source=EpisodeType.message, source_description="support chat",
                       content="alice: I moved to Zurich last spring.\nassistant: Nice!", valid_at=T0, created_at=T0)
    ep2 = EpisodicNode(name="chat-2", group_id="alice", source=EpisodeType.message, source_description="support chat",
                       content="alice: My brother Tom is a doctor.", valid_at=T0.replace(day=2), created_at=T0.replace(day=2))
    edges = [
        edges_mod.EntityEdge(group_id="alice", source_node_uuid="n-alice", target_node_uuid="n-zurich", created_at=T0,
                             name="LIVES_IN", fact="Alice lives in Zurich.", episodes=[ep1.uuid], valid_at=T0,
                             fact_embedding=[0.1, 0.2]),
        edges_mod.EntityEdge(group_id="alice", source_node_uuid="n-alice", target_node_uuid="n-doctor", created_at=T0,
                             name="WORKS_AS", fact="Alice is a doctor.", episodes=[ep2.uuid]),
    ]
    doc = {"edges": [e.model_dump(mode="json") for e in edges], "episodes": [ep.model_dump(mode="json") for ep in (ep1, ep2)]}
    return dump(tmp_path / "graphiti.json", doc)


def test_graphiti_edges_and_episodes_with_its_own_classes(tmp_path, monkeypatch):
    path = graphiti_export(tmp_path, monkeypatch)
    doc = json.loads(path.read_text())
    res = import_memories("graphiti", path, out=tmp_path / "imp")
    c = res.candidates
    assert c["assertion_id"].tolist() == [e["uuid"] for e in doc["edges"]]
    assert c["category"].tolist() == ["LIVES_IN", "WORKS_AS"]
    assert c["provenance"].tolist() == [[doc["episodes"][0]["uuid"]], [doc["episodes"][1]["uuid"]]]
    assert "fact_embedding" not in c.columns
    src = read_jsonl(tmp_path / "imp" / "sources.jsonl")
    assert [s["persona_id"] for s in src] == ["alice"]
    text = src[0]["source"]
    e1, e2 = doc["episodes"][0]["uuid"], doc["episodes"][1]["uuid"]
    assert text.startswith(f"=== session {e1} ===\n[{doc['episodes'][0]['valid_at']}] episode (chat-1): alice: I moved to Zurich last spring.\n"
                           "    assistant: Nice!")
    assert f"=== session {e2} ===" in text


def test_graphiti_round_trip_labels_carry_provenance(tmp_path, monkeypatch):
    path = graphiti_export(tmp_path, monkeypatch)
    import_memories("graphiti", path, out=tmp_path / "imp")
    res = score_run(tmp_path / "imp" / "candidates.jsonl", tmp_path / "imp" / "sources.jsonl", ScriptedJudge(),
                    out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False)
    labels = read_labels(tmp_path / "run" / "labels.jsonl")
    assert labels["provenance"].tolist() == res.labels["provenance"].tolist()
    assert [p[0] for p in labels["provenance"]] == [e["uuid"] for e in json.loads(path.read_text())["episodes"]]
    assert labels["valid_at"].iloc[0] == T0.isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------
# LangMem (fixture: create_memory_manager's ExtractedMemory(id, content=Memory(content=...)) of
# https://langchain-ai.github.io/langmem/guides/extract_semantic_memories/, saved as
# [{"id": m.id, "content": m.content.model_dump()}], and a store's items as BaseStore.search returns them)

LANGMEM_EXTRACTED = [
    {"id": "0d4e9c4f-1111-4a4c-9f7e-5e0f0a1b2c3d", "content": {"content": "User prefers dark mode in all applications."}},
    {"id": "7a9b8c6d-2222-4e5f-8a1b-2c3d4e5f6a7b", "content": {"content": "User's favourite language is Python."}},
]
LANGMEM_ITEMS = [
    {"namespace": ["memories", "user-7"], "key": "k1", "value": {"kind": "Memory", "content": {"content": "Lives in Oslo."}},
     "created_at": "2025-02-01T10:00:00+00:00", "updated_at": "2025-02-01T10:00:00+00:00", "score": None},
]


def test_langmem_extracted_memories_need_a_user(tmp_path, capsys):
    path = dump(tmp_path / "langmem.json", LANGMEM_EXTRACTED)
    code, out, err = run_inproc(capsys, "import", "langmem", path, "--out", tmp_path / "imp")
    assert_one_line_error(code, err, path, 2, "does not name the user", "--map default.persona_id=USER")
    code, out, err = run_inproc(capsys, "import", "langmem", path, "--out", tmp_path / "imp", "--map", "default.persona_id=dana")
    assert code == 0, err
    rows = read_jsonl(tmp_path / "imp" / "candidates.jsonl")
    assert [(r["persona_id"], r["category"], r["text"]) for r in rows] == [
        ("dana", "memory", "User prefers dark mode in all applications."), ("dana", "memory", "User's favourite language is Python.")]


def test_langmem_store_items(tmp_path):
    c = import_memories("langmem", dump(tmp_path / "items.json", LANGMEM_ITEMS)).candidates
    assert c[["assertion_id", "persona_id", "category", "text"]].values.tolist() == [["k1", "user-7", "Memory", "Lives in Oslo."]]


# ---------------------------------------------------------------------------------------
# Letta


def test_letta_blocks_and_passages_with_its_own_classes(tmp_path):
    pytest.importorskip("letta_client", reason="letta-client: in the [test] extra")
    from letta_client.types import Passage
    from letta_client.types.agents import Block

    blocks = [Block(id="block-1", label="human", value="The human's name is Sarah. Sarah is a product manager."),
              Block(id="block-2", label="persona", value="I am Sam, a helpful assistant.")]
    passages = [Passage(id="passage-1", text="Sarah mentioned she runs marathons.", created_at=T0, embedding=[0.1] * 4)]
    doc = {"blocks": [b.model_dump(mode="json") for b in blocks], "passages": [p.model_dump(mode="json") for p in passages]}
    path = dump(tmp_path / "letta.json", doc)
    with pytest.raises(InputError, match="does not name the user"):
        import_memories("letta", path)
    from memjudge.formats import parse_map

    c = import_memories("letta", path, mapping={"candidates": parse_map("default.persona_id=sarah")}).candidates
    assert c[["assertion_id", "category", "text"]].values.tolist() == [
        ["block-1", "human", blocks[0].value], ["block-2", "persona", blocks[1].value], ["passage-1", "archival", passages[0].text]]
    assert "embedding" not in c.columns and c["created_at"].iloc[2] == T0.isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------
# adding a system is a file; bad input


def test_a_new_system_is_a_file(tmp_path):
    preset = tmp_path / "acme.toml"
    preset.write_text('title = "Acme memory"\ndocs = "https://example.org/acme"\nconfidence = "acme.score"\n'
                      '[memories]\nrecords = ["items"]\n[memories.map]\nassertion_id = "key"\npersona_id = "owner"\n'
                      'text = "fact"\ncategory = "kind"\nconfidence = "score"\n', encoding="utf-8")
    export = dump(tmp_path / "acme.json", {"items": [{"key": "a", "owner": "o1", "fact": "Likes tea", "kind": "taste", "score": 0.6}]})
    c = import_memories(preset, export).candidates
    assert c[["assertion_id", "persona_id", "category", "confidence", "text"]].values.tolist() == [["a", "o1", "taste", 0.6, "Likes tea"]]


def test_duplicate_memory_ids_name_the_line_in_the_document(tmp_path, capsys):
    doc = {"results": [MEM0_DOC["results"][0], dict(MEM0_DOC["results"][1], id=MEM0_DOC["results"][0]["id"])]}
    path = dump(tmp_path / "dup.json", doc)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), start=1) if '"memory": "User is vegetarian."' in t) - 2
    code, out, err = run_inproc(capsys, "import", "mem0", path, "--out", tmp_path / "imp")
    assert_one_line_error(code, err, path, line, "duplicate assertion_id", "first at line 3")


def test_unknown_system_and_a_mapping_for_a_dataset(tmp_path, capsys):
    code, out, err = run_inproc(capsys, "import", "zep-cloud", tmp_path / "x.json", "--out", tmp_path / "o")
    assert code == 2 and "unknown dataset 'zep-cloud'" in err
    with pytest.raises(UsageError, match="unknown memory system"):
        load_system("zep-cloud")
    code, out, err = run_inproc(capsys, "import", "synthpai", tmp_path, "--out", tmp_path / "o", "--map", "text=x")
    assert code == 2 and "--map is for a memory system's export" in err


def test_the_preset_mapping_can_be_overridden(tmp_path):
    path = dump(tmp_path / "mem0.json", {"results": [dict(m, metadata={"conf": 0.3}) for m in MEM0_DOC["results"]]})
    from memjudge.formats import parse_mappings

    res = import_memories("mem0", path, mapping=parse_mappings(["confidence=metadata.conf,category=hash"], "candidates"))
    c = res.candidates
    assert c["confidence"].tolist() == [0.3, 0.3]
    assert res.summary()["confidence"] == {"with": 2, "note": "mapped: confidence=metadata.conf"}
    assert c["category"].tolist() == [m["hash"] for m in MEM0_DOC["results"]]


# ---------------------------------------------------------------------------------------
# the shipped sample: a mem0-style export and its chat transcript, round trip through score

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "data" / "mem0"


def test_the_shipped_sample_is_what_its_script_writes(tmp_path):
    import runpy

    runpy.run_path(str(ROOT / "examples" / "mem0_sample.py"), run_name="sample").get("main")(tmp_path)
    for name in ("get_all.jsonl", "conversations.jsonl"):
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name


def sim_judge(tmp_path):
    from memjudge import JudgeConfig, simulate

    simulate(preset="paper", seed=0, personas=6, out=tmp_path / "sim6")
    return JudgeConfig(spec="sim:paper", options={"truth": str(tmp_path / "sim6")})


def test_round_trip_mem0_export_and_transcript_to_labels_with_provenance(tmp_path, capsys):
    code, out, err = run_inproc(capsys, "import", "mem0", SAMPLE / "get_all.jsonl", "--out", tmp_path / "imp")
    assert code == 0, err
    export = [m for line in (SAMPLE / "get_all.jsonl").read_text().splitlines() for m in json.loads(line)["results"]]
    res = score_run(tmp_path / "imp" / "candidates.jsonl", SAMPLE / "conversations.jsonl", sim_judge(tmp_path),
                    out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False)
    labels = read_labels(tmp_path / "run" / "labels.jsonl")
    assert labels["assertion_id"].tolist() == [m["id"] for m in export]
    assert labels["verdict"].notna().all() and res.summary.simulated
    assert labels["created_at"].tolist() == [m["created_at"] for m in export]
    assert labels["categories"].tolist() == [m["categories"] for m in export]
    assert labels["hash"].tolist() == [m["hash"] for m in export]
    assert labels["category"].tolist() == [m["categories"][0] for m in export]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["inputs"]["sources"]["transcript"]["format"] == "messages"
    # the judge read the transcript: speaker and session marks in each prompt's source
    first = export[0]["user_id"]
    source = next(s for s in read_jsonl_sources(SAMPLE / "conversations.jsonl") if s["persona_id"] == first)["source"]
    assert source.startswith(f"=== session {first}-s1 ===\n[") and "\nassistant: Thanks for telling me." in source


def read_jsonl_sources(path):
    from memjudge import read_sources

    return read_sources(path).to_dict("records")


def _model_installed() -> bool:
    import importlib.util

    from memjudge.judges import local as L

    return importlib.util.find_spec("llama_cpp") is not None and all(
        importlib.util.find_spec(p) is not None for p in L.PACKAGED[L.DEFAULT_MODEL].packages)


@pytest.mark.model
@pytest.mark.timeout(1800)  # the embedded model: about a minute on two idle cores, far more on a crowded machine
@pytest.mark.skipif(not _model_installed(), reason="the [local] extra is not installed")
def test_round_trip_with_the_local_judge(tmp_path):
    """Three memories of the sample's first persona, with the first session of its transcript, through
    the embedded judge: a verdict (or a recorded error) per memory, the export's columns in each label."""
    import_memories("mem0", SAMPLE / "get_all.jsonl", out=tmp_path / "imp")
    rows = read_jsonl(tmp_path / "imp" / "candidates.jsonl")[:3]
    pid = rows[0]["persona_id"]
    assert {r["persona_id"] for r in rows} == {pid}
    chat = [m for m in read_jsonl(SAMPLE / "conversations.jsonl") if m["session_id"] == f"{pid}-s1"]
    (tmp_path / "three.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(m) + "\n" for m in chat))
    res = score_run(tmp_path / "three.jsonl", tmp_path / "chat.jsonl", "local:qwen2.5-coder-1.5b",
                    out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False)
    labels = read_labels(tmp_path / "run" / "labels.jsonl")
    assert labels["assertion_id"].tolist() == [r["assertion_id"] for r in rows]
    assert labels["created_at"].tolist() == [r["created_at"] for r in rows]
    assert labels["categories"].tolist() == [r["categories"] for r in rows]
    assert (labels["verdict"].notna() | labels["error"].notna()).all()
    assert labels["verdict"].notna().any() and not res.summary.simulated


# ---------------------------------------------------------------------------------------
# docs/importers.md runs as written (its bash and python blocks, in order, in a fresh folder
# holding a copy of examples/); the write-path recipes that need a provider are checked here


def test_importers_page_runs_as_written(tmp_path):
    from doc_blocks import blocks_of, env_for, run_block, workdir

    blocks = blocks_of(ROOT / "docs" / "importers.md")
    work, env = workdir(tmp_path), env_for(tmp_path)
    ran = [b for b in blocks if b.lang in ("bash", "python") and not b.tags]
    for b in ran:
        run_block(b, work, env)
    assert len(ran) >= 5
    assert (work / "policy.json").is_file() and (work / "runs" / "mem0-sim" / "labels.jsonl").is_file()


def test_write_path_recipes_gate_before_they_store(tmp_path):
    """The recipes tagged `key` (they call a provider) run here with recording stand-ins for the
    memory systems, after the page's gate block, on a real fitted policy."""
    import ast

    from doc_blocks import blocks_of

    blocks = blocks_of(ROOT / "docs" / "importers.md")
    gate = next(b for b in blocks if b.lang == "python" and "load_policy" in b.code and not b.tags)
    recipes = [b for b in blocks if b.lang == "python" and "key" in b.tags]
    assert len(recipes) == 3
    policy = {"format": "memjudge.retention-policy", "version": 1, "kind": "targeted",
              "thresholds": {"values": 0.5}, "default_threshold": None, "gate": ["values"], "floor": 0.8, "fitted_on": {}}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    cands = [{"text": "Values honesty", "category": "values", "confidence": 0.2},
             {"text": "Values family", "category": "values", "confidence": 0.7},
             {"text": "Lives in Zurich", "category": "location", "confidence": 0.1}]

    class Recorder:
        def __init__(self):
            self.calls = []

        def add(self, *a, **kw):
            self.calls.append((a, kw))

        def put(self, *a):
            self.calls.append((a, {}))

    import os
    import sys
    import types

    from memjudge.gate import load_policy

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ns: dict = {}
        exec(compile(gate.code, "docs/importers.md", "exec"), ns)
        assert [c["text"] for c in ns["admitted"](cands)] == ["Values family", "Lives in Zurich"]
    finally:
        os.chdir(cwd)
    assert ns["policy"].admit("values", 0.7) == load_policy(tmp_path / "policy.json").admit("values", 0.7)

    mem0_store, lang_store, memos_store = Recorder(), Recorder(), Recorder()
    fake_mem0 = types.ModuleType("mem0")
    fake_mem0.Memory = lambda: mem0_store
    fake_langmem = types.ModuleType("langmem")

    class _Extracted:
        def __init__(self, i, c):
            self.id, self.content = f"m{i}", c

    def create_memory_manager(model, schemas):
        class Manager:
            def invoke(self, _):
                return [_Extracted(i, schemas[0](content=c["text"], category=c["category"], confidence=c["confidence"]))
                        for i, c in enumerate(cands)]
        return Manager()

    fake_langmem.create_memory_manager = create_memory_manager

    class _Meta:
        def __init__(self, c):
            self.type, self.memory_type, self.confidence = c["category"], "LongTermMemory", c["confidence"] * 100

    class _Item:
        def __init__(self, c):
            self.memory, self.metadata = c["text"], _Meta(c)

    class Reader:
        def get_memory(self, scenes, type, info):
            return [[_Item(c) for c in cands]]

    saved = {k: sys.modules.get(k) for k in ("mem0", "langmem")}
    sys.modules.update(mem0=fake_mem0, langmem=fake_langmem)
    try:
        env = {**ns, "my_extractor": lambda messages: cands, "messages": [], "store": lang_store,
               "mem_reader": Reader(), "memory": memos_store}
        for b in recipes:
            ast.parse(b.code)
            exec(compile(b.code, "docs/importers.md", "exec"), dict(env))
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    # mem0: the admitted ones only, verbatim, with infer=False
    assert [(a[0][0]["content"], kw["infer"]) for a, kw in mem0_store.calls] == [("Values family", False), ("Lives in Zurich", False)]
    assert [a[2]["content"] for a, _ in lang_store.calls] == ["Values family", "Lives in Zurich"]
    assert [[i.memory for i in a[0]] for a, _ in memos_store.calls] == [["Values family", "Lives in Zurich"]]
