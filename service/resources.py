"""Folders the service reads at run time that live outside the import package in the source
tree: `migrations/` (Alembic) and `filter/` (the files `openwebui install` uploads).

A wheel carries copies of both under `service/bundled/` (setup.py's build step copies them at
build time, so the source folders stay where they are); a source checkout or an editable
install has no such copy and reads the repository's folders.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

BUNDLED = "bundled"
"""The package folder the wheel's copies are built into (setup.py)."""

SOURCE_ROOT = Path(__file__).resolve().parents[1]
"""The repository root when running from a checkout."""


def folder(name: str) -> Path:
    """The folder `name` ("migrations" or "filter"): the wheel's copy when installed from
    one, else the source tree's.

    Raises:
        FileNotFoundError: neither exists (a broken install).
    """
    packaged = resources.files("service").joinpath(BUNDLED, name)
    if packaged.is_dir():
        return Path(str(packaged))
    source = SOURCE_ROOT / name
    if source.is_dir():
        return source
    raise FileNotFoundError(f"no {name}/ folder in the package ({packaged}) or at {source}")
