"""First start: the ``default`` namespace, its key and the admin token (spec/06-operations.md §1).

On the first start in a data directory the server mints a key with every
permission on namespace ``default`` and an admin token, writes both to
``DATA/credentials.toml`` (mode 0600) and stores their hashes. The file is
written, fsynced and renamed into place before the hashes are committed, so a
crash in between leaves a directory that bootstraps again on the next start
rather than one whose only key nobody knows.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from brain.server.keys import KeyStore, generate_admin_token, generate_api_key

__all__ = ["CREDENTIALS_FILE", "bootstrap_credentials"]

CREDENTIALS_FILE: Final = "credentials.toml"
CREDENTIALS_MODE: Final = 0o600


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, CREDENTIALS_MODE)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, CREDENTIALS_MODE)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def bootstrap_credentials(data_dir: Path, keys: KeyStore) -> Path | None:
    """Make first-start credentials if this directory has none; return the file written."""
    if keys.is_bootstrapped():
        return None
    api_key = generate_api_key()
    admin_token = generate_admin_token()
    path = data_dir / CREDENTIALS_FILE
    # Both secrets are base64url, so they need no TOML escaping.
    _write_private(
        path,
        "# Written by the first start of brain serve. Keep it secret.\n"
        'namespace = "default"\n'
        f'api_key = "{api_key}"\n'
        f'admin_token = "{admin_token}"\n',
    )
    keys.bootstrap(api_key, admin_token)
    return path
