"""What a cluster with standbys does: members, switchover, etcd, HAProxy's entry points."""
