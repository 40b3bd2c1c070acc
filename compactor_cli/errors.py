"""One base exception; each subclass says what kind of fix the user needs."""

from __future__ import annotations


class XCompactError(Exception):
    """Base of every error xcompact raises on purpose. Its message is one line meant for users."""


class InvalidInputError(XCompactError):
    """A conversation or file is not something xcompact accepts (broken JSON, wrong shape...)."""

    def __init__(self, message: str, pointer: str = "") -> None:
        super().__init__(message)
        self.pointer = pointer

    def __str__(self) -> str:
        msg = super().__str__()
        return f"at {self.pointer}: {msg}" if self.pointer else msg


class UsageError(XCompactError):
    """Options that do not fit together, or a missing argument."""


class OutputError(XCompactError):
    """An output cannot be written (would overwrite an input, directory missing...)."""


class BackendError(XCompactError):
    """A summariser backend failed (server error, bad answer, timeout)."""


class UnusableAnswerError(BackendError):
    """The model answered, but its answer is no usable summary even after a repair turn (cut off,
    malformed, sections missing, over the budget): ``summarize`` writes the offline sections of
    the same head instead and says so, where a server that does not answer fails the record."""
