"""Rubrics (spec §4): a template, a version and the JSON schema of a valid answer, as data.

Built-in rubrics live in the top-level `rubrics/` folder (installed as the package
`memjudge._rubrics`); a path to a `.toml` file of the same shape works too. Templates are
rendered in jinja2's sandbox with StrictUndefined, so a rubric file can neither reach Python
internals nor silently drop a variable. A rubric's identity in outputs and cache keys is
`name@<sha256 prefix of template + schema>`: editing one word gives a new identity.

Rubrics sit in judges/, below scoring: a rubric is what a judge is asked (the prompt) and
what it must answer (the schema), and providers need it (the simulated judge names the
built-in rubrics in its fast path and reads the rendered list blocks back).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from jinja2 import DictLoader, StrictUndefined, TemplateError, nodes
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError, create_model

from memjudge.errors import InputError, UsageError
from memjudge.judges.base import Prompt, canonical_json

KINDS = ("support", "coverage")
VERDICTS = ("supported", "unsupported")
# How a coverage rubric asks (its `form`): "persona", one call per persona listing all its facts
# and candidates; "fact", one call per reference fact listing only the `candidates` (top k, by
# BM25) of the persona's candidates closest to it, for small models and the embedded judge.
COVERAGE_FORMS = ("persona", "fact")
DIGEST_CHARS = 12


class AnswerError(ValueError):
    """A judge's answer that is not valid under the rubric (the engine re-asks, then gives up)."""


# ---------------------------------------------------------------------------------------
# sandboxed rendering


def _data(value: Any) -> str:
    """Untrusted text inside <<<NAME ... NAME>>> blocks: make the markers inert so the text
    cannot close its block and pose as instructions."""
    text = "" if value is None else str(value)
    return text.replace("<<<", "\u2039\u2039\u2039").replace(">>>", "\u203a\u203a\u203a")


# Line breaks to some reader (str.splitlines(), a tokenizer's view) that JSON leaves raw.
_RAW_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}


def _entry(value: Any) -> str:
    """One list entry (a fact, an assertion) as one JSON object on one line: quotes, line
    breaks and brackets in its text are escaped, so it can neither end its entry nor start
    another, however a reader splits lines; markers are made inert as in `data`."""
    def inert(v):
        if isinstance(v, dict):
            return {str(k): inert(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [inert(x) for x in v]
        return _data(v) if isinstance(v, str) else v

    text = json.dumps(inert(value), ensure_ascii=False)
    for raw, escaped in _RAW_BREAKS.items():
        text = text.replace(raw, escaped)
    return text


def _environment() -> SandboxedEnvironment:
    # An empty loader: a template that reaches for another one fails as a TemplateError (one
    # line), not as jinja2's "no loader for this environment" TypeError.
    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False, loader=DictLoader({}))
    env.filters["data"] = _data
    env.filters["entry"] = _entry
    return env


def list_entries(block: str) -> list[tuple[str, str]]:
    """(id, text) of the entries of a rendered list block (the inside of <<<FACTS or
    <<<ASSERTIONS): one JSON object per line, as the `entry` filter writes them; an older
    rubric's `[id] text` lines are read too."""
    out = []
    for line in block.split("\n"):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "id" in obj:
                out.append((str(obj["id"]), str(obj.get("text", ""))))
        else:
            m = re.match(r"^\[([^\]\n]+)\] ?(.*)$", line)
            if m:
                out.append((m.group(1), m.group(2)))
    return out


_ENV = _environment()
# The per-item variables of a support prompt (`Rubric.support_renderer` splices them in).
_ITEM_VARS = ("assertion", "category", "assertion_id")
_SENTINEL = re.compile("\x00([0-9])\x00")


class SupportRenderer:
    """One persona's support prompts (`Rubric.support_renderer`): called with an item's
    (assertion, category, assertion_id); `prefix` is text each user message it renders starts
    with, so that what depends only on the persona (its cache-key hashing) is done once."""

    __slots__ = ("_render", "prefix")

    def __init__(self, render: Callable[[str, str, str], Prompt], prefix: str = ""):
        self._render = render
        self.prefix = prefix

    def __call__(self, assertion: str, category: str, assertion_id: str) -> Prompt:
        return self._render(assertion, category, assertion_id)


class SplicedPrompt(Prompt):
    """A support prompt whose user message is spliced from its persona's pieces each time it
    is read, not kept: a run holds one per item, and the message (the persona's whole source,
    then the item) would be most of a large run's memory. Equal to, hashed, shown, copied and
    pickled as the plain `Prompt` of the same text."""

    _spliced: tuple[Callable[[list[str], tuple[str, str, str]], str], list[str], tuple[str, str, str]]

    def __init__(self, system: str, splice: Callable[[list[str], tuple[str, str, str]], str], pieces: list[str],
                 given: tuple[str, str, str]):
        object.__setattr__(self, "system", system)
        object.__setattr__(self, "_spliced", (splice, pieces, given))

    @property
    def user(self) -> str:
        splice, pieces, given = self._spliced
        return splice(pieces, given)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Prompt):
            return self.system == other.system and self.user == other.user
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.system, self.user))

    def __repr__(self) -> str:
        return f"Prompt(system={self.system!r}, user={self.user!r})"

    def __reduce__(self):
        return Prompt, (self.system, self.user)


# ---------------------------------------------------------------------------------------
# JSON schema -> pydantic model (the subset rubric answers need)

_SCALARS = {"string": StrictStr, "integer": StrictInt, "number": StrictFloat, "boolean": StrictBool}


def _schema_type(name: str, schema: dict, where: str):
    t = schema.get("type")
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{where}: enum must be a non-empty list of strings")
        return Literal[tuple(values)]
    if t in _SCALARS:
        return _SCALARS[t]
    if t == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            raise ValueError(f"{where}: an array needs an 'items' schema")
        return list[_schema_type(name + "Item", items, where + ".items")]  # type: ignore[misc]
    if t == "object":
        return model_from_schema(name, schema, where)
    raise ValueError(f"{where}: unsupported type {t!r}")


_SCHEMA_CACHE: dict[tuple, dict] = {}


class AnswerModel(BaseModel):
    """Base of rubric answer models: strict, no extra keys, and a JSON schema computed once.

    Structured-output SDK calls (openai's `parse`, google-genai's `response_schema`) ask the
    model for its JSON schema on every request, and pydantic regenerates it each time
    (about a millisecond of CPU, more than the rest of a request's client-side work)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def model_json_schema(cls, *args, **kwargs) -> dict[str, Any]:
        key = (cls, args, tuple(sorted(kwargs.items())))
        schema = _SCHEMA_CACHE.get(key)
        if schema is None:
            schema = _SCHEMA_CACHE[key] = super().model_json_schema(*args, **kwargs)
        return copy.deepcopy(schema)  # callers (the openai SDK) mutate it


def model_from_schema(name: str, schema: dict, where: str = "schema") -> type[BaseModel]:
    """A strict pydantic model for an object schema: no type coercion, no extra keys."""
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, dict) or not props:
        raise ValueError(f"{where}: expected an object schema with properties")
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for key, sub in props.items():
        if not isinstance(sub, dict):
            raise ValueError(f"{where}.{key}: expected a schema table")
        typ = _schema_type(name + key.title().replace("_", ""), sub, f"{where}.{key}")
        fields[key] = (typ, ...) if key in required else (typ | None, None)
    return create_model(name, __base__=AnswerModel, **fields)


# ---------------------------------------------------------------------------------------
# the rubric


@dataclass(frozen=True)
class Rubric:
    name: str
    kind: str  # "support" or "coverage": how the engine turns an answer into rows
    version: int
    description: str
    system_template: str
    user_template: str
    schema: dict
    expected_output_tokens: int
    origin: str  # "builtin" or the file it came from
    model: type[BaseModel] = field(repr=False, compare=False)
    form: str = "persona"  # coverage: "persona" or "fact" (COVERAGE_FORMS)
    candidates: int | None = None  # form "fact": how many BM25-closest candidates each fact's call shows

    @property
    def per_fact(self) -> bool:
        return self.kind == "coverage" and self.form == "fact"

    def _form_identity(self) -> dict[str, Any]:
        # Only the per-fact form adds keys: the persona form's identities (and cache keys) stay
        # what they were before forms existed.
        return {"form": self.form, "candidates": self.candidates} if self.per_fact else {}

    @functools.cached_property
    def digest(self) -> str:
        """sha256 of the template text and the schema (what changes answers), and of the
        per-fact form's settings."""
        payload = canonical_json({"system": self.system_template, "user": self.user_template, "schema": self.schema,
                                  **self._form_identity()})
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def id(self) -> str:
        return f"{self.name}@{self.digest[:DIGEST_CHARS]}"

    def cache_identity(self) -> dict[str, Any]:
        return {"name": self.name, "template_sha256": self.digest, "schema": self.schema, **self._form_identity()}

    def describe(self) -> dict[str, Any]:
        d = {"id": self.id, "name": self.name, "kind": self.kind, "version": self.version, "origin": self.origin,
             "sha256": self.digest}
        if self.kind == "coverage":
            d.update(form=self.form, candidates=self.candidates)
        return d

    # -- rendering ----------------------------------------------------------------------

    @functools.cached_property
    def _templates(self):
        return _ENV.from_string(self.system_template), _ENV.from_string(self.user_template)

    def render(self, **variables: Any) -> Prompt:
        """The (system, user) prompt; any template error is a UsageError naming the rubric."""
        system, user = self._templates
        try:
            return Prompt(system=system.render(**variables).strip(), user=user.render(**variables).strip())
        except TemplateError as e:  # SecurityError and UndefinedError are TemplateErrors
            raise UsageError(f"rubric {self.name} ({self.origin}): {type(e).__name__}: {e}") from None

    def render_support(self, *, source: str, assertion: str, category: str = "", persona_id: str = "", assertion_id: str = "") -> Prompt:
        return self.render(source=source, assertion=assertion, category=category, persona_id=persona_id, assertion_id=assertion_id)

    def support_renderer(self, *, source: str, persona_id: str = "") -> SupportRenderer:
        """`render_support` for one persona's items: ``f(assertion, category, assertion_id)``.

        The template is rendered once for the persona, with a sentinel in place of each item
        variable, and each item's prompt is spliced from the pieces: equal, character for
        character, to `render_support` (the cache keys hang on it), at a fraction of the cost.
        Only when splicing is exact: every use of an item variable is a plain ``{{ name }}`` or
        ``{{ name | data }}`` output (one form per variable), the persona's text holds no NUL
        (the sentinels' character), and the item's values are strings. Otherwise each item is
        rendered in full. Its `prefix` is text every user message it renders starts with (the
        persona's part before the first item variable; "" when it renders in full)."""
        def full(assertion: str, category: str, assertion_id: str) -> Prompt:
            return self.render_support(source=source, assertion=assertion, category=category, persona_id=persona_id,
                                       assertion_id=assertion_id)

        forms = self._item_forms
        if forms is None or "\x00" in source or "\x00" in persona_id:
            return SupportRenderer(full)
        sentinels = {name: f"\x00{i}\x00" for i, name in enumerate(_ITEM_VARS)}
        system, user = self._templates
        try:
            raw = [t.render(source=source, persona_id=persona_id, **sentinels) for t in (system, user)]
        except TemplateError:
            return SupportRenderer(full)
        pieces = [_SENTINEL.split(text) for text in raw]   # odd positions: a variable's index
        # How each variable's value is written, by its index (a sentinel's digit).
        writers = [_data if forms.get(name) == "data" else None for name in _ITEM_VARS]

        def splice(parts: list[str], values: tuple[str, str, str]) -> str:
            out = list(parts)
            for k in range(1, len(out), 2):
                i = int(out[k])
                write = writers[i]
                out[k] = write(values[i]) if write is not None else values[i]
            return "".join(out).strip()

        # A message without item variables is the same text for every item: one string, kept.
        fixed = [p[0].strip() if len(p) == 1 else None for p in pieces]

        def spliced(assertion: str, category: str, assertion_id: str) -> Prompt:
            if type(assertion) is not str or type(category) is not str or type(assertion_id) is not str:
                return full(assertion, category, assertion_id)
            given = (assertion, category, assertion_id)
            system = fixed[0] if fixed[0] is not None else splice(pieces[0], given)
            if fixed[1] is not None:
                return Prompt(system=system, user=fixed[1])
            return SplicedPrompt(system, splice, pieces[1], given)

        first = pieces[1][0]
        return SupportRenderer(spliced, first.strip() if len(pieces[1]) == 1 else first.lstrip())

    @functools.cached_property
    def _item_forms(self) -> dict[str, str] | None:
        """How each item variable is output ("plain" or "data"), or None when splicing would
        not be exact (`support_renderer`)."""
        forms: dict[str, str] = {}
        for text in (self.system_template, self.user_template):
            if "\x00" in text:
                return None
            try:
                tree = _ENV.parse(text)
            except TemplateError:
                return None
            allowed: dict[int, str] = {}
            for out in tree.find_all(nodes.Output):
                for node in out.nodes:
                    if isinstance(node, nodes.Name) and node.name in _ITEM_VARS:
                        allowed[id(node)] = "plain"
                    elif (isinstance(node, nodes.Filter) and node.name == "data" and isinstance(node.node, nodes.Name)
                          and node.node.name in _ITEM_VARS and not node.args and not node.kwargs
                          and node.dyn_args is None and node.dyn_kwargs is None):
                        allowed[id(node.node)] = "data"
            for name in tree.find_all(nodes.Name):
                if name.name not in _ITEM_VARS:
                    continue
                form = allowed.get(id(name))
                if form is None or forms.setdefault(name.name, form) != form:
                    return None
        return forms

    def render_coverage(self, *, source: str, assertions: list[dict], facts: list[dict] | None = None, persona_id: str = "") -> Prompt:
        return self.render(source=source, assertions=assertions, facts=facts or [], persona_id=persona_id)

    # -- answers ------------------------------------------------------------------------

    def validate(self, answer: str | dict | None) -> dict[str, Any]:
        """The answer as a plain dict if it is valid under the schema; AnswerError otherwise.
        Nothing is coerced: "Supported" is not "supported", "1" is not 1."""
        obj = parse_json_answer(answer) if not isinstance(answer, dict) else answer
        try:
            return self.model.model_validate(obj).model_dump()
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first.get("loc", ())) or "answer"
            raise AnswerError(f"answer does not match the {self.name} schema: {loc}: {first['msg']}") from None


_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL | re.IGNORECASE)


def parse_json_answer(text: str | None) -> Any:
    """One JSON value, optionally inside a ```json fence; anything else is an AnswerError."""
    if text is None or not text.strip():
        raise AnswerError("empty answer")
    s = text.strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1).strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        raise AnswerError(f"answer is not valid JSON ({e.msg} at char {e.pos})") from None
    except RecursionError:
        raise AnswerError("answer is JSON nested too deeply") from None


# ---------------------------------------------------------------------------------------
# loading

_SAMPLES: dict[str, list[dict[str, Any]]] = {
    "support": [dict(source="s", assertion="a", category="c", persona_id="p", assertion_id="x")],
    "coverage": [
        dict(source="s", persona_id="p", facts=[], assertions=[{"id": "x", "text": "a", "category": "c"}]),
        dict(source="s", persona_id="p", facts=[{"id": "f", "text": "t"}], assertions=[{"id": "x", "text": "a", "category": "c"}]),
    ],
}


def _check_kind_schema(kind: str, schema: dict) -> str | None:
    props = schema.get("properties", {})
    if kind == "support":
        v = props.get("verdict", {})
        if set(v.get("enum", [])) != set(VERDICTS):
            return f"a support rubric's schema needs 'verdict' with enum {list(VERDICTS)}"
    else:
        items = props.get("facts", {}).get("items", {}).get("properties", {})
        if props.get("facts", {}).get("type") != "array" or not {"fact_id", "covered_by"} <= set(items):
            return "a coverage rubric's schema needs 'facts': array of objects with 'fact_id' and 'covered_by'"
    return None


def _coverage_form(data: dict, kind: str, origin: str) -> tuple[str, int | None]:
    """(form, candidates) of a rubric file: a coverage rubric's `form` ("persona" by default) and,
    for the per-fact form, its `candidates` k (an integer >= 1)."""
    form = data.get("form", "persona")
    if kind != "coverage":
        if "form" in data or "candidates" in data:
            raise InputError(origin, "'form' and 'candidates' are for coverage rubrics")
        return "persona", None
    if form not in COVERAGE_FORMS:
        raise InputError(origin, f"rubric form must be one of {', '.join(COVERAGE_FORMS)}, found {form!r}")
    k = data.get("candidates")
    if form == "persona":
        if k is not None:
            raise InputError(origin, "'candidates' is for form = \"fact\" (the persona form shows every candidate)")
        return form, None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(origin, f"a per-fact coverage rubric needs 'candidates' (how many to show per fact), an integer >= 1, "
                                 f"found {k!r}")
    return form, k


def rubric_from_toml(text: str, origin: str) -> Rubric:
    """Parse and check a rubric file; problems are InputErrors naming it."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(origin, f"not valid TOML ({e})") from None
    missing = [k for k in ("name", "kind", "version", "system", "user", "schema") if k not in data]
    if missing:
        raise InputError(origin, f"rubric is missing {', '.join(missing)}")
    kind = data["kind"]
    if kind not in KINDS:
        raise InputError(origin, f"rubric kind must be one of {', '.join(KINDS)}, found {kind!r}")
    if not isinstance(data["version"], int) or isinstance(data["version"], bool):
        raise InputError(origin, "rubric version must be an integer")
    for k in ("name", "system", "user"):
        if not isinstance(data[k], str) or not data[k].strip():
            raise InputError(origin, f"rubric {k!r} must be a non-empty string")
    schema = data["schema"]
    try:
        model = model_from_schema(f"{data['name'].title().replace('-', '')}Answer", schema)
    except ValueError as e:
        raise InputError(origin, f"rubric schema: {e}") from None
    problem = _check_kind_schema(kind, schema)
    if problem:
        raise InputError(origin, problem)
    try:
        for t in (data["system"], data["user"]):
            _ENV.from_string(t)
            if next(_ENV.parse(t).find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)), None) is not None:
                raise InputError(origin, "rubric template: {% include %}, {% import %} and {% extends %} are not allowed: "
                                         "a rubric is one self-contained file")
    except TemplateError as e:
        raise InputError(origin, f"rubric template: {type(e).__name__}: {e}") from None
    form, candidates = _coverage_form(data, kind, origin)
    rubric = Rubric(
        name=data["name"], kind=kind, version=data["version"], description=data.get("description", ""),
        system_template=data["system"], user_template=data["user"], schema=schema,
        expected_output_tokens=int(data.get("expected_output_tokens", 100)), origin=origin, model=model,
        form=form, candidates=candidates,
    )
    for sample in _SAMPLES[kind]:  # fail at load, not after a thousand calls
        try:
            rubric.render(**sample)
        except UsageError as e:
            raise InputError(origin, f"rubric template does not render: {e}") from None
    return rubric


def _builtin_dir():
    try:
        return resources.files("memjudge._rubrics")
    except ModuleNotFoundError:  # running from a source tree (PYTHONPATH=src)
        return Path(__file__).resolve().parents[3] / "rubrics"


def builtin_names() -> list[str]:
    return sorted(p.name[: -len(".toml")] for p in _builtin_dir().iterdir() if p.name.endswith(".toml"))


@functools.cache
def _load_builtin(name: str) -> Rubric:
    res = _builtin_dir() / f"{name}.toml"
    return rubric_from_toml(res.read_text(encoding="utf-8"), f"builtin:{name}")


def load_rubric(name_or_path: str | Rubric) -> Rubric:
    """A built-in rubric by name (`support`, `coverage`) or a rubric file by path."""
    if isinstance(name_or_path, Rubric):
        return name_or_path
    text = str(name_or_path)
    if text.endswith(".toml") or "/" in text or "\\" in text:
        path = Path(text)
        if not path.is_file():
            raise InputError(path, "no such rubric file" if not path.exists() else "is a directory, expected a rubric file")
        return rubric_from_toml(path.read_text(encoding="utf-8"), str(path))
    if text not in builtin_names():
        raise UsageError(f"unknown rubric {text!r} (built-in: {', '.join(builtin_names())}; or a path to a .toml rubric file)")
    return _load_builtin(text)


# ---------------------------------------------------------------------------------------
# evidence


def normalise_ws(text: str) -> str:
    return " ".join(text.split())


def evidence_found(evidence: str | None, source: str, *, normalised: bool = False) -> bool | None:
    """Does the quote occur verbatim in the source (whitespace normalised)? None when no quote.
    ``normalised``: the source is already `normalise_ws`'d (one persona's many quotes)."""
    if evidence is None or not evidence.strip():
        return None
    return normalise_ws(evidence) in (source if normalised else normalise_ws(source))


__all__ = [
    "AnswerError", "COVERAGE_FORMS", "KINDS", "Rubric", "SupportRenderer", "VERDICTS", "builtin_names", "evidence_found",
    "list_entries", "load_rubric", "model_from_schema", "normalise_ws", "parse_json_answer", "rubric_from_toml",
]
