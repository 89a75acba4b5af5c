"""What a read-only replica does: built, streamed, healed, promoted, removed."""
