"""Private files: what the server and the ``brain`` command write is their user's alone.

A data directory holds every tenant's text: the LMDB store, the WAL, the HNSW
indexes, snapshots and exports. The process runs under :data:`PRIVATE_UMASK`,
so each file it creates grants nothing to group or others, and at start the
server takes such permissions off whatever the data directory already holds
(:func:`make_private`: files an older server wrote readable by every local
user).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Final

__all__ = ["GROUP_AND_OTHERS", "PRIVATE_UMASK", "make_private"]

log = logging.getLogger("brain.server")

GROUP_AND_OTHERS: Final = 0o077
"""The permission bits of group and others: none of them is granted."""

PRIVATE_UMASK: Final = GROUP_AND_OTHERS
"""The file-creation mask of ``brain`` processes: files 0600 and directories 0700
at most, whatever mode a library asks for when it creates them."""


def make_private(root: Path) -> int:
    """Take group and other permissions off ``root`` and everything under it, links
    not followed; return how many entries changed."""
    changed = 0
    for directory, names, files in os.walk(root):
        for path in [Path(directory), *(Path(directory) / name for name in files)]:
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) or not mode & GROUP_AND_OTHERS:
                continue
            path.chmod(stat.S_IMODE(mode) & ~GROUP_AND_OTHERS)
            changed += 1
        names[:] = [name for name in names if not (Path(directory) / name).is_symlink()]
    if changed:
        log.info("took group and other permissions off %d entries under %s", changed, root)
    return changed
