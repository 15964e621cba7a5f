"""Case 43: folders whose ids differ only by separators never share Project Memory.

A scope is stored as (owner kind, owner id, bank) in separate columns, never as one joined
string, so "p_a-b" and "p-a_b" are two owners; this replays the case through the HTTP API.
"""

from __future__ import annotations

from typing import Any

from testkit.live_service import LiveService

FOLDERS = ["p_a-b", "p-a_b", "p/a/b", "p a b", "p_a_b"]


def _context(service: LiveService, folder: str) -> dict[str, Any]:
    chat = {"user_id": "u1", "chat_id": f"c-{folder}", "kind": "saved", "folder_id": folder}
    answer: dict[str, Any] = service.client.post(
        "/v1/context", json={"chat": chat, "message": "Which database does the project use?"}
    ).json()
    return answer


def test_folders_that_differ_only_by_separators_keep_their_own_project_memory(
    service: LiveService,
) -> None:
    for i, folder in enumerate(FOLDERS):
        added = service.client.post(
            "/v1/users/u1/memories",
            json={
                "content": f"The project uses database number {i + 1}",
                "bank": "project",
                "folder_id": folder,
            },
        )
        assert added.status_code == 201, added.text
    for i, folder in enumerate(FOLDERS):
        listed = service.client.get("/v1/users/u1/memories", params={"folder_id": folder})
        assert listed.status_code == 200, listed.text
        project = [m["content"] for m in listed.json()["items"] if m["bank"] == "project"]
        assert project == [f"The project uses database number {i + 1}"]
        block = _context(service, folder)["block"]
        assert f"database number {i + 1}" in block
        others = [j + 1 for j in range(len(FOLDERS)) if j != i]
        assert not any(f"database number {n}" in block for n in others), (folder, block)
