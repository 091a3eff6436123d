"""Errors of the spec package: every problem of a pipeline file, reported together."""

from __future__ import annotations

from collections.abc import Iterable

from cq_service.errors import CQError, SpecError

__all__ = ["SpecErrors", "SpecLimitExceeded"]


class SpecErrors(SpecError):
    """A pipeline file with one or more problems; `errors` lists them all, in file order.

    ``str(exc)`` renders one ``FILE:LINE:COL: message`` line per problem.
    """

    def __init__(self, errors: Iterable[CQError], *, file: str | None = None):
        self.errors: list[CQError] = list(errors)
        first = self.errors[0] if self.errors else None
        count = len(self.errors)
        summary = f"{count} problem{'s' if count != 1 else ''} in pipeline file"
        super().__init__(summary, first.span if first else None, file=file)

    def lines(self) -> list[str]:
        return [error.render() for error in self.errors] or [super().render()]

    def render(self) -> str:
        if not self.errors:
            return super().render()
        return "\n".join(error.render() for error in self.errors)


class SpecLimitExceeded(SpecErrors):
    """A pipeline text over a bound of what it may stand for (YAML aliases expanding to too
    many values, too deep a nesting: spec/yaml_limits.py), refused before it is expanded."""
