"""The standbys room: a cluster with standbys (``num_nodes`` 2-3). Patroni runs every member,
the panel's etcd holds the leader key, HAProxy keeps the cluster's ports on the primary and the
standbys; members are added and removed, switched over, restarted one at a time, and followed by
a floating address. ``services`` -> ``engine`` -> ``lib``, as in every app (pyproject.toml's
contracts); the single-server part of ``panel.clusters`` reaches in only where a contract lists it.
"""
