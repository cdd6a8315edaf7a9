"""`dsh_mnemo.record`: data classes without `exec`, behaving as dataclasses do where used."""

from __future__ import annotations

import ast
from typing import Any, ClassVar

import pytest

from dsh_mnemo.record import (
    FrozenInstanceError,
    asdict,
    field,
    fields,
    is_record,
    record,
    replace,
)
from dsh_mnemo.report import to_jsonable
from tests.cli.test_architecture import PACKAGE


@record
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", repr=False, compare=False)
    vector: Any = field(default=None, compare=False, metadata={"json": False})
    LIMIT: ClassVar[int] = 3


@record(frozen=True)
class Key:
    name: str
    size: int = 1


@record
class Child(Point):
    z: int = 5


def test_init_defaults_factories_and_errors_as_a_dataclass_has_them() -> None:
    a, b = Point(1), Point(1)
    assert (a.x, a.y, a.tags, a.note, a.vector) == (1, 0, [], "", None)
    a.tags.append("t")
    assert b.tags == []  # one new list per instance
    assert Point(1, 2, ["u"], note="n").note == "n"
    assert Point.LIMIT == 3 and "LIMIT" not in {f.name for f in fields(Point)}
    assert Point.y == 0 and not hasattr(Point, "tags")  # class defaults as dataclasses leave them
    with pytest.raises(TypeError, match="missing required argument 'x'"):
        Point()
    with pytest.raises(TypeError, match="multiple values"):
        Point(1, x=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'w'"):
        Point(1, w=2)
    with pytest.raises(TypeError, match="positional arguments"):
        Point(1, 2, [], "", None, 7)
    with pytest.raises(TypeError, match="non-default argument"):
        @record
        class Bad:
            a: int = 0
            b: int


def test_repr_and_equality_honour_the_field_options() -> None:
    assert repr(Point(1, 2, note="hidden")) == "Point(x=1, y=2, tags=[], vector=None)"
    assert Point(1, note="a", vector=[1.0]) == Point(1, note="b", vector=[2.0])
    assert Point(1) != Point(2) and Point(1) != Child(1)
    assert Point.__hash__ is None  # mutable and compared: unhashable, as a dataclass
    assert [f.name for f in fields(Child)] == ["x", "y", "tags", "note", "vector", "z"]
    assert Child(1, z=9).z == 9


def test_frozen_records_refuse_assignment_and_hash_by_value() -> None:
    key = Key("a")
    with pytest.raises(FrozenInstanceError):
        key.name = "b"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del key.size
    assert hash(Key("a", 1)) == hash(Key("a")) and {Key("a"), Key("a")} == {Key("a")}


def test_asdict_replace_and_the_json_report_see_the_fields() -> None:
    p = Point(1, tags=["t"], vector=[0.5])
    assert asdict(p) == {"x": 1, "y": 0, "tags": ["t"], "note": "", "vector": [0.5]}
    assert asdict(p)["tags"] is not p.tags
    assert replace(p, y=4) == Point(1, 4, ["t"]) and p.y == 0
    assert is_record(p) and not is_record(Point) and not is_record({"x": 1})
    assert to_jsonable({"p": p, "k": [Key("k")]}) == \
        {"p": {"x": 1, "y": 0, "tags": ["t"], "note": ""}, "k": [{"name": "k", "size": 1}]}
    with pytest.raises(TypeError):
        fields(object())


def test_a_post_init_runs_after_the_fields_are_set() -> None:
    @record
    class Doubled:
        n: int

        def __post_init__(self) -> None:
            self.n *= 2

    assert Doubled(2).n == 4


def test_no_module_of_mnemo_uses_dataclasses() -> None:
    """Every class of the package is a record: a module of mnemo that imported
    `dataclasses` would bring it (and `inspect`) back into every cold hook."""
    using = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) else []
            if "dataclasses" in names:
                using.append(str(path.relative_to(PACKAGE)))
    assert using == []
