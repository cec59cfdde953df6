"""hf-ext's benchmarks: one folder per method, ``benchmarks/<id>/bench.py``, run by ``hf-ext bench <id>`` and
``hf-ext tour`` from a source checkout (they are not part of the installed package).

Each ``bench.py`` has ``run(*, quick: bool, seed: int) -> BenchReport`` and ``grid() -> list[dict]`` (the full
run's settings); :mod:`benchmarks.harness` holds the report types and the shared scaffolding.
"""
