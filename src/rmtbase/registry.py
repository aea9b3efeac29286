"""Named registries, extended from outside the package through entry points.

One :class:`Registry` per kind of named thing: nulls, storage formats, architecture adapters,
head statistics, profile axes. Other packages add entries through entry-point groups
``rmtbase.nulls``, ``rmtbase.storages``, ``rmtbase.adapters``, ``rmtbase.statistics``,
``rmtbase.axes`` (``docs/extending.md``).

- Plugins load lazily, on the first lookup needing every name (unknown name, ``in``,
  iteration, ``len``), never at import; :meth:`Registry.peek` loads nothing.
- An entry point's object goes to the registry's ``add(name, obj)``. A plugin that fails to
  import or register is skipped with one :class:`PluginWarning`; a later lookup of that name is
  refused with the same line (:meth:`Registry.failure`).
- :meth:`Registry.refresh` forgets the scan; an already registered name is not loaded again.
"""

from __future__ import annotations

import importlib.metadata
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence

__all__ = ["GROUPS", "Names", "PluginWarning", "Registry"]

#: The entry-point groups rmtbase reads, by kind.
GROUPS = {"null": "rmtbase.nulls", "storage": "rmtbase.storages",
          "adapter": "rmtbase.adapters", "statistic": "rmtbase.statistics",
          "axis": "rmtbase.axes"}

_LOCK = threading.RLock()


class PluginWarning(UserWarning):
    """A plugin (an entry point of one of :data:`GROUPS`) could not be loaded."""


class Registry(Mapping):
    """Values of one ``kind`` by name, in the order registered; plugins of entry-point
    ``group`` added on the first full lookup (module docstring). ``add(name, obj)``: how a
    plugin's loaded object is registered (default: under the entry point's name)."""

    def __init__(self, kind: str, group: str, add: Callable | None = None):
        self.kind, self.group = kind, group
        self._add = add or self.register
        self._entries: dict = {}
        self._loaded = self._loading = False
        self._failed: dict[str, str] = {}

    # -- registration (never loads plugins) --------------------------------------------------
    def register(self, name: str, value):
        """Register ``value`` under ``name`` (the kind's own module checks for a clash first)
        and return it."""
        self._entries[name] = value
        return value

    def unregister(self, name: str) -> None:
        """Take ``name`` out (KeyError if it is not registered)."""
        del self._entries[name]

    def peek(self, name, default=None):
        """The value registered under ``name`` so far, without loading plugins."""
        return self._entries.get(name, default)

    # -- plugins ------------------------------------------------------------------------------
    def load(self) -> None:
        """Load every entry point of :attr:`group` not loaded yet (once per scan)."""
        if self._loaded:
            return
        with _LOCK:  # another thread waits here until the plugins are in
            if self._loaded or self._loading:  # _loading: a plugin's own lookup, this thread
                return
            self._loading = True
            try:
                self._failed.clear()
                for ep in importlib.metadata.entry_points(group=self.group):
                    if ep.name not in self._entries:  # loaded before (or shipped): not again
                        self._load_one(ep)
            finally:
                self._loading, self._loaded = False, True

    def _load_one(self, ep) -> None:
        try:
            self._add(ep.name, ep.load())
        except Exception as e:  # noqa: BLE001 - any plugin error: one line, skipped
            text = str(e).strip().splitlines()
            line = (f"rmtbase: {self.kind} plugin {ep.name!r} ({ep.value}, entry point group "
                    f"{self.group}) was not loaded: {type(e).__name__}"
                    + (f": {text[0]}" if text else ""))
            self._failed[ep.name] = line
            warnings.warn(line, PluginWarning, stacklevel=3)

    def refresh(self) -> None:
        """Scan the entry points again at the next lookup (module docstring)."""
        self._loaded = False

    def failure(self, name) -> str | None:
        """The line saying why the plugin ``name`` was not loaded, if it failed."""
        self.load()
        return self._failed.get(name) if isinstance(name, str) else None

    def unknown(self, name, what: str) -> str:
        """The one-line refusal of ``name``: ``what`` (e.g. "null must be one of a, b, got
        'x'"), or the plugin's failure when the entry point of that name failed."""
        return self.failure(name) or what

    # -- lookups (load plugins first) ------------------------------------------------------------
    def __getitem__(self, name):
        if name not in self._entries:
            self.load()
        return self._entries[name]

    def __contains__(self, name) -> bool:
        try:
            hash(name)
        except TypeError:
            return False
        if name in self._entries:
            return True
        self.load()
        return name in self._entries

    def __iter__(self) -> Iterator:
        self.load()
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def names(self) -> Names:
        """A live view of the names (:class:`Names`)."""
        return Names(self)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.group!r}, {list(self._entries)!r})"


class Names(Sequence):
    """The names of a :class:`Registry` in registration order, read when used (a name
    registered later, or by a plugin, is in it); it compares equal to the tuple of them."""

    def __init__(self, registry: Registry, keep: Callable | None = None):
        self._registry, self._keep = registry, keep

    def _now(self) -> tuple:
        names = tuple(self._registry)
        if self._keep is None:
            return names
        return tuple(n for n in names if self._keep(self._registry.peek(n)))

    def __getitem__(self, i):
        return self._now()[i]

    def __len__(self) -> int:
        return len(self._now())

    def __iter__(self):
        return iter(self._now())

    def __contains__(self, name) -> bool:
        if not isinstance(name, str) or name not in self._registry:
            return False
        return self._keep is None or bool(self._keep(self._registry.peek(name)))

    def __add__(self, other) -> tuple:
        return self._now() + tuple(other)

    def __radd__(self, other) -> tuple:
        return tuple(other) + self._now()

    def __eq__(self, other) -> bool:
        return self._now() == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._now())
