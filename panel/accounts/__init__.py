"""The account's own settings: for now the language its pages are shown in."""
