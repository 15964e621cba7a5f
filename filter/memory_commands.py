"""
title: Memory Commands
author: Memory Banks contributors
version: 0.1.0
required_open_webui_version: 0.12.0
description: Shows the exact answers to /memory commands; companion of the Memory Banks filter.
license: MIT
"""

from typing import Any

from pydantic import BaseModel

REFUSAL = "This model only answers /memory commands typed in a chat."


class Pipe:
    class Valves(BaseModel):
        pass

    def __init__(self) -> None:
        self.valves = self.Valves()

    async def pipe(
        self,
        body: dict[str, Any],
        __user__: dict[str, Any] | None = None,
        __metadata__: dict[str, Any] | None = None,
        __event_emitter__: Any = None,
    ) -> str:
        """The reply the filter stored in `__metadata__["memory_command"]["text"]`, unchanged.

        The filter's inlet runs the command against the memory service and reroutes the turn
        to this model; a request that did not come through the filter gets a fixed refusal.
        """
        command = __metadata__.get("memory_command") if isinstance(__metadata__, dict) else None
        text = command.get("text") if isinstance(command, dict) else None
        return text if isinstance(text, str) else REFUSAL
