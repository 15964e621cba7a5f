"""The CLI reference (docs/reference/cli.md) is the one the commands make (issue 29 item 11:
the CLI's commands had no reference). Made by service/cli/cli_reference.py."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from service.cli import cli_reference
from service.cli.main import app

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"


def test_the_committed_cli_reference_is_the_one_the_commands_make() -> None:
    assert PAGE.read_text(encoding="utf-8") == cli_reference.render_reference(), (
        f"docs/reference/cli.md differs from the commands; run `{cli_reference.REGENERATE}`"
    )


def _command_paths(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of a typer app, read from its registrations (not from click)."""
    paths = []
    for registered in group.registered_commands:
        name = registered.name or (registered.callback.__name__ if registered.callback else "")
        paths.append((*prefix, name.replace("_", "-")))
    for sub in group.registered_groups:
        assert sub.typer_instance is not None and sub.name is not None
        paths.append((*prefix, sub.name))
        paths += _command_paths(sub.typer_instance, (*prefix, sub.name))
    return paths


def test_every_command_has_a_section_with_its_options() -> None:
    page = cli_reference.render_reference()
    headings = {line[4:-1] for line in page.splitlines() if line.startswith("## `")}
    expected = {" ".join(("python -m service", *path)) for path in _command_paths(app)}
    assert len(expected) > 12  # 14 commands and 3 groups of subcommands when this was written
    assert expected <= headings, sorted(expected - headings)
    assert "| `--to REVISION` |" in page  # an option of `migrate`, with its metavar
    assert "| `--tools-model <list[str]>` |" in page  # a repeatable option of `openwebui install`


def test_defaults_are_printed_without_the_machine_s_folders() -> None:
    page = cli_reference.render_reference()
    assert str(Path(__file__).resolve().parents[2]) not in page
    home = str(Path.home())
    assert home == "/" or f"{home}/" not in page
    assert "[default: filter/memory_filter.py]" in page


def test_check_names_the_command_that_regenerates_a_stale_page(tmp_path: Path) -> None:
    page = tmp_path / "cli.md"
    page.write_text("# an old reference\n", encoding="utf-8")
    runner = CliRunner()

    stale = runner.invoke(app, ["cli-reference", "--check", str(page)])
    assert stale.exit_code == 1
    assert cli_reference.REGENERATE in stale.output

    assert runner.invoke(app, ["cli-reference", "--write", str(page)]).exit_code == 0
    assert runner.invoke(app, ["cli-reference", "--check", str(page)]).exit_code == 0
    assert page.read_text(encoding="utf-8") == cli_reference.render_reference()


def test_a_page_that_cannot_be_read_gets_a_sentence_and_exit_code_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["cli-reference", "--check", str(tmp_path / "missing.md")])
    assert result.exit_code == 1
    assert "error:" in result.output and "missing.md" in result.output
