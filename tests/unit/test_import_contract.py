"""The layer order of the service (shared/STYLE.md §1), checked on every module's imports.

    api/  jobs/  cli/  bootstrap  →  flows/  →  core/      (core imports only core and errors)
                                            →  storage/  llm/  embeddings/  (may import core)
    config.py is read by entry points and passed down as values; observability.py holds the
    metrics and log format every layer may record into, and imports only core.

Every `import` and `from … import` in service/ counts, at module level or inside a function,
type-only ones too: a type import still ties one layer to another's vocabulary.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVICE = REPO / "service"

BASE = {"errors", "__init__", "resources"}
"""What every layer may import: the exception hierarchy, the package itself (version) and
the lookup of its bundled folders."""

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "core": {"core"},
    "config": set(),
    "observability": {"core"},
    "storage": {"storage", "core"},
    "embeddings": {"embeddings", "core"},
    "llm": {"llm", "core"},
    "flows": {"flows", "core", "storage", "embeddings", "llm", "config", "observability"},
    "jobs": {"jobs", "flows", "core", "config", "observability"},
    # routes speak flows and core types, never storage; app.py also starts the workers and
    # takes a prebuilt encoder (tests share one)
    "api": {"api", "flows", "core", "config", "observability", "bootstrap", "jobs", "embeddings"},
    "bootstrap": {"config", "embeddings", "flows", "jobs", "llm", "storage"},
    # commands wire what they need through bootstrap (migrations) and flows (doctor's reads),
    # never storage, llm or embeddings below them, and never the routes, except `serve`,
    # which runs the app
    "cli": {
        "cli",
        "api",
        "bootstrap",
        "config",
        "core",
        "flows",
        # `worker` runs the job workers and the background loops
        "jobs",
        "observability",
    },
    "__main__": {"cli"},
    "__init__": set(),
    "resources": set(),
}
"""Layer → the other layers of service/ it may import (besides BASE)."""

MODULE_EXCEPTIONS: dict[str, set[str]] = {}
"""Module → layers it may import besides its layer's (none now: `local-llm`'s model assembly,
a dev and test tool the service never runs, moved from llm/ to cli/local_models.py)."""


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _service_imports(path: Path, root: Path = SERVICE) -> set[str]:
    """Fully qualified service modules (or names of them) that `path` imports."""
    found: set[str] = set()
    package = ".".join(path.relative_to(root.parent).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "service"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.split(".")[0] != "service":
                continue
            if module == "service":  # `from service import bootstrap, observability`
                found |= {f"service.{a.name}" for a in node.names}
            else:
                found.add(module)
    return found


def _breaches(root: Path = SERVICE) -> list[str]:
    breaches = []
    for path in sorted(root.rglob("*.py")):
        source = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        layer = _layer(source)
        allowed = ALLOWED[layer] | BASE | {layer} | MODULE_EXCEPTIONS.get(source, set())
        for imported in sorted(_service_imports(path, root)):
            target = _layer(imported)
            if target == "__version__":
                target = "__init__"
            if target not in allowed:
                breaches.append(f"{source} imports {imported} ({layer} → {target})")
    return breaches


def test_every_service_module_imports_only_the_layers_below_it() -> None:
    assert _breaches() == []


DATABASE_LIBRARIES = ("sqlalchemy", "psycopg", "psycopg_pool", "pgvector", "alembic")
SESSION_TYPE = "sqlalchemy.ext.asyncio"
"""Flows take the unit of work's session as a parameter; naming its type is all they may do."""


def _third_party_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def test_only_storage_talks_to_the_database() -> None:
    outside = []
    for path in sorted(SERVICE.rglob("*.py")):
        layer = path.relative_to(SERVICE).parts[0]
        if layer in ("storage",):
            continue
        for name in sorted(_third_party_imports(path)):
            if name.split(".")[0] in DATABASE_LIBRARIES and not (
                layer == "flows" and name == SESSION_TYPE
            ):
                outside.append(f"{path.relative_to(SERVICE.parent)} imports {name}")
    assert outside == []


QUEUE_LIBRARY = "procrastinate"
QUEUE_LAYERS = ("jobs",)
"""Only jobs/ knows the job queue's library; flows defer through `Runtime.jobs`
(flows/runtime.py `JobQueue`, implemented in jobs/queue.py)."""


def _queue_library_breaches(root: Path = SERVICE) -> list[str]:
    outside = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in QUEUE_LAYERS:
            continue
        for name in sorted(_third_party_imports(path)):
            if name.split(".")[0] == QUEUE_LIBRARY:
                outside.append(f"{path.relative_to(root.parent).as_posix()} imports {name}")
    return outside


def test_only_jobs_imports_the_job_queue_library() -> None:
    assert _queue_library_breaches() == []


def test_the_queue_rule_names_a_flow_that_imports_procrastinate(tmp_path: Path) -> None:
    flows = tmp_path / "service" / "flows"
    flows.mkdir(parents=True)
    (flows / "turns.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import procrastinate\n"
        "from procrastinate.exceptions import AlreadyEnqueued\n",
        encoding="utf-8",
    )
    (tmp_path / "service" / "jobs").mkdir()
    (tmp_path / "service" / "jobs" / "queue.py").write_text(
        "import procrastinate\n", encoding="utf-8"
    )
    assert _queue_library_breaches(tmp_path / "service") == [
        "service/flows/turns.py imports procrastinate",
        "service/flows/turns.py imports procrastinate.exceptions",
    ]


def test_every_layer_of_the_service_is_in_the_contract() -> None:
    layers = {
        _layer(".".join(p.relative_to(SERVICE.parent).with_suffix("").parts))
        for p in SERVICE.rglob("*.py")
    }
    assert sorted(layers - set(ALLOWED) - {"__init__"}) == []


def test_the_allowed_imports_have_no_cycle_between_layers() -> None:
    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in ALLOWED.get(start, set()) - {start}:
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert [layer for layer in ALLOWED if reaches(layer, layer, set())] == []


def test_the_contract_reports_a_breach_with_its_module_and_layers(tmp_path: Path) -> None:
    fake = tmp_path / "service" / "core" / "leaky.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        "from service.storage import memories\n"
        "def f():\n"
        "    import service.flows.context\n"
        "from . import records\n",
        encoding="utf-8",
    )
    assert _breaches(tmp_path / "service") == [
        "service.core.leaky imports service.flows.context (core → flows)",
        "service.core.leaky imports service.storage (core → storage)",
    ]


PACKAGES: dict[str, set[str]] = {
    "filter": set(),
    "service": set(),
    "migrations": {"service"},
    "testkit": {"service"},
    "bench": {"service", "testkit"},
    "tests": {"service", "testkit", "bench"},
}
"""Top-level folder of the repository → the others it may import.

Tests import bench because bench is code under test (the LoCoMo loader, the eval harness,
the fuzz and load runners) and holds the filter harness; bench never imports tests, because
a benchmark (and `python -m service eval`) must run without the test suite, and a suite that
its subject imports is no longer a check of it. What both drive — the stand-in LLM, the
in-process service, the filter loader, the scripted answers, `wait_until`, and the real Open
WebUI stack of the e2e suite and `make h2h` (testkit/openwebui.py, testkit/openwebui_stack.py)
— lives in testkit/, which imports only the service.
"""

PACKAGE_EXCEPTIONS = {
    # `python -m service eval` runs bench's LoCoMo harness and testkit's stand-in LLM; a wheel
    # install has neither (they are not packaged), so the command works from a checkout only.
    "service/cli/eval.py": {"bench", "testkit"},
}


def _repository_breaches(root: Path = REPO) -> list[str]:
    breaches = []
    for top, allowed in PACKAGES.items():
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            permitted = allowed | {top} | PACKAGE_EXCEPTIONS.get(relative, set())
            for name in sorted(_third_party_imports(path)):
                first = name.split(".")[0]
                if first in PACKAGES and first not in permitted:
                    breaches.append(f"{relative} imports {name} ({top} → {first})")
    return breaches


def test_bench_never_imports_tests_and_testkit_imports_only_the_service() -> None:
    assert _repository_breaches() == []


def test_the_repository_contract_names_a_bench_module_that_imports_tests(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "runner.py").write_text(
        "from tests.support.races import x\nimport testkit.llm_stub\n", encoding="utf-8"
    )
    assert _repository_breaches(tmp_path) == [
        "bench/runner.py imports tests.support.races (bench → tests)"
    ]


def test_the_contract_names_a_command_that_imports_storage(tmp_path: Path) -> None:
    cli = tmp_path / "service" / "cli"
    cli.mkdir(parents=True)
    (cli / "doctor.py").write_text(
        "def check():\n    from service.storage import turns\n", encoding="utf-8"
    )
    assert _breaches(tmp_path / "service") == [
        "service.cli.doctor imports service.storage (cli → storage)"
    ]
