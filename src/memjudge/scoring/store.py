"""Where valid answers are kept: the run's journal and the cache.

In-process judges (sim, local: `Judge.costly` false): every valid answer is appended to the
run's journal (`RUN_DIR/journal.jsonl`, flushed per answer) *before* it goes to the cache: the
journal is what survives a kill. The cache is written behind, in batches (one thread hop and
one SQLite transaction per batch rather than per answer keeps the event loop free).

Judges whose answers cost money (`Judge.costly`: every network judge): each answer is in the
cache *before* its journal line is written (`write_through`), so the journal never holds an
answer the cache lacks, and a rerun after a kill pays for nothing already answered, into this
run folder or any other that shares the cache. The writes are still grouped: answers that
arrive while a transaction is being written wait for the next one (one thread hop and one
transaction for all of them), and each answer's journal line follows its transaction.

A run begins by copying into the cache every journal answer it lacks (a journal written by an
in-process judge, or by an earlier memjudge): only then may the journal be rewritten at the
end of the run.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import IO

from memjudge import formats as io
from memjudge._util import jsontext
from memjudge.scoring.answers import Task
from memjudge.scoring.cache import AnswerCache
from memjudge.scoring.jsonl import json_line

JOURNAL = "journal.jsonl"
# Answers kept before the cache is written on the event loop's own thread: a judge that never
# yields (in-process: sim, local) never lets the saver task run, and every answer of the run
# would wait for the end in memory (~1 KB each, two million at a million candidates). Not
# fewer: at 4,096 a run of 400,000 calls took ~10% more CPU (a SQLite transaction each). Each
# transaction writes every index page it touched, twice (the write-ahead log, then the
# database), and the keys (hashes) touch pages at random: at a million candidates the index
# is ~40,000 pages, 32,768 random keys land on about half of them, and the run wrote 13.9 GB
# for a 1.5 GB cache (8.4 GB at 131,072). The answers held meanwhile cost ~1 KB each.
FLUSH_AT = 131072


def load_journal(path: Path) -> tuple[dict[str, dict], int]:
    """key → record of every valid answer in the journal, and the number of lines; a damaged
    line (a kill mid-write) is skipped, it is asked again."""
    out: dict[str, dict] = {}
    lines = 0
    if not path.is_file() and not path.is_symlink():
        return out, lines
    with io.open_private(path, "rb") as f:
        data = f.read()
    texts = io.jsonl_lines(data.decode("utf-8", "replace"))
    lines = len(texts)
    for rec in _parsed(texts):
        if isinstance(rec, dict) and isinstance(rec.get("key"), str) and isinstance(rec.get("answer"), dict):
            out[rec.pop("key")] = rec
    return out, lines


def _parsed(texts: list[str]) -> list:
    """Each line's JSON value, None for a line that is none (damaged: asked again). Usually
    one parse of all the lines as one array (a journal of thousands is read in half the
    time); line by line when that fails or does not give one answer per line, as a journal
    a kill cut short does."""
    if texts:
        try:
            whole = json.loads("[" + ",".join(texts) + "]")
        except (json.JSONDecodeError, RecursionError):
            pass
        else:
            if len(whole) == len(texts) and all(type(rec) is dict and type(rec.get("key")) is str for rec in whole):
                return whole
    out = []
    for line in texts:
        try:
            out.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError):  # not an answer we wrote: asked again
            out.append(None)
    return out


def reuse_answers(tasks: dict[str, Task], journal: dict[str, dict], cache: AnswerCache | None, *, sync_cache: bool,
                  former_keys: dict[str, list[str]] | None = None, reread=None) -> int:
    """Answer what can be answered without a request: the run's journal first, then the cache;
    each under the call's key, then under the keys an earlier memjudge gave the same answer
    (`former_keys`). Returns how many answers were found under a former key only (with
    `sync_cache` they are copied under their key now: the next run finds them directly).

    With `sync_cache`, every journal answer the cache lacks goes there first, pending work or
    not and whatever settings it was asked with: the journal may be rewritten at the end of
    this run, and only then is that safe. `reread(record, call)`, if given, restates each
    reused answer under the judge's current settings (Judge.reread)."""
    if cache is not None and journal and sync_cache:
        unsaved = cache.missing(journal)
        if unsaved:
            cache.set_many((k, journal[k]) for k in unsaved)
    for key, task in tasks.items():
        rec = journal.get(key)
        if rec is not None:
            task.record, task.origin = rec, "journal"
    if cache is not None:
        missing = [k for k, t in tasks.items() if t.record is None]
        for key, rec in cache.get_many(missing).items():
            tasks[key].record, tasks[key].origin = rec, "cache"
    found = _reuse_former(tasks, journal, cache, former_keys, sync_cache) if former_keys else 0
    if reread is not None:
        for task in tasks.values():
            if task.record is not None:
                task.record = reread(task.record, task.call)
    return found


def _reuse_former(tasks: dict[str, Task], journal: dict[str, dict], cache: AnswerCache | None,
                  former_keys: dict[str, list[str]], sync_cache: bool) -> int:
    wanted = {key: former_keys[key] for key, t in tasks.items() if t.record is None and key in former_keys}
    if not wanted:
        return 0
    olds = [old for keys in wanted.values() for old in keys]
    stored = cache.get_many([old for old in olds if old not in journal]) if cache is not None else {}
    found = {}
    for key, keys in wanted.items():
        for old in keys:
            if old in journal:
                tasks[key].record, tasks[key].origin = journal[old], "journal"
            elif old in stored:
                tasks[key].record, tasks[key].origin = stored[old], "cache"
            else:
                continue
            found[key] = tasks[key].record
            break
    if cache is not None and sync_cache and found:
        cache.set_many(found.items())
    return len(found)


def journal_text(records: dict[str, dict]) -> str:
    """A whole journal: one line per answer (for an atomic rewrite)."""
    return "".join(map(journal_line, records.keys(), records.values()))


def journal_line(key: str, record: dict) -> str:
    """`json_line({"key": key, **record})`, the journal's line of one answer, spliced from the
    record's own line rather than through a merged copy of it (a rewrite writes thousands)."""
    if record and type(key) is str and "key" not in record:
        return '{"key": ' + jsontext.string(key) + ", " + json_line(record)[1:]
    return json_line({"key": key, **record})


def _ends_with_newline(path: Path) -> bool:
    with io.open_private(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


class AnswerStore:
    """The journal (None: no run folder) and the cache of one run: written behind the journal,
    or (`write_through`, a judge whose answers cost money) before it."""

    def __init__(self, cache: AnswerCache | None, journal_path: Path | None, *, write_through: bool = False):
        self.cache = cache
        self.journal_path = journal_path
        # The cache before the journal, answer by answer (see the module docstring).
        self.write_through = write_through and cache is not None
        self._journal: IO[str] | None = None
        self._unsaved: list[tuple[str, dict]] = []
        self._waiting: list[tuple[str, dict, asyncio.Future]] = []  # write_through: answers for the next transaction
        self._saver: asyncio.Task | None = None
        self._writing = False  # the saver's thread is writing a batch

    def open(self) -> None:
        if self.journal_path is None:
            return
        io.make_dir(self.journal_path.parent)
        self._journal = io.open_private(self.journal_path, "a")
        # A kill can leave a last line without its newline; start ours on a fresh line.
        if self._journal.tell() > 0 and not _ends_with_newline(self.journal_path):
            self._journal.write("\n")
            self._journal.flush()

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def journal(self, key: str, record: dict) -> None:
        if self._journal is not None:
            self._journal.write(journal_line(key, record))
            self._journal.flush()

    async def keep(self, key: str, record: dict) -> None:
        """A valid answer goes to the journal (flushed now: this is what survives a kill) and
        then to the cache, in batches; with `write_through`, to the cache first (in the next
        transaction), then to the journal."""
        if self.write_through:
            done = asyncio.get_running_loop().create_future()
            self._waiting.append((key, record, done))
            if self._saver is None or self._saver.done():
                self._saver = asyncio.get_running_loop().create_task(self._save_waiting())
            await done
            self.journal(key, record)
            return
        self.journal(key, record)
        if self.cache is not None:
            self._unsaved.append((key, record))
            if self._saver is None or self._saver.done():
                self._saver = asyncio.get_running_loop().create_task(self._save_unsaved())
            elif len(self._unsaved) >= FLUSH_AT and not self._writing:
                # The saver has not run since (the loop never came back to it). Written here,
                # not handed to its thread: a thread beside a judge that holds the GIL costs
                # ~20% more CPU in hand-offs. Never while the thread writes: a key kept twice
                # (coverage follow-ups) must reach the cache in order.
                batch, self._unsaved = self._unsaved, []
                self.cache.set_many(batch)

    async def _save_waiting(self) -> None:
        """write_through: every answer waiting goes in one transaction; each keep() then goes on."""
        assert self.cache is not None  # write_through needs one
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                await asyncio.to_thread(self.cache.set_many, [(k, r) for k, r, _ in batch])
            except BaseException as e:
                for *_, done in batch:
                    if not done.done():
                        done.set_exception(e if isinstance(e, Exception) else OSError(f"cache write interrupted: {e!r}"))
                if not isinstance(e, Exception):
                    raise
                continue
            for *_, done in batch:
                if not done.done():
                    done.set_result(None)

    async def _save_unsaved(self) -> None:
        while self._unsaved:
            # Only `keep` holds answers back, and only for a cache (never replaced): there is one.
            assert self.cache is not None
            batch, self._unsaved = self._unsaved, []
            self._writing = True
            try:
                await asyncio.to_thread(self.cache.set_many, batch)
            finally:
                self._writing = False

    async def drain(self) -> None:
        """Wait until every kept answer is in the cache."""
        while self._saver is not None:
            saver = self._saver
            await saver
            if saver is self._saver:
                self._saver = None
        if self._unsaved:
            await self._save_unsaved()

    async def finishing(self, coro):
        """Await `coro`, then `drain()` whatever happened."""
        try:
            return await coro
        finally:
            await self.drain()


__all__ = ["JOURNAL", "AnswerStore", "journal_line", "journal_text", "load_journal", "reuse_answers"]
