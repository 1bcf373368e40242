"""Thread limits for BLAS-heavy inner loops."""

from __future__ import annotations

import sys
import threading
from typing import Any

#: The process's threadpoolctl controller and the number of imported modules when it was
#: built. Building one scans every loaded shared library (about 1 ms with torch loaded),
#: and the GAM and IRT fits enter a limit thousands of times per run; the scan is redone
#: only after new modules were imported, which is when a new BLAS can have been loaded.
_CONTROLLER: tuple[int, Any] | None = None
_LOCK = threading.Lock()


def _controller() -> Any:
    global _CONTROLLER
    n = len(sys.modules)
    with _LOCK:
        if _CONTROLLER is None or _CONTROLLER[0] != n:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER = (n, ThreadpoolController())
        return _CONTROLLER[1]


def single_blas_thread() -> Any:
    """Context manager: BLAS/LAPACK on one thread (threadpoolctl).

    Small dense problems (GAM bases of ~20 columns, per-draw embedding sums) gain nothing
    from multithreaded OpenBLAS, and on a busy machine its spinning threads made each SVD
    ~25x slower (0.16 s vs 6 ms for 4000 x 21 at load 10 on 2 cores). Every BLAS library
    loaded in the process is limited, and restored on exit, as with
    ``threadpoolctl.threadpool_limits``; the library scan is cached (:data:`_CONTROLLER`).

    Examples
    --------
    >>> from sigmap_lib._util import single_blas_thread
    >>> import numpy as np
    >>> from threadpoolctl import threadpool_info
    >>> with single_blas_thread():
    ...     s = np.linalg.svd(np.eye(3), compute_uv=False)
    ...     inside = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    >>> s.tolist(), inside
    ([1.0, 1.0, 1.0], {1})
    """
    return _controller().limit(limits=1, user_api="blas")
