"""evaluate_pipeline / output_columns on a pipeline file with csv and jsonl sources."""

import json
import textwrap

from tests.reference import evaluate_pipeline, output_columns

PIPELINE = """\
version: 1
name: web-proxy
time_unit: s
streams:
  Requests:
    schema: {client_id: int, domain: string, url: string}
    timestamp: ts
    max_delay: 2
    source: {type: file, path: data/requests.csv, format: csv}
  Clicks:
    schema: {x: int}
    source: {type: file, path: data/clicks.jsonl, format: jsonl}
relations:
  Domains:
    schema: {domain: string, type: string}
    timestamp: ts
    source: {type: file, path: data/domains.jsonl, format: jsonl}
queries:
  commerce_urls:
    cql: >
      SELECT Istream(S.url) FROM Requests S [Range 1 Minute], Domains R
      WHERE S.domain = R.domain AND R.type = 'commerce'
    sink: {type: file, path: out/commerce.jsonl, format: jsonl}
  all_requests:
    cql: SELECT * FROM Requests
    sink: {type: blackhole}
  big_clicks:
    cql: SELECT x FROM Clicks WHERE x > 1
  click_count:
    cql: SELECT COUNT(*) AS n FROM big_clicks [Rows 2]
    sink: {type: file, path: out/clicks.jsonl, format: jsonl}
"""

REQUESTS_CSV = """\
ts,client_id,domain,url
1,1,a.com,u1
4,2,b.com,u2
3,3,a.com,u3
0,4,a.com,late
5,5,b.com,u5
"""


def test_pipeline_file(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "p.yaml").write_text(PIPELINE)
    (tmp_path / "data" / "requests.csv").write_text(REQUESTS_CSV)
    (tmp_path / "data" / "clicks.jsonl").write_text(
        "\n".join(json.dumps({"x": x}) for x in (5, 0, 7, 9)) + "\n"
    )
    domains = [
        {"ts": 0, "domain": "a.com", "type": "commerce"},
        {"ts": 4, "domain": "b.com", "type": "commerce"},
        {"ts": 5, "domain": "a.com", "type": "commerce", "_op": "-"},
    ]
    (tmp_path / "data" / "domains.jsonl").write_text(
        textwrap.dedent("\n".join(json.dumps(d) for d in domains))
    )
    path = tmp_path / "p.yaml"
    out = evaluate_pipeline(path)
    assert set(out) == {"commerce_urls", "all_requests", "click_count"}  # big_clicks: a view
    # ts 0 is late (0 < 4 - 2): dropped; 3 is within max_delay: reordered before 4.
    assert out["all_requests"] == [
        (1, "+", (1, "a.com", "u1")),
        (3, "+", (3, "a.com", "u3")),
        (4, "+", (2, "b.com", "u2")),
        (5, "+", (5, "b.com", "u5")),
    ]
    assert out["commerce_urls"] == [
        (1, "+", ("u1",)),
        (3, "+", ("u3",)),
        (4, "+", ("u2",)),  # b.com became commerce at 4, with u2
        (5, "+", ("u5",)),
    ]
    # Clicks are timestamped by position: 5@0, 0@1, 7@2, 9@3; big_clicks: 5@0, 7@2, 9@3
    assert out["click_count"] == [
        (0, "+", (1,)),
        (2, "-", (1,)),
        (2, "+", (2,)),
    ]
    assert output_columns(path) == {
        "commerce_urls": ["url"],
        "all_requests": ["client_id", "domain", "url"],
        "click_count": ["n"],
    }
