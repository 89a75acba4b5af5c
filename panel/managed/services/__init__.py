"""One function per user action of the managed service's extras.

- ``tags``: a cluster's tags, the clusters with a tag.
- ``create``: a new cluster with its tags, trusted sources and storage as the create call sends them.
- ``maintenance``: the maintenance window, the versions a node reports, installing an update.
- ``autoscale``: the storage autoscale rule and the move to the next plan's disk.
- ``metrics``: an account's scrape credentials and a cluster's Prometheus exposition.
"""
