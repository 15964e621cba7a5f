"""A stand-in for Open WebUI's `__event_emitter__` that keeps what it was sent."""

from typing import Any


class EventRecorder:
    """Async callable recording every event, like the emitter Open WebUI passes to hooks."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)


def status(description: str) -> dict[str, Any]:
    """The finished status event the filter emits."""
    return {"type": "status", "data": {"description": description, "done": True}}
