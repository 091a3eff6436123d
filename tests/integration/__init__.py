"""Tests against real Kafka and PostgreSQL (see conftest.py for where they come from)."""
