"""Names that the command line lists in its help and the implementations look up, in one place.

Standard library only, and nothing here imports the implementations (they are named as
``"module:attribute"`` strings), so `memjudge --help` can show the lists without importing
pandas. Each implementation reads its names from here:

- `preset_names()`: the simulation presets (`presets/*.toml` in the package) that
  `memjudge.simulation.load_preset` accepts;
- `IMPORTERS`: dataset name → importer class, the built-in entries of
  `memjudge.importers`' registry (`memjudge import DATASET`);
- `memory_system_names()`: the memory systems whose exports `memjudge import NAME FILE` reads,
  one data file each (`importers/systems/*.toml`, memjudge.importers.memory_systems);
- `CALIBRATION_TARGETS`: what `memjudge calibrate --target` may maximise, the default first
  (`memjudge.stats.thresholds.TARGETS`).
"""

from __future__ import annotations

from importlib import resources

__all__ = [
    "CALIBRATION_TARGETS", "DEFAULT_CALIBRATION_TARGET", "IMPORTERS", "dataset_names", "memory_system_names", "preset_names",
]

IMPORTERS: dict[str, str] = {
    "synthpai": "memjudge.importers.synthpai:SynthPAIImporter",
    "xsumfaith": "memjudge.importers.xsumfaith:XSumFaithImporter",
    "label-studio": "memjudge.importers.label_studio:LabelStudioImporter",  # writes a gold file
}

CALIBRATION_TARGETS: tuple[str, ...] = ("balanced_accuracy", "accuracy", "youden", "f1_unsupported")
DEFAULT_CALIBRATION_TARGET = CALIBRATION_TARGETS[0]


def preset_names() -> list[str]:
    """The simulation presets shipped in the package, sorted."""
    folder = resources.files("memjudge").joinpath("presets")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def dataset_names() -> list[str]:
    """The built-in importers' dataset names, in the order the help lists them."""
    return list(IMPORTERS)


def memory_system_names() -> list[str]:
    """The memory systems with a shipped preset (`importers/systems/*.toml`), sorted."""
    folder = resources.files("memjudge").joinpath("importers", "systems")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))
