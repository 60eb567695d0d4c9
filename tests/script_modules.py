"""The command-line scripts of ``scripts/`` as modules, for the tests that call their functions or ``main``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` (``name`` may name a subfolder: ``experiments/kappa_sweep``) loaded as a fresh module
    named after the file (registered in ``sys.modules``: dataclasses look their module up while the module
    executes)."""
    path = SCRIPTS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
