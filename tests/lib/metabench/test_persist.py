from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.metabench import (
    ItemPool,
    PoolIrt,
    load_item_pool,
    load_pool_irt,
    save_item_pool,
    save_pool_irt,
)


def test_item_pool_and_pool_irt_round_trip(tmp_path) -> None:
    rng = np.random.default_rng(0)
    stats = pd.DataFrame(
        {"sd": rng.random(5), "disc": rng.random(5)}, index=[f"i{j}" for j in range(5)]
    )
    roles = pd.Series(["train", "val", "test"], index=["m1", "m2", "m3"], name="role")
    pool = ItemPool("bench", stats, ["i0", "i3"], roles, 1.25)
    save_item_pool(pool, tmp_path / "pool")
    back = load_item_pool(tmp_path / "pool")
    pd.testing.assert_frame_equal(back.item_stats, stats)
    pd.testing.assert_series_equal(back.roles, roles, check_names=False)
    assert (
        back.pool_items == ["i0", "i3"]
        and back.subsample_rmse == 1.25
        and back.benchmark == "bench"
    )

    params = pd.DataFrame(
        {"a1": [1.0, 2.0], "d": [0.1, -0.3], "g": [0.0, 0.0], "u": [1.0, 1.0]}, index=["i0", "i3"]
    )
    th = pd.DataFrame({"theta": [0.1, -1.0], "se": [0.3, 0.4]}, index=["m1", "m2"])
    cv = pd.DataFrame({"irt_model": ["2PL"], "theta_method": ["MAP"], "val_rmse": [2.0]})
    pirt = PoolIrt("bench", {"2PL": params, "3PL": params * 2}, {"2PL/MAP": th}, cv)
    save_pool_irt(pirt, tmp_path / "irt")
    save_pool_irt(pirt, tmp_path / "irt")  # overwriting is atomic and idempotent
    back = load_pool_irt(tmp_path / "irt")
    assert set(back.params) == {"2PL", "3PL"}
    pd.testing.assert_frame_equal(back.params["3PL"], params * 2)
    pd.testing.assert_frame_equal(back.thetas["2PL/MAP"], th)
    pd.testing.assert_frame_equal(back.cv, cv)


def test_missing_stage_names_the_path(tmp_path) -> None:
    with pytest.raises(SigmapInputError, match="item pool"):
        load_item_pool(tmp_path / "nothing")
