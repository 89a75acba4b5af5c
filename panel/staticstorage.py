"""The collected static files: public, so readable by a web server running as another user."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from whitenoise.storage import CompressedManifestStaticFilesStorage


class PublicStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's hashed and compressed files, every one of them 0644 in 0755 directories.

    Django applies ``file_permissions_mode`` to what it saves, but WhiteNoise writes the ``.gz``
    copies itself, under the panel's umask 077: a web server running as ``pgpanel`` then got
    "Permission denied" (a 500) for every stylesheet and script, and the pages had no htmx.
    """

    def post_process(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        yield from super().post_process(*args, **kwargs)
        for directory, _dirs, names in os.walk(self.location):
            os.chmod(directory, 0o755)
            for name in names:
                os.chmod(os.path.join(directory, name), 0o644)
