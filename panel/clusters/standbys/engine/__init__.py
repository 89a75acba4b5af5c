"""The processes of a cluster with standbys: Patroni, etcd, the floating address's follower."""
