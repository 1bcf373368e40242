"""The process's heap: handing freed memory back to the OS and bounding glibc's arenas.

Light on purpose (standard library only), so that the command line can bound the arenas
before the heavy imports start their threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    """glibc, when this process runs on it (else None: :func:`release_memory` only collects)."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_memory() -> None:
    """Collect garbage and hand the freed heap back to the OS (glibc keeps it otherwise), so
    one step's peak does not stay in the process under the next one's: the zoo demo's
    process peaked at 2.27 GB without it, 1.99 GB with it (docs/RESULTS.md)."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(OSError):
            libc.malloc_trim(0)


#: glibc's ``mallopt`` parameter for the most malloc arenas (``M_ARENA_MAX`` in malloc.h).
_M_ARENA_MAX = -8


def cap_malloc_arenas(n: int = 2) -> bool:
    """At most ``n`` glibc malloc arenas in this process from now on (True when set).

    glibc gives new threads arenas of their own (up to 8 per core), and memory freed in
    one stays with it. The demo's lanes and torch's thread pools would otherwise hold
    several: with 2, the zoo demo's process peaked at 1.74 GB instead of 1.83–1.87 GB,
    for about 8 CPU-s more (the threads wait on shared arenas' locks; docs/RESULTS.md). Arenas made before the call stay. A no-op off glibc.

    Examples
    --------
    >>> from sigmap_assets.memory import cap_malloc_arenas
    >>> import sys
    >>> cap_malloc_arenas(2) == sys.platform.startswith("linux")
    True
    """
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, max(1, int(n))))
