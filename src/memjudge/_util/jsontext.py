"""JSON text of memjudge's own values, from an encoder made once.

`json.JSONEncoder.encode` builds its C encoder again at every call (the options, and a dict
of the containers it has entered), about a quarter of the cost of encoding one judge answer;
a run encodes two or three per call (the journal's line, the cache's value, the label row).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _json_encoder
from typing import Any

# A str as json.dumps(..., ensure_ascii=False) writes it, whatever the separators: a key or a
# message spliced into JSON text without the encoder's per-call setup.
string: Callable[[str], str] = _json_encoder.encode_basestring


def encoder(*, sort_keys: bool = False, separators: tuple[str, str] = (", ", ": "), allow_nan: bool = True) -> Callable[[Any], str]:
    """`json.JSONEncoder(ensure_ascii=False, sort_keys=, separators=, allow_nan=).encode`: the
    same text and the same errors (TypeError for a value JSON has no form for, ValueError for
    NaN without `allow_nan`), with the C encoder made once. It does not look for circular
    references: what memjudge encodes is parsed JSON or built from it, and a cycle would end
    in RecursionError instead of ValueError."""
    plain = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, separators=separators, allow_nan=allow_nan)
    make = getattr(_json_encoder, "c_make_encoder", None)
    if make is None:  # a Python without json's C speedups
        return plain.encode
    item_sep, key_sep = separators
    chunks = make(None, plain.default, string, None, key_sep, item_sep, sort_keys, False, allow_nan)
    join = "".join

    def encode(obj: Any) -> str:
        if type(obj) is str:  # as JSONEncoder.encode: a str alone is written directly
            return string(obj)
        return join(chunks(obj, 0))

    return encode
