"""Private helpers shared by every subpackage: atomic writes, table and JSONL readers,
boundary checks of arrays, thread limits. Not part of the public API (names may change);
each exists once here so that every subpackage behaves the same at its boundary.
"""

from ._atomic import (
    atomic_dir,
    atomic_file,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    json_default,
)
from ._checks import array_like
from ._concat import ConcatArray
from ._fields import ManifestField
from ._files import files_in, files_stamp, read_folder_json, read_head
from ._tables import iter_jsonl, load_json, read_table, row_label, table_kind
from ._threads import single_blas_thread

__all__ = [
    "ConcatArray",
    "ManifestField",
    "array_like",
    "atomic_dir",
    "atomic_file",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "files_in",
    "files_stamp",
    "iter_jsonl",
    "json_default",
    "load_json",
    "read_folder_json",
    "read_head",
    "read_table",
    "row_label",
    "single_blas_thread",
    "table_kind",
]
