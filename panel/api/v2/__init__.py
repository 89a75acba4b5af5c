"""The ``/v2/`` API (django-ninja): the NinjaAPI, its routers, its errors and its URLs."""
