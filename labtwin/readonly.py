"""A ``dict`` that cannot be changed, for values one object hands out to many holders (a
cache's stored results, provenance shared by many measurements)."""

from __future__ import annotations

from typing import Any


class ReadOnlyDict(dict):
    """A ``dict`` whose changing methods raise ``TypeError`` with :attr:`read_only_message`;
    ``dict(d)`` or ``d.copy()`` is a mutable copy. It pickles, copies and writes to JSON as
    the plain dict it equals. Subclasses say in their message whose it is."""

    __slots__ = ()
    read_only_message = "this dict is read-only; change a copy of it: dict(d)"

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(self.read_only_message)

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))
