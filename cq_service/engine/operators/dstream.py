"""Dstream: at each instant, the tuples the relation lost (R(τ−1) − R(τ), as a bag)."""

from __future__ import annotations

from cq_service.engine.operators.istream import RelationToStream

__all__ = ["Dstream"]


class Dstream(RelationToStream):
    kind = "dstream"
    sign = -1
