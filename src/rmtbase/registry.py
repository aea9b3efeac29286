"""Named registries, extended from outside the package through entry points.

One :class:`Registry` per kind of named thing: nulls, storage formats, architecture adapters,
head statistics, profile axes. Other packages add entries through entry-point groups
``rmtbase.nulls``, ``rmtbase.storages``, ``rmtbase.adapters``, ``rmtbase.statistics``,
``rmtbase.axes`` (``docs/extending.md``; a plugin imports what it needs from
:mod:`rmtbase.extend`).

- Plugins load on demand, on the first lookup needing every name (unknown name, ``in``,
  iteration, ``len``), never at import; :meth:`Registry.peek` loads nothing. An entry point whose
  module is still being imported (a plugin module that imports rmtbase, which looks a name up)
  is left for the next lookup, not failed.
- An entry point's object goes to the registry's ``add(name, obj)`` (:func:`record_plugin` for
  a record type). A plugin that fails to import or register is skipped with one
  :class:`PluginWarning`; a later lookup of that name is refused with the same line
  (:meth:`Registry.failure`). An entry point named like an entry of another owner (a shipped
  ``gaussian``) is not loaded: one warning names both owners, said on the first lookup of that
  name too (entry-point names are read, nothing imported), so the shipped entry wins whether or
  not a lookup loads the plugins. A *reserved* name (:meth:`Registry.reserve`: rmtbase's own
  entry registered only when first named) is rmtbase's in every process state: no plugin and
  no other registration takes it. Of several plugins giving one name, the first by
  (distribution name, object path) is loaded, whatever the install order; each other one is
  one warning.
- Each entry has an owner (:meth:`Registry.owner`): rmtbase's own entries are *shipped*
  (:meth:`Registry.shipped`); a plugin's failure when called is a :class:`PluginError` line
  naming it (:func:`plugin_call`).
- :meth:`Registry.refresh` forgets the scan; an already registered name is not loaded again.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence

from .errors import InputError

__all__ = ["GROUPS", "Names", "PluginError", "PluginWarning", "Registry", "plugin_call",
           "record_plugin"]

#: The entry-point groups rmtbase reads, by kind.
GROUPS = {"null": "rmtbase.nulls", "storage": "rmtbase.storages",
          "adapter": "rmtbase.adapters", "statistic": "rmtbase.statistics",
          "axis": "rmtbase.axes"}

_LOCK = threading.RLock()


class PluginWarning(UserWarning):
    """A plugin (an entry point of one of :data:`GROUPS`) could not be loaded."""


class PluginError(InputError):
    """A plugin failed when called, or returned what its contract excludes: one line naming
    the plugin and what it did (exit 2 from the command line)."""


def _owner_of(value) -> tuple[str, str]:
    """(module, text) of who registered ``value``: a class by its module and name, a record by
    the module of its first function (``fn``, ``quantiser``, ``detector``), else its type's."""
    if isinstance(value, type):
        return value.__module__, f"{value.__module__}.{value.__qualname__}"
    for attr in ("fn", "quantiser", "detector"):
        f = getattr(value, attr, None)
        if callable(f) and getattr(f, "__module__", None):
            return f.__module__, f.__module__
    module = type(value).__module__
    return module, module


def _initialising(module: str) -> bool:
    """Whether ``module`` is being imported right now (it, or a package above it)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        spec = getattr(sys.modules.get(".".join(parts[:i])), "__spec__", None)
        if getattr(spec, "_initializing", False):
            return True
    return False


class Registry(Mapping):
    """Values of one ``kind`` by name, in the order registered; plugins of entry-point
    ``group`` added on the first full lookup (module docstring). ``add(name, obj)``: how a
    plugin's loaded object is registered (default: under the entry point's name);
    ``check(name, value)``: what every entry not shipped must pass."""

    def __init__(self, kind: str, group: str, add: Callable | None = None,
                 check: Callable | None = None):
        self.kind, self.group = kind, group
        self._add = add or self.register
        self._check = check  # check(name, value) of every entry not shipped: raises if wrong
        self._entries: dict = {}
        self._owners: dict[str, tuple[str, str]] = {}
        self._shipped: set[str] = set()
        self._loaded = self._loading = False
        self._failed: dict[str, str] = {}
        self._ep = None  # the entry point being loaded (its owner text)
        self._shadows_read = False  # entry points named like shipped entries warned of
        self._said: set = set()  # entry points warned of as taken, this scan
        self._reserved: dict[str, str] = {}  # rmtbase's own names registered when named

    # -- registration (never loads plugins) --------------------------------------------------
    def register(self, name: str, value, *, shipped: bool = False):
        """Register ``value`` under ``name`` (the kind's own module checks for a clash first)
        and return it; ``shipped``: one of rmtbase's own; any other passes the kind's check,
        however it is registered (an entry point, the kind's register, this call)."""
        if not shipped and name in self._reserved:
            raise InputError(f"the {self.kind} name {name!r} is rmtbase's own "
                             f"({self._reserved[name]}); give the plugin another name")
        if not shipped and self._check is not None:
            self._check(name, value)
        self._entries[name] = value
        if self._ep is not None:
            self._owners[name] = (self._ep.module, _ep_text(self._ep, self.group))
        else:
            self._owners[name] = _owner_of(value)
        if shipped:
            self._shipped.add(name)
        return value

    def reserve(self, names, module: str) -> None:
        """Keep ``names`` for rmtbase's own entries of ``module``, registered (shipped) only when
        first named: an entry point of such a name is never loaded, a registration refused."""
        for name in names:
            self._reserved[name] = module

    def _own(self, name) -> bool:
        return name in self._shipped or name in self._reserved

    def unregister(self, name: str) -> None:
        """Take ``name`` out (KeyError if it is not registered)."""
        del self._entries[name]
        self._owners.pop(name, None)
        self._shipped.discard(name)

    def peek(self, name, default=None):
        """The value registered under ``name`` so far, without loading plugins."""
        return self._entries.get(name, default)

    def shipped(self, name) -> bool:
        """Whether ``name`` is one of rmtbase's own entries (loads nothing)."""
        return name in self._shipped

    def shipped_values(self) -> tuple:
        """rmtbase's own entries' values, in registration order (loads nothing)."""
        return tuple(v for n, v in self._entries.items() if n in self._shipped)

    def owner(self, name) -> str:
        """Who registered ``name``: a plugin's entry point and distribution, a class, a module."""
        return self._owners.get(name, ("", "?"))[1]

    # -- plugins ------------------------------------------------------------------------------
    def load(self) -> None:
        """Load every entry point of :attr:`group` not loaded yet (once per scan)."""
        if self._loaded:
            return
        with _LOCK:  # another thread waits here until the plugins are in
            if self._loaded or self._loading:  # _loading: a plugin's own lookup, this thread
                return
            self._loading = True
            pending = False
            try:
                self._failed.clear()
                self._shadows_read = True  # _taken below says each
                for ep in self._entry_points():
                    if ep.name in self._entries or ep.name in self._reserved:
                        self._taken(ep)
                    elif _initialising(ep.module):
                        pending = True  # its module is importing rmtbase: at the next lookup
                    else:
                        self._load_one(ep)
            finally:
                self._loading, self._loaded = False, not pending

    def _entry_points(self) -> list:
        """The group's entry points, one a name: of several plugins giving a name, the first by
        (distribution name, object path) (module docstring); each other one warned of."""
        by_name: dict[str, list] = {}
        for ep in importlib.metadata.entry_points(group=self.group):
            by_name.setdefault(ep.name, []).append(ep)
        out = []
        for name, eps in by_name.items():
            eps = sorted(eps, key=lambda ep: (_dist_name(ep), ep.value))
            out.append(eps[0])
            for other in eps[1:]:
                if (_dist_name(other), other.value) == (_dist_name(eps[0]), eps[0].value):
                    continue  # one distribution seen twice on the path
                warnings.warn(f"rmtbase: {self.kind} plugin {name!r} ({_ep_text(other, self.group)})"
                              f" was not loaded: the name {name!r} is also given by "
                              f"{_ep_text(eps[0], self.group)}, which is used (the first by "
                              "distribution name)", PluginWarning, stacklevel=5)
        return out

    def _read_shadows(self) -> None:
        """Once a scan: warn of each entry point named like a shipped entry (:meth:`_taken`),
        reading entry-point names only (no plugin imported)."""
        if self._shadows_read or self._loading:
            return
        self._shadows_read = True
        for ep in importlib.metadata.entry_points(group=self.group):
            if self._own(ep.name):
                self._taken(ep)

    def _taken(self, ep) -> None:
        """An entry point named like a registered entry: silent when its own module registered
        it (imported before), else one warning naming both owners."""
        module, text = self._owners.get(ep.name) or (
            (self._reserved[ep.name],) * 2 if ep.name in self._reserved else ("", "?"))
        if module == ep.module or module.startswith(ep.module + "."):
            return
        if self._owners.get(ep.name, ("", ""))[1] == _ep_text(ep, self.group):
            return
        if (ep.name, ep.value, _dist_name(ep)) in self._said:
            return
        self._said.add((ep.name, ep.value, _dist_name(ep)))
        line = (f"rmtbase: {self.kind} plugin {ep.name!r} ({_ep_text(ep, self.group)}) was not "
                f"loaded: the name {ep.name!r} is taken by "
                + ("rmtbase's own " + self.kind if self._own(ep.name) else "another plugin")
                + f" ({text})")
        warnings.warn(line, PluginWarning, stacklevel=4)

    def _load_one(self, ep) -> None:
        try:
            obj = ep.load()
            self._ep = ep
            try:
                self._add(ep.name, obj)
            finally:
                self._ep = None
        except Exception as e:  # noqa: BLE001 - any plugin error: one line, skipped
            line = (f"rmtbase: {self.kind} plugin {ep.name!r} ({_ep_text(ep, self.group)}) was "
                    f"not loaded: {_error_text(e)}")
            self._failed[ep.name] = line
            warnings.warn(line, PluginWarning, stacklevel=4)

    def refresh(self) -> None:
        """Scan the entry points again at the next lookup (module docstring)."""
        self._loaded = self._shadows_read = False
        self._said.clear()

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
        elif name in self._shipped:
            self._read_shadows()
        return self._entries[name]

    def __contains__(self, name) -> bool:
        try:
            hash(name)
        except TypeError:
            return False
        if name in self._entries:
            if name in self._shipped:
                self._read_shadows()
            return True
        self.load()
        return name in self._entries

    def __iter__(self) -> Iterator:
        self.load()
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def names(self, keep: Callable | None = None) -> Names:
        """A live view of the names whose value satisfies ``keep`` (:class:`Names`)."""
        return Names(self, keep)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.group!r}, {list(self._entries)!r})"


def _dist_name(ep) -> str:
    dist = getattr(ep, "dist", None)
    return "" if dist is None else str(dist.name)


def _ep_text(ep, group: str) -> str:
    dist = getattr(ep, "dist", None)
    by = f", distribution {dist.name} {dist.version}" if dist is not None else ""
    return f"{ep.value}, entry point group {group}{by}"


def _error_text(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}" + (f": {text[0]}" if text else "")


def record_plugin(record_type: type, register: Callable) -> Callable:
    """The ``add(name, obj)`` of a registry of ``record_type`` records (storage formats, head
    statistics, profile axes): ``obj`` must be such a record named like its entry point, then
    ``register(obj)``."""
    what = f"{record_type.__module__}.{record_type.__qualname__}"

    def add(name: str, record) -> None:
        if not isinstance(record, record_type):
            raise TypeError(f"{record!r} is not a {what} record")
        if record.name != name:
            raise TypeError(f"the entry point is named {name!r} but its record is named "
                            f"{record.name!r}")
        register(record)

    return add


def plugin_call(registry: Registry, name: str, what: str, fn: Callable, *args,
                check: Callable | None = None, **kw):
    """``fn(*args)`` of the entry ``name`` of ``registry``; for an entry not shipped, an
    exception or a result ``check(result)`` objects to (its text, else None) is one
    :class:`PluginError` line naming the plugin, ``what`` was called and what it did."""
    if registry.shipped(name):
        return fn(*args, **kw)
    head = f"rmtbase: {registry.kind} plugin {name!r} ({registry.owner(name)})"
    try:
        out = fn(*args, **kw)
    except (PluginError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - a plugin's error: one line naming it
        raise PluginError(f"{head}: {what} raised {_error_text(e)}") from e
    wrong = check(out) if check is not None else None
    if wrong:
        raise PluginError(f"{head}: {what} returned {wrong}")
    return out


class Names(Sequence):
    """The names of a :class:`Registry` in registration order whose value satisfies ``keep``,
    read when used (a name registered later, or by a plugin, is in it), after the fixed names
    ``first``; it compares equal to the tuple of them. A record is in it when it is the record
    registered under its name. Unhashable: its contents change."""

    def __init__(self, registry: Registry, keep: Callable | None = None, first: tuple = ()):
        self._registry, self._keep, self._first = registry, keep, tuple(first)

    def _now(self) -> tuple:
        names = tuple(self._registry)
        if self._keep is not None:
            names = tuple(n for n in names if self._keep(self._registry.peek(n)))
        return self._first + names

    def __getitem__(self, i):
        return self._now()[i]

    def __len__(self) -> int:
        return len(self._now())

    def __iter__(self):
        return iter(self._now())

    def __contains__(self, name) -> bool:
        if isinstance(name, str) and name in self._first:
            return True
        record = None
        if not isinstance(name, str):
            record, name = name, getattr(name, "name", None)
        if not isinstance(name, str) or name not in self._registry:
            return False
        value = self._registry.peek(name)
        if record is not None and value != record:
            return False
        return self._keep is None or bool(self._keep(value))

    def __add__(self, other) -> tuple:
        return self._now() + tuple(other)

    def __radd__(self, other) -> tuple:
        return tuple(other) + self._now()

    def __eq__(self, other) -> bool:
        return self._now() == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._now())
