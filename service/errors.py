"""The service's exception hierarchy; each docstring is the default message."""

from __future__ import annotations


class MemoryServiceError(Exception):
    """The memory service failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigurationError(MemoryServiceError):
    """The service is misconfigured."""


class MemoryNotFound(MemoryServiceError):
    """No such memory for this user."""


class ReminderNotFound(MemoryNotFound):
    """No such reminder for this user."""


class ScopeDenied(MemoryServiceError):
    """This chat may not read or write that memory bank."""


class InvalidInput(MemoryServiceError):
    """The request is not valid."""


class EditConflict(InvalidInput):
    """Another edit changed this memory at the same moment; yours was not applied."""


class LLMUnavailable(MemoryServiceError):
    """The extraction LLM could not be reached or answered with an error."""


class LLMNotConfigured(MemoryServiceError):
    """No extraction LLM is configured (set LLM_BASE_URL and LLM_MODEL)."""


class ExtractionOutputInvalid(MemoryServiceError):
    """The LLM's extraction answer is not a valid operations object, even after repair."""


class DatabaseUnavailable(MemoryServiceError):
    """PostgreSQL could not be reached."""


class QueueUnavailable(DatabaseUnavailable):
    """The job queue did not take the turn; nothing was saved, hand it over again."""


class SummaryOutputInvalid(ExtractionOutputInvalid):
    """The LLM's summary of a memory cluster is not valid, even after repair."""


class ChatSummaryInvalid(ExtractionOutputInvalid):
    """The LLM's rolling summary of a chat is not valid, even after repair."""
