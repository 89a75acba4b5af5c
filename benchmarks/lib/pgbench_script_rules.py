"""What a custom pgbench script may contain: it talks to the database, never to the operating system.

pgbench's ``\\shell`` and ``\\setshell`` meta-commands run a program through ``system()``/``popen()``
on the machine that runs pgbench, so a script holding them is refused before anything is queued.

How pgbench 15 reads a meta-command (``psqlscan.l`` hands over at a backslash, ``exprscan.l`` reads
the words): a backslash outside quotes and comments, anywhere on a line (``SELECT 1 \\shell …``
too), then the command word, compared case-insensitively (``\\SHELL``). Before that word the word
lexer skips blanks (``\\  shell``) and line continuations (a backslash at the end of a line:
``\\`` + newline + ``setshell``). A word ends at a blank, a newline or a continuation.

This rule matches that shape anywhere in the text, also inside SQL comments and string literals,
where pgbench would not execute it. That is deliberate: a rule that mirrored pgbench's SQL lexer
exactly would have to agree with it on every corner (a ``--`` comment ends at a carriage return,
``\\;`` is not a meta-command, ``E''`` strings escape backslashes, dollar quotes, nested ``/* */``)
and any disagreement would be a way out; the text ``\\shell`` has no use in a benchmark script, so
refusing it in a comment costs nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BLANK = r"[ \t\r\f\v]"
_CONTINUATION = r"\\\r?\n"
_SHELL_META = re.compile(
    rf"\\(?:{_BLANK}|{_CONTINUATION})*(?P<name>(?:set)?shell)(?=[ \t\r\f\v\n]|{_CONTINUATION}|\Z)",
    re.IGNORECASE | re.ASCII,
)


@dataclass(frozen=True)
class ShellCommand:
    """A meta-command that would run a program: its 1-based line and name (``shell``/``setshell``)."""

    line: int
    name: str


def shell_commands(script: str) -> list[ShellCommand]:
    """Every ``\\shell`` and ``\\setshell`` in ``script``, in any spelling pgbench accepts."""
    return [
        ShellCommand(script.count("\n", 0, match.start()) + 1, match.group("name").lower())
        for match in _SHELL_META.finditer(script)
    ]


def shell_command_lines(script: str) -> list[int]:
    """The line numbers where ``script`` starts a ``\\shell`` or ``\\setshell`` meta-command; empty
    when the script may run."""
    return sorted({command.line for command in shell_commands(script)})
