"""Every repository file the docs cite exists (issue 29 item 6: the docs cited
`scripts/check-install.sh`, `docs/howto/container.Dockerfile` and `bench/LOCOMO.md`).

Read: README.md, CONTRIBUTING.md, CHANGELOG.md, every Markdown file under docs/ and bench/ (the
results), the deployment recipes in docs/howto/deploy/,
the scripts in scripts/ and .ci/, and the module docstrings of bench/*.py.
A citation is a path that starts at a top-level entry of the repository (`service/…`,
`docs/…`, `Makefile`…) or a Markdown link to a relative target; paths outside the repository
(`../shared/…`) and URLs are not checked.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TOP_LEVEL = (
    ".ci/",
    "bench/",
    "docs/",
    "filter/",
    "migrations/",
    "scripts/",
    "service/",
    "testkit/",
    "tests/",
)
TOP_FILES = (
    "Makefile",
    "pyproject.toml",
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "setup.py",
    ".dockerignore",
)

MADE_AT_RUN_TIME = {
    "bench/.work": "the benchmarks' scratch folder (git-ignored)",
    "service/bundled": "made by the wheel build from migrations/ and filter/",
}
"""Cited paths that are not in a checkout, and who makes them. (Paths such as `.state/` and
`eval-run/` are not rooted at a checked top-level folder, so they are never checked.)"""

MERGED_THIS_ROUND = {}
"""Cited by CONTRIBUTING.md before the branch that adds them is merged; drop each entry once
the file exists on main (the checker then covers it again)."""

_PATH = re.compile(r"(?<![\w./~:@-])((?:\.\./|\./)?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+/?)")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
_TEMPLATE = re.compile(r"[{}<>*\[]")
_OUTPUT = re.compile(r"--out\s+$")


def _texts() -> Iterator[tuple[Path, str]]:
    scripts = [
        p
        for folder in ("docs/howto/deploy", "scripts", ".ci")
        for p in sorted((ROOT / folder).iterdir())
        if p.is_file()
    ]
    pages = [ROOT / p for p in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    markdown = [*sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "bench").rglob("*.md"))]
    for path in [*pages, *markdown, *scripts]:
        yield path, path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "bench").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if doc:
            yield path, doc


def _exists(cited: str, base: Path) -> bool:
    cited = cited.rstrip("/.:,;")
    if cited.rstrip("/") in MADE_AT_RUN_TIME or cited in MERGED_THIS_ROUND:
        return True
    for where in (ROOT / cited, base / cited):
        if where.exists():
            return True
        # a module path such as tests/support/races.race_runtime names races.py
        stem = where.name.split(".", 1)[0]
        if "." in where.name and (where.parent / f"{stem}.py").exists():
            return True
    return False


def _citations(path: Path, text: str) -> Iterator[str]:
    for match in _PATH.finditer(text):
        cited = match.group(1)
        rooted = cited.startswith(TOP_LEVEL) or cited.split("/")[0] in TOP_FILES
        written = _OUTPUT.search(text[max(0, match.start() - 8) : match.start()])
        templated = _TEMPLATE.search(text[match.start() : match.end() + 1])
        if rooted and not written and not templated:  # a command's output or a pattern
            yield cited
    if path.suffix == ".md":
        for match in _LINK.finditer(text):
            target = match.group(1)
            if "://" in target or target.startswith(("mailto:", "../../shared", "../shared")):
                continue
            if path.parent.joinpath(target).resolve().is_relative_to(ROOT):
                yield target


def test_every_cited_repository_file_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}: {cited}"
        for path, text in _texts()
        for cited in _citations(path, text)
        if not _exists(cited, path.parent)
    ]
    assert missing == []


def test_the_checker_finds_a_missing_file(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    text = (
        "Run `scripts/check-install.sh`, see [the recipe](deploy/Dockerfile) "
        "and `docs/howto/deploy.md`."
    )
    found = [c for c in _citations(ROOT / "docs" / "page.md", text) if not _exists(c, doc.parent)]
    assert found == ["scripts/check-install.sh", "deploy/Dockerfile"]


LOCAL_ONLY = (".state", ".venv", ".e2e", ".git", "eval-run", "bench/.work", ".mypy_cache")
"""What a `docker build` context must leave out: the database and API key (.state), the
environments, the end-to-end and evaluation runs, caches."""


def test_the_image_build_context_leaves_local_state_out() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert [name for name in LOCAL_ONLY if not any(fnmatch(name, p) for p in patterns)] == []


_ANCHOR_LINK = re.compile(r"\]\(([^)\s#]*)#([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for the headings of `page` (lower case, punctuation dropped,
    spaces as hyphens, `-1`, `-2` … for repeats); headings inside code fences do not count."""
    found: set[str] = set()
    repeats: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        count = repeats.get(slug, 0)
        repeats[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _broken_anchors(path: Path, text: str) -> Iterator[str]:
    for match in _ANCHOR_LINK.finditer(text):
        target, anchor = match.group(1), match.group(2)
        page = path.parent / target if target else path
        if "://" in target or page.suffix != ".md" or not page.exists():
            continue  # a missing page is the other test's finding
        if anchor not in _anchors(page):
            yield f"{target}#{anchor}"


def test_every_link_to_a_heading_finds_it() -> None:
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md"]
    broken = [
        f"{path.relative_to(ROOT)}: {link}"
        for path in [*pages, *sorted((ROOT / "docs").rglob("*.md"))]
        for link in _broken_anchors(path, path.read_text(encoding="utf-8"))
    ]
    assert broken == []


def test_the_anchor_checker_finds_a_renamed_heading(tmp_path: Path) -> None:
    (tmp_path / "deploy.md").write_text("# Deploy\n## Upgrading and rolling back\n")
    text = "[ok](deploy.md#upgrading-and-rolling-back) [gone](deploy.md#upgrading) [self](#x)"
    page = tmp_path / "index.md"
    page.write_text("# Index\n")
    assert list(_broken_anchors(page, text)) == ["deploy.md#upgrading", "#x"]
