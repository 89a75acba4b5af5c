"""Log forwarding's services: the sinks (``sinks``, one function per user action), where they may
point (``destination``), how records travel (``transport``) and the forwarding round (``forward``)."""
