"""One engine per tool: the model's choices are the registry, every engine has its readers, and what
differs per tool (its program, its data set's fields and initialisation, a run's shape from its data
set, threads, status words) is asked of the engine."""

from __future__ import annotations

from benchmarks.engine import runner
from benchmarks.lib import engines
from benchmarks.lib.run_options import ConnectionTarget, RunOptions
from benchmarks.models import BenchmarkRun, DataSet, Engine

TARGET = ConnectionTarget(host="127.0.0.1", port=26900, user="doadmin", dbname="defaultdb", sslmode="require")


def test_the_models_choices_are_the_registry() -> None:
    for model in (BenchmarkRun, DataSet):
        field = model._meta.get_field("engine")
        assert {name for name, _label in field.choices} == set(engines.ENGINES)
    assert {Engine.PGBENCH, Engine.SYSBENCH} <= set(engines.ENGINES)


def test_every_engine_has_its_readers_and_its_program() -> None:
    for name, engine in engines.ENGINES.items():
        assert engine.name == name
        assert engine.reader(RunOptions(engine=name, clients=1, threads=1)) is not None
        if engine.init_command:
            assert engine.init_reader(engine.dataset_spec(engines.DatasetSpec(scale=1))[0]) is not None
        assert engine.program in runner.load_programs()
        assert runner.program_path(name, "16").endswith("/" + engine.program)


def test_pgbench_asks_for_a_scale_and_keeps_no_sysbench_fields() -> None:
    pgbench = engines.ENGINES[Engine.PGBENCH]
    spec, found = pgbench.dataset_spec(engines.DatasetSpec(tables=3, table_size=10))
    assert [(field, message.code) for field, message in found] == [("scale", "dataset.scale_missing")]
    spec, found = pgbench.dataset_spec(engines.DatasetSpec(scale=5, init_steps="", tables=3))
    assert not found and spec == engines.DatasetSpec(scale=5)
    args = pgbench.init_args("/usr/bin/pgbench", TARGET, spec)
    assert args[:2] == ["/usr/bin/pgbench", "-i"] and "5" in args
    assert not pgbench.wants_dataset(RunOptions(clients=1, threads=1))


def test_sysbench_fills_its_defaults_and_takes_a_runs_shape_from_its_data_set() -> None:
    sysbench = engines.ENGINES[Engine.SYSBENCH]
    spec, found = sysbench.dataset_spec(engines.DatasetSpec(scale=5, foreign_keys=True))
    assert not found and spec.scale is None and not spec.foreign_keys
    assert (spec.tables, spec.table_size) == (4, 100_000)
    assert "prepare" in sysbench.init_args("/usr/bin/sysbench", TARGET, spec)
    options = RunOptions(engine=Engine.SYSBENCH, clients=1, threads=1, tables=2)
    assert sysbench.wants_dataset(options)
    shaped = sysbench.with_dataset(options, engines.DatasetSpec(tables=8, table_size=1000))
    assert (shaped.tables, shaped.table_size) == (2, 1000) and not sysbench.wants_dataset(shaped)
    assert sysbench.missing_dataset("appdb").code == "run.sysbench_data_missing"


def test_custom_scripts_threads_and_sample_fields_are_the_engines_word() -> None:
    pgbench, sysbench = engines.ENGINES[Engine.PGBENCH], engines.ENGINES[Engine.SYSBENCH]
    assert pgbench.custom_script_refusal() is None
    refusal = sysbench.custom_script_refusal()
    assert refusal is not None and refusal.code == "run.sysbench_custom_script"
    assert sysbench.threads_for(8, 2) == 8 and pgbench.threads_for(8, 2) <= 8
    assert sysbench.threads_for(8, 2, asked=2) == 8 and pgbench.threads_for(8, 2, asked=2) == 2
    assert engines.make_options(engine=Engine.SYSBENCH, clients=6, threads=2, duration_s=5).threads == 6
    assert engines.make_options(clients=6, threads=2, duration_s=5).threads == 2
    assert pgbench.extra_sample_fields == () and sysbench.extra_sample_fields == ("qps",)


def test_default_scripts_and_data_set_shapes_are_the_engines_word() -> None:
    pgbench, sysbench = engines.ENGINES[Engine.PGBENCH], engines.ENGINES[Engine.SYSBENCH]
    assert (pgbench.default_script, sysbench.default_script) == ("tpcb-like", "oltp_read_write")
    assert pgbench.shape(engines.DatasetSpec(scale=5)) == "at scale 5"
    assert pgbench.short_shape(engines.DatasetSpec(scale=5)) == "scale 5"
    assert sysbench.shape(engines.DatasetSpec(tables=4, table_size=100_000)) == "sysbench 4 × 100,000 rows"
