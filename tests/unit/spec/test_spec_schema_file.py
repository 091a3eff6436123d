"""The published JSON Schema: valid 2020-12, helpful to editors, strict about keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from cq_service.spec import pipeline_schema

ROOT = Path(__file__).resolve().parents[3]
PACKAGE_COPY = ROOT / "cq_service" / "spec" / "pipeline.schema.json"
PUBLISHED_COPY = ROOT / "schemas" / "pipeline.schema.json"


def _objects(schema: Any, where: str = "#") -> list[tuple[str, dict[str, Any]]]:
    """Every subschema that declares `properties`, with where it is."""
    found = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append((where, schema))
        for key, value in schema.items():
            found.extend(_objects(value, f"{where}/{key}"))
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            found.extend(_objects(value, f"{where}/{i}"))
    return found


def test_published_schema_is_the_package_copy():
    assert PUBLISHED_COPY.read_bytes() == PACKAGE_COPY.read_bytes()


def test_schema_is_valid_2020_12_with_id():
    schema = json.loads(PACKAGE_COPY.read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"]
    assert pipeline_schema() == schema


def test_every_property_has_a_description():
    schema = pipeline_schema()
    missing = []
    for where, obj in _objects(schema):
        if where.split("/")[-1] in ("if",):
            continue
        for name, prop in obj["properties"].items():
            target = prop
            if "$ref" in prop and "description" not in prop:
                target = schema["$defs"][prop["$ref"].split("/")[-1]]
            if "description" not in target:
                missing.append(f"{where}/properties/{name}")
    assert missing == []


def test_every_object_rejects_unknown_keys():
    schema = pipeline_schema()
    for where, obj in _objects(schema):
        if where.endswith("/if"):
            continue  # a condition, not an object definition
        assert obj.get("additionalProperties") is False, where


def test_sys_stream_element_lists_the_engine_columns():
    from cq_service.spec.sys_stream import SYS_STREAM_FIELDS

    element = pipeline_schema()["$defs"]["sysStreamElement"]
    assert list(element["properties"]) == [n for n, _, _ in SYS_STREAM_FIELDS]
    assert element["required"] == [n for n, _, _ in SYS_STREAM_FIELDS]
    json_types = {"string": "string", "int": "integer", "float": "number"}
    for name, t, meaning in SYS_STREAM_FIELDS:
        prop = element["properties"][name]
        assert prop["description"] == meaning
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        assert types[0] == json_types[t.value], name
