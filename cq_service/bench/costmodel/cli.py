"""``cq bench costmodel``: the cost model against the engine (docs/resources.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from cq_service.bench.app import bench_app


@bench_app.command("costmodel")
def bench_costmodel(
    quick: bool = typer.Option(False, "--quick", help="fewer and shorter cases"),
    json_output: bool = typer.Option(False, "--json", help="print JSON: each case's errors"),
    seed: int = typer.Option(0, help="seed of the Poisson streams"),
    out: Path = typer.Option(
        Path("benchmarks/costmodel/results"), help="where the text and JSON results go"
    ),
    only: str | None = typer.Option(
        None,
        "--only",
        help="one experiment: accuracy, shedding, delays or scalability (default: all); "
        "its text and JSON go to NAME.txt and NAME.json",
    ),
    nested_loops: float = typer.Option(
        1 / 3, "--nested-loops", help="scalability: the share of joins that are nested-loop joins"
    ),
    repeat: int | None = typer.Option(
        None, "--repeat", help="accuracy: runs per case, the median CPU counts (default 3; --quick: 1)"
    ),
) -> None:
    """The cost model against the engine (docs/resources.md): estimated vs measured memory and
    CPU of joins and aggregations over Poisson streams, out of sample (fitted on one workload,
    predicting another), window reduction vs load shedding on
    the paper's equi-join (Figs. 9–11), the adaptation delays of window and granularity
    changes (Fig. 7; chart delays.png), and the resource manager's scalability (Fig. 12: the
    worker with hundreds of random queries and the model alone with 5,000; charts
    scalability.png, scalability-model.png)."""
    import json

    from cq_service.bench.costmodel import accuracy, delays, scalability, shedding

    names = ("accuracy", "shedding", "delays", "scalability")
    if only is not None and only not in names:
        typer.echo(f"error: --only {only}: expected one of {', '.join(names)}", err=True)
        raise typer.Exit(2)
    if repeat is not None and repeat < 1:
        typer.echo("error: --repeat must be at least 1", err=True)
        raise typer.Exit(2)
    chosen = names if only is None else (only,)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if quick else ""
    data: dict = {}
    parts: list[str] = []
    if "accuracy" in chosen:
        results = accuracy.run(quick=quick, seed=seed, repeat=repeat)
        data["accuracy"] = accuracy.as_json(results)
        parts.append(accuracy.text(results))
    if "shedding" in chosen:
        data["shedding"] = shedding.run(seconds=120 if quick else 600, seed=seed)
        parts.append(shedding.text(data["shedding"]))
    if "delays" in chosen:
        delayed = delays.run(quick=quick, seed=seed)
        data["delays"] = delays.as_json(delayed)
        delays.chart(delayed, out / f"delays{suffix}.png")
        parts.append(delays.text(delayed))
    if "scalability" in chosen:
        scaled = scalability.run(
            quick=quick,
            seed=seed,
            nested_loops=nested_loops,
            progress=lambda line: typer.echo(line, err=True),
        )
        data["scalability"] = scalability.as_json(scaled)
        scalability.chart(scaled["engine"], out / f"scalability{suffix}.png")
        scalability.chart(scaled["model"], out / f"scalability-model{suffix}.png")
        parts.append(scalability.text(scaled))
    stem = only or "costmodel"
    (out / f"{stem}{suffix}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    report = "\n\n".join(parts)
    (out / f"{stem}{suffix}.txt").write_text(report + "\n")
    typer.echo(json.dumps(data, default=str) if json_output else report)
