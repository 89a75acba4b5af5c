"""The spellings of a pgbench custom script that runs a program, and of ones that do not: what
the rule of issue 10, row 5 must refuse and leave alone (tests/security/test_pgbench_shell_rule.py),
and what pgbench, given them directly, really runs (tests/security/test_pgbench_shell_on_a_cluster.py).
"""

from __future__ import annotations

LEGITIMATE = "\\set aid random(1, 100)\n\\sleep 1 ms\nSELECT :aid AS aid;\n"
SHELL_MESSAGE = "runs a program on the server; custom scripts may only talk to the database."

# (name, script with {target} where the program's argument goes, lines refused, pgbench runs it)
REFUSED = [
    ("plain", "\\shell touch {target}\n", [1], True),
    ("upper case, indented", "SELECT 1;\n  \\SHELL touch {target}\n", [2], True),
    ("tab before, no final newline", "\t\\shell touch {target}", [1], True),
    ("setshell", "\\set a 1\n\\setshell out touch {target}\nSELECT :out;\n", [2], True),
    ("mixed case setshell", "\\SetShell out touch {target}\n", [1], True),
    ("after SQL on the same line", "SELECT 1; \\shell touch {target}\n", [1], True),
    ("after \\; (psql's forced semicolon)", "SELECT 1 \\;\\shell touch {target}\n", [1], True),
    ("blanks between backslash and word", "\\  shell touch {target}\n", [1], True),
    ("continuation between backslash and word", "SELECT 1;\n\\\\\nshell touch {target}\n", [2], True),
    ("CRLF continuation before setshell", "\\\\\r\nsetshell out touch {target}\r\n", [1], True),
    ("blanks and continuations mixed", "\\ \\\n \\\nSeTsHeLl v touch {target}\n", [1], True),
    ("word then continuation", "\\shell\\\ntouch {target}\n", [1], True),
    ("CRLF lines", "SELECT 1;\r\n\\shell touch {target}\r\n", [2], True),
    # pgbench's SQL lexer ends a -- comment at a carriage return: this \shell runs.
    ("after a comment ended by CR", "SELECT 1; -- note\r\\shell touch {target}\n", [1], True),
    # Decided: refused inside comments and string literals too, where pgbench does not run it. A
    # rule that followed pgbench's SQL lexer would have to agree with it on every corner (the CR
    # above, E'' escapes, dollar quotes, nested comments) and any disagreement would be a way out;
    # the text has no use in a benchmark script.
    ("in a -- comment", "SELECT 1; -- \\shell touch {target}\n", [1], False),
    ("in a string", "SELECT '\\shell touch {target}';\n", [1], False),
    ("two of them", "\\shell touch {target}\nSELECT 1;\n\\setshell v echo 1\n", [1, 3], True),
    ("alone at the end", "SELECT 1;\n\\shell", [2], False),
]
REFUSED_IDS = [name for name, *_ in REFUSED]

ALLOWED = [
    ("set and sleep", LEGITIMATE),
    ("a variable named shell", "\\set shell 1\nSELECT :shell;\n"),
    ("shell as a word in SQL", "SELECT 'shell', 'setshell' AS shell;\n"),
    ("words that merely start with shell", "\\set shellfish 1\n\\set setshells 2\nSELECT :shellfish;\n"),
    ("gset into shell_out", "SELECT 1 AS shell_out \\gset\n"),
    ("a sleep with a continuation", "\\sleep \\\n 1 ms\nSELECT 1;\n"),
]
