"""`@record`: the data classes of the hook path, made without `exec`.

`dataclasses.dataclass` writes each class's `__init__`, `__repr__` and
`__eq__` (and, frozen, `__setattr__`, `__delattr__` and `__hash__`) as
source text and compiles it with `exec`: about 0.3 ms a class, 0.5 frozen.
Its module also imports `inspect` (with `ast`, `dis`, `tokenize`).  A hook
process without the resident server defines some 35 such classes on every
prompt: measured on a 2-core machine, 19 ms of a cold prompt's 150, as much
as half the whole physical-limit hook.  A record class is made in a few
microseconds: its methods are closures over the field list, shared code
that Python compiled once into this module's bytecode.

What it keeps of a dataclass: the annotated fields in order (a base
record's first), defaults and `field(default_factory=...)`, `repr=False`
and `compare=False` per field, `metadata`, `__post_init__`, `frozen=True`
(assignment raises `FrozenInstanceError`, the instance hashes by its
compared fields) and `eq=False`; `fields()`, `asdict()` and `replace()`.
What it leaves out, since no record uses it: `order`, `InitVar`,
`kw_only`, `slots`, `__match_args__`, and `dataclasses.is_dataclass` (use
`is_record`).  An instance costs about a microsecond more to make than a
dataclass's (a loop over the fields instead of straight-line code), which
a hook that makes a few hundred never notices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record."""


class Field:
    """One field of a record (`fields()` lists them)."""

    __slots__ = ("name", "default", "default_factory", "repr", "compare", "metadata")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING,
                 repr: bool = True, compare: bool = True,  # noqa: A002 - dataclasses' names
                 metadata: Mapping[str, Any] | None = None) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare
        self.metadata: Mapping[str, Any] = metadata or {}

    def __repr__(self) -> str:
        return f"Field(name={self.name!r})"


def field(*, default: Any = MISSING, default_factory: Any = MISSING,
          repr: bool = True, compare: bool = True,  # noqa: A002 - dataclasses' names
          metadata: Mapping[str, Any] | None = None) -> Any:
    """A field's options, as `dataclasses.field` takes them."""
    return Field(default, default_factory, repr, compare, metadata)


FIELDS = "__record_fields__"


def _is_classvar(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _own_fields(cls: type) -> list[Field]:
    found: list[Field] = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        if isinstance(value, Field):
            spec = value
            if spec.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        else:
            spec = Field(default=value)
        spec.name = name
        found.append(spec)
    return found


def _make_init(cls: type, specs: tuple[Field, ...], frozen: bool) -> Callable[..., None]:
    names = tuple(f.name for f in specs)
    count = len(names)
    set_value = object.__setattr__ if frozen else setattr
    post_init = getattr(cls, "__post_init__", None)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        if len(args) > count:
            raise TypeError(f"{type(self).__name__}() takes {count} positional arguments "
                            f"but {len(args)} were given")
        for name, value in zip(names, args, strict=False):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got multiple values for "
                                f"argument {name!r}")
            set_value(self, name, value)
        for spec in specs[len(args):]:
            name = spec.name
            if name in kwargs:
                value = kwargs.pop(name)
            elif spec.default is not MISSING:
                value = spec.default
            elif spec.default_factory is not MISSING:
                value = spec.default_factory()
            else:
                raise TypeError(f"{type(self).__name__}() missing required argument {name!r}")
            set_value(self, name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument "
                            f"{next(iter(kwargs))!r}")
        if post_init is not None:
            post_init(self)

    return __init__


def _make_repr(specs: tuple[Field, ...]) -> Callable[[Any], str]:
    shown = tuple(f.name for f in specs if f.repr)

    def __repr__(self: Any) -> str:  # noqa: N807
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({inner})"

    return __repr__


def _make_eq(specs: tuple[Field, ...]) -> tuple[Callable[[Any, Any], Any],
                                                  Callable[[Any], tuple[Any, ...]]]:
    compared = tuple(f.name for f in specs if f.compare)

    def key(self: Any) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in compared)

    def __eq__(self: Any, other: Any) -> Any:  # noqa: N807
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__, key


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    if name in getattr(type(self), FIELDS, {}):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self: Any, name: str) -> None:
    if name in getattr(type(self), FIELDS, {}):
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def record(cls: type[T] | None = None, *, frozen: bool = False,
           eq: bool = True) -> Any:
    """Make `cls` a record (used as `@record` or `@record(frozen=True)`)."""

    def wrap(cls: type[T]) -> type[T]:
        inherited: dict[str, Field] = {}
        for base in reversed(cls.__mro__[1:]):
            inherited.update(getattr(base, FIELDS, {}))
        for spec in _own_fields(cls):
            inherited[spec.name] = spec
        specs = tuple(inherited.values())
        required_after_default = False
        for spec in specs:
            has_default = spec.default is not MISSING or spec.default_factory is not MISSING
            if required_after_default and not has_default:
                raise TypeError(f"non-default argument {spec.name!r} follows default argument")
            required_after_default = required_after_default or has_default
        setattr(cls, FIELDS, inherited)
        if "__init__" not in cls.__dict__:
            cls.__init__ = _make_init(cls, specs, frozen)  # type: ignore[misc]
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = _make_repr(specs)  # type: ignore[method-assign]
        if eq and "__eq__" not in cls.__dict__:
            equal, key = _make_eq(specs)
            cls.__eq__ = equal  # type: ignore[method-assign]
            if frozen:
                cls.__hash__ = lambda self: hash(key(self))  # type: ignore[method-assign]
            elif "__hash__" not in cls.__dict__:
                cls.__hash__ = None  # type: ignore[assignment]
        if frozen:
            cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign,assignment]
            cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign,assignment]
        return cls

    return wrap if cls is None else wrap(cls)


def is_record(value: Any) -> bool:
    """Is `value` a record instance (not a record class)?"""
    return not isinstance(value, type) and hasattr(type(value), FIELDS)


def fields(value: Any) -> tuple[Field, ...]:
    """The fields of a record or record class, in order."""
    cls = value if isinstance(value, type) else type(value)
    try:
        return tuple(getattr(cls, FIELDS).values())
    except AttributeError:
        raise TypeError(f"{cls.__name__} is not a record") from None


def asdict(value: Any) -> dict[str, Any]:
    """Field name -> value, records, lists, tuples and dicts within copied the same way."""
    return {f.name: _copy(getattr(value, f.name)) for f in fields(value)}


def _copy(value: Any) -> Any:
    if is_record(value):
        return asdict(value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy(v) for v in value)
    if isinstance(value, dict):
        return {_copy(k): _copy(v) for k, v in value.items()}
    return value


def replace(value: T, **changes: Any) -> T:
    """A new record like `value`, with `changes`."""
    current = {f.name: getattr(value, f.name) for f in fields(value)}
    current.update(changes)
    return type(value)(**current)
