"""The benchmarks' engine room: the one module that spawns and signals the load generators (runner)."""
