"""The heap helpers: glibc's arenas bounded for threads made afterwards; freed memory
returned."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Six threads, alive together, allocate 40 KB blocks (below glibc's mmap threshold, so from their arenas)
# and hold them; the process then prints its number of heaps from malloc_info.
PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util, re, sys, tempfile, threading
    from sigmap_assets.memory import cap_malloc_arenas
    if sys.argv[1] == "cap":
        assert cap_malloc_arenas(2)
    held, barrier = [], threading.Barrier(6)
    def work():
        barrier.wait()  # all six alive at once: none inherits an exited thread's arena
        held.append([bytearray(40_000) for _ in range(50)])
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.fopen.restype = ctypes.c_void_p
    path = tempfile.mktemp()
    f = ctypes.c_void_p(libc.fopen(path.encode(), b"w"))
    libc.malloc_info(0, f)
    libc.fclose(f)
    print(len(re.findall(r'<heap nr="[0-9]+"', open(path).read())))
    """
)


def _heaps(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_info")
def test_arenas_are_capped_for_threads_started_afterwards() -> None:
    assert _heaps("none") > 2  # the probe does make arenas of its own
    assert _heaps("cap") <= 2


def test_release_memory_runs_anywhere() -> None:
    from sigmap_assets.memory import release_memory

    release_memory()  # a no-op off glibc; on glibc it must not raise
