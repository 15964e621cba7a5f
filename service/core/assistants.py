"""Who owns an Assistant Memory: one user and one assistant together (DESIGN §3).

An admin marks a workspace model (an "assistant") as having its own memory; what a user
tells it belongs to that user *for that assistant*. The owner id of such a memory names
both, as the compact JSON array `["<user id>","<assistant id>"]`: unambiguous whatever
characters either id holds (a user "a/b" and a model "c" never meet a user "a" and a model
"b/c"), readable in audit rows, and every owner id of one user starts with the same text
(`owner_prefix`), so deleting a user finds all their assistants' memories.
"""

from __future__ import annotations

import json

MAX_OWNER_CHARS = 255
"""Length of the `owner_id` column (service/storage/tables.py)."""


def owner_id(user_id: str, assistant_id: str) -> str:
    """The owner id of `user_id`'s memory for `assistant_id`: `["ana","coder"]`.

    Raises:
        ValueError: an empty id, or both together longer than MAX_OWNER_CHARS.
    """
    if not user_id or not assistant_id:
        raise ValueError("an assistant memory needs both a user id and an assistant id")
    owner = json.dumps([user_id, assistant_id], ensure_ascii=False, separators=(",", ":"))
    if len(owner) > MAX_OWNER_CHARS:
        raise ValueError(
            f"the user id and assistant id together are too long for an assistant memory "
            f"(at most {MAX_OWNER_CHARS - 7} characters)"
        )
    return owner


def owner_prefix(user_id: str) -> str:
    """The text every assistant owner id of `user_id` starts with: `["ana",`."""
    return json.dumps([user_id], ensure_ascii=False, separators=(",", ":"))[:-1] + ","


def parse_owner(owner: str) -> tuple[str, str] | None:
    """(user id, assistant id) of an assistant owner id; None when it is not one."""
    try:
        value = json.loads(owner)
    except ValueError:
        return None
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(part, str) and part for part in value)
    ):
        return value[0], value[1]
    return None


def label(assistant_id: str, name: str | None) -> str:
    """How lists name the bank: "Assistant Memory of Coding Helper" (or of its id)."""
    shown = (name or "").strip() or assistant_id
    return f"Assistant Memory of {shown}"
