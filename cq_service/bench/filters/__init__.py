"""`cq bench filters`: thesis 003's filter-ordering experiments (§4.7) on the engine.

workload.py generates the correlated, permuted input; pipeline.py and real_case.py write the
pipelines; optimum.py finds the exhaustive optimum offline; engine_runs.py runs one pipeline as
`cq run` does and meters it; experiments.py holds the four experiments, report.py the checks
and text, plots.py the charts. docs/adaptive.md, "Benchmark: filter ordering", has the design
and the figures measured.
"""
