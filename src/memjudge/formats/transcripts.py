"""Chat transcripts as sources (spec §2): the conversation a memory system saw, rendered as the
one source string per persona that the judge reads.

Two shapes, told apart by their columns:

- one record per message: `persona_id`, `role`, `content`, optional `name`, `timestamp`,
  `session_id`;
- one record per conversation: `persona_id`, `messages` (a list in the OpenAI chat format:
  ``{"role": ..., "content": ..., "name"?: ...}``, content a string or a list of parts), optional
  `session_id`, `timestamp`.

The rendering marks who said what (wrong-person attributions are judged on it) and where each
session begins, in a stable order: a persona's sessions in the order their first message appears
in the file, and each session's messages in file order. Every line of a message after its first
is indented, so that no message can pass itself off as another speaker's turn or a new session.
The rendered text is the persona's source, so it is part of each prompt and of the cache key.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from memjudge.errors import InputError
from memjudge.formats.columns import LINE

__all__ = ["TRANSCRIPT_VERSION", "is_transcript", "render_transcripts"]

# Every break a reader (or a judge) may take for a new line, not only "\n".
_LINE_BREAKS = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
TRANSCRIPT_VERSION = 1  # bump when the rendering changes: every cached answer on transcripts changes with it


def is_transcript(df: pd.DataFrame) -> bool:
    """Messages (`role` or `content`: a row lacking the other is an error at its line) or
    conversations (`messages`); a file with a `source` column and neither content nor messages is
    a plain sources file, whatever else it holds."""
    cols = set(df.columns)
    if "messages" in cols or "content" in cols:
        return True
    return "role" in cols and "source" not in cols


def _text(value, where: str, path: Path, line: int, tool_calls=None) -> str:
    """A message's content as text: a string, or the OpenAI list of parts (text parts joined,
    other parts named)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if value is None or (isinstance(value, float) and value != value):
        if tool_calls:
            names = [str((c.get("function") or {}).get("name", "?")) if isinstance(c, dict) else "?" for c in tool_calls]
            return f"[tool calls: {', '.join(names)}]"
        raise InputError(path, f"{where}without 'content'", line)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and "type" in part:
                parts.append(f"[{part['type']}]")
            else:
                raise InputError(path, f"{where}content part is neither text nor a typed part: {str(part)[:60]!r}", line)
        return "\n".join(parts)
    raise InputError(path, f"{where}'content' must be a string or a list of parts, found {type(value).__name__}", line)


def _label(value, what: str, where: str, path: Path, line: int, required: bool) -> str | None:
    if value is None or (isinstance(value, float) and value != value) or (isinstance(value, str) and not value.strip()):
        if required:
            raise InputError(path, f"{where}without {what!r}", line)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float, np.integer, np.floating)):
        if hasattr(value, "isoformat"):  # a Parquet timestamp
            return value.isoformat()
        raise InputError(path, f"{where}{what!r} must be a string, found {type(value).__name__}", line)
    # one line, whatever it held: a speaker or session name cannot start a line of its own
    return " ".join(str(value).split())


def _messages(df: pd.DataFrame, path: Path):
    """(persona, session key, session label, line, role, name, timestamp, text) per message, file order."""
    per_conversation = "messages" in df.columns
    for i, row in enumerate(df.to_dict("records")):
        line = int(row[LINE])
        pid = _label(row.get("persona_id"), "persona_id", "", path, line, True)
        session = _label(row.get("session_id"), "session_id", "", path, line, False)
        if not per_conversation:
            role = _label(row.get("role"), "role", "message ", path, line, True)
            text = _text(row.get("content"), "message ", path, line, row.get("tool_calls"))
            stamp = _label(row.get("timestamp"), "timestamp", "message ", path, line, False)
            name = _label(row.get("name"), "name", "message ", path, line, False)
            yield pid, session, session, line, role, name, stamp, text
            continue
        msgs = row.get("messages")
        if isinstance(msgs, np.ndarray):
            msgs = msgs.tolist()
        if not isinstance(msgs, list) or not msgs:
            raise InputError(path, "'messages' must be a non-empty list of chat messages", line)
        stamp0 = _label(row.get("timestamp"), "timestamp", "", path, line, False)
        # Each conversation record is a session of its own, named by its session_id if it has one.
        key = session if session is not None else f"\x00{i}"
        for j, m in enumerate(msgs, start=1):
            where = f"messages[{j}] "
            if not isinstance(m, dict):
                raise InputError(path, f"{where}must be an object with role and content, found {type(m).__name__}", line)
            role = _label(m.get("role"), "role", where, path, line, True)
            text = _text(m.get("content"), where, path, line, m.get("tool_calls"))
            name = _label(m.get("name"), "name", where, path, line, False)
            stamp = _label(m.get("timestamp"), "timestamp", where, path, line, False) or (stamp0 if j == 1 else None)
            yield pid, key, session, line, role, name, stamp, text


def render_transcripts(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """One source per persona (`persona_id`, `source`, the `LINE` of its first record), rendered."""
    personas: dict[str, dict] = {}
    for pid, key, label, line, role, name, stamp, text in _messages(df, path):
        p = personas.setdefault(pid, {"line": line, "sessions": {}})
        s = p["sessions"].setdefault(key, {"label": label, "lines": []})
        speaker = f"{role} ({name})" if name else role
        head = f"[{stamp}] {speaker}:" if stamp else f"{speaker}:"
        body = _LINE_BREAKS.split(text)
        s["lines"].append(" ".join([head, body[0]]).rstrip() + "".join(f"\n    {b}" for b in body[1:]))
    rows = []
    for pid, p in personas.items():
        sessions = list(p["sessions"].values())
        marked = len(sessions) > 1 or sessions[0]["label"] is not None
        blocks = []
        for k, s in enumerate(sessions, start=1):
            title = f"session {s['label']}" if s["label"] is not None else f"session {k}"
            blocks.append((f"=== {title} ===\n" if marked else "") + "\n".join(s["lines"]))
        rows.append({"persona_id": pid, "source": "\n\n".join(blocks), LINE: p["line"]})
    out = pd.DataFrame(rows, columns=["persona_id", "source", LINE])
    out.attrs["transcript"] = {"format": "conversations" if "messages" in df.columns else "messages",
                               "rendering": TRANSCRIPT_VERSION, "personas": len(rows)}
    return out
