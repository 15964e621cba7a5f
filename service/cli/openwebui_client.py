"""A REST client for Open WebUI's API (0.12.x): one signed-in session, its calls and the
reads the installer and the import need (functions, valves, model rows, admin config, chat).

Every call answers decoded JSON or raises OpenWebUIError with one sentence for the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["REQUEST_TIMEOUT_S", "OpenWebUI", "OpenWebUIError", "add_to_model_meta", "model_form"]

REQUEST_TIMEOUT_S = 30.0


class OpenWebUIError(Exception):
    """Open WebUI refused or failed a request; the message is one sentence for the user."""


@dataclass
class OpenWebUI:
    """An admin session with one Open WebUI server.

    Attributes:
        base_url: e.g. `http://127.0.0.1:8080` (no trailing slash).
        client: httpx client that sends the bearer token (JWT or `sk-…` API key).
        version: Open WebUI's version string, as `GET /api/version` reports it.
    """

    base_url: str
    client: httpx.Client
    version: str = ""

    @classmethod
    def connect(
        cls, url: str, *, token: str | None, email: str | None, password: str | None
    ) -> OpenWebUI:
        """Check that `url` is Open WebUI, sign in if needed and check that we are an admin.

        Raises:
            OpenWebUIError: unreachable, not Open WebUI, credentials refused, or not an admin.
        """
        owui = cls.sign_in(url, token=token, email=email, password=password)
        try:
            owui._check_admin()
        except BaseException:
            owui.close()
            raise
        return owui

    @classmethod
    def sign_in(
        cls,
        url: str,
        *,
        token: str | None,
        email: str | None,
        password: str | None,
        whose: str = "an admin",
    ) -> OpenWebUI:
        """Check that `url` is Open WebUI and sign in with `token`, else `email`/`password`.

        Args:
            whose: the account the missing credentials belong to, for the error's sentence.

        Raises:
            OpenWebUIError: unreachable, not Open WebUI, no credentials, or sign-in refused.
        """
        base_url = url.rstrip("/")
        client = httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S, trust_env=False)
        owui = cls(base_url, client)
        try:
            owui.version = owui._version()
            if not token:
                if not (email and password):
                    raise OpenWebUIError(f"give --token, or --email and --password of {whose}")
                token = owui._sign_in(email, password)
            client.headers["Authorization"] = f"Bearer {token}"
        except BaseException:
            client.close()
            raise
        return owui

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self.client.close()

    def call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        """Send one request and return the decoded JSON answer.

        Raises:
            OpenWebUIError: transport failure or any status outside 2xx.
        """
        try:
            response = self.client.request(method, path, json=json, params=params)
        except httpx.TimeoutException as exc:
            raise OpenWebUIError(
                f"Open WebUI at {self.base_url} did not answer {method} {path} "
                f"within {REQUEST_TIMEOUT_S:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise OpenWebUIError(f"cannot reach Open WebUI at {self.base_url}: {exc}") from exc
        if not response.is_success:
            raise OpenWebUIError(
                f"Open WebUI answered {response.status_code} to {method} {path}: "
                f"{_detail(response)}"
            )
        return response.json() if response.content else None

    def _version(self) -> str:
        try:
            response = self.client.get("/api/version")
        except httpx.HTTPError as exc:
            raise OpenWebUIError(f"cannot reach Open WebUI at {self.base_url}: {exc}") from exc
        try:
            version = response.json().get("version") if response.is_success else None
        except ValueError:
            version = None
        if not isinstance(version, str):
            raise OpenWebUIError(
                f"{self.base_url} does not look like Open WebUI "
                f"(GET /api/version answered {response.status_code})"
            )
        return version

    def _sign_in(self, email: str, password: str) -> str:
        response = self.client.post(
            "/api/v1/auths/signin", json={"email": email, "password": password}
        )
        if response.status_code == 400:
            raise OpenWebUIError(f"Open WebUI refused the sign-in of {email}: {_detail(response)}")
        if not response.is_success:
            raise OpenWebUIError(
                f"Open WebUI answered {response.status_code} to the sign-in of "
                f"{email}: {_detail(response)}"
            )
        return str(response.json()["token"])

    def _check_admin(self) -> None:
        # Any signed-in user may list functions; only an admin may list them with their owners.
        first = self.client.get("/api/v1/functions/")
        if first.status_code in (401, 403):
            raise OpenWebUIError(f"Open WebUI refused the token: {_detail(first)}")
        second = self.client.get("/api/v1/functions/list")
        if second.status_code in (401, 403):
            raise OpenWebUIError(
                "this account is not an admin of Open WebUI; functions can "
                "only be installed by an admin"
            )
        if not second.is_success:
            raise OpenWebUIError(
                f"Open WebUI answered {second.status_code} to GET "
                f"/api/v1/functions/list: {_detail(second)}"
            )

    # -- functions -----------------------------------------------------------------------------

    def function(self, function_id: str) -> dict[str, Any] | None:
        """The stored function (with `content`, `is_active`, `is_global`), None if absent."""
        # GET /id/{id} answers 401 for a missing id, like a bad token; the list tells them apart.
        listed = {f["id"] for f in self.call("GET", "/api/v1/functions/list") or []}
        if function_id not in listed:
            return None
        found: dict[str, Any] = self.call("GET", f"/api/v1/functions/id/{function_id}")
        return found

    def valves(self, function_id: str) -> dict[str, Any]:
        """The admin valves stored for a function ({} when none were ever saved)."""
        return self.call("GET", f"/api/v1/functions/id/{function_id}/valves") or {}

    def tool(self, tool_id: str) -> dict[str, Any] | None:
        """The stored Tool (with `content` and `access_grants`), None if absent."""
        listed = {t["id"] for t in self.call("GET", "/api/v1/tools/list") or []}
        if tool_id not in listed:
            return None
        found: dict[str, Any] = self.call("GET", f"/api/v1/tools/id/{tool_id}")
        return found

    def tool_valves(self, tool_id: str) -> dict[str, Any]:
        """The admin valves stored for a Tool ({} when none were ever saved)."""
        return self.call("GET", f"/api/v1/tools/id/{tool_id}/valves") or {}

    def model_rows(self) -> dict[str, dict[str, Any]]:
        """Every model row (workspace models and overrides of provider models), by id."""
        return {m["id"]: m for m in self.call("GET", "/api/v1/models/all") or []}

    def provider_models(self) -> dict[str, dict[str, Any]]:
        """The models Open WebUI offers (rebuilding its cached list), by id."""
        answer = self.call("GET", "/api/models", params={"refresh": "true"}) or {}
        return {m["id"]: m for m in answer.get("data", [])}

    def admin_config(self) -> dict[str, Any]:
        """Admin Panel → Settings → General, as `GET /api/v1/auths/admin/config` answers."""
        found: dict[str, Any] = self.call("GET", "/api/v1/auths/admin/config") or {}
        return found

    def ask(self, model_id: str, text: str) -> str:
        """One chat turn without a chat (no history is saved); the reply's text."""
        answer = self.call(
            "POST",
            "/api/chat/completions",
            json={
                "model": model_id,
                "stream": False,
                "messages": [{"role": "user", "content": text}],
            },
        )
        try:
            return str(answer["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError) as exc:
            raise OpenWebUIError(
                f"Open WebUI's answer to a chat turn has no reply text: {str(answer)[:200]}"
            ) from exc


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    if isinstance(detail, str) and detail:
        return detail
    return response.reason_phrase or "no detail"


def set_service_valves(
    owui: OpenWebUI,
    *,
    stored: dict[str, Any],
    update_path: str,
    service_url: str,
    api_key: str,
) -> str:
    """Point a function's or a Tool's admin valves at the memory service.

    Open WebUI stores exactly the valves sent, so the other stored valves are sent back
    unchanged; nothing is sent when both already match.

    Args:
        stored: the valves stored now (`OpenWebUI.valves` or `tool_valves`).
        update_path: the `…/valves/update` route of that function or Tool.

    Returns:
        "valves unchanged" or "valves set (service_url, api_key)".
    """
    wanted = {**stored, "service_url": service_url, "api_key": api_key}
    if wanted == stored:
        return "valves unchanged"
    owui.call("POST", update_path, json=wanted)
    return "valves set (service_url, api_key)"


def model_form(row: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """The update form for a model row with a new `meta` (is_active is left as it is)."""
    return {
        "id": row["id"],
        "base_model_id": row.get("base_model_id"),
        "name": row["name"],
        "meta": meta,
        "params": row.get("params") or {},
    }


def add_to_model_meta(
    owui: OpenWebUI,
    model_id: str,
    row: dict[str, Any] | None,
    available: dict[str, dict[str, Any]],
    *,
    key: str,
    item: str,
) -> str:
    """Put `item` into the list `meta[key]` of a model (`filterIds`, `toolIds`), creating an
    override row for a provider model that has none.

    Returns:
        "created" (a new row), "present" (it was there already) or "added".
    """
    if row is None:
        owui.call(
            "POST",
            "/api/v1/models/create",
            json={
                "id": model_id,
                "base_model_id": None,
                "name": available[model_id].get("name") or model_id,
                "meta": {key: [item]},
                "params": {},
            },
        )
        return "created"
    meta = dict(row.get("meta") or {})
    items = list(meta.get(key) or [])
    if item in items:
        return "present"
    meta[key] = [*items, item]
    owui.call("POST", "/api/v1/models/model/update", json=model_form(row, meta))
    return "added"
