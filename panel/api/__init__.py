"""The public API (``/v2/``, compatible with the managed service's databases API) and the
personal access tokens it is called with."""
