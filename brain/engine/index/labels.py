"""The labels one scope's HNSW index holds, one byte per label.

Labels come from each scope's ``next_label`` counter (``vector_scopes``), so they
are small and dense: 0, 1, 2, … up to the documents the scope ever embedded. A
Python ``set`` of them costs about 60 bytes a label (the int object and its slot),
60 MiB per million vectors beside the graph; a byte array indexed by label costs one
byte. Saved, the array is packed to one bit a label.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Final

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_LABEL", "LabelSet"]

MAX_LABEL: Final = 2**32 - 1
"""The largest label held. Labels count one scope's embedded documents, so a larger
one is a damaged row; refusing it keeps a bad value from sizing the array."""

_INITIAL: Final = 1024
"""Labels the array covers at first; it doubles past them (as the index's capacity does)."""


class LabelSet:
    """A set of labels in ``0 … MAX_LABEL``, one byte per label up to the largest."""

    def __init__(self, labels: Iterable[int] = ()) -> None:
        """The set of ``labels``."""
        self._present: NDArray[np.bool_] = np.zeros(_INITIAL, dtype=np.bool_)
        self._count = 0
        self.update(labels)

    def __len__(self) -> int:
        return self._count

    def __contains__(self, label: object) -> bool:
        if not isinstance(label, int | np.integer):
            return False
        value = int(label)
        return 0 <= value < len(self._present) and bool(self._present[value])

    def __iter__(self) -> Iterator[int]:
        return (int(label) for label in np.flatnonzero(self._present))

    def update(self, labels: Iterable[int] | NDArray[np.integer]) -> None:
        """Add ``labels`` (those already held are left as they are)."""
        if isinstance(labels, np.ndarray):
            chosen = labels.astype(np.int64, copy=False)
        else:
            chosen = np.fromiter((int(label) for label in labels), dtype=np.int64)
        if not len(chosen):
            return
        if int(chosen.min()) < 0 or int(chosen.max()) > MAX_LABEL:
            raise ValueError(f"a vector label must lie in 0 … {MAX_LABEL}")
        self._cover(int(chosen.max()))
        distinct = np.unique(chosen)
        new = distinct[~self._present[distinct]]
        self._present[new] = True
        self._count += len(new)

    def discard(self, label: int) -> None:
        """Remove ``label`` if held."""
        if label in self:
            self._present[label] = False
            self._count -= 1

    def _cover(self, largest: int) -> None:
        size = len(self._present)
        if largest < size:
            return
        while size <= largest:
            size *= 2
        grown = np.zeros(size, dtype=np.bool_)
        grown[: len(self._present)] = self._present
        self._present = grown

    def to_text(self) -> str:
        """The set packed one bit a label, as base64 text (for the index's description)."""
        top = int(np.flatnonzero(self._present)[-1]) + 1 if self._count else 0
        return base64.b64encode(np.packbits(self._present[:top]).tobytes()).decode("ascii")

    @classmethod
    def from_text(cls, text: str) -> LabelSet:
        """The set :meth:`to_text` wrote (ValueError for text that is not one)."""
        bits = np.unpackbits(np.frombuffer(base64.b64decode(text, validate=True), dtype=np.uint8))
        loaded = cls()
        loaded.update(np.flatnonzero(bits))
        return loaded
