"""The end-to-end stack: a real Open WebUI 0.12.4, our memory service, two stub LLMs.

Skipped unless `E2E_OPENWEBUI` is set; `make e2e` installs what it needs (tests/e2e/setup.sh)
and sets it. One stack serves the whole session (Open WebUI takes ~30 s to start):

- `model_stub`: the only model Open WebUI knows (`stub-model`); its request log is what the
  model received.
- `extraction_stub`: the memory service's LLM; answers every extraction with no facts, so
  memories exist only where a test adds them.
- the service: `python -m service serve` with its own embedded PostgreSQL in a temp dir.
- Open WebUI: offline, fresh data dir, channels on and folder sharing allowed, an admin from
  the environment, two ordinary users, a public read row for `stub-model`, and our filter,
  pipe and events function installed by our installer CLI.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.extraction_replies import by_message
from testkit.llm_stub import MODEL_ID, LLMStub
from tests.e2e.harness import (
    ARTIFACTS,
    CHROMIUM,
    OPEN_WEBUI_BIN,
    PLAYWRIGHT_PYTHON,
    REPO,
    Account,
    ManagedProcess,
    OpenWebUIClient,
    RequestLog,
    free_port,
)
from tests.support import memory_blocks

E2E_DIR = Path(__file__).resolve().parent
ADMIN_EMAIL, ADMIN_PASSWORD = "admin@example.com", "adminpass123"
USER_PASSWORD = "userpass123"
EXTRACTION_MODEL = "extraction-model"
SERVICE_START_TIMEOUT_S = 180
OPEN_WEBUI_START_TIMEOUT_S = 240
INSTALLER_TIMEOUT_S = 120
#: The stack shares small CI machines with other jobs; these deadlines of the service and the
#: filter only catch a hung call here (latency is measured in bench/, not in these tests).
PATIENT_DEADLINE_S = 10.0
#: seconds of each setup step, printed at the end of the run
TIMINGS: dict[str, float] = {}


E2E_TEST_TIMEOUT_S = 900
"""pytest-timeout per e2e test: the first one also installs and starts Open WebUI and the
service (SERVICE_START_TIMEOUT_S + OPEN_WEBUI_START_TIMEOUT_S and more)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("E2E_OPENWEBUI"):
        for item in items:
            if E2E_DIR in item.path.parents:
                item.add_marker(pytest.mark.timeout(E2E_TEST_TIMEOUT_S))
        return
    skip = pytest.mark.skip(reason="drives a real Open WebUI: run `make e2e`")
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        terminalreporter.write_line(
            "e2e timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items())
        )
    if BLOCKS["tests"]:
        terminalreporter.write_line(
            f"e2e memory blocks: {BLOCKS['blocks']} in {BLOCKS['requests']} model requests of "
            f"{BLOCKS['tests']} tests, {BLOCKS['problems']} with a fact twice or a second block"
        )


#: What `no_injected_block_holds_a_fact_twice` saw over the session.
BLOCKS = {"tests": 0, "requests": 0, "blocks": 0, "problems": 0, "deselected": 0}


def pytest_deselected(items: list[pytest.Item]) -> None:
    BLOCKS["deselected"] += sum(E2E_DIR in item.path.parents for item in items)


@pytest.fixture(autouse=True)
def no_injected_block_holds_a_fact_twice(request: pytest.FixtureRequest) -> Iterator[None]:
    """Issue 15 item 3 as a property of the whole e2e suite: every chat request the stand-in
    model got during a test holds at most one memory block and no fact twice in it."""
    if "stack" not in request.fixturenames:
        yield
        return
    stack: Stack = request.getfixturevalue("stack")
    mark = stack.model_log.mark()
    yield
    seen = list(stack.model_log.iter_chat(mark))
    blocks, problems = memory_blocks.check_requests(seen)
    BLOCKS["tests"] += 1
    BLOCKS["requests"] += len(seen)
    BLOCKS["blocks"] += blocks
    BLOCKS["problems"] += len(problems)
    assert problems == [], problems


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A whole e2e run that saw no memory block checked nothing: fail it."""
    files = {item.path for item in session.items if E2E_DIR in item.path.parents}
    ran_all = (
        os.environ.get("E2E_OPENWEBUI")
        and exitstatus == pytest.ExitCode.OK
        and BLOCKS["deselected"] == 0
        and files == set(E2E_DIR.glob("test_e2e_*.py"))
    )
    if ran_all and BLOCKS["blocks"] == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "e2e memory blocks: the whole suite ran but no model request held a memory "
                "block, so `no_injected_block_holds_a_fact_twice` checked nothing",
                red=True,
            )


@dataclass
class Stack:
    """Everything a test needs to drive the running stack."""

    base_url: str  #: Open WebUI, `http://127.0.0.1:<port>`
    admin: Account
    users: dict[str, Account]  #: "a" and "b", ordinary users
    service_url: str  #: our memory service
    service_key: str
    service: httpx.Client  #: the service's API with the bearer key set
    model_stub: LLMStub
    extraction_stub: LLMStub
    installer_output: str  #: what the installer printed on its first run
    clients: dict[str, OpenWebUIClient] = field(default_factory=dict)

    @property
    def model_log(self) -> RequestLog:
        return RequestLog(lambda: self.model_stub.requests)

    def client(self, who: str) -> OpenWebUIClient:
        """REST client of "admin", "a" or "b" (tokens are reused: sign-in is rate limited)."""
        if who not in self.clients:
            account = self.admin if who == "admin" else self.users[who]
            self.clients[who] = OpenWebUIClient(self.base_url, account)
        return self.clients[who]

    def run_installer(
        self, *args: str, token: str | None = None, command: str = "install"
    ) -> subprocess.CompletedProcess[str]:
        """`python -m service openwebui <command>` against this Open WebUI, as the admin."""
        argv = [
            sys.executable,
            "-m",
            "service",
            "openwebui",
            command,
            "--url",
            self.base_url,
            "--token",
            token or self.admin.token,
        ]
        if command == "install":
            argv += ["--service-url", self.service_url, "--api-key", self.service_key]
        return subprocess.run(
            [*argv, *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=INSTALLER_TIMEOUT_S,
            check=False,
        )

    def be_patient_with_the_service(self) -> None:
        """Raise the filter's timeouts to PATIENT_DEADLINE_S (run after each fresh install)."""
        admin = self.client("admin")
        valves = admin.call("GET", "/api/v1/functions/id/memory_filter/valves") or {}
        admin.call(
            "POST",
            "/api/v1/functions/id/memory_filter/valves/update",
            json={
                **valves,
                "inlet_timeout_s": PATIENT_DEADLINE_S,
                "outlet_timeout_s": PATIENT_DEADLINE_S,
                "command_timeout_s": PATIENT_DEADLINE_S,
            },
        )

    def forget_memories(self, user_id: str) -> None:
        """Delete every memory of a user through the service's API."""
        while True:
            page = self.service.get(f"/v1/users/{user_id}/memories", params={"limit": 200}).json()
            if not page["items"]:
                return
            for memory in page["items"]:
                answer = self.service.delete(f"/v1/users/{user_id}/memories/{memory['id']}")
                assert answer.status_code == 204, answer.text

    def add_memory(
        self, user_id: str, content: str, bank: str = "personal", folder_id: str | None = None
    ) -> dict[str, Any]:
        """Add a memory through the service's API (Project Memory: `folder_id` owns it)."""
        answer = self.service.post(
            f"/v1/users/{user_id}/memories",
            json={"content": content, "bank": bank, "folder_id": folder_id},
        )
        assert answer.status_code == 201, answer.text
        memory: dict[str, Any] = answer.json()
        return memory


def _own_folder(cleanup: ExitStack, prefix: str) -> Path:
    """A fresh folder in the system temp dir, removed when `cleanup` closes."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    cleanup.callback(shutil.rmtree, folder, True)
    return folder


def _require_installed() -> None:
    missing = [str(p) for p in (OPEN_WEBUI_BIN, PLAYWRIGHT_PYTHON, CHROMIUM) if not p.exists()]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run `bash tests/e2e/setup.sh` (make e2e)")


def _open_webui_env(data_dir: Path, stub_url: str) -> dict[str, str]:
    """Offline, headless settings (E2E.md §3); they apply because the data dir is fresh."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(
        {
            "DATA_DIR": str(data_dir),
            "WEBUI_SECRET_KEY": secrets.token_hex(16),
            "WEBUI_ADMIN_EMAIL": ADMIN_EMAIL,
            "WEBUI_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "WEBUI_ADMIN_NAME": "Admin",
            "OFFLINE_MODE": "true",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ENABLE_OLLAMA_API": "false",
            "ENABLE_OPENAI_API": "true",
            "OPENAI_API_BASE_URL": stub_url,
            "OPENAI_API_KEY": "x",
            "RAG_EMBEDDING_ENGINE": "openai",
            "RAG_OPENAI_API_BASE_URL": stub_url,
            "RAG_OPENAI_API_KEY": "x",
            "DEFAULT_MODELS": MODEL_ID,
            # Off by default; the privacy tests need channels and users who share folders.
            "ENABLE_CHANNELS": "true",
            "USER_PERMISSIONS_FOLDERS_ALLOW_SHARING": "true",
            "ENABLE_VERSION_UPDATE_CHECK": "false",
            "ENABLE_PIP_INSTALL_FRONTMATTER_REQUIREMENTS": "false",
            "ENABLE_TITLE_GENERATION": "false",
            "ENABLE_TAGS_GENERATION": "false",
            "ENABLE_FOLLOW_UP_GENERATION": "false",
            "ENABLE_AUTOCOMPLETE_GENERATION": "false",
            "ANONYMIZED_TELEMETRY": "false",
            "SCARF_NO_ANALYTICS": "true",
            "DO_NOT_TRACK": "true",
        }
    )
    return env


def _service_env(state_dir: Path, port: int, key: str, llm_url: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMORY_", "LLM_", "EMBEDDING_")) and k != "DATABASE_URL"
    }
    env.update(
        {
            "MEMORY_STATE_DIR": str(state_dir),
            "MEMORY_HOST": "127.0.0.1",
            "MEMORY_PORT": str(port),
            "MEMORY_API_KEY": key,
            "MEMORY_CONTEXT_DEADLINE_S": str(PATIENT_DEADLINE_S),
            "LLM_BASE_URL": llm_url,
            "LLM_MODEL": EXTRACTION_MODEL,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    return env


def _sign_in(base_url: str, email: str, password: str) -> Account:
    answer = httpx.post(
        f"{base_url}/api/v1/auths/signin",
        trust_env=False,
        timeout=30,
        json={"email": email, "password": password},
    )
    assert answer.status_code == 200, answer.text
    data = answer.json()
    return Account(data["id"], email, password, data["name"], data["role"], data["token"])


def add_user(admin: OpenWebUIClient, name: str, email: str) -> Account:
    data = admin.call(
        "POST",
        "/api/v1/auths/add",
        json={"name": name, "email": email, "password": USER_PASSWORD, "role": "user"},
    )
    assert data["role"] == "user", data
    return Account(data["id"], email, USER_PASSWORD, name, "user", data["token"])


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    _require_installed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with ExitStack() as cleanup:
        model_stub = LLMStub(log_path=ARTIFACTS / "model-requests.jsonl").start()
        cleanup.callback(model_stub.stop)
        (ARTIFACTS / "model-requests.jsonl").write_text("", encoding="utf-8")
        extraction_stub = LLMStub(by_message({})).start()
        cleanup.callback(extraction_stub.stop)

        service_port, owui_port = free_port(), free_port()
        service_key = secrets.token_urlsafe(24)
        service_url = f"http://127.0.0.1:{service_port}"
        base_url = f"http://127.0.0.1:{owui_port}"
        work_dir = tmp_path_factory.mktemp("owui-work")

        started = time.monotonic()
        service = ManagedProcess.start(
            "memory service",
            [sys.executable, "-m", "service", "serve"],
            # Not under pytest's temp root: it is private to its user (0700), and the
            # embedded PostgreSQL runs as its own user when the tests run as root.
            env=_service_env(
                _own_folder(cleanup, "memory-e2e-state-"),
                service_port,
                service_key,
                extraction_stub.base_url,
            ),
            cwd=REPO,
            log_path=ARTIFACTS / "memory-service.log",
        )
        cleanup.callback(service.stop)
        owui = ManagedProcess.start(
            "open-webui",
            [str(OPEN_WEBUI_BIN), "serve", "--host", "127.0.0.1", "--port", str(owui_port)],
            env=_open_webui_env(tmp_path_factory.mktemp("owui-data"), model_stub.base_url),
            cwd=work_dir,
            log_path=ARTIFACTS / "open-webui.log",
        )
        cleanup.callback(owui.stop)
        # Both start at once; each wait is bounded and fails with the process's last output.
        service.wait_http(f"{service_url}/readyz", timeout_s=SERVICE_START_TIMEOUT_S)
        TIMINGS["service ready"] = time.monotonic() - started
        owui.wait_http(f"{base_url}/health", timeout_s=OPEN_WEBUI_START_TIMEOUT_S)
        TIMINGS["open-webui ready"] = time.monotonic() - started

        admin = _sign_in(base_url, ADMIN_EMAIL, ADMIN_PASSWORD)
        admin_client = OpenWebUIClient(base_url, admin)
        users = {
            "a": add_user(admin_client, "Alice", "alice@example.com"),
            "b": add_user(admin_client, "Bob", "bob@example.com"),
        }
        # Ordinary users may only use models that have a row granting them read access.
        admin_client.call("GET", "/api/models", params={"refresh": "true"})
        admin_client.call(
            "POST",
            "/api/v1/models/create",
            json={
                "id": MODEL_ID,
                "base_model_id": None,
                "name": MODEL_ID,
                "meta": {},
                "params": {},
                "is_active": True,
                "access_grants": [
                    {"principal_type": "user", "principal_id": "*", "permission": "read"}
                ],
            },
        )
        # The admin's first browser visit would open a blocking "What's New" dialog.
        admin_client.call(
            "POST", "/api/v1/users/user/settings/update", json={"ui": {"showChangelog": False}}
        )

        service_client = httpx.Client(
            base_url=service_url,
            timeout=30,
            trust_env=False,
            headers={"Authorization": f"Bearer {service_key}"},
        )
        cleanup.callback(service_client.close)
        result = Stack(
            base_url,
            admin,
            users,
            service_url,
            service_key,
            service_client,
            model_stub,
            extraction_stub,
            installer_output="",
        )
        result.clients["admin"] = admin_client

        def close_clients() -> None:
            for client in result.clients.values():
                client.close()

        cleanup.callback(close_clients)

        installing = time.monotonic()
        installed = result.run_installer()
        TIMINGS["installer"] = time.monotonic() - installing
        assert installed.returncode == 0, installed.stderr + installed.stdout
        result.installer_output = installed.stdout
        result.be_patient_with_the_service()
        TIMINGS["stack ready"] = time.monotonic() - started
        (ARTIFACTS / "timings.json").write_text(json.dumps(TIMINGS, indent=2), encoding="utf-8")
        yield result
