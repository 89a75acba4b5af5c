"""Forms of the Benchmarks tab, one module per form. They check the shape of the input and build
the domain types (``RunOptions``, the pool) the way ``manage.py bench run`` does; the services check
the rules (the target exists, the engine accepts the options and the custom script)."""

from benchmarks.forms.dataset import InitDataSetForm
from benchmarks.forms.run import RunForm
from benchmarks.forms.sweep import SweepForm, parse_clients_list, parse_pool_sizes

__all__ = ["InitDataSetForm", "RunForm", "SweepForm", "parse_clients_list", "parse_pool_sizes"]
