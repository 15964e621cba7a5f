"""A stand-in for the few Open WebUI tables the filter reads in-process (CONTRACT §7).

`install` puts `open_webui`, `open_webui.models.chats`, `.shared_chats`, `.folders`,
`.access_grants` and `.users` into `sys.modules`, so the filter believes it runs inside Open
WebUI. Rows are plain attribute objects, as Open WebUI's pydantic models are read by
attribute; their shapes
follow Open WebUI 0.12.4 (`ChatModel`, `SharedChatModel`, `FolderModel`, `AccessGrantModel`).
"""

import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest


class LookupBroken(Exception):
    """Raised by a table method the test marked as failing."""


@dataclass
class FakeOpenWebUI:
    #: chat id → {"user_id", "folder_id", "meta"?, "share_id"?}
    chats: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: chat id → the share mode of its share snapshot ("continue" or None)
    shares: dict[str, str | None] = field(default_factory=dict)
    #: folder id → {"user_id", "parent_id", "data"?}
    folders: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: folder id → [{"principal_type", "principal_id", "permission"}]
    grants: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: group id → ids of its members
    groups: dict[str, set[str]] = field(default_factory=dict)
    #: Open WebUI 0.12 table methods are coroutines; older ones were plain functions
    asynchronous: bool = True
    #: names of table methods that raise LookupBroken
    failing: set[str] = field(default_factory=set)
    #: every table call, as (method name, arguments)
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    #: user id → role ("user", "admin"); a user not listed has the role "user"
    roles: dict[str, str] = field(default_factory=dict)
    #: an Open WebUI without `Chats.get_accessible_chat_by_id` (before 0.12.4)
    without_accessible_chat: bool = False

    def install(self, monkeypatch: pytest.MonkeyPatch, *, with_models: bool = True) -> None:
        package = types.ModuleType("open_webui")
        package.__path__ = []
        monkeypatch.setitem(sys.modules, "open_webui", package)
        if not with_models:
            return
        models = types.ModuleType("open_webui.models")
        models.__path__ = []
        monkeypatch.setitem(sys.modules, "open_webui.models", models)
        chat_methods: dict[str, Any] = {
            "get_chat_by_id": self._chat,
            "is_chat_owner": self._is_owner,
        }
        if not self.without_accessible_chat:
            chat_methods["get_accessible_chat_by_id"] = self._accessible_chat
        tables = {
            "chats": ("Chats", chat_methods),
            "users": ("Users", {"get_user_by_id": self._user}),
            "shared_chats": ("SharedChats", {"get_by_chat_id": self._share}),
            "folders": ("Folders", {"get_folder_by_id": self._folder}),
            "access_grants": ("AccessGrants", {"get_grants_by_resource": self._grants}),
        }
        for module_name, (table_name, methods) in tables.items():
            module = types.ModuleType(f"open_webui.models.{module_name}")
            table = types.SimpleNamespace(
                **{name: self._method(name, fn) for name, fn in methods.items()}
            )
            setattr(module, table_name, table)
            monkeypatch.setitem(sys.modules, f"open_webui.models.{module_name}", module)
        for name in ("open_webui.utils", "open_webui.utils.access_control"):
            package = types.ModuleType(name)
            package.__path__ = []
            monkeypatch.setitem(sys.modules, name, package)
        access = types.ModuleType("open_webui.utils.access_control.folders")
        access.has_folder_access = self._method(  # type: ignore[attr-defined]
            "has_folder_access", self._has_folder_access
        )
        monkeypatch.setitem(sys.modules, "open_webui.utils.access_control.folders", access)

    def _method(self, name: str, fn: Any) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            if name in self.failing:
                raise LookupBroken(name)
            return fn(*args)

        async def call_async(*args: Any, db: Any = None, **keywords: Any) -> Any:
            return call(*args, *keywords.values())

        if name == "has_folder_access":  # a coroutine in 0.12.4 whatever the tables are
            return call_async

        return call_async if self.asynchronous else call

    def _chat(self, chat_id: str) -> Any:
        row = self.chats.get(chat_id)
        if row is None:
            return None
        return types.SimpleNamespace(id=chat_id, **{"meta": {}, **row})

    def _user(self, user_id: str) -> Any:
        return types.SimpleNamespace(id=user_id, role=self.roles.get(user_id, "user"))

    def _is_owner(self, chat_id: str, user_id: str) -> bool:
        row = self.chats.get(chat_id)
        return row is not None and row["user_id"] == user_id

    def _accessible_chat(self, chat_id: str, user: Any, permission: str = "read") -> Any:
        """As `Chats.get_accessible_chat_by_id` of 0.12.4: the owner; an admin reading
        (ENABLE_ADMIN_CHAT_ACCESS, on by default); a chat shared to continue (its read grant
        is taken as given here); a chat in a folder the user may read, for writing only when
        the folder is shared to continue."""
        row = self.chats.get(chat_id)
        if row is None:
            return None
        chat = self._chat(chat_id)
        if row["user_id"] == user.id or (user.role == "admin" and permission == "read"):
            return chat
        if self.shares.get(chat_id) == "continue":
            return chat
        folder = self._folder(row["folder_id"]) if row.get("folder_id") else None
        if (
            folder is not None
            and (permission == "read" or (folder.data or {}).get("share_mode") == "continue")
            and self._has_folder_access(user.id, folder, "read", None)
        ):
            return chat
        return None

    def _share(self, chat_id: str) -> Any:
        if chat_id not in self.shares:
            return None
        # the snapshot is the chat's JSON with the mode added (SharedChatsTable.create)
        return types.SimpleNamespace(
            id=f"share-{chat_id}",
            chat_id=chat_id,
            chat={"history": {}, "share_mode": self.shares[chat_id]},
        )

    def _folder(self, folder_id: str) -> Any:
        row = self.folders.get(folder_id)
        if row is None:
            return None
        return types.SimpleNamespace(id=folder_id, **{"data": {}, **row})

    def _grants(self, resource_type: str, resource_id: str) -> list[Any]:
        assert resource_type == "folder"
        return [types.SimpleNamespace(**grant) for grant in self.grants.get(resource_id, [])]

    def _has_folder_access(self, user_id: str, folder: Any, permission: str, db: Any) -> bool:
        """As `has_folder_access` of 0.12.4: the owner, or a grant here or on an ancestor."""
        seen: set[str] = set()
        while folder is not None and folder.id not in seen:
            seen.add(folder.id)
            if folder.user_id == user_id:
                return True
            for grant in self.grants.get(folder.id, []):
                if grant["permission"] != permission:
                    continue
                principal = grant["principal_id"]
                if grant["principal_type"] == "user" and principal in (user_id, "*"):
                    return True
                if grant["principal_type"] == "group" and user_id in self.groups.get(principal, ()):
                    return True
            folder = self._folder(folder.parent_id) if folder.parent_id else None
        return False
