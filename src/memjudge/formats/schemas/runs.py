"""The files of a scoring run, a simulated corpus, an import and an exported policy:
labels and coverage rows (one JSON object per line), config.json, simulate.json,
import.json and the retention gate's policy file. (summary.json is the scorer's own
`ScoreSummary` dataclass: see the registry.)"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from memjudge.formats.schemas.common import Json, Num, Open, Strict, described


class CandidateRow(Open):
    """One line of candidates.jsonl (written by `memjudge simulate` and `memjudge import`; the
    input of every command). Other columns are kept and carried into the labels."""

    persona_id: str
    assertion_id: str
    category: str
    confidence: Num = described("in [0, 1]; needed by the policy comparison", default=None)
    text: str


class SourceRow(Open):
    """One line of sources.jsonl: what the persona wrote (an import adds counts of its own)."""

    persona_id: str
    source: str


class FactRow(Open):
    """One line of facts.jsonl: a reference fact for the coverage rubric (a simulated corpus adds
    how it is stated)."""

    persona_id: str
    fact_id: str
    text: str


class TruthRow(Strict):
    """One line of a simulated corpus's truth.jsonl: how each assertion was made."""

    assertion_id: str
    persona_id: str
    category: str
    confidence: float
    kind: str = described("supported, over_inference, fabrication, contradiction, wrong_person, …")
    supported: bool
    fact_ids: list[str] = described("the facts it states")
    evidence: str = described("the source sentence it rests on (empty for none)")
    cue: str | None = described("the weak cue an over-inference was read from")
    contradicts: str | None = described("the fact a contradiction contradicts")
    stated: str | None = described("explicit or implied: how its fact is stated")


class SampleRow(Open):
    """One line of `memjudge sample --out FILE.jsonl`: an item to label (the candidates' other
    columns are kept)."""

    assertion_id: str
    persona_id: str
    category: str
    text: str
    stratum: str = described("the item's stratum (names the judge's verdict: hide it from annotators); "
                             "'active' in an active sample")
    strata_by: str = described("what the strata are made of: '', 'category' or 'category,verdict'; 'active' "
                               "for --strategy active (per-item probabilities, no strata)")
    inclusion_prob: float = described("the probability that this item is in the sample, in (0, 1]; for a "
                                      "top-up, the union's (active: π1 + (1 − π1)·π)")
    signal: str | None = described("--strategy active: the judge's confidence signal the probabilities grew "
                                   "from (log-odds, replicates or panel)", default=None)
    mix_w: float | None = described("--strategy active: the weight W of uniform sampling in the mix "
                                    "(0 pure active, 1 uniform)", default=None)
    source: str | None = described("with --sources", default=None)
    source_ref: str | None = described("without --sources: where the source is", default=None)


class GoldRow(Strict):
    """One line of a gold file written by `memjudge annotate` (the latest row per assertion
    and annotator counts)."""

    assertion_id: str
    verdict: str = described("supported, unsupported, partial or skip")
    annotator: str
    note: str | None
    labelled_at: str = described("ISO 8601 time")


class Usage(Strict):
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None = described("of input_tokens: read from the provider's prompt cache")
    thinking_tokens: int | None
    cache_write_tokens: int | None = described("of input_tokens: written to the provider's prompt cache (anthropic:)", default=None)


class LabelRow(Open):
    """One line of labels.jsonl: one (assertion, judge, rubric, replicate). The candidates'
    other columns (confidence, text, …) follow these, so other keys are allowed here."""

    assertion_id: str
    persona_id: str
    category: str
    judge: str
    rubric: str = described("name@hash for a rubric rendered by memjudge; a name for imports and gold")
    replicate: int
    verdict: str | None = described("supported, unsupported (another label in imports), or null: no valid answer")
    judge_score: Num = described("the judge's own score (log-odds of supported), where it gives one")
    evidence: str | None
    evidence_found: bool | None = described("the evidence quote was found in the source")
    rationale: str | None
    error: str | None = described("why the verdict is null")
    cached: bool | None
    usage: Usage | None
    latency_s: Num
    finish_reason: str | None = described("scored rows", default=None)
    model_version: str | None = described("scored rows: the served model", default=None)
    simulated: bool | None = described("rows of a simulated judge or a simulated corpus's gold", default=None)
    decided_by: str | None = described("memjudge cascade: the stage's judge whose answer was trusted; null: abstained", default=None)


class CoverageRow(Open):
    """One line of coverage.jsonl: which assertions state one reference fact."""

    persona_id: str
    fact_id: str
    fact_text: str
    covered_by: list[str] | None = described("assertion ids; null: the fact was not judged")
    judge: str
    rubric: str
    replicate: int
    error: str | None
    cached: bool | None = described("scored rows", default=None)
    simulated: bool | None = described("a simulated corpus's gold", default=None)


class Rubric(Strict):
    id: str = described("name@<sha256 prefix of template + schema>")
    name: str
    kind: str
    version: int
    origin: str = described("builtin:NAME or the file it was read from")
    sha256: str
    form: str | None = described("coverage rubrics: `persona` (one call per persona) or `fact` (one call per fact)", default=None)
    candidates: int | None = described("per-fact coverage: the BM25-closest candidates shown per fact", default=None)


class InputFile(Strict):
    path: str = described("the file read, or `<NAME DataFrame>` for a table passed to the Python API")
    sha256: str | None = described("of the file's bytes; null for a DataFrame")
    mapping: dict[str, Json] | None = described(
        "with --map or a memory system's importer: each memjudge column's source columns as written "
        "(`a | b` first present, `*k` scaled, `?` optional), `default` and `drop`", default=None)
    records: list[str] | None = described("the nested keys whose list items became the rows (a mapping's records)",
                                          default=None)
    derived: dict[str, str] | None = described("ids memjudge derived (column: how), when the input had none",
                                               default=None)
    transcript: dict[str, Json] | None = described(
        "sources rendered from chat transcripts: `format`, `rendering` (its version) and `personas`", default=None)


class Inputs(Strict):
    candidates: InputFile
    sources: InputFile | None
    facts: InputFile | None


class ConfigJson(Strict):
    """config.json of `memjudge score`: everything to reproduce the run (never an API key)."""

    memjudge_version: str
    command: dict[str, Json] | None = described("the command's arguments, by option name (null from the Python API)")
    judge: dict[str, Json] = described(
        "the judge's identity (spec, model, base_url, params, …), `endpoint`, `simulated`, `config` "
        "(every setting of the judge) and `effective` (what an OpenAI-compatible server ended up accepting; for the "
        "embedded judge, `llama_cpp`: the build and whether the weights were repacked)")
    rubric: Rubric
    replicates: int
    replicates_derived: bool = described(
        "a deterministic judge: replicates after the first are copies of replicate 0 (label column replicate_of)",
        default=False)
    inputs: Inputs
    judges_file: str | None
    cache_dir: str | None
    use_cache: bool
    python: str
    privacy: dict[str, Json] | None = described(
        "--private (spec §16): null without it; else `applied` (false for a judge that sends nothing, with `why`), "
        "`style`, `recognisers` (Presidio and spaCy versions, the NER model's package and version or null, the entity "
        "types, the recognisers that ran), `map_file`, `entities_replaced` by type. Never an original text.")


class SimulateJson(Strict):
    """simulate.json of `memjudge simulate --out DIR`."""

    simulated: Literal[True]
    params: dict[str, Json] = described("the preset's tables as used (corpus, categories, support, …)")
    summary: dict[str, Json] = described("counts of the generated corpus")


class JudgeImport(Strict):
    labels: int
    valid: int
    verdicts: dict[str, int] = described('counts by verdict, "null" for none')


class ImportJson(Strict):
    """import.json of `memjudge import DATASET FOLDER --out DIR`."""

    dataset: str
    folder: str
    candidates: int
    sources: int | None = described("null when the dataset has no sources")
    labels: int
    valid_verdicts: int
    personas: int
    categories: list[str]
    judges: dict[str, JudgeImport]
    rubrics: list[str]
    licence: str
    attribution: str
    notes: list[str]
    files: dict[str, str] = described("what was written, by role (candidates, labels, sources, manifest)")


class ImportConfidence(Strict):
    with_: int = Field(alias="with", description="candidates that carry a confidence")
    note: str = described("where the confidence came from, or why there is none")


class MemoryImportJson(Strict):
    """import.json of `memjudge import SYSTEM FILE --out DIR` (a memory system's export: mem0,
    memos, graphiti, langmem, letta); a data set's import.json is the `import` schema."""

    system: str
    title: str
    file: str
    candidates: int
    personas: int
    categories: dict[str, int] = described("candidates per category")
    confidence: ImportConfidence
    extra_columns: list[str] = described("the export's other columns, carried into candidates.jsonl")
    sources: int | None = described("personas with sources written, null when the export has no messages")
    mapping: dict[str, Json] = described("the mapping it was read with (the preset's, with --map over it)")
    preset: str
    docs: str
    files: dict[str, str] = described("what was written, by role (candidates, sources, manifest)")


class PolicyJson(Strict):
    """The retention gate (`memjudge compare --export-policy FILE`), read by `memjudge.gate`."""

    format: Literal["memjudge.retention-policy"]
    version: int
    kind: Literal["write_all", "global", "targeted", "per_category"]
    thresholds: dict[str, Num] = described("per category; null = keep all")
    default_threshold: Num = described("categories not listed (the global threshold)")
    gate: list[str] | None
    floor: float | None
    fitted_on: dict[str, Json] = described("provenance: inputs, judge, replicate, counts, fit-set figures, time")
