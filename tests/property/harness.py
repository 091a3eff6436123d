"""Run one pipeline through the engine and through the reference evaluator, and compare.

`run_both(tmp_path, pipeline, data)` writes the pipeline file (file sources in jsonl or csv,
a jsonl file sink for every query that has one) and its data files under `tmp_path`, runs the
engine in-process (`load_and_compile` + `run_pipeline`), reads each sink, evaluates the same
file with `tests.reference`, and returns both outputs as {query: [(ts, op, row), …]} sorted by
`element_key`. It also checks what only one side can get wrong on its own: the shape of each
output line (keys `_ts`, `_op`, then the columns), line order (non-decreasing `_ts`, `-` before
`+` within one `_ts`), and the output column names against `output_columns`.

`assert_same(engine_out, reference_out)` compares element for element: exact timestamps and
ops, multiset equality of rows within each timestamp, floats with a relative and absolute
tolerance of 1e-9, NULLs equal, ints and floats distinguished. On failure the message shows the
first differing instant with both sides' elements there, and the pipeline file.

The `pipeline` dict:

    {
        "time_unit": "ms",                       # optional, default ms
        "streams": {"S": {"schema": {"a": "int", …}, "format": "jsonl" | "csv",
                          "timestamp": "ts"}},   # timestamp optional (default "ts"; None:
                                                 # arrival order)
        "relations": {"R": {"schema": {…}, "format": …}},
        "resources": {"shared_join": "swf"},   # optional: written as given
        "queries": {"q1": "SELECT …",            # a query with a jsonl sink
                    "v": {"cql": "SELECT …", "sink": False},    # a view
                    "q2": {"cql": "…", "qos": {…}}},  # qos: written as given
    }

`data` maps each stream and relation to its records: dicts with the timestamp field, the
columns, and for relations an optional `_op` (`"+"`/`"-"`).
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import signal
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.reference import element_key, pipeline_outputs, row_key

__all__ = [
    "POLICIES",
    "Outputs",
    "assert_same",
    "differences",
    "run_adjusted",
    "run_both",
    "run_engine",
    "run_under_policies",
    "write_pipeline",
]

Element = tuple[int, str, tuple]

ENGINE_TIMEOUT_S = 120


class Outputs(dict):
    """{query: sorted elements}, carrying the pipeline file text for failure messages."""

    pipeline_text: str = ""
    columns: dict[str, list[str]]

    def __init__(self, *args: Any, pipeline_text: str = "", **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.pipeline_text = pipeline_text
        self.columns = {}


# ------------------------------------------------------------------------------ writing files


def _query_specs(pipeline: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    out = []
    for name, q in (pipeline.get("queries") or {}).items():
        if isinstance(q, str):
            out.append((name, q, True))
        else:
            out.append((name, q["cql"], bool(q.get("sink", True))))
    return out


def _write_data(path: Path, fmt: str, fields: Sequence[str], records: Sequence[Mapping]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps({k: rec[k] for k in fields if k in rec}) + "\n")
        return
    if fmt == "csv":
        with open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(fields)
            for rec in records:
                w.writerow(["" if rec.get(k) is None else _csv_text(rec.get(k)) for k in fields])
        return
    raise ValueError(f"unknown data format {fmt!r}")


def _csv_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def write_pipeline(
    tmp_path: Path, pipeline: Mapping[str, Any], data: Mapping[str, Sequence[Mapping]]
) -> Path:
    """Write the pipeline file and its data files; returns the pipeline file's path."""
    tmp_path = Path(tmp_path)
    doc: dict[str, Any] = {
        "version": 1,
        "name": "prop",
        "time_unit": pipeline.get("time_unit", "ms"),
    }
    if pipeline.get("resources"):
        doc["resources"] = dict(pipeline["resources"])
    for section in ("streams", "relations"):
        items = pipeline.get(section) or {}
        if not items:
            continue
        doc[section] = {}
        for name, spec in items.items():
            fmt = spec.get("format", "jsonl")
            ts_field = spec.get("timestamp", "ts")
            rel = f"data/{name}.{fmt}"
            entry: dict[str, Any] = {"schema": dict(spec["schema"])}
            if ts_field is not None:
                entry["timestamp"] = ts_field
            entry["source"] = {"type": "file", "path": rel, "format": fmt}
            if "max_delay" in spec:
                entry["max_delay"] = spec["max_delay"]
            doc[section][name] = entry
            fields = ([ts_field] if ts_field is not None else []) + list(spec["schema"])
            if section == "relations":
                fields.append("_op")
            _write_data(tmp_path / rel, fmt, fields, data.get(name, []))
    doc["queries"] = {}
    for name, cql, has_sink in _query_specs(pipeline):
        entry: dict[str, Any] = {"cql": cql}
        if has_sink:
            entry["sink"] = {"type": "file", "path": f"out/{name}.jsonl", "format": "jsonl"}
        spec = pipeline["queries"][name]
        if isinstance(spec, dict) and spec.get("qos"):
            entry["qos"] = spec["qos"]
        doc["queries"][name] = entry
    path = tmp_path / "pipeline.yaml"
    path.write_text(_dump_yaml(doc), encoding="utf-8")
    return path


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_presenter)


def _dump_yaml(doc: Mapping[str, Any]) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


# ------------------------------------------------------------------------------ running


@contextlib.contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the main thread after `seconds` (no-op elsewhere)."""

    def _raise(signum: int, frame: object) -> None:
        raise TimeoutError(f"the engine ran for more than {seconds} s")

    try:
        old = signal.signal(signal.SIGALRM, _raise)
    except ValueError:  # not the main thread
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _engine_entry() -> tuple[Any, Any]:
    """(load_and_compile, run_pipeline): from cq_service.pipeline, or from compiler/runner."""
    try:
        from cq_service.pipeline import load_and_compile, run_pipeline
    except ImportError:
        from cq_service.compiler import load_and_compile
        from cq_service.runner import run_pipeline
    return load_and_compile, run_pipeline


# Sources are read in chunks of this many records; small chunks exercise heartbeats, alignment
# across inputs and expiries between batches. Chosen per case from its data, so a failing case
# replays (and shrinks) with the same chunking.
BATCH_ROWS = (65_536, 1, 2, 3, 7)


def batch_rows_for(data: Mapping[str, Sequence[Mapping]]) -> int:
    return BATCH_ROWS[sum(len(rows) for rows in data.values()) % len(BATCH_ROWS)]


# Scheduling changes memory and latency, never results: every case runs under each policy,
# given as (name, parameter): chain_bounded's bound in seconds, chain_share's share of FIFO
# steps (1/2: Chain and FIFO steps alternate, so both rules meet every plan).
POLICIES: tuple[tuple[str, float | None], ...] = (
    ("chain", None),
    ("fifo", None),
    ("round_robin", None),
    ("greedy", None),
    ("chain_bounded", 0.0),
    ("chain_share", 0.5),
)


def run_engine(
    path: Path, batch_rows: int = 65_536, policy: str = "chain", bound: float | None = None
) -> None:
    load_and_compile, run_pipeline = _engine_entry()
    with _time_limit(ENGINE_TIMEOUT_S):
        compiled = load_and_compile(path)
        if policy == "chain_share":
            run_pipeline(compiled, batch_rows=batch_rows, policy=policy, share=bound)
        else:
            run_pipeline(compiled, batch_rows=batch_rows, policy=policy, latency_bound=bound)


def read_sink(path: Path, columns: Sequence[str] | None) -> tuple[list[Element], list[str], str]:
    """(elements in file order, column names seen, problems) of a jsonl sink file."""
    elements: list[Element] = []
    names: list[str] | None = None
    problems: list[str] = []
    if not path.exists():
        return elements, list(columns or []), f"no output file {path.name}"
    prev: tuple[int, int] | None = None
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        obj = json.loads(line)
        keys = list(obj)
        if keys[:2] != ["_ts", "_op"]:
            problems.append(f"line {k}: keys start {keys[:2]}, not ['_ts', '_op']")
        cols = [c for c in keys if c not in ("_ts", "_op")]
        if names is None:
            names = cols
        elif cols != names:
            problems.append(f"line {k}: columns {cols}, earlier lines had {names}")
        ts, op = obj.get("_ts"), obj.get("_op")
        if not isinstance(ts, int) or isinstance(ts, bool) or op not in ("+", "-"):
            problems.append(f"line {k}: bad _ts/_op {ts!r}/{op!r}")
            continue
        pos = (ts, 0 if op == "-" else 1)
        if prev is not None and pos < prev:
            problems.append(
                f"line {k}: ({ts}, {op}) after ({prev[0]}, {'-' if prev[1] == 0 else '+'}): "
                "lines must be in non-decreasing _ts with '-' before '+'"
            )
        prev = pos
        elements.append((ts, op, tuple(obj[c] for c in cols)))
    return elements, (names if names is not None else list(columns or [])), "; ".join(problems[:5])


def run_both(
    tmp_path: Path,
    pipeline: Mapping[str, Any],
    data: Mapping[str, Sequence[Mapping]],
    policy: str = "chain",
    bound: float | None = None,
) -> tuple[Outputs, Outputs]:
    """Run the pipeline through the engine and the reference: ({query: elements}, same)."""
    engines, reference = run_under_policies(tmp_path, pipeline, data, ((policy, bound),))
    return engines[policy], reference


def run_under_policies(
    tmp_path: Path,
    pipeline: Mapping[str, Any],
    data: Mapping[str, Sequence[Mapping]],
    policies: Sequence[tuple[str, float | None]] = POLICIES,
) -> tuple[dict[str, Outputs], Outputs]:
    """The reference's outputs once, and the engine's under each scheduling policy."""
    path = write_pipeline(tmp_path, pipeline, data)
    rows = batch_rows_for(data)
    ref = pipeline_outputs(path)
    text = render_case(path) + f"\n(engine run with batch_rows={rows})\n"
    reference_out = _reference_outputs(ref, text)
    engines: dict[str, Outputs] = {}
    for policy, bound in policies:
        label = text.replace("batch_rows=", f"policy={policy}, batch_rows=")
        for name in ref:  # each policy writes its sinks afresh
            (tmp_path / "out" / f"{name}.jsonl").unlink(missing_ok=True)
        try:
            run_engine(path, rows, policy, bound)
        except Exception as e:  # a crash or a refusal is a failure of the engine, with context
            raise AssertionError(
                f"the engine failed: {type(e).__name__}: {e}\n\n{label}\n"
                f"reference output:\n{_show_all(reference_out)}"
            ) from e
        engines[policy] = _read_outputs(tmp_path, ref, label)
    return engines, reference_out


def _reference_outputs(ref: Mapping[str, Any], text: str) -> Outputs:
    """The reference evaluator's outputs, sorted as the comparison expects."""
    out = Outputs(pipeline_text=text)
    for name, q in ref.items():
        out[name] = sorted(q.elements, key=element_key)
        out.columns[name] = list(q.columns)
    return out


def _read_outputs(tmp_path: Path, ref: Mapping[str, Any], label: str) -> Outputs:
    """The engine's sinks, checked for what only the engine can get wrong on its own."""
    engine_out = Outputs(pipeline_text=label)
    problems = []
    for name in ref:
        els, cols, problem = read_sink(tmp_path / "out" / f"{name}.jsonl", ref[name].columns)
        engine_out[name] = sorted(els, key=element_key)
        engine_out.columns[name] = cols
        if problem:
            problems.append(f"query {name}: {problem}")
        if els and cols != list(ref[name].columns):
            problems.append(
                f"query {name}: output columns {cols}, expected {list(ref[name].columns)}"
            )
    if problems:
        raise AssertionError("\n".join(problems) + "\n\n" + label)
    return engine_out


Schedule = Sequence[tuple[int, str, str, int]]  # (after step, query, knob, value)


def run_adjusted(
    tmp_path: Path,
    pipeline: Mapping[str, Any],
    data: Mapping[str, Sequence[Mapping]],
    schedule: Schedule,
) -> tuple[Outputs, Outputs, Outputs]:
    """Run the pipeline through the engine, adjusting windows after the steps `schedule`
    gives (a change the engine refuses is skipped); then again replaying the engine's
    adjustment log from the start; then through the reference replaying the same log.
    Returns (live run, replayed run, reference)."""
    from cq_service.errors import AdjustmentError

    path = write_pipeline(tmp_path, pipeline, data)
    rows = batch_rows_for(data)
    load_and_compile, run_pipeline = _engine_entry()
    by_step: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
    for step, query, knob, value in schedule:
        by_step[step].append((query, knob, value))

    def after_step(executor: Any) -> None:
        for query, knob, value in by_step.get(executor.steps, ()):
            with contextlib.suppress(AdjustmentError):
                executor.adjust(query, knob, value, reason="test")

    with _time_limit(ENGINE_TIMEOUT_S):
        report = run_pipeline(load_and_compile(path), batch_rows=rows, after_step=after_step)
    made = list(report.executor.adjustments)
    log = [a.to_json() for a in made]
    ref = pipeline_outputs(path, log)
    text = (
        render_case(path)
        + f"\n(engine run with batch_rows={rows})\nadjustments:\n"
        + "\n".join(json.dumps(a) for a in log)
        + "\n"
    )
    reference_out = _reference_outputs(ref, text)
    live = _read_outputs(tmp_path, ref, text)
    for name in ref:
        (tmp_path / "out" / f"{name}.jsonl").unlink(missing_ok=True)
    with _time_limit(ENGINE_TIMEOUT_S):
        run_pipeline(load_and_compile(path), batch_rows=rows, adjustments=made)
    replayed = _read_outputs(tmp_path, ref, text.replace("(engine run", "(replayed run"))
    return live, replayed, reference_out


def render_case(path: Path) -> str:
    """The pipeline file and its data files, as one readable block."""
    path = Path(path)
    parts = [f"--- {path.name}\n{path.read_text(encoding='utf-8')}"]
    data_dir = path.parent / "data"
    if data_dir.exists():
        for f in sorted(data_dir.iterdir()):
            parts.append(f"--- data/{f.name}\n{f.read_text(encoding='utf-8')}")
    return "\n".join(parts)


# ------------------------------------------------------------------------------ comparing


def values_equal(x: Any, y: Any) -> bool:
    """NULL = NULL; bools, ints, floats and strings never equal each other across kinds;
    floats within rel/abs 1e-9 (NaN equals NaN)."""
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, bool) or isinstance(y, bool):
        return isinstance(x, bool) and isinstance(y, bool) and x == y
    if isinstance(x, float) and isinstance(y, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(x, int) and isinstance(y, int):
        return x == y
    if isinstance(x, str) and isinstance(y, str):
        return x == y
    return False


def rows_equal(r: tuple, s: tuple) -> bool:
    return len(r) == len(s) and all(values_equal(x, y) for x, y in zip(r, s))


def _by_ts(elements: Sequence[Element]) -> dict[int, list[tuple[str, tuple]]]:
    out: dict[int, list[tuple[str, tuple]]] = defaultdict(list)
    for ts, op, row in elements:
        out[ts].append((op, tuple(row)))
    return out


def _same_bag(a: list[tuple[str, tuple]], b: list[tuple[str, tuple]]) -> bool:
    if len(a) != len(b):
        return False
    left = list(b)
    for op, row in a:
        for k, (op2, row2) in enumerate(left):
            if op == op2 and rows_equal(row, row2):
                del left[k]
                break
        else:
            return False
    return True


def first_difference(engine: Sequence[Element], reference: Sequence[Element]) -> int | None:
    """The first instant at which the two outputs differ as multisets, or None."""
    e, r = _by_ts(engine), _by_ts(reference)
    for ts in sorted(set(e) | set(r)):
        if not _same_bag(e.get(ts, []), r.get(ts, [])):
            return ts
    return None


def _show(items: Sequence[tuple[str, tuple]]) -> str:
    if not items:
        return "      (nothing)"
    ordered = sorted(items, key=lambda x: (0 if x[0] == "-" else 1, row_key(x[1])))
    return "\n".join(f"      {op} {row!r}" for op, row in ordered)


def _show_all(out: Mapping[str, Sequence[Element]], limit: int = 40) -> str:
    lines = []
    for name, els in out.items():
        lines.append(f"  {name}:")
        lines += [f"    {ts} {op} {row!r}" for ts, op, row in els[:limit]]
        if len(els) > limit:
            lines.append(f"    … {len(els) - limit} more")
    return "\n".join(lines)


def differences(
    engine_out: Mapping[str, Sequence[Element]], reference_out: Mapping[str, Sequence[Element]]
) -> list[str]:
    """One readable paragraph per query whose outputs differ."""
    out = []
    for name in sorted(set(engine_out) | set(reference_out)):
        if name not in engine_out or name not in reference_out:
            side = "engine" if name not in engine_out else "reference"
            out.append(f"query {name}: no output from the {side}")
            continue
        eng, ref = engine_out[name], reference_out[name]
        ts = first_difference(eng, ref)
        if ts is None:
            continue
        e, r = _by_ts(eng), _by_ts(ref)
        out.append(
            f"query {name}: first difference at _ts={ts} "
            f"(engine {len(eng)} elements in all, reference {len(ref)})\n"
            f"    engine at {ts}:\n{_show(e.get(ts, []))}\n"
            f"    reference at {ts}:\n{_show(r.get(ts, []))}"
        )
    return out


def assert_same(
    engine_out: Mapping[str, Sequence[Element]],
    reference_out: Mapping[str, Sequence[Element]],
    pipeline_text: str | None = None,
) -> None:
    """Assert both outputs are equal (see the module docstring); a readable diff otherwise."""
    diffs = differences(engine_out, reference_out)
    eng_cols = getattr(engine_out, "columns", {})
    ref_cols = getattr(reference_out, "columns", {})
    for name in sorted(set(eng_cols) & set(ref_cols)):
        if engine_out.get(name) and eng_cols[name] != ref_cols[name]:
            diffs.append(f"query {name}: columns {eng_cols[name]} != {ref_cols[name]}")
    if not diffs:
        return
    text = pipeline_text or getattr(engine_out, "pipeline_text", "") or ""
    msg = "engine and reference differ\n" + "\n".join(diffs)
    if text:
        msg += "\n\n" + text
    msg += (
        "\nengine output:\n"
        + _show_all(engine_out)
        + "\nreference output:\n"
        + _show_all(reference_out)
    )
    raise AssertionError(msg)
