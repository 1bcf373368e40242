"""The heap helpers: glibc's arenas bounded for threads made afterwards; freed memory
returned."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Six threads, alive together, allocate 40 KB blocks (below glibc's mmap threshold, so
# from their arenas) and hold them; the process then prints its number of heaps from
# malloc_info.
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


# 200 MB of 40 KB blocks freed on a heap glibc never trims by itself; the process prints
# its resident bytes before and after release_memory.
TRIM_PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util
    from sigmap_assets.memory import release_memory
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: no trimming on free
    libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD: every block from the heap
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    blocks = [bytearray(b"x" * 40_000) for _ in range(5000)]
    del blocks
    before = rss()
    release_memory()
    print(before, rss())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_memory_hands_the_freed_heap_back() -> None:
    out = subprocess.run(
        [sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = map(int, out.stdout.split())
    assert before - after > 150e6  # of the 200 MB freed
