"""Processes and REST helpers for driving a real Open WebUI with our filter installed.

Shared by the e2e suite (tests/e2e) and the head-to-head benchmark (bench/h2h_openwebui.py),
which run the same Open WebUI 0.12.4 from `.e2e/` (tests/e2e/setup.sh installs it). Every wait
polls a condition with a deadline; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from testkit.llm_stub import MODEL_ID
from testkit.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
E2E_DIR = REPO / ".e2e"
OPEN_WEBUI_BIN = E2E_DIR / "owui" / "bin" / "open-webui"
PLAYWRIGHT_PYTHON = E2E_DIR / "pw" / "bin" / "python"
CHROMIUM = Path("/usr/bin/chromium")
#: logs and request logs of an e2e run (git-ignored)
ARTIFACTS = REPO / "tests" / "e2e" / "artifacts"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- processes --------------------------------------------------------------------------------


@dataclass
class ManagedProcess:
    """A server started in its own session, its output in `log_path`."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @classmethod
    def start(
        cls, name: str, argv: list[str], *, env: dict[str, str], cwd: Path, log_path: Path
    ) -> ManagedProcess:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return cls(name, popen, log_path)

    def wait_http(self, url: str, *, timeout_s: float) -> float:
        """Wait until GET `url` answers 200; returns the seconds it took since now."""
        started = time.monotonic()

        def ready() -> bool:
            if self.popen.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.popen.returncode}; last output:\n{self.tail()}"
                )
            try:
                return httpx.get(url, timeout=2, trust_env=False).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_until(ready, timeout_s=timeout_s, what=f"{self.name} at {url}", interval_s=0.25)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; last output:\n{self.tail()}") from exc
        return time.monotonic() - started

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, *, timeout_s: float = 30) -> None:
        """SIGTERM, then SIGKILL to the process group this process leads (its own children)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        try:  # children that outlived a clean exit (none expected)
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- Open WebUI over REST ---------------------------------------------------------------------


@dataclass
class Account:
    """A signed-in Open WebUI user; `token` is a session JWT."""

    id: str
    email: str
    password: str
    name: str
    role: str
    token: str


@dataclass
class Thread:
    """A saved chat as the client keeps it: id, history sent to the model, the last reply id."""

    chat_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    parent_id: str | None = None


@dataclass
class Turn:
    """One chat turn: what the HTTP call answered and what the chat stored."""

    response: Any  #: decoded JSON, or the SSE text for a no-chat streaming call
    reply: str  #: the assistant's text (from the response, else from the stored chat)
    stored: dict[str, Any] | None  #: the stored assistant message (saved chats only)


class OpenWebUIClient:
    """REST calls of one user against Open WebUI.

    Args:
        base_url: `http://127.0.0.1:<port>`.
        account: whose token is sent.
    """

    def __init__(self, base_url: str, account: Account) -> None:
        self.base_url = base_url
        self.account = account
        self.http = httpx.Client(
            base_url=base_url,
            timeout=60,
            trust_env=False,
            headers={"Authorization": f"Bearer {account.token}"},
        )

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; AssertionError with the answer's body on a non-2xx status."""
        response = self.http.request(method, path, **kwargs)
        assert response.is_success, (
            f"{method} {path} as {self.account.email} answered "
            f"{response.status_code}: {response.text[:500]}"
        )
        return response.json() if response.content else None

    # -- chats -----------------------------------------------------------------------------

    def new_thread(self, title: str = "e2e", *, folder_id: str | None = None) -> Thread:
        """A new saved chat of this user, inside `folder_id` when given."""
        chat = self.call(
            "POST",
            "/api/v1/chats/new",
            json={
                "chat": {
                    "title": title,
                    "models": [MODEL_ID],
                    "history": {"messages": {}, "currentId": None},
                    "messages": [],
                },
                "folder_id": folder_id,
            },
        )
        assert chat["folder_id"] == folder_id, chat
        return Thread(chat_id=chat["id"])

    def read_chat(self, chat_id: str) -> dict[str, Any]:
        chat: dict[str, Any] = self.call("GET", f"/api/v1/chats/{chat_id}")
        return chat

    def stored_message(
        self, chat_id: str, message_id: str, *, timeout_s: float = 30
    ) -> dict[str, Any]:
        """The stored message once it is `done` (polled)."""

        def done() -> dict[str, Any] | None:
            messages = self.read_chat(chat_id)["chat"].get("history", {}).get("messages", {})
            message = messages.get(message_id)
            return message if message and message.get("done") else None

        return wait_until(done, timeout_s=timeout_s, what=f"message {message_id} to be done")

    def send(
        self,
        thread: Thread,
        text: str,
        *,
        stream: bool = False,
        session_id: str | None = None,
        model: str = MODEL_ID,
        extra: dict[str, Any] | None = None,
        timestamp: int | None = None,
    ) -> Turn:
        """One turn in a saved chat; the reply is read back from the stored chat when needed.

        Without `session_id` a non-streaming call answers the completion and a streaming one
        answers `null`; with it, the call answers at once and the chat is polled.
        `timestamp` (epoch seconds) stamps the user message as a browser does.
        """
        user_id, assistant_id = str(uuid.uuid4()), str(uuid.uuid4())
        user_message: dict[str, Any] = {"role": "user", "content": text}
        body: dict[str, Any] = {
            "model": model,
            "stream": stream,
            "chat_id": thread.chat_id,
            "id": assistant_id,
            "messages": [*thread.messages, user_message],
            "user_message": {
                "id": user_id,
                **user_message,
                "parentId": thread.parent_id,
                "models": [model],
                **({"timestamp": timestamp} if timestamp is not None else {}),
            },
            **(extra or {}),
        }
        if session_id is not None:
            body["session_id"] = session_id
        response = self.call("POST", "/api/chat/completions", json=body)
        stored = self.stored_message(thread.chat_id, assistant_id)
        reply = stored.get("content", "")
        thread.messages += [user_message, {"role": "assistant", "content": reply}]
        thread.parent_id = assistant_id
        return Turn(response=response, reply=reply, stored=stored)

    def send_without_chat(
        self,
        text: str,
        *,
        stream: bool = False,
        model: str = MODEL_ID,
        extra: dict[str, Any] | None = None,
    ) -> Turn:
        """One turn with no chat (plain API call); the reply comes from the response only."""
        body = {
            "model": model,
            "stream": stream,
            "messages": [{"role": "user", "content": text}],
            **(extra or {}),
        }
        if not stream:
            answer = self.call("POST", "/api/chat/completions", json=body)
            return Turn(answer, answer["choices"][0]["message"]["content"], None)
        with self.http.stream("POST", "/api/chat/completions", json=body) as response:
            assert response.is_success, response.read().decode()[:500]
            raw = response.read().decode()
        return Turn(raw, sse_text(raw), None)


def sse_text(raw: str) -> str:
    """The concatenated `delta.content` of an OpenAI server-sent-events body."""
    parts: list[str] = []
    for line in raw.splitlines():
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if not data or data == "[DONE]":
            continue
        for choice in json.loads(data).get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str):
                parts.append(content)
    return "".join(parts)


# --- what the model received ------------------------------------------------------------------


def status_lines(stored: dict[str, Any] | None) -> list[str]:
    """The status lines Open WebUI stored with an assistant message, in order."""
    history = (stored or {}).get("statusHistory") or []
    return [str(entry.get("description", "")) for entry in history]


def system_text(request: dict[str, Any]) -> str:
    """All system-message text of one chat-completion request, joined by newlines."""
    texts: list[str] = []
    for message in request.get("messages") or []:
        if message.get("role") != "system":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(texts)


def all_text(request: dict[str, Any]) -> str:
    """Every message's text of one request (to prove something is absent anywhere)."""
    return json.dumps(request.get("messages") or [], ensure_ascii=False)


def last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


class RequestLog:
    """What a stub LLM received after a mark: `mark = log.mark(); …; log.since(mark)`."""

    def __init__(self, requests: Callable[[], list[dict[str, Any]]]) -> None:
        self._requests = requests

    def mark(self) -> int:
        return len(self._requests())

    def since(self, mark: int) -> list[dict[str, Any]]:
        return self._requests()[mark:]

    def iter_chat(self, mark: int) -> Iterator[dict[str, Any]]:
        """Chat-completion requests (with messages) received after `mark`."""
        return (r for r in self.since(mark) if "messages" in r)
