"""The Open WebUI stack the e2e suite and the head-to-head benchmark both start: accounts,
the environment of Open WebUI (offline, headless; ../shared/openwebui/E2E.md §3) and of our
service, and `Stack`, what a test drives once both run (tests/e2e/conftest.py builds it).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from testkit.llm_stub import MODEL_ID, LLMStub
from testkit.openwebui import REPO, Account, OpenWebUIClient, RequestLog

ADMIN_EMAIL, ADMIN_PASSWORD = "admin@example.com", "adminpass123"
USER_PASSWORD = "userpass123"
EXTRACTION_MODEL = "extraction-model"
SERVICE_START_TIMEOUT_S = 180
OPEN_WEBUI_START_TIMEOUT_S = 240
INSTALLER_TIMEOUT_S = 120
#: The stack shares small CI machines with other jobs; these deadlines of the service and the
#: filter only catch a hung call here (latency is measured in bench/, not in these tests).
PATIENT_DEADLINE_S = 10.0


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


def open_webui_env(data_dir: Path, stub_url: str) -> dict[str, str]:
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


def service_env(state_dir: Path, port: int, key: str, llm_url: str) -> dict[str, str]:
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


def sign_in(base_url: str, email: str, password: str) -> Account:
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
