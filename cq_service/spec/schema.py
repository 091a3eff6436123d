"""The JSON Schema of pipeline files (`pipeline.schema.json`) and its errors explained: each
`jsonschema` error mapped to the offending key or value of the YAML document, with its position
and a message in the file's own words (pass 2 of `loader`)."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from cq_service.errors import Span, SpecError
from cq_service.spec.positions import Path, YamlDocument, yaml_kind

# The top-level mappings of entities and what one of them is called.
ENTITIES = {"streams": "stream", "relations": "relation", "queries": "query"}


def pipeline_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of pipeline files, version 1 (a fresh copy)."""
    return copy.deepcopy(_schema())


@cache
def _schema() -> dict[str, Any]:
    text = resources.files("cq_service.spec").joinpath("pipeline.schema.json").read_text("utf-8")
    return json.loads(text)


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(_schema())


# --- schema errors -----------------------------------------------------------------------------


# Keys no longer offered, with why (reported instead of "unknown key").
WITHDRAWN: dict[Path, str] = {
    ("resources", "cpu_budget"): (
        "resources: cpu_budget is no longer offered: the cost model's CPU estimates of joins "
        "and aggregations are not within 25% out of sample (docs/resources.md), too far to "
        "hold a CPU bound by; bound the deployment with memory_budget"
    ),
}


def schema_errors(doc: YamlDocument) -> list[SpecError]:
    if doc.value is None:
        return [SpecError("the pipeline file is empty", Span(1, 1, file=doc.file))]
    if not isinstance(doc.value, dict):
        message = f"a pipeline file must be a mapping of keys (version, name, …), got {yaml_kind(doc.value)}"
        return [SpecError(message, doc.span(()))]
    found: list[SpecError] = []
    for error in _validator().iter_errors(doc.value):
        found.extend(_explain(error, doc))
    return found


def _explain(error: ValidationError, doc: YamlDocument) -> list[SpecError]:
    """One or more readable errors, each at the position of the offending key or value."""
    path: Path = tuple(error.absolute_path)
    schema_path = list(error.absolute_schema_path)
    kind = error.validator
    what = describe_path(path)

    if kind == "additionalProperties" and error.validator_value is False:
        allowed = list(error.schema.get("properties", {}))
        allowed = [k for k in allowed if _allowed_for(error.schema, error.instance, k)]
        where = f" in {definite(what)}" if path else ""
        return [
            SpecError(
                WITHDRAWN.get((*path, key))
                or f"unknown key '{key}'{where} (expected one of: {', '.join(allowed)})",
                doc.span((*path, key), key=True),
            )
            for key in error.instance
            if key not in error.schema.get("properties", {})
        ]
    if len(schema_path) >= 2 and schema_path[-2] == "propertyNames":
        key = str(error.instance)
        span = doc.span((*path, key), key=True)
        if kind == "enum":  # a key a stdout/blackhole sink does not take
            if key not in _declaring_schema(error.schema).get("properties", {}):
                return []  # an unknown key: reported by additionalProperties
            kind_of = _type_of(doc, path)
            others = [k for k in error.validator_value if k != "type"]
            takes = f"only {', '.join(others)}" if others else "no other keys"
            message = (
                f"key '{key}' is not allowed in {definite(what)}: "
                f"a {path[-1]} of type '{kind_of}' takes {takes}"
            )
            return [SpecError(message, span)]
        message = error.schema.get("patternErrorMessage", f"must match {error.validator_value}")
        noun, where = _name_kind(path)
        return [SpecError(f"{noun} '{key}'{where} {message}", span)]
    if kind == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        where = f" in {definite(what)}" if path else ""
        return [
            SpecError(f"missing key '{name}'{where}", doc.span(path, key=True)) for name in missing
        ]

    span = doc.span(path)
    value = error.instance
    raw = doc.raw(path)
    if raw == "" and value is None:
        return [SpecError(f"{what} is empty{_expected_suffix(error)}", span)]
    if _read_as_non_string(error, doc, path):
        return [
            SpecError(
                f"{what}: {raw} was read as {yaml_kind(value)}; quote it{_expected_suffix(error)}",
                span,
            )
        ]
    return [SpecError(_value_message(error, what, _shown(value, raw)), span)]


def _value_message(error: ValidationError, what: str, got: str) -> str:
    kind, expected, schema = error.validator, error.validator_value, error.schema
    if kind == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        names = [_TYPE_NAMES.get(t, t) for t in types]
        if "pattern" in schema and "string" in types:
            names = [n if n != "a string" else "a duration such as '5 seconds'" for n in names]
        return f"{what} must be {' or '.join(names)}, got {got}"
    if kind == "enum":
        return f"{what} must be one of {', '.join(map(str, expected))}, got {got}"
    if kind == "const":
        return f"{what} must be {expected}, got {got}"
    if kind == "pattern":
        message = schema.get("patternErrorMessage", f"must match {expected}")
        return f"{what} {got} {message}"
    if kind == "minimum":
        return f"{what} must be >= {expected}, got {got}"
    if kind == "exclusiveMinimum":
        return f"{what} must be > {expected}, got {got}"
    if kind == "maximum":
        return f"{what} must be <= {expected}, got {got}"
    if kind in ("minLength", "maxLength"):
        if schema.get("minLength") == schema.get("maxLength") == 1:
            return f"{what} must be a single character, got {got}"
        if kind == "minLength":
            return f"{what} must not be empty"
        return f"{what} must be at most {expected} characters long, got {got}"
    if kind == "minItems":
        if expected > 1:
            return f"{what} must have at least {expected} items, got {len(error.instance)}"
        return f"{what} must not be empty"
    if kind == "minProperties":
        if error.absolute_path and error.absolute_path[-1] == "schema":
            return f"{what} must list at least one column"
        return f"{what} must not be empty"
    return f"{what}: {error.message}"


_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "object": "a mapping",
    "array": "a list",
    "boolean": "true or false",
    "null": "null",
}


def _read_as_non_string(error: ValidationError, doc: YamlDocument, path: Path) -> bool:
    """True if YAML turned an unquoted word the schema wanted as a string into something else."""
    value = error.instance
    if isinstance(value, str | dict | list) or not doc.is_plain(path):
        return False
    if error.validator == "type":
        expected = error.validator_value
        types = [expected] if isinstance(expected, str) else expected
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if numeric and ("integer" in types or "number" in types):
            return False  # a number where numbers are welcome, just not this one
        return "string" in types
    if error.validator in ("enum", "const"):
        options = error.validator_value if error.validator == "enum" else [error.validator_value]
        return all(isinstance(option, str) for option in options)
    return False


def _expected_suffix(error: ValidationError) -> str:
    if error.validator == "enum":
        return f" (must be one of {', '.join(map(str, error.validator_value))})"
    return ""


def _allowed_for(schema: Mapping[str, Any], instance: Any, key: str) -> bool:
    """False if an if/then branch of `schema` that applies to `instance` forbids `key`."""
    for branch in schema.get("allOf", []):
        names = branch.get("then", {}).get("propertyNames", {}).get("enum")
        if names is not None and Draft202012Validator(branch["if"]).is_valid(instance):
            return key in names
    return True


def _declaring_schema(names_schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object schema whose if/then branch holds the `propertyNames` schema `names_schema`."""
    for definition in _schema()["$defs"].values():
        for branch in definition.get("allOf", []):
            if branch.get("then", {}).get("propertyNames") is names_schema:
                return definition
    return {}


def _type_of(doc: YamlDocument, path: Path) -> str:
    value: Any = doc.value
    for part in path:
        value = value[part]
    return str(value.get("type")) if isinstance(value, dict) else "?"


def describe_path(path: Path) -> str:
    """A readable name for the value at `path`: "stream 'S'", "format of the sink of query 'q'"."""
    if not path:
        return "the pipeline"
    if len(path) == 1:
        return str(path[0])
    head = str(path[0])
    if len(path) == 2 and head in ENTITIES:
        return f"{ENTITIES[head]} '{path[1]}'"
    if len(path) == 4 and head in ENTITIES and path[2] == "schema":
        return f"type of column '{path[3]}' in {describe_path(path[:2])}"
    return f"{path[-1]} of {definite(describe_path(path[:-1]))}"


def definite(description: str) -> str:
    first = description.split(" ", 1)[0]
    if description.startswith("the ") or first in ENTITIES.values() or " " not in description:
        return description
    return f"the {description}"


def _name_kind(path: Path) -> tuple[str, str]:
    """What the keys of the mapping at `path` name, and where: ("column name", " in stream 'S'")."""
    if len(path) == 1 and str(path[0]) in ENTITIES:
        return f"{ENTITIES[str(path[0])]} name", ""
    if len(path) == 3 and path[2] == "schema":
        return "column name", f" in {describe_path(path[:2])}"
    return "key", f" in {definite(describe_path(path))}" if path else ""


def _shown(value: Any, raw: str | None) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, dict | list):
        return yaml_kind(value)
    if raw is not None:
        return raw
    return (
        "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


