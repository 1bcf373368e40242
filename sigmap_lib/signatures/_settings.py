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


@dataclass(frozen=True)
class SignatureSettings:
    """Options of :func:`extract_signatures` that define a set of signatures.

    Attributes
    ----------
    k : int
        Candidates kept per benchmark by stage 1 (the screening's resolved ``K``; used by
        aic / bic / ebic).
    statistic : {"thrush", "preselect"}
        The rank statistic that orders candidates (aic / bic / ebic).
    two_sided : bool
        Rank candidates / test by ``|statistic|`` (default) rather than its signed value.
    criterion : {"aic", "bic", "ebic"}
        Stage-2 stopping rule; it names the method when ``method`` is None (settings
        saved before ``method`` existed read back as the forward selection they were).
    gamma : float
        EBIC's γ.
    method : str or None
        ``"calibrated" | "calibrated-marginal" | "lasso" | "aic" | "bic" | "ebic"``
        (None: ``criterion``).
    alpha : float
        Family-wise error level of the max-T threshold.
    shared_null : bool
        One set of permutation columns per set of scored models.
    tail_fraction, ranking, lasso_alpha :
        The Lasso's candidate tails, tie rule and penalty.

    The number of permutations is not part of the settings: it sets the precision of the
    calibration, not what a signature is (the caller passes ``n_permutations``).

    Examples
    --------
    >>> from sigmap_lib.signatures import SignatureSettings
    >>> s = SignatureSettings(k=200, statistic="thrush", two_sided=True, criterion="bic")
    >>> s.to_dict()["criterion"], s.resolved_method
    ('bic', 'bic')
    >>> SignatureSettings.from_dict(s.to_dict()) == s
    True
    >>> s.extract_kwargs()["criterion"], "method" in s.extract_kwargs()
    ('bic', False)
    >>> c = SignatureSettings(k=200, method="calibrated", shared_null=True)
    >>> c.resolved_method, c.extract_kwargs()["method"], "criterion" in c.extract_kwargs()
    ('calibrated', 'calibrated', False)
    >>> SignatureSettings.from_dict({"k": 50, "criterion": "aic"}).resolved_method  # older
    'aic'
    """

    k: int
    statistic: str = "thrush"
    two_sided: bool = True
    criterion: str = "aic"
    gamma: float = 0.5
    method: str | None = None
    alpha: float = 0.05
    shared_null: bool = False
    tail_fraction: float = 1e-6
    ranking: str = "average"
    lasso_alpha: float = 0.01

    def __post_init__(self) -> None:
        from sigmap_lib.signatures._signature import resolve_method

        resolve_method(self.method, self.criterion if self.method is None else None)

    @property
    def resolved_method(self) -> str:
        """The signature method these settings select."""
        return self.method if self.method is not None else self.criterion

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (stored in each signature's summary)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], what: str = "signature settings") -> SignatureSettings:
        """Read :meth:`to_dict` output back; unknown or missing keys are an error."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SigmapInputError(f"{what}: unknown field(s) {unknown}; known: {sorted(names)}")
        if "k" not in data:
            raise SigmapInputError(f"{what}: missing field 'k'")
        return cls(**data)

    def extract_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`sigmap_lib.signatures.extract_signatures`.

        ``method`` when set (then ``criterion`` is left out: it only names forward
        selection), else ``criterion`` as before.
        """
        out = self.to_dict()
        if self.method is None:
            del out["method"]
        else:
            del out["criterion"]
        return out
