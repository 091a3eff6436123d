"""YAML bombs: the "billion laughs" document (`laughs`), shared by the YAML limit tests
(tests/unit/spec/test_yaml_limits.py) and the API's bad-request tests
(tests/unit/service/test_api_requests.py)."""

from __future__ import annotations


def laughs(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each level a list of `width` aliases of the level before."""
    lines = ["version: 1", "name: lol", f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"
