"""The settings a set of signatures was extracted with, saved beside them.

Everything that recomputes signatures later — the permutation null of the signature
overlap, the robustness variants of the report — must use the same screening and
selection options as the stored signatures. They are saved as one object with the
signatures (``summary["settings"]``) and read back, never reassembled from several files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from sigmap_lib.errors import SigmapInputError
from sigmap_lib.signatures._method import SignatureMethod


@dataclass(frozen=True)
class SignatureSettings:
    """The method and the options that define a set of signatures.

    Attributes
    ----------
    k : int
        Candidates kept per benchmark by stage 1 (the screening's resolved ``K``; used by
        aic / bic / ebic).
    statistic : {"thrush", "preselect"}
        The rank statistic that orders candidates (aic / bic / ebic).
    two_sided : bool
        Rank candidates / test by ``|statistic|`` (default) rather than its signed value.
    gamma : float
        EBIC's γ.
    method : str
        A mode of :data:`~sigmap_lib.signatures.SIGNATURE_METHODS`.
    alpha : float
        Family-wise error level of the max-T threshold.
    shared_null : bool
        One set of permutation columns per set of scored models.
    tail_fraction, ranking, lasso_alpha :
        The Lasso's candidate tails, tie rule and penalty.
    fdr : float or None
        The calibrated test's false-discovery rate (None: the family-wise error ``alpha``).
    hierarchy : str
        ``calibrated-multiresolution``: the levels tested beside units, comma-separated
        (``"source,document"``); the caller turns them into group labels per unit.

    Each method takes the fields that are its parameters (:meth:`method_params`); the
    others are kept so that a variant with another method (the robustness table) reads the
    same screening. The number of permutations is not part of the settings: it sets the
    precision of the calibration, not what a signature is (the caller passes
    ``n_permutations``).

    Examples
    --------
    >>> from sigmap_lib.signatures import SignatureSettings
    >>> s = SignatureSettings(k=200, statistic="thrush", two_sided=True, method="bic")
    >>> s.method_params()
    {'k': 200, 'statistic': 'thrush', 'two_sided': True, 'alpha': 0.05}
    >>> SignatureSettings.from_dict(s.to_dict()) == s
    True
    >>> SignatureSettings(k=200, shared_null=True).method_params()  # the calibrated default
    {'two_sided': True, 'alpha': 0.05, 'shared_null': True, 'fdr': None}
    >>> SignatureSettings(k=200, method="ebic").method_object(n_permutations=5)
    ForwardEBIC(k=200, n_permutations=5)
    """

    k: int
    statistic: str = "thrush"
    two_sided: bool = True
    gamma: float = 0.5
    method: str = "calibrated"
    alpha: float = 0.05
    shared_null: bool = False
    tail_fraction: float = 1e-6
    ranking: str = "average"
    lasso_alpha: float = 0.01
    fdr: float | None = None
    hierarchy: str = ""

    def __post_init__(self) -> None:
        self.method_object()  # an unknown method or a parameter out of range: one line

    @property
    def method_class(self) -> type[SignatureMethod]:
        """The class of :attr:`method`."""
        from sigmap_lib.signatures._signature import method_class

        return method_class(self.method)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (stored in each signature's summary)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], what: str = "signature settings") -> SignatureSettings:
        """Read :meth:`to_dict` output back; unknown or missing keys are an error."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SigmapInputError(
                f"{what}: unknown field(s) {unknown} (known: {sorted(names)}): stored by "
                "another sigmap version; re-materialize the signatures (or delete the "
                "storage root)"
            )
        if "k" not in data:
            raise SigmapInputError(f"{what}: missing field 'k'")
        return cls(**data)

    def method_params(self) -> dict[str, Any]:
        """The fields that are parameters of :attr:`method`."""
        return self.method_class.select_params(self.to_dict())

    def method_object(self, **options: Any) -> SignatureMethod:
        """The method built from :meth:`method_params` and ``options`` (the caller's
        precision and extras: ``n_permutations``, ``strata``, ...)."""
        from sigmap_lib.signatures._signature import signature_method

        return signature_method(self.method, **(self.method_params() | options))
