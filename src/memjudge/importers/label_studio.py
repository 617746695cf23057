"""`memjudge import label-studio EXPORT.json --out GOLD.jsonl`: a Label Studio JSON export of
memjudge's tasks, read back as a gold file (the format is in memjudge.annotate.label_studio).

Unlike the dataset importers this one reads one file and writes one gold file, so it says
`writes = "gold"` and the CLI calls `import_gold` instead of `import_dataset`.
"""

from __future__ import annotations

from pathlib import Path

from memjudge.errors import InputError
from memjudge.importers import Importer


class LabelStudioImporter(Importer):
    name = "label-studio"
    description = "Label Studio JSON export of memjudge annotate's tasks -> gold labels (JSONL)"
    licence = "your own annotations"
    attribution = "Label Studio (HumanSignal), JSON export format"
    writes = "gold"

    def check_folder(self, folder: Path) -> None:
        if not folder.exists():
            raise InputError(folder, "no such file")
        if not folder.is_file():
            raise InputError(folder, "is not a file (expected a Label Studio JSON export, e.g. export.json)")

    def import_gold(self, path, out) -> dict:
        from memjudge.annotate.label_studio import import_export

        path = Path(path)
        self.check_folder(path)
        return import_export(path, out)
