"""The brief's example queries E1–E4 (brief-stream.md §2), expected outputs by hand."""

from tests.reference import evaluate, evaluate_outputs

REQ = [("client_id", "int"), ("domain", "string"), ("url", "string")]
DOM = [("domain", "string"), ("type", "string")]


def test_e1_count_over_a_one_day_range():
    # time_unit h: 1 Day = 24; an element at t is counted from t to t + 24, leaves at t + 25.
    requests = [
        (0, (1, "stanford.edu", "u0")),
        (5, (2, "cnn.com", "u5")),
        (10, (1, "stanford.edu", "u10")),
        (30, (3, "stanford.edu", "u30")),
        (40, (4, "cnn.com", "u40")),
    ]
    q = "Select Count(*) From Requests S [Range 1 Day Preceding] Where S.domain = 'stanford.edu'"
    outs = evaluate_outputs("h", {"Requests": (REQ, requests)}, {}, [("e1", q, True)])
    assert outs["e1"].columns == ["count"]
    assert outs["e1"].elements == [
        (0, "+", (1,)),
        (10, "-", (1,)),
        (10, "+", (2,)),
        (25, "-", (2,)),  # u0 leaves
        (25, "+", (1,)),
        (30, "-", (1,)),
        (30, "+", (2,)),
        (35, "-", (2,)),  # u10 leaves; at 40 only a cnn.com request arrives: no change
        (35, "+", (1,)),
    ]


def test_e2_inner_where_applies_before_the_partitioned_cutoff():
    requests = [
        (0, (1, "stanford.edu", "http://cs.stanford.edu/a")),
        (1, (1, "stanford.edu", "http://www.stanford.edu/b")),
        (2, (1, "cnn.com", "http://cnn.com/c")),  # not in the window at all (inner Where)
        (3, (2, "stanford.edu", "http://cs.stanford.edu/d")),
        (4, (1, "stanford.edu", "http://cs.stanford.edu/e")),
        (5, (1, "stanford.edu", "http://cs.stanford.edu/f")),
    ]
    q = (
        "Select Count(*) From Requests S "
        "[Partition By S.client_id Rows 2 Preceding Where S.domain = 'stanford.edu'] "
        "Where S.url Like 'http://cs.stanford.edu/%'"
    )
    # client 1's window: {a} {a,b} {a,b} {a,b} {b,e} {e,f}; client 2's: {d} from 3.
    # outer Like keeps a, d, e, f: counts 1 1 1 2 2 3.
    assert evaluate("s", {"Requests": (REQ, requests)}, {}, [("e2", q, True)])["e2"] == [
        (0, "+", (1,)),
        (3, "-", (1,)),
        (3, "+", (2,)),
        (5, "-", (2,)),
        (5, "+", (3,)),
    ]


E3 = (
    "Select T.URL From (Select client_id, URL From Requests S, Domains R "
    "Where S.domain = R.domain And R.type = 'commerce') T Sample({p}) "
    "Where T.client_id Between 1 And 1000"
)
E3_REQUESTS = [
    (1, (5, "amazon.com", "u1")),
    (2, (2000, "amazon.com", "u2")),  # client out of range
    (3, (7, "ebay.com", "u3")),  # ebay.com is not commerce yet
    (4, (8, "stanford.edu", "u4")),
    (6, (9, "ebay.com", "u5")),
]
E3_DOMAINS = [
    (0, "+", ("amazon.com", "commerce")),
    (0, "+", ("stanford.edu", "edu")),
    (5, "+", ("ebay.com", "commerce")),  # u3 joins now and is emitted at 5
]


def test_e3_later_domain_insert_emits_old_requests():
    outs = evaluate_outputs(
        "s",
        {"Requests": (REQ, E3_REQUESTS)},
        {"Domains": (DOM, E3_DOMAINS)},
        [("e3", E3.format(p=100), True)],
    )
    assert outs["e3"].is_stream
    assert outs["e3"].columns == ["url"]
    assert outs["e3"].elements == [(1, "+", ("u1",)), (5, "+", ("u3",)), (6, "+", ("u5",))]


def test_e3_sample_zero_keeps_nothing():
    out = evaluate(
        "s",
        {"Requests": (REQ, E3_REQUESTS)},
        {"Domains": (DOM, E3_DOMAINS)},
        [("e3", E3.format(p=0), True)],
    )
    assert out == {"e3": []}


def test_e4_select_star_is_the_stream_itself():
    s = [(0, (1, "a")), (0, (2, "b")), (3, (1, "a")), (7, (None, "c"))]
    outs = evaluate_outputs(
        "ms", {"S": ([("x", "int"), ("y", "string")], s)}, {}, [("e4", "Select * From S", True)]
    )
    assert outs["e4"].is_stream and outs["e4"].columns == ["x", "y"]
    assert outs["e4"].elements == [
        (0, "+", (1, "a")),
        (0, "+", (2, "b")),
        (3, "+", (1, "a")),  # a duplicate is a new element
        (7, "+", (None, "c")),
    ]
