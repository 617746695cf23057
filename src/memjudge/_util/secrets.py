"""Secret values never reach a file or a message: every `*_API_KEY` / `*_TOKEN` in the
environment is replaced by `***` in error texts, rows and config.json."""

from __future__ import annotations

import os

# Named explicitly too, whatever the suffix rule above says about them.
KNOWN = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY")
MIN_LENGTH = 8  # shorter values ("EMPTY", "1") are too common to replace in text


def secret_values() -> list[str]:
    """Values that must never reach a file: every *_API_KEY / *_TOKEN in the environment."""
    out = []
    for name, value in os.environ.items():
        if value and len(value) >= MIN_LENGTH and (name.endswith("_API_KEY") or name.endswith("_TOKEN") or name in KNOWN):
            out.append(value)
    return out


def redact(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every secret value replaced by ***; `secrets` defaults to the environment's."""
    for s in secret_values() if secrets is None else secrets:
        text = text.replace(s, "***")
    return text


def request_error(exc: BaseException, secrets: list[str] | None = None) -> str:
    """A failed request as one redacted line: "request failed: Type: message" (500 chars at most)."""
    msg = " ".join(str(exc).split())
    if len(msg) > 500:
        msg = msg[:500] + "..."
    return redact(f"request failed: {type(exc).__name__}: {msg}" if msg else f"request failed: {type(exc).__name__}", secrets)


__all__ = ["redact", "request_error", "secret_values"]
