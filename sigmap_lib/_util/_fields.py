"""A store's read-only properties declared as typed fields of its JSON manifest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class ManifestField(Generic[T]):
    """A read-only property: the manifest entry of the same name, converted by ``kind``.

    Parameters
    ----------
    kind : callable
        Converts the stored JSON value (``int``, ``str``, ...).
    attr : str
        The instance attribute holding the manifest dict.

    Examples
    --------
    >>> from sigmap_lib._util import ManifestField
    >>> class Store:
    ...     n_units = ManifestField(int)
    ...     def __init__(self, manifest):
    ...         self.manifest = manifest
    >>> Store({"n_units": "12"}).n_units
    12
    """

    def __init__(self, kind: Callable[[Any], T], attr: str = "manifest") -> None:
        self.kind = kind
        self.attr = attr
        self.key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> ManifestField[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> T | ManifestField[T]:
        if obj is None:
            return self
        return self.kind(getattr(obj, self.attr)[self.key])
