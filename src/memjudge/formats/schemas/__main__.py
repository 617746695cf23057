"""python -m memjudge.formats.schemas [FOLDER]: write every schema (default docs/schemas)."""

import sys

from memjudge.formats.schemas import write_schemas

for path in write_schemas(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas"):
    print(path)
