from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import spearmanr

from sigmap_lib.overlap import UnitBits, signature_overlap, signature_robustness
from sigmap_lib.signatures import extract_signatures, method_class
from sigmap_lib.worlds import SyntheticWorld, make_synthetic_world


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("rob") / "w"
    shape = {"n_models": 16, "n_units": 2000, "n_functions": 2, "n_benchmarks": 4}
    make_synthetic_world(root, **shape, planted_per_function=3, n_items=20, n_respondents=0, seed=3)
    return SyntheticWorld.load(root)


@pytest.fixture(scope="module")
def data(world) -> SimpleNamespace:
    """The world's NLL arrays (one per model), benchmark names and scores, and ``bits``:
    the models' bits per byte read by unit (5-byte units)."""
    import polars as pl

    arrays = [np.asarray(a) for a in world.nll_arrays()]
    scores = pl.read_csv(world.root / "scores.csv")
    names = [c for c in scores.columns if c != "model"]
    nbytes = np.full(arrays[0].shape[0], 5)
    bpb = np.stack([a / (nbytes * np.log(2)) for a in arrays], axis=1)
    bits = UnitBits.from_arrays(arrays, nbytes, bpb.mean(axis=0), bpb.std(axis=0))
    return SimpleNamespace(arrays=arrays, names=names, y=scores.select(names).to_numpy(), bits=bits)


def _main(data: SimpleNamespace, kw: dict) -> tuple[dict, object]:
    """The main signatures, extracted with ``kw``, and their overlap matrix."""
    values = np.stack(data.arrays, axis=1)
    method = kw["method"]
    options = method_class(method).select_params(kw)  # the main method's options only
    found = extract_signatures(values, data.y, method=method, benchmark_names=data.names, **options)
    sigs = {s.benchmark: s.units for s in found}
    return sigs, signature_overlap(sigs, data.bits)


def test_variants_recompute_the_matrix_and_agreement_is_spearman(data) -> None:
    names = data.names
    kw = {"k": 20, "statistic": "thrush", "two_sided": True, "method": "aic", "gamma": 0.5}
    _, main = _main(data, kw)
    variants = signature_robustness(
        data.arrays,
        data.y,
        names,
        data.bits,
        main=main,
        extract_kwargs=kw,
        n_model_subsets=2,
        seed=0,
    )
    got = [v.name for v in variants]
    assert got == [
        "screening=preselect",
        "corpus half 1",
        "corpus half 2",
        "models subset 1",
        "models subset 2",
        "criterion=bic",
        "criterion=ebic",
    ]
    iu = np.triu_indices(len(names), 1)
    for v in variants:
        assert set(v.matrix.labels) == set(names)
        a = main.values[iu]
        b = v.matrix.subset(list(main.labels)).values[iu]
        assert np.isclose(v.agreement, spearmanr(a, b).statistic)
        assert v.n_pairs == len(a)
    half2 = next(v for v in variants if v.name == "corpus half 2")
    assert all(
        s.units.min() >= 1000 for s in half2.signatures.values()
    )  # global unit ids of the second half


def test_bad_split_is_rejected(data) -> None:
    from sigmap_lib.errors import SigmapInputError

    arrays = data.arrays
    y = np.random.default_rng(0).random((len(arrays), 2))
    with pytest.raises(SigmapInputError, match="corpus_split"):
        signature_robustness(
            arrays,
            y,
            ["a", "b"],
            data.bits,
            main=None,
            extract_kwargs={"k": 5},
            corpus_split=0,
        )


def test_forward_selection_variants_do_not_inherit_the_max_t_permutations(
    data, monkeypatch
) -> None:
    """With a calibrated main, the AIC / Lasso variants get no ``n_permutations`` (for forward
    selection it would be a permutation null of the whole procedure: P extra passes)."""
    import sigmap_lib.signatures as sig_mod

    calls = []
    real = sig_mod.extract_signatures

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(sig_mod, "extract_signatures", spy)  # the public face it imports
    kw = {"method": "calibrated", "n_permutations": 19, "k": 20, "two_sided": True}
    main_sigs, main = _main(data, kw)  # the real extract_signatures: not in ``calls``
    signature_robustness(
        data.arrays,
        data.y,
        data.names,
        data.bits,
        main=main,
        extract_kwargs=kw,
        n_model_subsets=0,
        methods=("aic", "lasso"),
        main_signatures=main_sigs,
    )
    by_method = {c.get("method"): c for c in calls}
    assert by_method["calibrated"]["n_permutations"] == 19
    assert "n_permutations" not in by_method["aic"] and "n_permutations" not in by_method["lasso"]
