"""One registry per extension point (dm_control's ``SUITE``): frozen specs by name, in registration order.

:class:`Registry` holds what every registry of the package shares: ``add`` refuses a spec whose name (or another
field that must be unique) is already registered, lookup by name refuses an unknown one with the valid names,
and iteration keeps the registration order. The runtimes (:mod:`pyrua_ros.settings.runtimes`) and the drivers
(:mod:`pyrua_ros.sim_interfaces.drivers`) subclass it with their own queries. It sits at the lowest layer, beside
the driver table, and imports nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

Spec = TypeVar("Spec")


class Registry(Generic[Spec]):
    """Specs (each with a ``name``) by name, in registration order.

    ``noun`` names a spec in refusals ("runtime", "driver"); ``unique``: the fields no two specs may share (None
    values never clash); ``sort_valid``: list the valid names sorted in an unknown name's refusal (else in
    registration order)."""

    def __init__(self, noun: str, *, unique: tuple[str, ...] = ("name",), sort_valid: bool = False) -> None:
        self.noun, self._unique, self._sort_valid = noun, unique, sort_valid
        self._specs: dict[str, Spec] = {}

    def add(self, spec: Spec) -> Spec:
        """Register ``spec``; ValueError when one of its unique fields is registered already."""
        for other in self._specs.values():
            for field in self._unique:
                value = getattr(spec, field)
                if value is not None and value == getattr(other, field):
                    raise ValueError(f"{self.noun} {spec.name!r}: {field} {value!r} is registered twice")
        self._specs[spec.name] = spec
        return spec

    def __getitem__(self, name: str) -> Spec:
        """The spec of ``name``; ValueError listing the valid names otherwise."""
        try:
            return self._specs[name]
        except KeyError:
            valid = sorted(self._specs) if self._sort_valid else list(self._specs)
            raise ValueError(f"unknown {self.noun} {name!r}; valid {self.noun}s: {', '.join(valid)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[Spec]:
        return iter(self._specs.values())

    def get(self, name: str) -> Spec | None:
        """The spec of ``name``, or None."""
        return self._specs.get(name)
