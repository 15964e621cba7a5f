"""Build step only (the project is described in pyproject.toml): the wheel carries copies of
migrations/ and the Open WebUI files of filter/ inside the package, as service/bundled/, so a
non-editable install can migrate and install the filter. The source folders stay where they
are; service/resources.py finds either.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = {
    "migrations": ("env.py", "script.py.mako", "versions/*.py"),
    "filter": ("memory_*.py",),
}


class BuildPyWithBundled(build_py):
    """build_py, then copy the bundled folders into the built package."""

    def run(self) -> None:
        """Build the package, then copy each bundled folder's files into it."""
        super().run()
        for folder, patterns in BUNDLED.items():
            target = Path(self.build_lib) / "service" / "bundled" / folder
            shutil.rmtree(target, ignore_errors=True)
            for pattern in patterns:
                for source in sorted((ROOT / folder).glob(pattern)):
                    destination = target / source.relative_to(ROOT / folder)
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, destination)


setup(cmdclass={"build_py": BuildPyWithBundled})
