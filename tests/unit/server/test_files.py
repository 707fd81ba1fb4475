"""make_private takes group and other permissions off a tree, and follows no link."""

from __future__ import annotations

import stat
from pathlib import Path

from brain.server.files import make_private


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_group_and_other_bits_go_and_the_owner_keeps_its_own(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "lmdb").mkdir(parents=True)
    (root / "lmdb" / "data.mdb").write_bytes(b"rows")
    (root / "lmdb" / "data.mdb").chmod(0o644)
    (root / "lmdb").chmod(0o755)
    (root / "run.sh").write_text("")
    (root / "run.sh").chmod(0o751)
    (root / "private").write_text("")
    (root / "private").chmod(0o600)
    root.chmod(0o775)
    assert make_private(root) == 4  # root, lmdb/, data.mdb, run.sh; private was already
    assert _mode(root) == 0o700
    assert _mode(root / "lmdb") == 0o700
    assert _mode(root / "lmdb" / "data.mdb") == 0o600
    assert _mode(root / "run.sh") == 0o700
    assert _mode(root / "private") == 0o600
    assert make_private(root) == 0


def test_links_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shared.txt").write_text("")
    (outside / "shared.txt").chmod(0o644)
    outside.chmod(0o755)
    root = tmp_path / "data"
    root.mkdir(mode=0o700)
    (root / "to-dir").symlink_to(outside, target_is_directory=True)
    (root / "to-file").symlink_to(outside / "shared.txt")
    assert make_private(root) == 0
    assert _mode(outside) == 0o755
    assert _mode(outside / "shared.txt") == 0o644
