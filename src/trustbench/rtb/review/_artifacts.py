"""Artifact scan: does any class of candidate-visible token carry information about the label?

Authoring leaves traces: an id suffix per generator role, a timestamp format used only by one
variant, a record always listed last in deny cases. Each token of `_features.token_features`
(`v:` value, `w:` word, `s:` shape, record order, first key) belongs to a *class*: its family and
path with the discriminator kept, e.g. `s:evidence[approval].approval_id`. For every token seen in
at least `MIN_DOCUMENTS` inputs (and not in all but that many) the scan computes the mutual
information, in bits, between the token's presence and the reference decision; a class's
statistic is its most informative token.

Many tokens are tested, so some will look informative by chance. The threshold is therefore
calibrated by permutation: the labels are shuffled within each domain group (keeping each group's
decision mix, which is what an honest corpus may share with its tokens), the *largest* token MI over
every class is recorded, and the threshold is the `1 - ALPHA` quantile of those maxima. A class
above it carries label information with family-wise error `ALPHA` under the null that no token
does. The statistic (a max over tokens) is the same under the permutations as on the real labels,
so a class of unique tokens (random ids) is not flagged for its size: the test can pass honestly,
and a planted artifact fails it honestly. Seeded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field

from trustbench.rtb.review._features import Document, FeatureSpace, token_features

MIN_DOCUMENTS = 3
"""A token must occur in at least this many inputs (and miss at least this many) to be tested."""
ALPHA = 0.01
"""Family-wise error of the scan under the permutation null."""
PERMUTATIONS = 400
"""Label permutations that calibrate the threshold."""


class TokenClassScore(BaseModel):
    """One token class's most label-informative token."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    token_class: str
    """Family and path, e.g. `s:evidence[approval].approval_id`."""
    tokens: int
    """Tokens of this class tested."""
    top_token: str
    """The class's most informative token."""
    mutual_information_bits: float
    """MI between that token's presence and the reference decision, in bits."""
    documents: int
    """Inputs holding the top token."""


class ArtifactReport(BaseModel):
    """Every tested token class, the permutation threshold, and the verdict."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    cases: int
    """Inputs scanned."""
    threshold_bits: float | None
    """The `1 - alpha` quantile of the permuted maximum token MI; None when the scan did not run."""
    alpha: float
    """Family-wise error of the threshold."""
    permutations: int
    """Permutations behind the threshold."""
    seed: int
    """Seed of the permutations."""
    classes: list[TokenClassScore]
    """Every tested class, most informative first."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def carrying(self) -> list[str]:
        """Token classes above the threshold: they carry label information."""
        if self.threshold_bits is None:
            return []
        return [
            c.token_class
            for c in self.classes
            if c.mutual_information_bits > self.threshold_bits + 1e-12
        ]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True only when the scan ran and no class is above the threshold."""
        return self.threshold_bits is not None and not self.carrying


def _token_class(token: str) -> str:
    family, rest = token.split(":", 1)
    if family in ("v", "first", "last", "next", "k0"):
        return f"{family}:{rest.split('=', 1)[0]}"
    return f"{family}:{rest.split(' :: ', 1)[0]}"


def _mutual_information(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """MI in bits between each binary column of `x` (n x t) and the one-hot labels `y` (n x k).

    From the 2 x k contingency table of each token: sum p(x, y) log2(p(x, y) / (p(x) p(y))),
    with 0 log 0 = 0.
    """
    n = x.shape[0]
    with_token = x.T @ y  # t x k counts
    without = y.sum(axis=0)[None, :] - with_token
    p_token = x.sum(axis=0)[:, None] / n
    p_label = y.sum(axis=0)[None, :] / n
    total = np.zeros(x.shape[1])
    for counts, p_x in ((with_token, p_token), (without, 1 - p_token)):
        joint = counts / n
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(joint > 0, joint * np.log2(joint / (p_x * p_label)), 0.0)
        total += terms.sum(axis=1)
    return total


def artifact_scan(
    documents: Sequence[Document],
    labels: Sequence[str],
    groups: Sequence[str],
    *,
    seed: int = 0,
    alpha: float = ALPHA,
    permutations: int = PERMUTATIONS,
) -> ArtifactReport:
    """Test every candidate-visible token class for label information.

    Args:
        documents: Each case's exported candidate input.
        labels: Each case's reference decision (grader side).
        groups: Each case's domain group: labels are permuted within groups.
        seed: Seed of the permutations.
        alpha: Family-wise error of the threshold.
        permutations: Label permutations that calibrate the threshold.

    Returns:
        The report; `ok` is False when a class is above the threshold or nothing could be tested.
    """
    space = FeatureSpace.infer(documents)
    present = [set(token_features(space, d)) for d in documents]
    n = len(documents)
    counts: dict[str, int] = {}
    for tokens in present:
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
    tested = sorted(t for t, c in counts.items() if MIN_DOCUMENTS <= c <= n - MIN_DOCUMENTS)
    decisions = sorted(set(labels))
    if not tested or len(decisions) < 2:
        return ArtifactReport(
            cases=n,
            threshold_bits=None,
            alpha=alpha,
            permutations=permutations,
            seed=seed,
            classes=[],
        )
    column = {t: i for i, t in enumerate(tested)}
    x = np.zeros((n, len(tested)))
    for row, tokens in enumerate(present):
        for token in tokens:
            if token in column:
                x[row, column[token]] = 1.0
    label_index = np.array([decisions.index(label) for label in labels])
    observed = _mutual_information(x, np.eye(len(decisions))[label_index])
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(np.array(groups) == g) for g in sorted(set(groups))]
    maxima = np.empty(permutations)
    for p in range(permutations):
        shuffled = label_index.copy()
        for index in members:
            shuffled[index] = rng.permutation(label_index[index])
        maxima[p] = _mutual_information(x, np.eye(len(decisions))[shuffled]).max()
    threshold = float(np.quantile(maxima, 1 - alpha))
    best: dict[str, tuple[float, str, int]] = {}
    sizes: dict[str, int] = {}
    for token, mi in zip(tested, observed, strict=True):
        name = _token_class(token)
        sizes[name] = sizes.get(name, 0) + 1
        if name not in best or mi > best[name][0]:
            best[name] = (float(mi), token, counts[token])
    classes = sorted(
        (
            TokenClassScore(
                token_class=name,
                tokens=sizes[name],
                top_token=token,
                mutual_information_bits=round(mi, 6),
                documents=docs,
            )
            for name, (mi, token, docs) in best.items()
        ),
        key=lambda c: (-c.mutual_information_bits, c.token_class),
    )
    return ArtifactReport(
        cases=n,
        threshold_bits=round(threshold, 6),
        alpha=alpha,
        permutations=permutations,
        seed=seed,
        classes=classes,
    )


__all__ = ["ArtifactReport", "TokenClassScore", "artifact_scan"]
