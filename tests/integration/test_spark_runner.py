"""The Spark runner (`batch.streaming`) on local Spark and the real Kafka broker: its output
equals `cq run`'s on the embedded engine over the same topics, element for element."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from cq_service.batch.streaming import StreamingJob, check, describe
from cq_service.compiler import compile_pipeline
from cq_service.io.kafka import API_VERSION
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline_text
from cq_service.spec.model import SinkSpec
from tests.integration.runner_outputs import MULTI, assert_same, lines, with_file_sinks


@pytest.fixture(scope="module")
def spark():
    """A local SparkSession with the Kafka connector's jars (left running for later tests)."""
    from cq_service.batch.streaming import spark_session

    return spark_session("local[2]")


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION, acks="all")
    try:
        for v in values:
            producer.send(topic, value=v, partition=partition)
        producer.flush()
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, within: float = 120.0) -> list[bytes]:
    """Every record of `topic` up to its end offsets as they are now, partition by partition
    (a consumer that stops after a quiet spell sees nothing on a loaded machine)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=API_VERSION,
                             enable_auto_commit=False)
    deadline = time.monotonic() + within
    try:
        partitions = consumer.partitions_for_topic(topic)
        while not partitions and time.monotonic() < deadline:
            time.sleep(0.2)
            partitions = consumer.partitions_for_topic(topic)
        parts = [TopicPartition(topic, p) for p in sorted(partitions or ())]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        out: list[bytes] = []
        while any(consumer.position(tp) < end[tp] for tp in parts):
            assert time.monotonic() < deadline, f"{topic}: not read to its end within {within} s"
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(r.value for r in records)
        return out
    finally:
        consumer.close()


def embedded(spec, out: Path) -> dict[str, list[str]]:
    spec = with_file_sinks(spec, out)
    run_pipeline(compile_pipeline(spec))
    return {n: lines(out / f"{n}.jsonl") for n, q in spec.queries.items() if q.sink}


def on_spark(spec, spark, out: Path, checkpoint: Path):
    spec = with_file_sinks(spec, out)
    report = StreamingJob(spec, spark, checkpoint).run(available_now=True, final=True)
    return {n: lines(out / f"{n}.jsonl") for n, q in spec.queries.items() if q.sink}, report


SALES = """\
version: 1
name: sales
time_unit: ms
streams:
  Sales:
    schema: {{id: int, city: string, amount: float, ts: int}}
    timestamp: ts
    max_delay: 10
    late: dead_letter
    source: {{type: kafka, topic: {topic}, bootstrap_servers: '{bootstrap}'}}
queries:
  per_city:
    cql: SELECT city, COUNT(*) AS n, SUM(amount) AS total FROM Sales [Range 100] GROUP BY city
    sink: {{type: file, path: out/per_city.jsonl}}
  big:
    cql: SELECT Rstream(id, amount) FROM Sales [Now] WHERE amount > 3
    sink: {{type: file, path: out/big.jsonl}}
"""


def sale(i: int, ts: int) -> bytes:
    return json.dumps({"id": i, "city": f"c{i % 3}", "amount": i / 2, "ts": ts}).encode()


def test_grouped_window_late_malformed_and_expiries(spark, kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic()
    spec = load_pipeline_text(SALES.format(topic=topic, bootstrap=kafka_bootstrap),
                              tmp_path / "p.yaml")
    assert check(spec) == []
    first = [sale(i, 10 * i) for i in range(30)] + [b"{not json", sale(99, 5)]  # late: 5 < 290-10
    produce(kafka_bootstrap, topic, first)
    # Two runs on one checkpoint: the second sees only the new messages, and its first results
    # include the first run's windows expiring (no arrival for a city in (290, 700]).
    ckpt = tmp_path / "ckpt"
    job_spec = with_file_sinks(spec, tmp_path / "spark")
    job = StreamingJob(job_spec, spark, ckpt)
    report = job.run(available_now=True, final=False)
    assert report.late == {"Sales": 1} and report.malformed == {"Sales": 1}
    assert report.ended_at["per_city"] == 290 - 10 - 1
    dlq = consume(kafka_bootstrap, f"{topic}.dlq")
    assert dlq == [b"{not json"]  # with the reason in headers, as the KafkaReader sends it
    expected = embedded(spec, tmp_path / "emb1")
    got1 = {n: lines(tmp_path / "spark" / f"{n}.jsonl") for n in ("per_city", "big")}
    for n in got1:
        assert_same([x for x in expected[n] if json.loads(x)["_ts"] <= 279], got1[n])
    dead = [json.loads(x) for x in lines(tmp_path / "spark" / "dead.jsonl")]
    assert {d["reason"].split(":")[0] for d in dead} >= {"late"} and len(dead) == 2

    # More input on the same checkpoint: one city gets no arrival, its window expires anyway;
    # then the final heartbeat at the largest timestamp: all equals the embedded cq run.
    produce(kafka_bootstrap, topic, [sale(3 * i, 700 + i) for i in range(5)] + [sale(7, 270)])
    report = StreamingJob(job_spec, spark, ckpt).run(available_now=True, final=True)
    assert report.late == {"Sales": 1}  # 270 <= the heartbeat 279 already passed
    expected = embedded(spec, tmp_path / "emb2")
    for n in ("per_city", "big"):
        # A file sink is rewritten by each run: the two runs' outputs follow each other.
        assert_same(expected[n], got1[n] + lines(tmp_path / "spark" / f"{n}.jsonl"))
    expiries = [json.loads(x) for x in expected["per_city"]]
    assert any(e["_op"] == "-" and 290 < e["_ts"] < 700 for e in expiries)


# -- NEXMark: every query runs on the runner and agrees with cq run ------------------------------

NEXMARK = Path(__file__).resolve().parents[2] / "pipelines" / "nexmark" / "nexmark.yaml"
KEY_PATH = {"q0", "q1", "q2", "q3", "q8"}  # q4, q5, q6, q7: single key per partitioning.analyze


def nexmark_on_kafka(bootstrap: str, new_topic, events: int):
    """The NEXMark pipeline with its streams on Kafka topics holding `events` generated events."""
    from cq_service.io import open_source
    from cq_service.spec import load_pipeline
    from cq_service.spec.model import SourceSpec

    spec = load_pipeline(NEXMARK)
    streams = {}
    for name, s in spec.streams.items():
        small = dataclasses.replace(s, source=dataclasses.replace(
            s.source, options={**s.source.options, "events": events}))
        names = [f.name for f in s.schema]
        values = []
        with open_source(small, spec.time_unit, 65_536) as reader:
            for chunk in reader:
                cols = [c.to_pylist() for c in chunk.columns]
                values += [json.dumps(dict(zip(names, row))).encode() for row in zip(*cols)]
        topic = new_topic()
        produce(bootstrap, topic, values)
        opts = {"topic": topic, "bootstrap_servers": bootstrap}
        streams[name] = dataclasses.replace(s, source=SourceSpec("kafka", options=opts,
                                                                 span=s.source.span))
    return dataclasses.replace(spec, streams=streams)


def test_nexmark_every_query_runs_each_on_its_path(kafka_bootstrap, new_topic):
    spec = nexmark_on_kafka(kafka_bootstrap, new_topic, 10)
    assert check(spec) == []
    paths = {line.split(":")[0]: line for line in describe(spec)}
    with_sinks = {q for q in spec.queries if spec.queries[q].sink}
    assert set(paths) == with_sinks
    for q in with_sinks:
        assert ("key-partitioned path" in paths[q]) == (q in KEY_PATH), paths[q]
        assert ("single key" in paths[q]) == (q not in KEY_PATH), paths[q]


def test_a_query_the_runner_cannot_read_is_reported_where_it_is(kafka_bootstrap, new_topic,
                                                                tmp_path):
    text = SALES.format(topic=new_topic(), bootstrap=kafka_bootstrap) + """\
  files:
    cql: SELECT Istream(a) FROM F [Range 10]
    sink: {type: file, path: out/files.jsonl}
"""
    text = text.replace("queries:\n", """\
  F:
    schema: {a: int}
    source: {type: file, path: f.jsonl}
queries:
""", 1)
    (tmp_path / "f.jsonl").write_text('{"a": 1}\n')
    spec = load_pipeline_text(text, tmp_path / "p.yaml")
    [problem] = check(spec)
    assert problem.query == "files" and "stream F is read from file, not Kafka" in problem.reason
    assert problem.span.line == text.splitlines().index("  files:") + 2


def test_nexmark_queries_equal_cq_run(spark, kafka_bootstrap, new_topic, tmp_path):
    spec = nexmark_on_kafka(kafka_bootstrap, new_topic, 3000)
    expected = embedded(spec, tmp_path / "emb")
    # Kafka to Kafka: every query's sink a topic.
    names = [n for n, q in spec.queries.items() if q.sink]
    topics = {n: new_topic() for n in names}
    queries = {
        n: dataclasses.replace(q, sink=SinkSpec(
            "kafka", options={"topic": topics[n], "bootstrap_servers": kafka_bootstrap}))
        if q.sink else q
        for n, q in spec.queries.items()
    }
    job_spec = dataclasses.replace(
        spec, queries=queries, dead_letter=SinkSpec("file", str(tmp_path / "dead.jsonl"), "jsonl"))
    report = StreamingJob(job_spec, spark, tmp_path / "ckpt").run(available_now=True, final=True)
    for n in names:
        got = [v.decode() for v in consume(kafka_bootstrap, topics[n])]
        assert_same(expected[n], got)
        assert report.results.get(n, 0) == len(expected[n])
    assert all(expected[n] for n in names), {n: len(expected[n]) for n in names}


# -- the per-batch work does not grow with history ----------------------------------------------

UNBOUNDED = """\
version: 1
name: unbounded
time_unit: ms
streams:
  P:
    schema: {{id: int, state: string, ts: int}}
    timestamp: ts
    source: {{type: kafka, topic: {people}, bootstrap_servers: '{bootstrap}'}}
  A:
    schema: {{seller: int, category: int, ts: int}}
    timestamp: ts
    source: {{type: kafka, topic: {auctions}, bootstrap_servers: '{bootstrap}'}}
queries:
  sellers:
    cql: >
      SELECT Istream(P.id, P.state, A.category)
      FROM A [Range Unbounded], P [Range Unbounded]
      WHERE A.seller = P.id AND A.category = 3
    sink: {{type: file, path: out/sellers.jsonl}}
"""


def test_each_micro_batch_feeds_only_new_elements_while_history_grows(
        spark, kafka_bootstrap, new_topic, tmp_path):
    """NEXMark q3's shape (a join of unbounded windows): over 20 micro-batches each step of the
    engine is fed the batch's new elements only — every element exactly once in all — while
    the state the engine keeps grows; the results equal cq run's."""
    people, auctions = new_topic(), new_topic()
    spec = load_pipeline_text(UNBOUNDED.format(people=people, auctions=auctions,
                                               bootstrap=kafka_bootstrap), tmp_path / "p.yaml")
    n = 2000
    produce(kafka_bootstrap, people, [json.dumps(
        {"id": i, "state": f"s{i % 7}", "ts": 10 * i}).encode() for i in range(n)])
    produce(kafka_bootstrap, auctions, [json.dumps(
        {"seller": (i * 7919) % (i + 1), "category": i % 5, "ts": 10 * i + 5}).encode()
        for i in range(n)])
    job = StreamingJob(with_file_sinks(spec, tmp_path / "spark"), spark, tmp_path / "ckpt",
                       max_offsets_per_trigger=200)
    report = job.run(available_now=True, final=True)
    steps = report.steps["sellers"]
    assert len(steps) >= 20
    assert sum(s["new"] for s in steps) == 2 * n
    assert sum(s["fed"] for s in steps) == 2 * n  # nothing replayed
    assert all(s["fed"] <= 200 + 2 for s in steps[:-1]), [s["fed"] for s in steps]
    # Python workers went on with the engines they kept instead of loading the saved state.
    assert sum(s["kept"] for s in steps) > 0, steps
    sizes = [s["state_bytes"] for s in steps]
    assert sizes[-1] > 3 * sizes[2]  # the state grows with history; the feeding does not
    assert not list((tmp_path / "ckpt").rglob("*.parquet"))  # no retained elements
    expected = embedded(spec, tmp_path / "emb")
    assert_same(expected["sellers"], lines(tmp_path / "spark" / "sellers.jsonl"))
    assert len(expected["sellers"]) > 100


# -- a random sample of the property tests' queries, on both paths ------------------------------


def _on_kafka(spec, bootstrap: str, new_topic):
    """`spec` with its file streams moved to Kafka topics (records in file order)."""
    from cq_service.io import open_source
    from cq_service.spec.model import SourceSpec

    streams = {}
    for name, s in spec.streams.items():
        names = [f.name for f in s.schema]
        values = []
        with open_source(s, spec.time_unit, 65_536) as reader:
            for chunk in reader:
                cols = [c.to_pylist() for c in chunk.columns]
                for row, ts in zip(zip(*cols), chunk.ts.tolist()):
                    record = dict(zip(names, row))
                    record[s.timestamp] = ts
                    values.append(json.dumps(record).encode())
        topic = new_topic()
        produce(bootstrap, topic, values)
        opts = {"topic": topic, "bootstrap_servers": bootstrap}
        streams[name] = dataclasses.replace(s, source=SourceSpec("kafka", options=opts))
    return dataclasses.replace(spec, streams=streams)


def test_random_queries_equal_cq_run(spark, kafka_bootstrap, new_topic, tmp_path):
    import os

    from hypothesis import HealthCheck, Phase, given, note, settings
    from hypothesis import strategies as st

    from cq_service.batch.streaming import supported
    from cq_service.spec import load_pipeline
    from tests.property import strategies as strat
    from tests.property.harness import write_pipeline

    families = (strat.window_queries, strat.join_queries, strat.aggregate_queries,
                strat.r2s_queries, strat.view_pipelines, strat.subquery_queries,
                strat.setop_queries)
    checked = []

    @settings(max_examples=int(os.environ.get("CQ_SPARK_RUNNER_EXAMPLES", "12")),
              deadline=None, derandomize=True, phases=[Phase.generate],  # Spark: no shrinking
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(case=st.one_of(*(strat.cases(f) for f in families)))
    def one(case) -> None:
        d = tmp_path / f"case{len(checked)}-{os.urandom(4).hex()}"
        spec = load_pipeline(write_pipeline(d, case.pipeline, case.data))
        if any(s.timestamp is None or s.source.type != "file" for s in spec.streams.values()):
            return
        spec = _on_kafka(spec, kafka_bootstrap, new_topic)
        keep = {n for n, q in spec.queries.items()
                if q.sink is not None and supported(spec, n)[0] is not None}
        if not keep:
            return
        spec = dataclasses.replace(spec, queries={
            n: q for n, q in spec.queries.items() if n in keep or q.sink is None})
        expected = embedded(spec, d / "emb")
        got, _ = on_spark(spec, spark, d / "spark", d / "ckpt")
        for n in keep:
            note(f"{n}: {spec.queries[n].cql}")
            assert_same(expected[n], got[n])
        checked.append(sorted(f"{n} {supported(spec, n)[0].path}" for n in keep))

    one()
    print("queries checked (path):", checked)
    paths = {entry.split()[-1] for c in checked for entry in c}
    assert paths == {"key", "single"}, checked


# -- a topic with three partitions ----------------------------------------------------------------

def test_a_three_partition_topic_equals_cq_run(spark, kafka_bootstrap, new_topic, tmp_path):
    """Keys spread over three partitions (each in timestamp order, the partitions interleaved
    by key), in two rounds on one checkpoint: per-partition lateness and the stream's
    heartbeat as the slowest partition's give the embedded engine's results, and nothing is
    late. (A partition with no data while others run ahead is the documented limit: there the
    embedded worker's own results depend on its idle timeout.)"""
    import random

    topic = new_topic(3)
    spec = load_pipeline_text(MULTI.format(topic=topic, bootstrap=kafka_bootstrap),
                              tmp_path / "p.yaml")
    rnd = random.Random(3)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, api_version=API_VERSION,
                             acks="all")

    def send(first: int, last: int) -> None:
        for i in range(first, last):
            k = rnd.randrange(9)
            record = {"k": k, "v": rnd.randrange(50), "ts": 5 * i + rnd.randrange(3)}
            producer.send(topic, json.dumps(record).encode(), partition=k % 3)
        producer.flush()

    send(0, 300)
    job_spec = with_file_sinks(spec, tmp_path / "spark")
    first = StreamingJob(job_spec, spark, tmp_path / "ckpt").run(available_now=True, final=False)
    got1 = {n: lines(tmp_path / "spark" / f"{n}.jsonl") for n in ("counts", "pairs")}
    send(300, 600)
    producer.close()
    second = StreamingJob(job_spec, spark, tmp_path / "ckpt").run(available_now=True, final=True)
    expected = embedded(spec, tmp_path / "emb")
    for n in ("counts", "pairs"):
        got = got1[n] + lines(tmp_path / "spark" / f"{n}.jsonl")
        assert_same(expected[n], got)
        assert expected[n]
    assert first.late.get("S", 0) == 0 and second.late.get("S", 0) == 0
