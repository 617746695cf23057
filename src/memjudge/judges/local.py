"""The embedded CPU judge `local:NAME`: a small GGUF model read through its log-odds.

A 1.5B model's *generated* labels are poor (about 55-65% accurate, biased to
"unsupported"), but its next-token distribution at the verdict is informative. So the
support rubric is rendered into the model's chat template with the prompt ending where the
verdict word begins (`{"verdict": "`), and the judge compares log P(supported) with
log P(unsupported), each summed over the word's tokens. The verdict is
`log-odds >= threshold`; the log-odds is recorded as `judge_score`, so a threshold can be
calibrated (`memjudge calibrate`) and AUC computed. With option `check = true` (for first-person
notes and chats) a second, sentence-level read is added to it: the premise check
(score_premise_check), in a KV cache of its own so that it never evicts the source's shared prefix.

With option `prompt = "premise"` the judge builds its own prompt instead (local_premise): the
k source sentences that bear most on the assertion (BM25), a short system turn with few-shot
turns, and the question "Does the source state or directly imply this statement?"; the verdict
is log P(Yes) - log P(No) against `premise_threshold`. It needs the call's `fields` (source,
assertion), which the engine fills; its identity carries the prompt version and premise count.

`local:qwen2.5-coder-1.5b` is the packaged default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M,
shipped as byte-chunk packages joined once and verified before the first load (local_weights).
`local:PATH.gguf` loads any GGUF file.

Speed comes from the KV cache: the source (rubric prompt) or the system and few-shot turns
(premise prompt) are the long, shared head of consecutive prompts, so a call evaluates only
the tokens after its longest common prefix with the previous prompt (the engine orders calls
persona by persona).

Temperature 0 is deterministic (`deterministic`): the engine asks once per item and records the
other replicates as copies of replicate 0 (`replicate_of`), so the flip rate is 0 by
construction, not measured. With a temperature T > 0 each replicate draws its verdict from the two-way distribution
P(supported) = sigmoid((log-odds - threshold) / T), by adding Gumbel noise scaled by T to the
two log-probabilities with a generator seeded by (seed, rubric, assertion, replicate).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from memjudge.errors import MemjudgeError, UsageError
from memjudge.judges.base import Judge, JudgeAnswer, JudgeCall, JudgeConfig, Prompt, Usage
from memjudge.judges.local_runtime import RepackDecision, describe, new_llama
from memjudge.judges.local_weights import (
    DEFAULT_MODEL,
    INSTALL_HINT,
    PACKAGED,
    assembled_path,
    import_llama_cpp,
    packaged_model_path,
    usable_cores,
)

# The answer is a JSON object whose first key is the verdict: the prompt stops right where
# the verdict word begins, so the next tokens are the judge's decision.
ANSWER_PREFIX = '{"verdict": "'
VERDICT_WORDS = ("supported", "unsupported")
# Options that only move a threshold over a stored score: not in the cache key (answer_identity).
THRESHOLD_OPTIONS = ("threshold", "category_thresholds", "coverage_threshold")
OPTION_KEYS = ("threshold", "category_thresholds", "n_ctx", "n_threads", "n_batch", "prompt", "premises", "few_shot",
               "check", "coverage_threshold", "coverage_source")
# "rubric" renders the support rubric over the whole source; "premise" is the judge's own prompt
# over selected source sentences (local_premise). The default stays "rubric": on the tuning corpus
# (bench/local_judge.py dev, seed 11) the two tie (AUC 0.751 vs 0.753 on the same 42 items), and
# the rubric prompt is the one measured on SummEdits sales calls (AUC 0.824) and on idle cores
# (76 assertions/min on generated notes); the premise prompt was never measured on either.
PROMPT_MODES = ("rubric", "premise")
DEFAULT_PROMPT = "rubric"
DEFAULT_PREMISES = 3
# Option check = true adds the premise check (score_premise_check) to the rubric prompt's verdict.
# Opt-in, for first-person notes and chats: there it lifted held-out AUC 0.722 -> 0.758
# (bench/local_judge.py, generated notes, seed 8086), but on SummEdits sales calls (transcripts,
# where "the writer" means nothing) it lowered AUC 0.830 -> 0.780 on the 101 items scored.
DEFAULT_CHECK = False
# Prompt tokens are evaluated in chunks at fixed positions (see LocalModel._evaluate).
EVAL_CHUNK = 64


# ---------------------------------------------------------------------------------------
# the model: chat template, prefix-reusing evaluation, verdict log-probabilities


_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass
class VerdictScore:
    logp_supported: float
    logp_unsupported: float
    prompt_tokens: int
    reused_tokens: int
    # Log-odds of the premise check (a second read), added to the verdict's: the two reads'
    # odds multiply. None: no check was read.
    check: float | None = None

    @property
    def log_odds(self) -> float:
        return self.logp_supported - self.logp_unsupported + (self.check or 0.0)

    def checked(self, check: VerdictScore) -> VerdictScore:
        """This verdict with `check`'s log-odds added (tokens of both prompts counted)."""
        return VerdictScore(self.logp_supported, self.logp_unsupported, self.prompt_tokens + check.prompt_tokens,
                            self.reused_tokens + check.reused_tokens, check=check.log_odds)


class LocalModel:
    """One llama.cpp model and its KV cache. Not thread-safe: callers hold `lock`."""

    def __init__(self, path: Path, *, n_ctx: int = 8192, n_threads: int | None = None, n_batch: int = 512):
        self._llama_cpp = import_llama_cpp()
        self.path = Path(path)
        # n_threads_batch too: llama-cpp-python's own default for it is every core of the machine
        self.n_threads = n_threads or usable_cores()
        # loaded with llama.cpp's weight repacking only where a self-test found it runs (local_runtime)
        self.llm, self.repack = new_llama(self.path, self.path.name, self._llama_cpp, n_ctx=n_ctx, n_threads=self.n_threads,
                                          n_threads_batch=self.n_threads, n_batch=n_batch, logits_all=False, verbose=False)
        self.n_ctx = n_ctx
        self.lock = threading.Lock()
        self._template = self._chat_template()
        self._word_tokens = {w: self.llm.tokenize(w.encode(), add_bos=False, special=False) for w in VERDICT_WORDS}
        self._memo: OrderedDict[str, tuple[float, float, int]] = OrderedDict()

    def _chat_template(self):
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise MemjudgeError(f"{self.path}: chat template error: {message}")

        source = self.llm.metadata.get("tokenizer.chat_template") or _CHATML
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
        env.globals["raise_exception"] = raise_exception
        return env.from_string(source)

    def _special(self, token_id: int) -> str:
        return self.llm.detokenize([token_id], special=True).decode("utf-8", "replace") if token_id >= 0 else ""

    def render(self, prompt: Prompt) -> str:
        """The chat-formatted rubric prompt, ending where the verdict word begins."""
        messages = [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]
        return self.render_messages(messages, ANSWER_PREFIX)

    def render_messages(self, messages: list[dict], answer_prefix: str = "") -> str:
        """Chat messages through the model's template with an open assistant turn, then
        `answer_prefix`. A model that expects a BOS token (tokenizer.ggml.add_bos_token) gets
        one, whether or not its template writes it."""
        bos, eos = self._special(self.llm.token_bos()), self._special(self.llm.token_eos())
        text = self._template.render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)
        if self.llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" and bos and not text.startswith(bos):
            text = bos + text
        return text + answer_prefix

    def _logprobs(self) -> np.ndarray:
        n_vocab = self.llm.n_vocab()
        ptr = self._llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float64)
        m = logits.max()
        return logits - (m + math.log(np.exp(logits - m).sum()))

    def _evaluate(self, tokens: list[int], reuse: bool, boundaries: tuple[int, ...] = ()) -> int:
        """Bring the KV cache to `tokens`, evaluating only what differs; returns tokens reused.

        Tokens are always evaluated in chunks at split points that are a function of the prompt
        alone: multiples of EVAL_CHUNK, restarted at each of `boundaries` (the ends of prefixes
        shared by many prompts). llama.cpp's results depend slightly (~0.1 log-odds) on how a
        prompt is split into batches, so a history-dependent split would make a score depend
        on which prompt came before. With fixed split points a prompt's score is the same cold
        or warm, in any order; a boundary lets a prompt reuse all of its shared prefix."""
        llm = self.llm
        starts = chunk_starts(len(tokens), *boundaries)
        keep = 0
        if reuse:
            cached = llm.input_ids[: llm.n_tokens]
            n = min(len(cached), len(tokens) - 1)  # at least one token is evaluated to get its logits
            if n > 0:
                same = np.asarray(cached[:n]) == np.asarray(tokens[:n])
                keep = int(n if same.all() else np.argmin(same))
        keep = max(s for s in starts if s <= keep)
        llm.n_tokens = keep  # eval() drops KV cells from n_tokens on
        ends = starts[1:] + [len(tokens)]
        for start, end in zip(starts, ends):
            if start >= keep:
                llm.eval(tokens[start:end])
        return keep

    def score(self, prompt: Prompt, *, reuse: bool = True, source: str = "", assertion: str = "") -> VerdictScore:
        """Log-probabilities of the rubric's verdict words after the rubric prompt. `source`,
        `assertion`: their texts as they appear in the prompt (see prompt_heads)."""
        text = self.render(prompt)
        return self.score_text(text, VERDICT_WORDS, reuse=reuse, shared=prompt_heads(text, source, assertion))

    def _tokens_of(self, word: str) -> list[int]:
        if word not in self._word_tokens:
            self._word_tokens[word] = self.llm.tokenize(word.encode(), add_bos=False, special=False)
        return self._word_tokens[word]

    def score_text(self, text: str, words: tuple[str, str], *, reuse: bool = True, shared: str | tuple[str, ...] = (),
                   tail: str = "") -> VerdictScore:
        """Log-probabilities of the two `words` (positive first), each summed over its tokens,
        as the continuation of the already-rendered `text` (then `tail`, tokenized on its own).
        `shared`: text prefixes of `text` common to many prompts (one or several, nested), whose
        tokens then end at chunk boundaries (see _evaluate); the end of `text` is one too when a
        tail follows."""
        heads = (shared,) if isinstance(shared, str) else tuple(shared)
        digest = hashlib.sha256(json.dumps([text, list(words), list(heads), tail]).encode()).hexdigest()
        if reuse and digest in self._memo:
            sup, uns, n = self._memo[digest]
            self._memo.move_to_end(digest)
            return VerdictScore(sup, uns, n, n)
        tokens = self.llm.tokenize(text.encode(), add_bos=False, special=True)
        boundaries = tuple(self._boundary(tokens, text, head) for head in heads)
        if tail:
            boundaries += (len(tokens),)
            tokens = tokens + self.llm.tokenize(tail.encode(), add_bos=False, special=False)
        need = len(tokens) + max(len(self._tokens_of(w)) for w in words)
        if need > self.n_ctx:
            raise PromptTooLong(f"prompt of {len(tokens)} tokens exceeds the context of {self.n_ctx} (option n_ctx)")
        reused = self._evaluate(tokens, reuse, boundaries)
        base = self.llm.n_tokens
        first = self._logprobs()
        logps = []
        for word in words:
            word_tokens = self._tokens_of(word)
            total = float(first[word_tokens[0]])
            for i in range(1, len(word_tokens)):
                self.llm.n_tokens = base + i - 1
                self.llm.eval([word_tokens[i - 1]])
                total += float(self._logprobs()[word_tokens[i]])
            logps.append(total)
        self.llm.n_tokens = base
        self._memo[digest] = (logps[0], logps[1], len(tokens))
        if len(self._memo) > 4096:
            self._memo.popitem(last=False)
        return VerdictScore(logps[0], logps[1], len(tokens), reused)

    def _boundary(self, tokens: list[int], text: str, shared: str) -> int:
        """How many of `text`'s tokens lie wholly inside its prefix `shared` (0 if it is not one).
        Counted on the text's own tokens, so a token that straddles the end of `shared` (BPE
        merges its last character with what follows) stays after the boundary."""
        if not shared or not text.startswith(shared):
            return 0
        limit, end, n = len(shared.encode()), 0, 0
        for tok in tokens:
            end += len(self.llm.detokenize([tok], special=True))
            if end > limit:
                break
            n += 1
        return n if n < len(tokens) else 0

    def forget(self) -> None:
        """Drop the KV prefix and the score memo (for cold-run measurements)."""
        self.llm.n_tokens = 0
        self._memo.clear()


def source_head(text: str, source: str) -> str:
    """The rendered prompt up to the end of its source: the head a persona's calls share, where
    evaluation restarts so a warm call evaluates only what follows (the assertion's part). A
    source the rubric's data filter changed (it held <<< or >>>) is not found: no restart."""
    at = text.find(source) if source else -1
    return text[: at + len(source)] if at >= 0 else ""


def assertion_head(text: str, assertion: str) -> str:
    """The rendered prompt up to where its assertion starts (its last occurrence: an assertion
    may quote the source verbatim): the head a persona's calls of one category share, so a warm
    call evaluates only the assertion and what follows it. Not found (the data filter changed
    it): no restart."""
    at = text.rfind(assertion) if assertion else -1
    return text[:at] if at > 0 else ""


def prompt_heads(text: str, source: str, assertion: str = "") -> tuple[str, ...]:
    """Where evaluation restarts in a rubric prompt: the source's end and the assertion's start
    (a boundary's place only decides what can be reused; it is a function of the call alone, so
    scores stay the same cold or warm)."""
    return tuple(h for h in (source_head(text, source), assertion_head(text, assertion)) if h)


def chunk_starts(n: int, *boundaries: int) -> list[int]:
    """Where evaluation chunks start for a prompt of `n` tokens: every EVAL_CHUNK tokens from 0,
    and again from each boundary (a shared prefix's end) with 0 < boundary < n."""
    cuts = [0, *sorted({b for b in boundaries if 0 < b < n}), max(n, 1)]
    return [s for a, b in zip(cuts, cuts[1:]) for s in range(a, b, EVAL_CHUNK)]


class PromptTooLong(MemjudgeError):
    pass


PREMISE_WORDS = ("Yes", "No")


def score_premises(model: LocalModel, source: str, assertion: str, k: int, *, few_shot: bool = True,
                   reuse: bool = True) -> VerdictScore:
    """The judge's own prompt: log P(Yes) vs log P(No) that the `k`-best source sentences per
    assertion sentence (k = 0: the whole source) support the assertion."""
    from memjudge.judges.local_premise import premise_messages, select_premises

    messages = premise_messages(select_premises(source, assertion, k), assertion, few_shot=few_shot)
    return _score_last_turn(model, messages, reuse)


def score_premise_check(model: LocalModel, source: str, assertion: str, *, reuse: bool = True) -> VerdictScore:
    """The premise check: log P(Yes) vs log P(No) that the source sentence bearing most on each
    assertion sentence (BM25) says the assertion of the writer themself. A 1.5B model reads it
    mostly as "does this one sentence carry the assertion?": it adds a sentence-level read to the
    rubric's whole-source verdict (it does not tell a friend's trait from the user's)."""
    from memjudge.judges.local_premise import CHECK_PREMISES, check_messages, select_premises

    return _score_last_turn(model, check_messages(select_premises(source, assertion, CHECK_PREMISES), assertion), reuse)


def _score_last_turn(model: LocalModel, messages: list[dict], reuse: bool) -> VerdictScore:
    """Yes/No log-odds after chat `messages` whose turns before the last are the same for every
    call: evaluation restarts where the last user turn's content begins, so all of that is reused."""
    text = model.render_messages(messages)
    sentinel = "\x00premises\x00"
    shared = model.render_messages(messages[:-1] + [{"role": "user", "content": sentinel}]).split(sentinel)[0]
    return model.score_text(text, PREMISE_WORDS, reuse=reuse, shared=shared)


# Loaded models are shared by judges in one process (a panel may name the same model twice).
_MODELS: dict[tuple, LocalModel] = {}
_MODELS_LOCK = threading.Lock()


def _finite(spec: str, name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{spec}: option {name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(x):
        raise UsageError(f"{spec}: option {name} must be a finite number, got {value!r}")
    return x


def load_model(path: Path, *, context: str = "main", **kw) -> LocalModel:
    """The process's model for `path` and settings; a different `context` name gets a KV cache of
    its own (the premise check's prompts would otherwise evict the sources' shared prefix)."""
    key = (str(Path(path).resolve()), context, tuple(sorted(kw.items())))
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = LocalModel(path, **kw)
        return _MODELS[key]


# ---------------------------------------------------------------------------------------
# the judge


def gumbel_pair(seed: int | None, rubric: str, assertion: str, replicate: int) -> tuple[float, float]:
    """Two standard Gumbel draws, a pure function of (seed, rubric, assertion, replicate)."""
    material = json.dumps([seed if seed is not None else 0, rubric, assertion, replicate]).encode()
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(material).digest()[:8], "little"))
    g = rng.gumbel(size=2)
    return float(g[0]), float(g[1])


class LocalJudge(Judge):
    prefix: ClassVar[str] = "local"

    def __init__(self, config: JudgeConfig):
        # One CPU model evaluates one prompt at a time; more concurrency only thrashes the KV prefix.
        super().__init__(config.model_copy(update={"concurrency": 1}))
        self.check_options(OPTION_KEYS)
        name = config.model
        self.packaged = PACKAGED.get(name)
        self._path: Path | None = None  # local:PATH.gguf's file; a packaged model's is joined at first use
        if self.packaged is None:
            if not name.lower().endswith(".gguf"):
                raise UsageError(f"{config.spec}: unknown local model (use local:{DEFAULT_MODEL} or local:PATH.gguf)")
            path = Path(name).expanduser()
            if not path.is_file():
                raise UsageError(f"{config.spec}: no such GGUF file {path}")
            self._path = path.resolve()
        opts = config.options
        self.prompt_mode = opts.get("prompt", DEFAULT_PROMPT)
        if self.prompt_mode not in PROMPT_MODES:
            raise UsageError(f"{config.spec}: option prompt must be one of {', '.join(PROMPT_MODES)}, got {self.prompt_mode!r}")
        premises = opts.get("premises", DEFAULT_PREMISES)
        if isinstance(premises, bool) or not isinstance(premises, int) or premises < 0:
            raise UsageError(f"{config.spec}: option premises must be an integer >= 0 (0 = whole source), got {premises!r}")
        self.premises = premises
        few_shot = opts.get("few_shot", True)
        if not isinstance(few_shot, bool):
            raise UsageError(f"{config.spec}: option few_shot must be true or false, got {few_shot!r}")
        self.few_shot = few_shot
        check = opts.get("check", DEFAULT_CHECK)
        if not isinstance(check, bool):
            raise UsageError(f"{config.spec}: option check must be true or false, got {check!r}")
        if check and self.prompt_mode != "rubric":
            # The premise prompt is itself a sentence-level read; a check beside it was never measured.
            raise UsageError(f"{config.spec}: option check = true needs prompt = \"rubric\", got prompt = "
                             f"{self.prompt_mode!r}")
        self.check = check
        threshold, per_category = opts.get("threshold"), opts.get("category_thresholds")
        if threshold is None and self.packaged is not None:
            if self.prompt_mode == "premise":
                threshold = self.packaged.premise_threshold
            elif self.check:
                threshold = self.packaged.check_threshold
                # The packaged thresholds are one rule: a category's own only beside its own rest.
                if per_category is None:
                    per_category = dict(self.packaged.check_category_thresholds)
            else:
                threshold = self.packaged.threshold
        self.threshold = _finite(config.spec, "threshold", 0.0 if threshold is None else threshold)
        if per_category is not None and not isinstance(per_category, dict):
            raise UsageError(f"{config.spec}: option category_thresholds must be a table of category = number, "
                             f"got {per_category!r}")
        # Categories judged against a threshold of their own (`memjudge calibrate --own-threshold`);
        # every other category against `threshold`.
        self.category_thresholds: dict[str, float] = {
            str(c): _finite(config.spec, f"category_thresholds.{c}", t) for c, t in (per_category or {}).items()}
        coverage_threshold = opts.get("coverage_threshold")
        if coverage_threshold is None:
            coverage_threshold = self.packaged.coverage_threshold if self.packaged is not None else 0.0
        self.coverage_threshold = _finite(config.spec, "coverage_threshold", coverage_threshold)
        self.coverage_source = opts.get("coverage_source", True)
        if not isinstance(self.coverage_source, bool):
            raise UsageError(f"{config.spec}: option coverage_source must be true or false, got {self.coverage_source!r}")
        # Loaded models by context name ("main", and "check" for the premise check's own KV cache).
        self._models: dict[str, LocalModel] = {}
        self._repack: RepackDecision | None = None  # how llama.cpp loaded the model (effective)
        self._lock = asyncio.Lock()
        self._check_installed()

    def _check_installed(self) -> None:
        """Fail before any work, in one line, when the [local] extra is missing."""
        import importlib.util

        if importlib.util.find_spec("llama_cpp") is None:
            raise UsageError(f"{self.spec}: the local judge needs llama-cpp-python: {INSTALL_HINT}")
        if self.packaged is not None:
            missing = [p for p in self.packaged.packages if importlib.util.find_spec(p) is None]
            if missing and not assembled_path(self.packaged).is_file():
                raise UsageError(f"{self.spec}: the model weights are not installed ({len(missing)} of "
                                 f"{len(self.packaged.packages)} packages missing, e.g. {missing[0]}): {INSTALL_HINT}")

    @property
    def deterministic(self) -> bool:
        """Temperature 0: the verdict is the log-odds against the threshold, bit-identical cold or
        warm (see LocalModel._evaluate), so a replicate would only repeat replicate 0."""
        return not (self.config.temperature or 0.0) > 0

    def order_key(self, call: JudgeCall) -> Any:
        """A persona's calls of one category together: they share the prompt up to the
        assertion, so a warm call evaluates only the assertion and what follows it."""
        item = call.item
        return (item.get("persona_id", ""), call.rubric, str(item.get("category", "")), item.get("assertion_id", ""),
                call.replicate)

    def identity(self) -> dict[str, Any]:
        """Everything that decides this judge's labels (config.json): `answer_identity()` with
        the thresholds, as options and as resolved (the cache keys' identity until 2026-12)."""
        ident = {**self.answer_identity(), "params": super().identity()["params"], "threshold": self.threshold}
        if self.category_thresholds:
            ident["category_thresholds"] = dict(sorted(self.category_thresholds.items()))
        return ident

    def answer_identity(self) -> dict[str, Any]:
        """What decides the model's scores: weights, prompt form, evaluation chunks; not the
        thresholds, which are applied to a stored score (`reread`), so a calibrated threshold
        reuses every answer the model gave before."""
        ident = super().identity()
        params = ident["params"]
        ident["params"] = {**params, "options": {k: v for k, v in params["options"].items() if k not in THRESHOLD_OPTIONS}}
        ident["eval_chunk"] = EVAL_CHUNK
        if self.prompt_mode == "rubric":
            ident["answer_prefix"] = ANSWER_PREFIX
            # Evaluation restarts where the source ends and where the assertion starts (scores
            # move by ~0.1 with the split).
            ident["split_at"] = "source end, assertion start"
            if self.check:
                from memjudge.judges.local_premise import CHECK_PREMISES, CHECK_VERSION

                ident["premise_check"] = {"version": CHECK_VERSION, "premises": CHECK_PREMISES,
                                          "words": list(PREMISE_WORDS)}
        else:
            from memjudge.judges.local_premise import PROMPT_VERSION

            # The rubric's text no longer reaches the model: the judge's own prompt version,
            # premise count and answer words decide its answers instead.
            ident["prompt"] = {"version": PROMPT_VERSION, "premises": self.premises, "few_shot": self.few_shot,
                               "words": list(PREMISE_WORDS)}
        if self.packaged:
            ident["weights_sha256"] = self.packaged.sha256
        else:
            st = (path := self.weights_path()).stat()
            ident["weights_file"] = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        return ident

    @property
    def model_version(self) -> str:
        if self.packaged:
            return f"{self.packaged.filename} sha256:{self.packaged.sha256[:12]}"
        return self.weights_path().name

    def ensure_loaded(self, context: str = "main") -> LocalModel:
        """Assemble/verify the weights and load the model (slow the first time; call in a thread).
        `context` "check": the same weights with a KV cache of their own, for the premise check."""
        if context in self._models:
            return self._models[context]
        path = self.weights_path()
        opts = self.config.options
        model = load_model(path, context=context, n_ctx=int(opts.get("n_ctx", 8192)), n_threads=opts.get("n_threads"),
                           n_batch=int(opts.get("n_batch", 512)))
        self._models[context], self._repack = model, getattr(model, "repack", None)
        return model

    def weights_path(self) -> Path:
        """The model's GGUF file, verified (joined on first use), not loaded: a bad file is a one-line
        error before any work, and a run whose every answer is cached never pays for the load."""
        if self.packaged:
            return packaged_model_path(self.packaged.name)
        assert self._path is not None  # __init__ sets it whenever the model is not a packaged one
        return self._path

    def load_all(self) -> None:
        """Load every context this judge's options read (the check's too), so that no load time
        falls into the first scored call."""
        self.ensure_loaded()
        if self.check:
            self.ensure_loaded("check")

    def _score_sync(self, call: JudgeCall) -> tuple[VerdictScore | None, str | None]:
        model = self.ensure_loaded()
        with model.lock:
            try:
                if self.prompt_mode == "premise":
                    f = call.fields
                    return score_premises(model, f["source"], f["assertion"], self.premises, few_shot=self.few_shot), None
                f = call.fields
                verdict = model.score(call.prompt, source=f.get("source", ""), assertion=f.get("assertion", ""))
            except PromptTooLong as e:
                return None, str(e)
        if not self.check:
            return verdict, None
        check_model = self.ensure_loaded("check")
        with check_model.lock:
            try:
                return verdict.checked(score_premise_check(check_model, f["source"], f["assertion"])), None
            except PromptTooLong as e:
                return None, f"premise check: {e}"

    def call_identity(self, kind: str) -> dict[str, Any]:
        """The scores' identity (no threshold); coverage calls also depend on the coverage
        prompt and whether it shows the source, and not on the support prompt's settings."""
        return self._call_identity(kind, self.answer_identity(), None, support=False)

    def label_identity(self, kind: str) -> dict[str, Any]:
        """The scores' identity with the thresholds (support: threshold, category_thresholds;
        coverage: also the coverage threshold)."""
        return self._call_identity(kind, self.identity(), self.coverage_threshold)

    def former_call_identities(self, kind: str) -> list[dict[str, Any]]:
        """Until 2026-12 the cache keys held the thresholds (`label_identity`): an answer
        stored then is still found, at the thresholds it was stored at, and a coverage answer
        stored at an earlier packaged coverage threshold while the option is left at its default.
        Until 2026-12-04 a coverage answer's key also held the support prompt's settings."""
        former = [self.label_identity(kind)]
        if kind == "coverage":
            former.append(self._call_identity(kind, self.answer_identity(), None))
            if self.packaged is not None and "coverage_threshold" not in self.config.options:
                former += [self._call_identity(kind, self.identity(), t) for t in self.packaged.former_coverage_thresholds]
        return former

    def _call_identity(self, kind: str, ident: dict[str, Any], threshold: float | None, support: bool = True) -> dict[str, Any]:
        if kind == "coverage":
            from memjudge.judges.local_coverage import coverage_identity

            return coverage_identity(ident, self.coverage_source, threshold, support=support)
        return ident

    def _coverage_sync(self, call: JudgeCall) -> tuple[list[VerdictScore] | None, str | None]:
        from memjudge.judges.local_coverage import score_candidates

        f = call.fields
        model = self.ensure_loaded()
        with model.lock:
            try:
                return score_candidates(model, f["source"] if self.coverage_source else None, f["facts"][0]["text"],
                                        [a["text"] for a in f["assertions"]]), None
            except PromptTooLong as e:
                return None, str(e)

    def coverage_answer(self, scores: list[VerdictScore], call: JudgeCall) -> JudgeAnswer:
        """The per-fact coverage answer: the shown candidates whose log-odds reach the coverage
        threshold (at temperature T > 0, each drawn as a support verdict is)."""
        by_id = {a["id"]: sc.log_odds for a, sc in zip(call.fields["assertions"], scores)}
        obj = self._coverage_obj(by_id, call)
        usage = Usage(input_tokens=sum(s.prompt_tokens for s in scores), output_tokens=0,
                      cached_tokens=sum(s.reused_tokens for s in scores))
        return JudgeAnswer(text=json.dumps(obj), finish_reason="stop", usage=usage, model_version=self.model_version,
                           judge_score=max(by_id.values()) if by_id else None, parsed=obj,
                           raw={"candidate_scores": by_id, "coverage_threshold": self.coverage_threshold})

    def _coverage_obj(self, by_id: dict[str, float], call: JudgeCall) -> dict:
        """The shown candidates (in the order shown) whose log-odds reach the coverage threshold."""
        fact = call.fields["facts"][0]
        temperature = self.config.temperature or 0.0
        covered = []
        for aid, lo in by_id.items():
            if temperature > 0:
                g_yes, g_no = gumbel_pair(self.config.seed, call.rubric, f"{fact['id']}|{aid}", call.replicate)
                lo = lo + temperature * (g_yes - g_no)
            if lo >= self.coverage_threshold:
                covered.append(aid)
        return {"facts": [{"fact_id": fact["id"], "fact": fact["text"], "covered_by": covered}]}

    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        if "facts" in getattr(call.schema, "model_fields", {}):
            if len(call.fields.get("facts") or []) != 1 or "assertions" not in call.fields:
                raise UsageError(f"{self.spec}: the local judge answers coverage one fact at a time: use the per-fact "
                                 f"rubric (--rubric coverage-fact) with --facts, not {call.rubric!r}")
            async with self._lock:
                scores, error = await asyncio.to_thread(self._coverage_sync, call)
            if scores is None:
                return JudgeAnswer(text=None, finish_reason="length", model_version=self.model_version, raw={"error": error})
            return self.coverage_answer(scores, call)
        if "verdict" not in getattr(call.schema, "model_fields", {}):
            raise UsageError(f"{self.spec}: the local judge answers support and per-fact coverage rubrics, not {call.rubric!r}")
        if (self.prompt_mode == "premise" or self.check) and not {"source", "assertion"} <= set(call.fields):
            raise UsageError(f"{self.spec}: the call carries no source/assertion fields for premise selection "
                             "(use option prompt = \"rubric\" with check = false)")
        async with self._lock:
            score, error = await asyncio.to_thread(self._score_sync, call)
        if score is None:
            return JudgeAnswer(text=None, finish_reason="length", model_version=self.model_version, raw={"error": error})
        return self.answer(score, call)

    def threshold_for(self, category: Any) -> float:
        """The threshold an item of `category` is judged against."""
        return self.category_thresholds.get(str(category), self.threshold)

    def answer(self, score: VerdictScore, call: JudgeCall) -> JudgeAnswer:
        log_odds = score.log_odds
        parts = "" if score.check is None else f" (verdict {log_odds - score.check:.3f} + premise check {score.check:.3f})"
        obj = self._support_obj(log_odds, f"log-odds {log_odds:.3f}{parts}", call)
        usage = Usage(input_tokens=score.prompt_tokens, output_tokens=0, cached_tokens=score.reused_tokens)
        return JudgeAnswer(text=json.dumps(obj), finish_reason="stop", usage=usage, model_version=self.model_version,
                           judge_score=log_odds, parsed=obj,
                           raw={"logp_supported": score.logp_supported, "logp_unsupported": score.logp_unsupported,
                                **({} if score.check is None else {"premise_check": score.check})})

    def _support_obj(self, log_odds: float, read: str, call: JudgeCall) -> dict:
        """The verdict of `log_odds` against the item's threshold (drawn at temperature T > 0);
        `read` opens the rationale (the score and its parts)."""
        category = str(call.item.get("category", ""))
        threshold = self.threshold_for(category)
        against = f"threshold {threshold:.3f}" + (f" (category {category})" if category in self.category_thresholds
                                                  else "")
        temperature = self.config.temperature or 0.0
        if temperature > 0:
            g_sup, g_uns = gumbel_pair(self.config.seed, call.rubric, str(call.item.get("assertion_id", call.key)),
                                       call.replicate)
            sampled = log_odds + temperature * (g_sup - g_uns)
            supported = sampled >= threshold
            rationale = f"{read} vs {against}; sampled at temperature {temperature:g}: {sampled:.3f}"
        else:
            supported = log_odds >= threshold
            rationale = f"{read} vs {against}"
        return {"verdict": "supported" if supported else "unsupported", "evidence": "", "rationale": rationale}

    def reread(self, answer: dict, judge_score: float | None, call: JudgeCall,
               candidate_scores: dict | None = None) -> dict:
        """A stored answer against today's thresholds: the verdict from its log-odds
        (`judge_score`), covered_by from its candidates' log-odds. The rationale keeps the
        stored read of the score (this judge wrote it: "log-odds X (verdict a + premise check b)")."""
        if "facts" in answer:
            if candidate_scores is None or len(answer["facts"]) != 1 or len(call.fields.get("facts") or []) != 1:
                return answer
            shown = [str(a["id"]) for a in call.fields.get("assertions") or []]
            scores = {str(k): float(v) for k, v in candidate_scores.items()}
            if set(shown) != set(scores):
                return answer
            return self._coverage_obj({aid: scores[aid] for aid in shown}, call)
        if judge_score is None or "verdict" not in answer:
            return answer
        read = str(answer.get("rationale") or "").split(" vs ", 1)[0] or f"log-odds {judge_score:.3f}"
        return self._support_obj(float(judge_score), read, call)

    def effective(self) -> dict[str, Any]:
        """How llama.cpp ran the model (config.json): its build and whether the weights were
        repacked; nothing when every answer came from the cache."""
        return {"llama_cpp": describe(self._repack)} if self._repack is not None else {}

    async def aclose(self) -> None:
        self._models.clear()
