"""Values handed to sandbox code (GUIDE.md, "The sandbox API"): `Record`, a dict whose keys are
also attributes (`issue.title`), and `ready(value)`, which makes a helper's result usable both
as a plain value and awaited (`x = runtime.list_servers()` and `x = await
runtime.list_servers()` give the same thing). Pure data: no I/O."""


def _await_self(self):
    """`await value` gives the value itself (a generator that returns at once)."""
    return self
    yield  # never reached: makes this a generator function, as __await__ must return one


class Record(dict):
    """A dict whose keys can also be read, set and deleted as attributes (`doc.name`). Keys that
    shadow dict methods (`items`, `keys`, `get`, ...) are read with `record["items"]`. Awaiting
    a Record gives the Record (helper results work with and without `await`)."""

    __slots__ = ()
    __await__ = _await_self

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError("%r has no key or attribute %r (keys: %s)" % (
                type(self).__name__, name, ", ".join(map(str, self)) or "none")) from None

    def __setattr__(self, name, value):
        self[name] = value

    def __delattr__(self, name):
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __dir__(self):
        return sorted(set(dir(dict)) | {k for k in self if isinstance(k, str)})


class AwaitableList(list):
    """A list that can also be awaited (gives itself)."""

    __slots__ = ()
    __await__ = _await_self


class AwaitableTuple(tuple):
    """A tuple that can also be awaited (gives itself)."""

    __slots__ = ()
    __await__ = _await_self


class AwaitableStr(str):
    """A str that can also be awaited (gives itself)."""

    __slots__ = ()
    __await__ = _await_self


class AwaitableInt(int):
    """An int that can also be awaited (gives itself)."""

    __slots__ = ()
    __await__ = _await_self


class AwaitableFloat(float):
    """A float that can also be awaited (gives itself)."""

    __slots__ = ()
    __await__ = _await_self


_WRAP = {list: AwaitableList, tuple: AwaitableTuple, str: AwaitableStr, int: AwaitableInt,
         float: AwaitableFloat, dict: Record}


def ready(value):
    """`value` in a form that also works when awaited. None and bools (which cannot be
    subclassed) come back unchanged; a helper returns them only when awaited at the call site,
    where no wrapping is needed."""
    wrap = _WRAP.get(type(value))
    return value if wrap is None else wrap(value)


def records(value):
    """`value` with every dict, however deeply nested in lists and dicts, a Record (copies)."""
    kind = type(value)
    if kind is dict or kind is Record:
        return Record({k: records(v) for k, v in value.items()})
    if kind is list:
        return [records(v) for v in value]
    return value
