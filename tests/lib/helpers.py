"""Helpers shared by the library tests (import them: ``from tests.lib.helpers import ...``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sigmap_lib.errors import SigmapInputError


def input_error(call: Callable[[], object], *fragments: str) -> str:
    """Run ``call``, which must raise :class:`SigmapInputError` whose message contains
    every one of ``fragments``; return the message (for further checks)."""
    with pytest.raises(SigmapInputError) as exc:
        call()
    msg = str(exc.value)
    for f in fragments:
        assert f in msg, msg
    return msg
