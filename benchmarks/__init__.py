"""pgbench jobs: command builder, output parser, runs and their charts."""
