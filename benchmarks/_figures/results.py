"""The benchmark result files as the rows read them: nodes whose missing fields name themselves."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class FigureError(Exception):
    """A result file is unreadable or lacks a field a row needs."""


class MissingResultError(FigureError):
    """A result file does not exist (its benchmark has not been run)."""

    def __init__(self, name: str, command: str) -> None:
        super().__init__(f"benchmarks/results/{name} is missing (written by `{command}`)")
        self.name = name
        self.command = command


# --------------------------------------------------------------------------- fields


@dataclass(frozen=True)
class Node:
    """A value inside a result file, with the path that leads to it (for errors)."""

    source: str
    path: str
    value: Any

    def _fail(self, what: str) -> FigureError:
        where = self.path or "the top level"
        return FigureError(f"benchmarks/results/{self.source}: {what} (at {where})")

    def __getitem__(self, key: str | int) -> Node:
        if isinstance(key, int):
            if not isinstance(self.value, list):
                raise self._fail(f"expected a list to take item {key}")
            if not -len(self.value) <= key < len(self.value):
                raise self._fail(f"no item {key} in a list of {len(self.value)}")
            return Node(self.source, f"{self.path}[{key}]", self.value[key])
        if not isinstance(self.value, dict):
            raise self._fail(f"expected an object with field {key!r}")
        if key not in self.value:
            raise self._fail(f"no field {key!r}")
        path = f"{self.path}.{key}" if self.path else key
        return Node(self.source, path, self.value[key])

    def at(self, *keys: str | int) -> Node:
        node = self
        for key in keys:
            node = node[key]
        return node

    def has(self, key: str) -> bool:
        return isinstance(self.value, dict) and key in self.value

    def num(self, *keys: str | int) -> float:
        node = self.at(*keys)
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise node._fail(f"expected a number, found {type(value).__name__}")
        if not math.isfinite(value):
            raise node._fail(f"expected a finite number, found {value!r}")
        return float(value)

    def opt_num(self, *keys: str | int) -> float | None:
        node = self.at(*keys)
        return None if node.value is None else node.num()

    def integer(self, *keys: str | int) -> int:
        node = self.at(*keys)
        value = node.num()
        if value != int(value):
            raise node._fail(f"expected a whole number, found {value!r}")
        return int(value)

    def text(self, *keys: str | int) -> str:
        node = self.at(*keys)
        if not isinstance(node.value, str):
            raise node._fail(f"expected a string, found {type(node.value).__name__}")
        return node.value

    def flag(self, *keys: str | int) -> bool:
        node = self.at(*keys)
        if not isinstance(node.value, bool):
            raise node._fail(f"expected true/false, found {type(node.value).__name__}")
        return node.value

    def items(self, *keys: str | int) -> list[Node]:
        node = self.at(*keys)
        if not isinstance(node.value, list):
            raise node._fail(f"expected a list, found {type(node.value).__name__}")
        return [node[i] for i in range(len(node.value))]

    def fields(self, *keys: str | int) -> Iterator[tuple[str, Node]]:
        node = self.at(*keys)
        if not isinstance(node.value, dict):
            raise node._fail(f"expected an object, found {type(node.value).__name__}")
        for key in node.value:
            yield key, node[key]

    def find(self, list_key: str, **match: Any) -> Node:
        """The one item of the list ``list_key`` whose fields equal ``match``."""
        hits = [
            item
            for item in self.items(list_key)
            if all(_lookup(item, k) == v for k, v in match.items())
        ]
        if len(hits) != 1:
            wanted = ", ".join(f"{k.replace('__', '.')} = {v!r}" for k, v in match.items())
            count = "no item" if not hits else f"{len(hits)} items"
            raise self[list_key]._fail(f"{count} with {wanted}")
        return hits[0]

    def match(self, list_key: str, field: str, pattern: str) -> tuple[Node, re.Match[str]]:
        """The one item of ``list_key`` whose string ``field`` matches ``pattern``."""
        hits = []
        for item in self.items(list_key):
            found = re.search(pattern, item.text(field))
            if found:
                hits.append((item, found))
        if len(hits) != 1:
            count = "no item" if not hits else f"{len(hits)} items"
            raise self[list_key]._fail(f"{count} whose {field!r} matches {pattern!r}")
        return hits[0]


def _lookup(node: Node, key: str) -> Any:
    """``a__b`` reads field ``a.b``; a missing field compares unequal to everything."""
    value = node.value
    for part in key.split("__"):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


_MISSING = object()


class Results:
    """Loads result files by name, once each."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._cache: dict[str, Node] = {}

    def load(self, name: str, command: str) -> Node:
        if name not in self._cache:
            path = self.directory / name
            if not path.is_file():
                raise MissingResultError(name, command)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise FigureError(f"benchmarks/results/{name}: cannot read it: {exc}") from exc
            self._cache[name] = Node(name, "", data)
        return self._cache[name]

    def cpu_counts(self) -> set[int]:
        """Core counts recorded by the files loaded so far (fields ``cpus``/``cpu_count``)."""
        counts: set[int] = set()
        for node in self._cache.values():
            counts.update(_find_cpu_counts(node.value, depth=3))
        return counts


def _find_cpu_counts(value: Any, depth: int) -> Iterator[int]:
    if depth < 0 or not isinstance(value, dict):
        return
    for key, item in value.items():
        if key in ("cpus", "cpu_count") and isinstance(item, int) and not isinstance(item, bool):
            yield item
        elif isinstance(item, dict):
            yield from _find_cpu_counts(item, depth - 1)


# --------------------------------------------------------------------------- formatting
