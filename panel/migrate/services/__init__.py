"""Online migration's services: the source side (``source``), the cluster side (``target``), and
one function per user action (``actions``)."""
