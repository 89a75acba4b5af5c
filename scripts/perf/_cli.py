"""The command line the measurement scripts share: the script's docstring as its help, and its
whole-number knobs (clients, scale, rounds …) as options with defaults."""

from __future__ import annotations

import argparse


def counts_parser(doc: str | None, **defaults: int) -> argparse.ArgumentParser:
    """A parser with ``doc`` as its description and ``--name N`` for each knob, in order
    (``rpo_samples=2`` is ``--rpo-samples``, 2 unless given); add the script's other options to it."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in defaults.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    return parser
