"""`cq bench restart`'s table: a history whose replay was not measured still shows its snapshot."""

from cq_service.bench.restart import RestartResult, report


def test_the_table_shows_both_modes_and_marks_a_replay_not_measured() -> None:
    results = [
        RestartResult("rows", 1_000_000, "snapshot", 2.5, 0, 110_000, 0.1),
        RestartResult("rows", 1_000_000, "replay", 44.0, 1_000_000, 110_000, 0.1),
        RestartResult("rows", 10_000_000, "snapshot", 3.7, 0, 112_000, 0.1),
    ]
    rows = [line for line in report(results).splitlines() if line.startswith("| rows")]
    assert rows == [
        "| rows | 1,000,000 | 2.5 s | 44.0 s | 0 / 1,000,000 | 0.1 MiB | 0.10 s |",
        "| rows | 10,000,000 | 3.7 s | not measured | 0 / — | 0.1 MiB | 0.10 s |",
    ]
