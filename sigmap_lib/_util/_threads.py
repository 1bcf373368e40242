"""Thread limits for BLAS-heavy inner loops."""

from __future__ import annotations

from typing import Any


def single_blas_thread() -> Any:
    """Context manager: BLAS/LAPACK on one thread (threadpoolctl).

    Small dense problems (GAM bases of ~20 columns, per-draw embedding sums) gain nothing
    from multithreaded OpenBLAS, and on a busy machine its spinning threads made each SVD
    ~25x slower (0.16 s vs 6 ms for 4000 x 21 at load 10 on 2 cores).

    Examples
    --------
    >>> import numpy as np
    >>> with single_blas_thread():
    ...     s = np.linalg.svd(np.eye(3), compute_uv=False)
    >>> s.tolist()
    [1.0, 1.0, 1.0]
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")
