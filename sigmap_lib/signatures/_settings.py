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
    """Screening and selection options of :func:`extract_signatures`.

    Attributes
    ----------
    k : int
        Candidates kept per benchmark by stage 1 (the screening's resolved ``K``).
    statistic : {"thrush", "preselect"}
        The rank statistic that orders candidates.
    two_sided : bool
        Rank candidates by ``|statistic|`` (default) rather than its signed value.
    criterion : {"aic", "bic", "ebic"}
        Stage-2 stopping rule.
    gamma : float
        EBIC's γ.

    Examples
    --------
    >>> from sigmap_lib.signatures import SignatureSettings
    >>> s = SignatureSettings(k=200, statistic="thrush", two_sided=True, criterion="bic")
    >>> s.to_dict()
    {'k': 200, 'statistic': 'thrush', 'two_sided': True, 'criterion': 'bic', 'gamma': 0.5}
    >>> SignatureSettings.from_dict(s.to_dict()) == s
    True
    >>> s.extract_kwargs()["criterion"]
    'bic'
    """

    k: int
    statistic: str = "thrush"
    two_sided: bool = True
    criterion: str = "aic"
    gamma: float = 0.5

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
        """Keyword arguments of :func:`sigmap_lib.signatures.extract_signatures`."""
        return self.to_dict()
