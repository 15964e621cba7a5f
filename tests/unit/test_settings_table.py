"""The settings reference's table is the one `Settings` makes (service/cli/settings_table.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings
from typer.testing import CliRunner

from service.cli import settings_table
from service.cli.main import app
from service.config import Settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "settings.md"


def test_the_settings_reference_table_is_the_one_settings_makes() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page == settings_table.with_table(page, settings_table.render_table()), (
        "docs/reference/settings.md's table differs from service/config.py; "
        f"regenerate it with `{settings_table.REGENERATE}`"
    )


def test_every_setting_has_an_environment_variable_and_a_description() -> None:
    missing = [
        name
        for name, info in Settings.model_fields.items()
        if not info.alias or len((info.description or "").strip()) < 10
    ]
    assert missing == []


def test_the_table_has_one_row_per_setting_in_declaration_order() -> None:
    rows = settings_table.render_table().splitlines()[2:]
    assert [row.split(" | ")[0].strip("|` ") for row in rows] == [
        info.alias for info in Settings.model_fields.values()
    ]


class _Example(BaseSettings):
    token: SecretStr = Field(
        default=SecretStr("hunter2-not-for-print"), alias="EXAMPLE_TOKEN", description="A key."
    )
    mode: str = Field(
        default="a", alias="EXAMPLE_MODE", pattern="^(a|b)$", description="Mode a | b."
    )
    ratio: float = Field(default=0.5, alias="EXAMPLE_RATIO", gt=0, le=1, description="Share.")
    url: str | None = Field(default=None, alias="EXAMPLE_URL", description="Where.")


def test_a_secret_default_is_never_printed_and_types_read_as_words() -> None:
    assert settings_table.render_table(_Example).splitlines()[2:] == [
        "| `EXAMPLE_TOKEN` | secret | (secret) | A key. |",
        "| `EXAMPLE_MODE` | one of `a`, `b` | `a` | Mode a \\| b. |",
        "| `EXAMPLE_RATIO` | number, > 0, ≤ 1 | `0.5` | Share. |",
        "| `EXAMPLE_URL` | text | unset | Where. |",
    ]


def test_a_setting_without_a_description_is_refused() -> None:
    class Bare(BaseSettings):
        size: int = Field(default=1, alias="EXAMPLE_SIZE")

    with pytest.raises(ValueError, match="setting size needs an alias and a description"):
        settings_table.render_table(Bare)


def test_check_names_the_command_that_regenerates_an_outdated_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{settings_table.START}\n| old |\n{settings_table.END}\n")
    runner = CliRunner()

    outdated = runner.invoke(app, ["settings-table", "--check", str(readme)])
    assert outdated.exit_code == 1
    assert settings_table.REGENERATE in outdated.output

    assert runner.invoke(app, ["settings-table", "--write", str(readme)]).exit_code == 0
    assert runner.invoke(app, ["settings-table", "--check", str(readme)]).exit_code == 0
    assert readme.read_text().startswith(f"# x\n{settings_table.START}\n| variable |")


def test_a_page_without_the_markers_gets_a_sentence_and_exit_code_1(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    result = CliRunner().invoke(app, ["settings-table", "--write", str(readme)])
    assert result.exit_code == 1
    assert "the page needs the lines" in result.output
    assert readme.read_text() == "# no table here\n"
