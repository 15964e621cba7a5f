"""The folders the service reads at run time: the wheel's copies, else the source tree's."""

from __future__ import annotations

from pathlib import Path

import pytest

from service import resources
from service.cli import openwebui_sources
from service.storage import migrate

REPO = Path(__file__).resolve().parents[2]


def test_a_checkout_reads_the_source_trees_migrations_and_filter() -> None:
    assert resources.folder("migrations") == REPO / "migrations"
    assert resources.folder("filter") == REPO / "filter"
    assert migrate.MIGRATIONS_DIR == REPO / "migrations"
    assert openwebui_sources.SOURCE_DIR == REPO / "filter"


def test_a_missing_folder_is_named_in_the_error() -> None:
    with pytest.raises(FileNotFoundError, match="no nothing-here/ folder"):
        resources.folder("nothing-here")
