"""``single_blas_thread``: one BLAS thread inside, the previous limits restored after, the
same as ``threadpoolctl.threadpool_limits``; the library scan is cached until modules are
imported."""

from __future__ import annotations

import sys
import threading

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from sigmap_lib._util import _threads
from sigmap_lib._util._threads import single_blas_thread


def _blas_threads() -> dict[str, int]:
    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_limits_every_blas_to_one_thread_and_restores_them() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before and set(before.values()) == {2}
        with single_blas_thread():
            assert set(_blas_threads().values()) == {1}
            with single_blas_thread():  # nested entries restore their own entry's state
                assert set(_blas_threads().values()) == {1}
            assert set(_blas_threads().values()) == {1}
        assert _blas_threads() == before


def test_the_library_scan_is_reused_until_a_module_is_imported() -> None:
    with single_blas_thread():
        pass
    first = _threads._CONTROLLER
    with single_blas_thread():
        pass
    assert _threads._CONTROLLER is first  # no import since: the same scan
    name = "sigmap_test_fake_module"
    sys.modules[name] = type(sys)(name)
    try:
        with single_blas_thread():
            pass
        assert _threads._CONTROLLER is not first and _threads._CONTROLLER[0] == len(sys.modules)
    finally:
        del sys.modules[name]


def test_results_inside_the_limit_equal_those_outside() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((400, 21))
    expect = np.linalg.svd(a, compute_uv=False)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                with single_blas_thread():
                    np.testing.assert_allclose(np.linalg.svd(a, compute_uv=False), expect)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
