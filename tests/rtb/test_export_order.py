"""`rtb export` leaves no trace of the corpus's case order in file times or allocation order."""

from pathlib import Path

import pytest
from scipy.stats import kendalltau

import trustbench.rtb.corpus as corpus_package
from trustbench.rtb.corpus import Corpus, ExportResult, export_candidate_inputs, load_corpus
from trustbench.rtb.corpus._export import INPUT_MTIME

V0_2 = Path(corpus_package.__file__).parent / "v0.2"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Corpus, ExportResult]:
    corpus = load_corpus(V0_2)
    return corpus, export_candidate_inputs(corpus, tmp_path_factory.mktemp("order"), seed=11)


def test_every_exported_input_has_the_same_fixed_modification_time(exported) -> None:
    _, result = exported
    times = {p.stat().st_mtime for p in result.inputs_dir.glob("*.json")}
    assert times == {float(INPUT_MTIME)}


def test_inputs_are_written_in_an_order_unrelated_to_the_case_order(exported) -> None:
    corpus, result = exported
    position = {case.case_id: i for i, case in enumerate(corpus.cases)}
    by_inode = sorted(result.inputs_dir.glob("*.json"), key=lambda p: p.stat().st_ino)
    written = [position[result.evaluation_map.evaluations[p.stem]] for p in by_inode]
    assert sorted(written) == list(range(len(corpus.cases)))
    # Writing in case order would give tau = 1 (sorted case ids too: the corpus is sorted); a
    # shuffle of 180 gives |tau| < 0.2 except with probability below 1e-4.
    tau = kendalltau(written, range(len(written))).statistic
    assert abs(tau) < 0.2, tau


def test_no_exported_input_names_its_case_group_variant_or_template(exported) -> None:
    corpus, result = exported
    by_id = {case.case_id: case for case in corpus.cases}
    for evaluation_id, case_id in result.evaluation_map.evaluations.items():
        text = (result.inputs_dir / f"{evaluation_id}.json").read_text(encoding="utf-8")
        case = by_id[case_id]
        for name in (case.case_id, f'"{case.variant}"', case.authoring.template):
            assert name not in text, (case_id, name)
