"""Vectorised evaluation of bound expressions (`cq_service.cql.logical` BExpr) over batches.

``compile_expr(e)`` gives an `Evaluator` ``(columns, n) -> pa.Array``; ``compile_predicate(e)``
gives a numpy mask of the rows where a boolean expression is TRUE. Semantics are PostgreSQL's,
with the deviations in docs/semantics.md (errors such as division by zero yield NULL).
"""

from __future__ import annotations

from ._arrays import Evaluator, Predicate
from .cast import float_to_text
from .compiler import FUNCTIONS, compile_expr, compile_predicate, fold_constants

__all__ = [
    "FUNCTIONS",
    "Evaluator",
    "Predicate",
    "compile_expr",
    "compile_predicate",
    "float_to_text",
    "fold_constants",
]
