"""Pure rendering and reading for standbys: Patroni, etcd, HAProxy, the member CA, the VIP."""
