"""The replicas room: read-only replicas of a cluster, each a cluster of its own that streams
from its source (on its node or another); built, healed, given a slot, promoted. Only
``services`` so far; the server's own files are ``panel.clusters.lib.pgconf``'s.
"""
