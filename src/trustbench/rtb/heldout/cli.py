"""`trustbench rtb keygen-seal | seal | retire | split` and the `trustbench rtb heldout` group."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from trustbench.errors import CheckFailed, InputError

heldout_app = typer.Typer(
    help="Governed held-out sets: exposure log, report, verify, open.", no_args_is_help=True
)

_SetArg = Annotated[Path, typer.Argument(help="Sealed held-out set folder.")]
_KeyOption = Annotated[
    Path | None,
    typer.Option("--key", help="Owner's X25519 private key file (else $TRUSTBENCH_HELDOUT_KEY)."),
]
_ByOption = Annotated[str | None, typer.Option("--by", help="Who did it (default: OS user).")]


def _now() -> str:
    from trustbench.rtb.heldout._pipeline import now_utc

    return now_utc()


def _who(by: str | None) -> str:
    from trustbench.rtb.heldout._pipeline import who

    return who(by)


def _new_key_file(out_text: str) -> Path:
    """The path a key is to be written to: never over a file, a run's evidence or a device."""
    from trustbench.core import check_output_file, output_path

    out = output_path(out_text)
    if out.exists():
        raise InputError("refusing to overwrite an existing key file", location=str(out))
    return check_output_file(out, streams=False)  # O_EXCL in `_write_key_file`


def _write_key_file(out: Path, text: str) -> None:
    """Write key text readable by its owner only (mode 600), refusing a file made meanwhile."""
    descriptor = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")


def keygen_seal(
    out_text: Annotated[str, typer.Option("--out", help="Private key file to write (mode 600).")],
) -> None:
    """Make an X25519 key pair for a held-out set owner; prints the public key."""
    from trustbench.rtb.heldout._crypto import new_key_pair

    out = _new_key_file(out_text)
    private, public = new_key_pair()
    _write_key_file(out, private)
    typer.echo(f"private key (keep away from candidates): {out}")
    typer.echo(public)


def seal(
    corpus: Annotated[Path, typer.Argument(help="Corpus folder to seal.")],
    recipient: Annotated[str, typer.Option("--recipient", help="Owner's X25519 public key.")],
    out_text: Annotated[str, typer.Option("--out", help="Sealed set folder to write.")],
    budget: Annotated[int, typer.Option("--budget", help="Declared evaluation budget.")] = 5,
    set_id: Annotated[str | None, typer.Option("--set-id", help="Set id (default random).")] = None,
    by: _ByOption = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Seal cases that match a shipped public corpus anyway; every report flags them.",
        ),
    ] = False,
) -> None:
    """Seal a corpus: candidate inputs in the clear, the answer key encrypted to the owner.

    Cases that match a shipped public corpus after normalisation are refused (`--force` seals
    them, flagged in every report).
    """
    from trustbench.core import check_output_folder, output_path
    from trustbench.rtb.heldout._seal import seal_corpus

    out = check_output_folder(output_path(out_text))

    manifest = seal_corpus(
        corpus, recipient, out, budget=budget, set_id=set_id, sealed_by=_who(by), at=_now(),
        force=force,
    )  # fmt: skip
    typer.echo(
        f"sealed held-out set {manifest['set_id']}: {manifest['case_count']} cases, "
        f"budget {manifest['budget']} runs, in {out}"
    )
    if manifest["public_matches"]:
        typer.echo(
            f"warning: {len(manifest['public_matches'])} cases match a shipped public corpus; "
            "every report of this set flags them",
            err=True,
        )


def split(
    corpus: Annotated[Path, typer.Argument(help="Corpus folder to allocate.")],
    out_text: Annotated[
        str, typer.Option("--out", help="Folder for development/, heldout/ and SPLIT.json.")
    ],
    heldout_fraction: Annotated[
        float, typer.Option("--heldout-fraction", help="Share of cases to hold out (0-1).")
    ] = 0.3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the allocation (recorded).")] = 0,
) -> None:
    """Allocate a corpus into development and held-out corpora, related cases on one side.

    Whole domain groups (and contrast families, where the corpus declares them) go to one side;
    the seeded allocation is recorded in SPLIT.json (keep it with the owner: it names the
    held-out cases). Seal `OUT/heldout` with `rtb seal`.
    """
    from trustbench.core import check_output_folder, output_path
    from trustbench.rtb.heldout._split import SIDES, SPLIT_RECORD, split_corpus

    out = check_output_folder(output_path(out_text))
    record = split_corpus(corpus, out, heldout_fraction=heldout_fraction, seed=seed)
    held = sum(1 for unit in record["units"] if unit["side"] == "heldout")
    typer.echo(
        f"split {sum(record[side]['cases'] for side in SIDES)} cases in {len(record['units'])} "
        f"groups of related cases (seed {seed}): {record['development']['cases']} development, "
        f"{record['heldout']['cases']} held out in {held} groups; recorded in "
        f"{out / SPLIT_RECORD}"
    )


def retire(
    folder: _SetArg,
    reason: Annotated[str, typer.Option("--reason", help="Why (e.g. cases published).")],
    key: _KeyOption = None,
    by: _ByOption = None,
) -> None:
    """Mark a held-out set exposed (owner's key): it refuses every later run, of any experiment."""
    from trustbench.rtb.heldout._pipeline import append_entry, owner_exposure_key, read_owner_key
    from trustbench.rtb.heldout._seal import read_set_manifest

    if not reason.strip():
        raise InputError("--reason must say why the set is retired")
    manifest = read_set_manifest(folder)
    exposure = owner_exposure_key(manifest, *read_owner_key(key))
    append_entry(folder, manifest, key=exposure, kind="retire", candidates=[], trials=0,
                 at=_now(), by=_who(by), reason=reason)  # fmt: skip
    typer.echo(f"held-out set {manifest['set_id']} retired: {reason}")


@heldout_app.command(name="exposure-key")
def exposure_key_command(
    folder: _SetArg,
    out_text: Annotated[str, typer.Option("--out", help="Exposure key file to write (mode 600).")],
    key: _KeyOption = None,
) -> None:
    """Write the set's exposure key (owner's key): what `freeze` and `run` append entries with.

    Give it to whoever runs evaluations as $TRUSTBENCH_HELDOUT_EXPOSURE_KEY, never to the set
    folder's custodian or a candidate: it authenticates the exposure log and opens nothing.
    """
    from trustbench.rtb.heldout._crypto import exposure_key
    from trustbench.rtb.heldout._pipeline import read_owner_key
    from trustbench.rtb.heldout._seal import read_set_manifest

    out = _new_key_file(out_text)
    manifest = read_set_manifest(folder)
    _write_key_file(out, exposure_key(read_owner_key(key)[0], str(manifest["set_id"])))
    typer.echo(f"exposure key of held-out set {manifest['set_id']}: {out}")


@heldout_app.command()
def freeze(
    folder: _SetArg,
    candidate: Annotated[list[str], typer.Option("--candidate", help="Candidate identity.")],
    trials: Annotated[int, typer.Option("--trials", help="Trials per case.")] = 1,
    reason: Annotated[str, typer.Option("--reason", help="Required past the budget.")] = "",
    by: _ByOption = None,
) -> None:
    """Record by hand one evaluation run outside `trustbench run`, before it starts.

    Counted as a run (an exposure of the set's inputs), each `--candidate` identity as its
    candidate code; needs the set's exposure key, and a reason past the budget.
    """
    from trustbench._canonical import sha256_hex
    from trustbench.rtb.heldout._pipeline import operator_exposure_key, record_run
    from trustbench.rtb.heldout._seal import read_set_manifest

    manifest = read_set_manifest(folder)
    entry = record_run(
        folder, manifest, key=operator_exposure_key(manifest), experiment="",
        candidates=candidate, candidate_code=[sha256_hex(name.encode()) for name in candidate],
        trials=trials, at=_now(), by=_who(by), reason=reason,
    )  # fmt: skip
    typer.echo(f"held-out set {manifest['set_id']}: evaluation recorded as entry {entry['seq']}")
    if reason:
        typer.echo(f"over-budget reason recorded: {reason}")


@heldout_app.command()
def verify(folder: _SetArg) -> None:
    """Check the pinned clear and sealed bytes and the exposure log's chain (no key needed)."""
    from trustbench.rtb.heldout._pipeline import log_problems
    from trustbench.rtb.heldout._seal import pin_problems, read_set_manifest

    manifest = read_set_manifest(folder)
    problems = pin_problems(folder, manifest) + log_problems(folder, manifest)
    for problem in problems:
        typer.echo(f"problem: {problem}", err=True)
    if problems:
        raise CheckFailed(f"held-out set {manifest['set_id']}: {len(problems)} problem(s)")
    typer.echo(f"held-out set {manifest['set_id']}: pins and exposure log intact")


_RunOption = Annotated[
    Path | None,
    typer.Option("--run", help="A run folder against this set: write the owner's report of it."),
]
_OwnerOutOption = Annotated[
    str | None,
    typer.Option("--out", help="With --run: folder for the owner's detailed report (not the run)."),
]


@heldout_app.command()
def report(
    folder: _SetArg,
    key: _KeyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON summary.")] = False,
    html_text: Annotated[str | None, typer.Option("--html", help="Write an HTML section.")] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing --html file.")
    ] = False,
    run_dir: _RunOption = None,
    out_text: _OwnerOutOption = None,
) -> None:
    """Report on a set with the owner's key: what was withheld, exposure, retirement.

    The count is checked with the key first (the seal's budget and identity, every entry's
    authentication, the witness beside the key file) and refused, naming what changed. With
    `--run RUN --out DIR`, also the owner's detailed report of that run (cases, labels,
    variants, the candidates' replies) into DIR; the run folder's own report stays the
    candidate's aggregate one.
    """
    from trustbench.core import check_output_file, is_standard_output, output_path, write_output
    from trustbench.rtb.heldout._corpus import SealedSet
    from trustbench.rtb.heldout._pipeline import (
        owner_check,
        read_owner_key,
        summary_html,
        summary_lines,
    )
    from trustbench.rtb.heldout._seal import open_set, read_binding

    html_out = None  # checked before the key is read: a refused path changes nothing
    if html_text is not None:
        html_out = check_output_file(output_path(html_text, "--html"), force=force, option="--html")
    owner_out = _owner_out(run_dir, out_text)
    private, source = read_owner_key(key)
    sealed = SealedSet(folder)
    with tempfile.TemporaryDirectory() as tmp:
        open_set(folder, private, Path(tmp))
        summary = owner_check(sealed, private, source, read_binding(Path(tmp)))
    to_stderr = html_out is not None and is_standard_output(html_out)  # the page goes to stdout
    if html_out is not None:
        write_output(html_out, summary_html(summary).encode("utf-8"))
    if as_json:
        typer.echo(json.dumps({"held_out_set": summary}, indent=2), err=to_stderr)
    else:
        for line in summary_lines(summary):
            typer.echo(line, err=to_stderr)
    if run_dir is not None and owner_out is not None:
        _owner_run_report(folder, run_dir, owner_out, source or private)


def _owner_out(run_dir: Path | None, out_text: str | None) -> Path | None:
    """The owner's report folder: `--out` with `--run`, never the run folder itself."""
    from trustbench.core import output_path
    from trustbench.rtb.heldout._pipeline import owner_report_folder

    if out_text is not None:
        output_path(out_text)  # an empty path is refused first, naming the option
    if (run_dir is None) != (out_text is None):
        raise InputError("--run and --out go together: the run to report and where to write")
    if run_dir is None or out_text is None:
        return None
    return owner_report_folder(out_text, run_dir)


def _owner_run_report(folder: Path, run_dir: Path, out: Path, key: Path | str) -> None:
    """Grade `run_dir` in the owner's view and write the report into `out`."""
    from trustbench.core import read_manifest, report_run
    from trustbench.rtb.heldout._crypto import KEY_ENV
    from trustbench.rtb.heldout._pipeline import owner_report

    frozen = read_manifest(run_dir)
    if Path(frozen.corpus.root).resolve() != folder.resolve():
        raise InputError(
            f"the run was frozen against {frozen.corpus.root}, not this set", location=str(run_dir)
        )
    os.environ[KEY_ENV] = str(key)  # the grading reads the owner's key where `report` does
    out.mkdir(parents=True, exist_ok=True)
    with owner_report():
        result = report_run(run_dir, out_dir=out)
    typer.echo(f"wrote the owner's report: {result.record_path} and {result.html_path}")


@heldout_app.command(name="open")
def open_command(
    folder: _SetArg,
    out_text: Annotated[str, typer.Option("--out", help="Grader-side folder to write.")],
    key: _KeyOption = None,
) -> None:
    """Decrypt the answer key (grader side only): `OUT/corpus/` and `OUT/grader/`."""
    from trustbench.core import check_output_folder, output_path
    from trustbench.rtb.heldout._crypto import read_private_key
    from trustbench.rtb.heldout._seal import open_set

    out = check_output_folder(output_path(out_text))
    if out.exists() and any(out.iterdir()):
        raise InputError("--out already holds files", location=str(out))
    manifest = open_set(folder, read_private_key(key), out)
    typer.echo(f"opened held-out set {manifest['set_id']} into {out} (grader side only)")
