"""Private helpers shared by every subpackage: atomic writes, table and JSONL readers,
boundary checks of arrays, thread limits. Not part of the public API.
"""

from ._atomic import (
    atomic_dir,
)

__all__ = [
    "atomic_dir",
]
