"""Generic features of exported candidate inputs, for the learned attackers and the artifact scan.

An attacker that reads the answer key is not an attacker; one that knows the policy is a reviewer.
The learned surface attackers (`_learned.py`) and the artifact scan (`_artifacts.py`) must see
exactly what a candidate sees and know nothing of what it means, so every feature here is read
from the exported JSON without naming a single field: the same code runs on any corpus version.

The only structure inferred is how to tell the objects of a list apart: for each list of objects
(e.g. `evidence`), the *discriminator* is the string key present in (nearly) every element whose
values take the fewest distinct values (at least two) across the corpus: in the shipped corpora
that is `kind`, but it is found, not named. A path then reads `evidence[approval].status`.

Feature families (each a name -> number, aggregated over repeated paths by counting):

- `n:` leaves per path and elements per discriminator; `len:` shortest and longest string per path;
- `v:` a short value at a path; `w:` a word of a string at a path; `s:` a string's shape (letters
  to `a`/`A`, digits to `0`, runs collapsed: `APR-0048-A` -> `A-0-A`);
- `eq:` / `neq:` raw / normalised equality of every pair of leaves in different parts of the
  input (top-level fields, list elements): e.g. the proposal's revision against a record's;
- `lt:` / `slt:` / `dt:` timestamps compared as times, as strings, and their gap in hours;
- `first:` / `last:` / `next:` / `pos:` record order; `k0:` which key an object lists first.

`evaluation_id` is ignored (random per export). Token families (`v w s first last next k0`) are
what the artifact scan tests; relation families (`eq neq lt slt dt`) feed only the learners.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Document = dict[str, Any]
Leaf = tuple[str, str, Any]
"""(part, path, value): `part` names the top-level field or list element the leaf lives in."""

IGNORED = frozenset({"evaluation_id"})
"""Top-level keys no feature reads: random per export."""

TOKEN_FAMILIES = ("v", "w", "s", "first", "last", "next", "k0")
"""Feature families that are tokens (tested by the artifact scan)."""

_WORD = re.compile(r"[A-Za-z0-9]+")
_TIMESTAMP = re.compile(
    r"^\s*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?\s*$"
)
_SHORT = 40
"""Strings up to this length are also taken whole as a value token."""
_PAIR_MAX = 80
"""Strings longer than this (prose, policy text) are left out of pairwise equality."""


def _shape(text: str) -> str:
    out: list[str] = []
    for char in text:
        mark = "0" if char.isdigit() else "a" if char.islower() else "A" if char.isupper() else char
        if not out or out[-1] != mark:
            out.append(mark)
    return "".join(out)


def _normalised(value: Any) -> Any:
    """A generic normalisation (trim, case, trailing dot, digit strings, list order)."""
    if isinstance(value, str):
        text = value.strip().casefold().rstrip(".")
        return int(text) if text.isdigit() else text
    if isinstance(value, list):
        return tuple(sorted(repr(_normalised(v)) for v in value))
    return value


def _as_time(value: Any) -> float | None:
    if not isinstance(value, str) or not _TIMESTAMP.match(value):
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


@dataclass
class FeatureSpace:
    """The discriminator of each list path, inferred from the corpus's inputs (no labels read)."""

    discriminators: dict[str, str] = field(default_factory=dict)
    """List path -> the key that tells its objects apart."""

    @classmethod
    def infer(cls, documents: Sequence[Document]) -> FeatureSpace:
        """Choose, per list of objects, the near-universal string key with fewest values (>= 2)."""
        elements: dict[str, list[dict[str, Any]]] = {}
        for document in documents:
            for path, items in _lists({k: v for k, v in document.items() if k not in IGNORED}):
                elements.setdefault(path, []).extend(i for i in items if isinstance(i, dict))
        chosen: dict[str, str] = {}
        for path, items in elements.items():
            keys = Counter(k for item in items for k, v in item.items() if isinstance(v, str))
            best: tuple[int, str] | None = None
            for key, present in keys.items():
                distinct = len({item.get(key) for item in items if isinstance(item.get(key), str)})
                if present >= 0.95 * len(items) and distinct >= 2:
                    best = min(best or (distinct, key), (distinct, key))
            if best:
                chosen[path] = best[1]
        return cls(chosen)

    def leaves(self, document: Document) -> Iterator[Leaf]:
        """Every scalar of the input with the part it belongs to and its discriminated path."""
        for key, value in document.items():
            if key not in IGNORED:
                yield from self._walk(value, key, key)

    def _walk(self, value: Any, path: str, part: str) -> Iterator[Leaf]:
        if isinstance(value, dict):
            for key, item in value.items():
                yield from self._walk(item, f"{path}.{key}", part)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            key = self.discriminators.get(_plain(path))
            for index, item in enumerate(value):
                tag = str(item.get(key, "?")) if key else ""
                yield from self._walk(item, f"{path}[{tag}]", f"{part}#{index}")
        elif isinstance(value, list):
            for item in value:
                yield from self._walk(item, f"{path}[]", part)
        else:
            yield part, path, value

    def tagged_lists(self, document: Document) -> Iterator[tuple[str, list[str]]]:
        """Each list of objects as (path, discriminator values in presentation order)."""
        for path, items in _lists({k: v for k, v in document.items() if k not in IGNORED}):
            key = self.discriminators.get(path)
            if key:
                yield path, [str(i.get(key, "?")) if isinstance(i, dict) else "?" for i in items]


def _plain(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "[]", path)


def _lists(value: Any, path: str = "") -> Iterator[tuple[str, list[Any]]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _lists(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            yield path, value
        for item in value:
            yield from _lists(item, f"{path}[]")


def _objects(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(value, dict):
        yield path, value
        for key, item in value.items():
            yield from _objects(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item, f"{path}[]")


def token_features(space: FeatureSpace, document: Document) -> Counter[str]:
    """Value, word and shape tokens per path, record order and first keys (the token classes)."""
    features: Counter[str] = Counter()
    for _, path, value in space.leaves(document):
        if isinstance(value, str):
            if len(value) <= _SHORT:
                features[f"v:{path}={value}"] += 1
            for word in _WORD.findall(value.casefold()):
                features[f"w:{path} :: {word}"] += 1
            features[f"s:{path} :: {_shape(value)}"] += 1
        elif value is None or isinstance(value, bool | int | float):
            features[f"v:{path}={value!r}"] += 1
    for path, tags in space.tagged_lists(document):
        features[f"first:{path}={tags[0]}"] += 1
        features[f"last:{path}={tags[-1]}"] += 1
        for a, b in itertools.pairwise(tags):
            features[f"next:{path}={a}>{b}"] += 1
    for path, obj in _objects({k: v for k, v in document.items() if k not in IGNORED}):
        if obj:
            features[f"k0:{_plain(path)}={next(iter(obj))}"] += 1
    return features


def structure_features(space: FeatureSpace, document: Document) -> dict[str, float]:
    """Counts, lengths, positions, pairwise equalities and timestamp comparisons."""
    features: Counter[str] = Counter()
    lengths: dict[str, list[int]] = {}
    leaves = list(space.leaves(document))
    for _, path, value in leaves:
        features[f"n:{path}"] += 1
        if isinstance(value, str):
            lengths.setdefault(path, []).append(len(value))
    out: dict[str, float] = dict(features)
    for path, values in lengths.items():
        out[f"len-min:{path}"] = float(min(values))
        out[f"len-max:{path}"] = float(max(values))
    for path, tags in space.tagged_lists(document):
        out[f"n:{path}"] = float(len(tags))
        for tag in set(tags):
            out[f"n:{path}[{tag}]"] = float(tags.count(tag))
            out[f"pos:{path}[{tag}]"] = tags.index(tag) / max(len(tags) - 1, 1)
    out.update(_pair_features(leaves))
    return out


def _pair_features(leaves: list[Leaf]) -> dict[str, float]:
    comparable = [
        (part, path, value)
        for part, path, value in leaves
        if (isinstance(value, str) and 0 < len(value) <= _PAIR_MAX)
        or (isinstance(value, int | float) and not isinstance(value, bool))
    ]
    normal = [_normalised(v) for _, _, v in comparable]
    times = [_as_time(v) for _, _, v in comparable]
    out: Counter[str] = Counter()
    gaps: dict[str, list[float]] = {}
    for i, (part_a, path_a, value_a) in enumerate(comparable):
        for j in range(i + 1, len(comparable)):
            part_b, path_b, value_b = comparable[j]
            if part_a == part_b:
                continue
            a, b = sorted((path_a, path_b))
            pair = f"{a}~{b}"
            time_a, time_b = (times[i], times[j]) if path_a == a else (times[j], times[i])
            if time_a is not None and time_b is not None:
                out[f"lt:{pair}"] += time_a < time_b
                out[f"teq:{pair}"] += time_a == time_b
                first, second = (value_a, value_b) if path_a == a else (value_b, value_a)
                # Only strings parse as times (`_as_time`), so both values are strings here.
                out[f"slt:{pair}"] += str(first) < str(second)
                gaps.setdefault(pair, []).append((time_b - time_a) / 3600)
                continue
            if value_a == value_b and type(value_a) is type(value_b):
                out[f"eq:{pair}"] += 1
            if normal[i] == normal[j]:
                out[f"neq:{pair}"] += 1
    result: dict[str, float] = {k: float(v) for k, v in out.items() if v}
    for pair, values in gaps.items():
        # Signed log-hours keep a 3-day gap and a 30-day gap apart without letting years dominate.
        result[f"dt-min:{pair}"] = math.copysign(math.log1p(abs(min(values))), min(values))
        result[f"dt-max:{pair}"] = math.copysign(math.log1p(abs(max(values))), max(values))
    return result


def text_of(space: FeatureSpace, document: Document) -> str:
    """The input as one token stream for a bag-of-words model: `path:word` and bare words."""
    words: list[str] = []
    for _, path, value in space.leaves(document):
        leaf = _plain(path).rsplit(".", 1)[-1]
        for word in _WORD.findall(str(value).casefold()):
            words += [word, f"{leaf}:{word}"]
    return " ".join(words)


def all_features(space: FeatureSpace, document: Document) -> dict[str, float]:
    """Token and structure features together (what the learners are fitted on)."""
    return {
        **{k: float(v) for k, v in token_features(space, document).items()},
        **structure_features(space, document),
    }
