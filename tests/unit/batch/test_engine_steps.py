"""The Spark runner's engine steps (`batch.engine_steps`) without Spark: a query stepped from
heartbeat to heartbeat, its state saved and loaded (through pickle) between every two steps,
elements arriving ahead of the heartbeat, gives element for element what one engine run over
the whole input gives (`engine_in_spark.run_engine`, backfill's engine, itself checked against
`cq run`), for random queries of every family the property tests draw."""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.batch import engine_in_spark as eis
from cq_service.batch import engine_steps as steps
from cq_service.batch.partitioning import analyze
from cq_service.compiler import load_and_compile
from cq_service.engine.operators.base import NEVER
from tests.property import strategies as strat
from tests.property.harness import write_pipeline

FAMILIES = (
    strat.window_queries, strat.join_queries, strat.aggregate_queries, strat.setop_queries,
    strat.subquery_queries, strat.correlated_aggregate_queries, strat.r2s_queries,
    strat.view_pipelines,
)


def _rows(table: pa.Table) -> list[tuple]:
    batch = eis.ordered(table, table.num_columns - 2)
    cols = [c.to_pylist() for c in batch.columns]
    return list(zip(batch.ts.tolist(), batch.w.tolist(), *cols))


def _stepped(spec, query: str, streams: dict[str, pa.Table], relations: dict[str, bytes],
             beats: list[int], ahead: int) -> tuple[list[tuple], int]:
    """`query` stepped to each of `beats`, the elements up to beat + `ahead` arriving with each
    step; the state through pickle between steps. Its results, and the elements fed."""
    names = tuple(streams)
    state_bytes = pickle.dumps(steps.BucketState())
    arrived = {n: int(NEVER) for n in names}
    out: list[pa.Table] = []
    fed = 0
    for k, beat in enumerate(beats):
        state: steps.BucketState = pickle.loads(state_bytes)
        task = steps.StepTask(spec, query, names, "", k - 1, "", "", beat, 1, relations)
        new = {}
        for n, table in streams.items():
            ts = table.column("_ts").to_numpy()
            upto = beat + ahead if k < len(beats) - 1 else max(int(ts.max(initial=0)), beat)
            mine = (ts > arrived[n]) & (ts <= upto)
            new[n] = table.filter(pa.array(mine))
            arrived[n] = max(arrived[n], upto)
        engine = steps.BucketEngine(spec, query, state.engine, batch_rows=5)
        result, n_fed = engine.step(steps._due(state, new, task), beat)
        fed += n_fed
        state.beat = beat
        state.engine = engine.snapshot()
        state_bytes = pickle.dumps(state)
        out.append(result)
    return _rows(pa.concat_tables(out)), fed


SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _check(case: strat.Case, cuts: list[int], ahead: int, compared: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="cq-steps-") as d:
        compiled = load_and_compile(write_pipeline(Path(d), case.pipeline, case.data))
        spec = compiled.spec
        for bq in compiled.queries:
            if spec.queries[bq.name].sink is None:
                continue
            part = analyze(bq)
            if not part.streams:
                continue
            streams = {n: eis.source_table(spec.streams[n], spec.time_unit).drop_columns(["_op"])
                       for n in part.streams}
            relations = {r: eis.to_ipc(eis.source_table(spec.relations[r], spec.time_unit))
                         for r in part.relations}
            stamps = [int(t) for table in streams.values()
                      for t in table.column("_ts").to_numpy()]
            if not stamps:
                continue
            end = max(stamps)
            task = eis.EngineTask(spec, bq.name, part.streams, int(NEVER), end, relations)
            whole = eis.run_engine(task, {n: t.drop_columns(["_partition"])
                                          for n, t in streams.items()})
            whole = whole.filter(pa.array(whole.column("_ts").to_numpy() <= end))
            lo = min(stamps)
            beats = [*sorted({lo - 1 + c for c in cuts if lo - 1 + c < end}), end]
            got, fed = _stepped(spec, bq.name, streams, relations, beats, ahead)
            assert got == _rows(whole), (bq.name, spec.queries[bq.name].cql, beats)
            on_time = sum(t.num_rows for t in streams.values())
            relation_rows = sum(int((eis.from_ipc(r).column("_ts").to_numpy() <= end).sum())
                                for r in relations.values())
            assert fed == on_time + relation_rows  # each element fed once
            compared.append(bq.name)



def test_stepping_with_saved_state_equals_one_run() -> None:
    compared: list[str] = []

    @SETTINGS
    @given(case=st.one_of(*(strat.cases(f) for f in FAMILIES)),
           cuts=st.lists(st.integers(0, 60), max_size=6), ahead=st.integers(0, 6))
    def check(case: strat.Case, cuts: list[int], ahead: int) -> None:
        _check(case, cuts, ahead, compared)

    check()
    assert len(compared) >= 100, compared  # most cases have a query on a stream


def test_a_kept_engine_is_used_only_by_the_step_after_the_one_that_made_it(tmp_path) -> None:
    """A Python worker's kept engine serves the next step only if that step reads the version
    the very same step wrote (its token): a redone step, or one after a failure, loads."""
    pipeline = {"streams": {"S": {"schema": {"a": "int"}, "format": "jsonl"}},
                "queries": {"q": "SELECT a, COUNT(*) AS n FROM S [Range 5] GROUP BY a"}}
    compiled = load_and_compile(write_pipeline(tmp_path, pipeline, {"S": [{"ts": 1, "a": 1}]}))
    spec, folder = compiled.spec, str(tmp_path / "state")
    saved = steps.BucketState(beat=7)
    steps.version_dir(folder, 0).mkdir(parents=True)
    (steps.version_dir(folder, 0) / "p0.state").write_bytes(pickle.dumps(saved))
    kept_state = steps.BucketState(beat=9)
    engine = steps.BucketEngine(spec, "q", None, 5)

    def task(token: str) -> steps.StepTask:
        return steps.StepTask(spec, "q", ("S",), folder, 0, token, "next", 10, 1)

    steps._KEPT[(folder, 0)] = ("made-v0", engine, kept_state)
    got, state, kept = steps._load(task("made-v0"), 0)
    assert kept and got is engine and state.beat == 9
    steps._KEPT[(folder, 0)] = ("another-attempt", engine, kept_state)
    got, state, kept = steps._load(task("made-v0"), 0)
    assert not kept and got is not engine and state.beat == 7
    assert (folder, 0) not in steps._KEPT  # taken out while the step runs
