"""The `trustbench rtb` command group."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.human.cli import human_app

if TYPE_CHECKING:  # rich is imported by the commands that print tables, not by `trustbench run`
    from rich.table import Table

    from trustbench.rtb._harness_audit import AuditRow
    from trustbench.rtb.corpus._load import ValidationReport
    from trustbench.rtb.review._shortcuts import SaturationReport

rtb_app = typer.Typer(help="Recursive Trust Benchmark (RTB).", no_args_is_help=True)
rtb_app.add_typer(human_app, name="human")

_CorpusOption = Annotated[
    Path | None,
    typer.Option(
        "--corpus", help="Corpus folder of the same format (default: the built-in starter)."
    ),
]
_CheckedCorpusOption = Annotated[
    str | None,
    typer.Option(
        "--corpus",
        help="A corpus folder, or `builtin:VERSION` (a built-in corpus; an unknown one is "
        "refused naming the known ones; the starter only when named); default: the default "
        "built-in corpus, as `rtb review` and `rtb export` use.",
    ),
]
_SHOWN_PROBLEMS = 20


def _checked_corpus(corpus: str | None) -> Path:
    """The corpus folder `validate` and `audit` check: the default built-in one unless named.

    Without `--corpus` every command reads the same corpus (`DEFAULT_VERSION`): the starter's
    audit exits 1 "corpus saturated", which a new user's first `rtb audit` used to report.

    Raises:
        InputError: an unknown `builtin:` version.
    """
    from trustbench.rtb.corpus._load import BUILTIN_VERSIONS, DEFAULT_VERSION, builtin_corpus_root

    if corpus is None:
        return builtin_corpus_root(DEFAULT_VERSION)
    if not corpus.startswith("builtin:"):
        return Path(corpus)
    version = corpus.removeprefix("builtin:").removeprefix("v")
    if version not in BUILTIN_VERSIONS:
        known = ", ".join(f"builtin:v{v}" for v in BUILTIN_VERSIONS)
        raise InputError(
            f"unknown built-in corpus {corpus!r} (known: {known})", location="--corpus"
        )
    return builtin_corpus_root(version)


def summary_table(report: ValidationReport) -> Table:
    """Group x variant table of authored reference decisions, with decision totals below."""
    from rich.table import Table

    from trustbench.rtb.corpus._models import Variant, reference_label, reference_status_counts

    grid = report.grid()
    starter_order = [v.value for v in Variant]
    present = {variant for cells in grid.values() for variant in cells}
    variants = [v for v in starter_order if v in present] + sorted(present - set(starter_order))
    reviews = reference_status_counts(reference_label(c.reference_status) for c in report.cases)
    table = Table(
        title=f"RTB corpus {report.version or '(no manifest)'}: authored reference decisions",
        caption=(
            "totals: "
            + ", ".join(f"{d} {n}" for d, n in report.decision_counts().items())
            + f" of {len(report.cases)} cases (reference decisions: {reviews['reviewed']} "
            f"reviewed, {reviews['disputed']} disputed, {reviews['pending']} pending independent "
            "domain review)"
        ),
    )
    table.add_column("group", no_wrap=True)
    for variant in variants:
        table.add_column(variant.replace("_", "\n"), overflow="fold")  # wrap, never `scen…`
    for group in sorted(grid):
        cells = []
        for variant in variants:
            decisions = grid[group].get(variant, [])
            cells.append(
                ", ".join(sorted(set(decisions)))
                + (f" x{len(decisions)}" if len(decisions) > 1 else "")
                if decisions
                else "-"
            )
        table.add_row(group, *cells)
    return table


@rtb_app.command()
def validate(
    corpus: _CheckedCorpusOption = None,
) -> None:
    """Check cases against the schema, files against MANIFEST.json, and the structural invariants.

    Writes nothing. Exit 0 when valid, 1 with `FILE: /json/pointer: message` lines otherwise.
    """
    from rich.console import Console

    from trustbench.rtb.corpus._load import validate_corpus

    # Wide enough for the 10 x 6 table when piped (rich assumes 80 columns off a terminal).
    console = Console(width=None if sys.stdout.isatty() else 120)
    report = validate_corpus(_checked_corpus(corpus))
    console.print(summary_table(report))
    if report.ok:
        checks = "schema, manifest, structure" + (", starter grid" if report.starter else "")
        console.print(
            f"valid: {report.root} ({len(report.cases)} cases, policy {report.policy_id}; "
            f"checked {checks})"
        )
        return
    err = Console(stderr=True)
    for problem in report.problems[:_SHOWN_PROBLEMS]:
        err.print(f"{report.root}/{problem}", highlight=False, markup=False, soft_wrap=True)
    if len(report.problems) > _SHOWN_PROBLEMS:
        err.print(f"... and {len(report.problems) - _SHOWN_PROBLEMS} more problem(s)")
    raise CheckFailed(f"{len(report.problems)} problem(s) in the corpus at {report.root}")


@rtb_app.command()
def manifest(
    corpus: _CorpusOption = None,
    version: Annotated[
        str | None,
        typer.Option("--version", help="Corpus version to record (default: keep the current one)."),
    ] = None,
    policy_id: Annotated[
        str | None,
        typer.Option(
            "--policy-id",
            help="Policy the corpus follows, a registered policy id (default: keep the current "
            "one; none recorded means the default policy).",
        ),
    ] = None,
) -> None:
    """Rewrite MANIFEST.json (SHA-256 per file, version, counts) for an otherwise valid corpus."""
    from trustbench.rtb.corpus._load import write_manifest

    written = write_manifest(corpus, version, policy_id)
    typer.echo(
        f"wrote MANIFEST.json: version {written.version}, {len(written.files)} files, "
        f"{written.counts.cases} cases"
    )


@rtb_app.command()
def export(
    out: Annotated[str, typer.Option("--out", help="Output folder (inputs/ and grader/ go here).")],
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="Corpus folder (default: the default built-in corpus)."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Reproducible evaluation ids (predictable to anyone with the seed)."
        ),
    ] = None,
) -> None:
    """Write one candidate input per case and, apart, the grader's evaluation-id map.

    Without --corpus: the reviewer-side default built-in corpus (the newest), the one
    `rtb review --model` and the Inspect task default to.
    """
    from trustbench.core import check_output_folder, output_path
    from trustbench.rtb.corpus._export import export_candidate_inputs
    from trustbench.rtb.corpus._load import DEFAULT_VERSION, builtin_corpus_root, load_corpus

    folder = check_output_folder(output_path(out))
    if corpus is not None and (corpus / "HELDOUT.json").is_file():  # a sealed held-out set
        from trustbench.rtb.heldout._pipeline import export_clear

        if seed is not None:
            raise InputError("--seed: a sealed set's evaluation ids were fixed when it was sealed")
        count = export_clear(corpus, folder)
        typer.echo(f"exported {count} candidate inputs of the sealed set to {folder / 'inputs'}")
        typer.echo("the grader-only evaluation map stays sealed to the set owner's key")
        return
    loaded = load_corpus(corpus or builtin_corpus_root(DEFAULT_VERSION))
    result = export_candidate_inputs(loaded, folder, seed=seed)
    count = len(result.evaluation_map.evaluations)
    typer.echo(f"exported {count} candidate inputs to {result.inputs_dir}")
    typer.echo(
        f"shared prompt: {result.prompt_path}; response schema: {result.response_schema_path}"
    )
    typer.echo(f"grader-only map (keep away from candidates): {result.grader_map_path}")
    if seed is not None:
        typer.echo("note: seeded evaluation ids are reproducible, hence predictable")


def audit_table(rows: list[AuditRow]) -> Table:
    """Rich table of harness self-audit checks, failures first."""
    from rich.table import Table

    table = Table(title="RTB harness self-audit (tests the measurement path, not a candidate)")
    for column in ("track", "check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for row in sorted(rows, key=lambda r: (r.passed, r.not_run)):
        if row.not_run:
            result = "[yellow]not run[/]"
        else:
            result = "[green]holds[/]" if row.passed else "[bold red]FAILED[/]"
        table.add_row(row.track, row.check, result, row.detail)
    return table


def saturation_table(report: SaturationReport) -> Table:
    """Rich table of the shortcut audit: each surface rule's accuracy against the ceiling."""
    from rich.table import Table

    from trustbench.rtb.review._shortcuts import chance_line, percent, verdict_cell

    table = Table(
        title="Corpus saturation: surface rules vs the reference decisions (candidate-visible "
        "input only)",
        caption=chance_line(report),
    )
    for column in ("rule", "accuracy", "ceiling", "result", "detail"):
        table.add_column(column, overflow="fold")
    for rule in report.rules:
        result = verdict_cell(rule.accuracy, rule.rule in report.saturated_rules, "SATURATED")
        table.add_row(
            rule.rule, percent(rule.accuracy), percent(report.ceiling), result, rule.detail
        )
    return table


@rtb_app.command()
def audit(
    corpus: _CheckedCorpusOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for the random sentinels.")] = 0,
    margin: Annotated[
        float,
        typer.Option(
            "--saturation-margin",
            min=0.0,
            max=1.0,
            help="Points above chance (majority-class share) a surface rule may score, and "
            "either side of chance a policy-blind attacker may, as a fraction (0.15 = 15 "
            "points). Learners of the fields the policy rules read are reported, not held to it.",
        ),
    ] = 0.15,
    heldout_key: Annotated[
        Path | None,
        typer.Option(
            "--heldout-key",
            help="With --corpus a sealed held-out set: the owner's private key file (else "
            "$TRUSTBENCH_HELDOUT_KEY); the audits read its labels.",
        ),
    ] = None,
) -> None:
    """Run the harness self-audit and the corpus audits (shortcuts, learners, artifacts, rules).

    The self-audit covers sentinels, reference policy, control path and workflow agents. The
    corpus audits score fixed surface rules and learned attackers (leave one domain group out) on
    the candidate-visible inputs, scan every token class for label information, fit attackers the
    corpus was not selected against (policy-blind ones within the corpus and on a fresh pool from
    the policy's generator, shallow relational ones on the pool), and run the reference reviewer
    without each rule of the policy text against the built-in review spec's release gates.

    Gated (issue 51): every expected signature, the surface rules (at most chance + margin), the
    policy-blind attackers (within chance +/- margin, two-sided), the token classes (none carries
    the label), every policy rule load-bearing, and no attacker or rule-ablated reader passing
    the review gates. Reported, never failing by accuracy: the learners of the fields the rules
    read (the learned attackers, the relational ones), as how much of the policy a shallow
    learner recovers and the rules its errors fall on. Exit 0 when every gated check holds; 1
    naming each failed one otherwise. Without a generator the pool-trained attackers are reported
    as not run.
    """
    from rich.console import Console

    from trustbench.rtb import _harness_audit
    from trustbench.rtb.heldout._pipeline import corpus_with_labels
    from trustbench.rtb.review import _audit as _ablation
    from trustbench.rtb.review import _learning_audit, _unfiltered_attackers

    with corpus_with_labels(_checked_corpus(corpus), heldout_key, "the audit") as loaded:
        rows = _harness_audit.run_harness_audit(loaded, seed=seed)
        audits = _harness_audit.run_corpus_audits(loaded, margin=margin, seed=seed)
    console = Console(width=None if sys.stdout.isatty() else 140)
    console.print(audit_table(rows))
    console.print(saturation_table(audits.saturation))
    console.print(_learning_audit.learned_table(audits.learning.learned))
    console.print(_learning_audit.artifact_table(audits.learning.artifacts))
    console.print(_unfiltered_attackers.unfiltered_table(audits.unfiltered))
    console.print(_ablation.ablation_table(audits.ablation))
    failed = [row for row in rows if not row.passed and not row.not_run]
    not_run = [row for row in rows if row.not_run]
    ran = len(rows) - len(not_run)
    problems = []
    if failed:
        names = "; ".join(f"{row.track}: {row.check}" for row in failed)
        problems.append(f"{len(failed)} of {ran} audit check(s) failed: {names}")
    else:
        typer.echo(f"all {ran} harness audit checks that ran hold")
    for row in not_run:
        typer.echo(f"{row.track} audit {row.detail}")
    *corpus_lines, ablation_line = audits.verdicts()
    for check_ok, line in corpus_lines:
        typer.echo(line)
        if check_ok is False:  # None: not run (no generator shipped), neither pass nor failure
            problems.append(line)
    typer.echo(_ablation.counts_line(audits.ablation))
    typer.echo(ablation_line[1])
    if not ablation_line[0]:
        problems.append(ablation_line[1])
    if problems:
        raise CheckFailed("; ".join(problems))


def _register_heldout() -> None:
    """Held-out set commands (issue #33), kept in `rtb/heldout/cli.py`."""
    from trustbench.rtb.heldout import cli as heldout_cli

    rtb_app.command(name="keygen-seal")(heldout_cli.keygen_seal)
    rtb_app.command(name="seal")(heldout_cli.seal)
    rtb_app.command(name="retire")(heldout_cli.retire)
    rtb_app.command(name="split")(heldout_cli.split)
    rtb_app.add_typer(heldout_cli.heldout_app, name="heldout")


_register_heldout()


def _register_quick() -> None:
    """The spec-free quick paths (`rtb review|workflow --model`), kept in `rtb/_quick.py`."""
    from trustbench.rtb import _quick as _quick_cli

    rtb_app.command(name="review")(_quick_cli.review)
    rtb_app.command(name="workflow")(_quick_cli.workflow)


_register_quick()


adjudicate_app = typer.Typer(
    help="Independent review of reference decisions: frozen protocol, hash-chained record.",
    no_args_is_help=True,
)
rtb_app.add_typer(adjudicate_app, name="adjudicate")

_RecordArgument = Annotated[
    Path, typer.Argument(help="The adjudication record (JSON Lines, append-only).")
]
_AdjudicatedCorpusOption = Annotated[
    Path | None,
    typer.Option("--corpus", help="Corpus folder, when not where the protocol names it."),
]
_SignKeyOption = Annotated[
    Path | None,
    typer.Option("--sign-key", help="Sign each new entry with this Ed25519 private key."),
]


@adjudicate_app.command("protocol")
def adjudicate_protocol(
    record: _RecordArgument,
    corpus: Annotated[
        str, typer.Option("--corpus", help="`builtin:NAME` (a built-in corpus) or a corpus folder.")
    ],
    select: Annotated[
        str, typer.Option("--select", help="all | sample | consequential | listed")
    ] = "all",
    per_group: Annotated[
        int | None, typer.Option("--per-group", help="Cases per domain group (sample).")
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the sample.")] = None,
    consequential: Annotated[
        str, typer.Option("--consequential", help="Reference decisions that are consequential.")
    ] = "deny,hold",
    cases_from: Annotated[
        Path | None, typer.Option("--cases-from", help="File of case ids (listed).")
    ] = None,
    reviewers_per_case: Annotated[
        int, typer.Option("--reviewers-per-case", help="Reviews each case needs.")
    ] = 1,
    blind_second_review: Annotated[
        bool,
        typer.Option(
            "--blind-second-review/--no-blind-second-review",
            help="Consequential cases need a second, blind review.",
        ),
    ] = True,
    rule: Annotated[
        str, typer.Option("--rule", help="unanimous | majority | adjudicated")
    ] = "unanimous",
    sign_key: _SignKeyOption = None,
) -> None:
    """Freeze a protocol: write a new record whose first entry names the corpus and cases."""
    from trustbench.rtb.adjudication import freeze_protocol

    if select not in ("all", "sample", "consequential", "listed"):
        raise InputError(f"--select {select!r}: choose all, sample, consequential or listed")
    if rule not in ("unanimous", "majority", "adjudicated"):
        raise InputError(f"--rule {rule!r}: choose unanimous, majority or adjudicated")
    options = {
        "sample_per_group": per_group,
        "seed": seed,
        "consequential_decisions": [d.strip() for d in consequential.split(",") if d.strip()],
        "reviewers_per_case": reviewers_per_case,
        "blind_second_review": blind_second_review,
        "adjudication_rule": rule,
    }
    frozen = freeze_protocol(
        record,
        corpus,
        selection=select,  # type: ignore[arg-type]  # checked above
        options=options,
        listed_file=cases_from,
        sign_key=sign_key,
    )
    typer.echo(
        f"froze protocol in {record}: {len(frozen.cases)} case(s) of {frozen.corpus} "
        f"(MANIFEST {frozen.corpus_manifest_sha256[:16]}...), rule {frozen.adjudication_rule}"
    )


@adjudicate_app.command("import")
def adjudicate_import(
    record: _RecordArgument,
    review_file: Annotated[Path, typer.Argument(help="One reviewer's reviews: TSV, CSV or JSON.")],
    reviewer_id: Annotated[
        str | None, typer.Option("--reviewer-id", help="Pseudonymous reviewer id.")
    ] = None,
    role: Annotated[
        str | None, typer.Option("--role", help="Declared role (say if not a human expert).")
    ] = None,
    years: Annotated[
        int | None, typer.Option("--years", help="Declared years of experience.")
    ] = None,
    corpus: _AdjudicatedCorpusOption = None,
    sign_key: _SignKeyOption = None,
    blind: Annotated[
        bool | None,
        typer.Option(
            "--blind/--not-blind",
            help="Declare the reviews made (not) blind: without seeing candidate verdicts, the "
            "label or other reviews. Default: the file's `# blind: yes|no` header, else not "
            "blind.",
        ),
    ] = None,
) -> None:
    """Append one reviewer's reviews to the record, all of them or none."""
    from trustbench.rtb.adjudication import import_reviews

    declared = {"reviewer_id": reviewer_id, "role": role, "years": years}
    qualification, count = import_reviews(
        record, review_file, declared=declared, corpus=corpus, sign_key=sign_key, blind=blind
    )
    typer.echo(f"recorded {count} review(s) by {qualification.text()}")


@adjudicate_app.command("serve")
def adjudicate_serve(
    record: _RecordArgument,
    reviewers: Annotated[
        Path,
        typer.Option(
            "--reviewers",
            help='Roster (JSON): {"reviewers": [{reviewer_id, role, years}], "adjudicators": '
            "[...]}, each person's declared qualification.",
        ),
    ],
    corpus: _AdjudicatedCorpusOption = None,
    port: Annotated[int, typer.Option("--port", help="Port (0 = any free port).")] = 8766,
    sign_key: _SignKeyOption = None,
) -> None:
    """Serve the review app on 127.0.0.1; print one private link per person; Ctrl-C to stop.

    A reviewer sees each case of the protocol as a candidate does, plus the policy text, never
    the label, a candidate's verdict or another reviewer's answer; each review is appended to
    RECORD as `import` appends one. An adjudicator settles the disagreements the protocol's
    `adjudicated` rule sends them, seeing the reviews but not the label.
    """
    from trustbench._local_app import listen_socket, serve_until_stopped
    from trustbench.rtb.adjudication_app import open_adjudication

    listening = listen_socket("127.0.0.1", port)  # before anything else: a used port fails at once
    serve_until_stopped(
        listening,
        "127.0.0.1",
        open_adjudication(record, reviewers, corpus, sign_key),
        what=str(record),
        stops="Ctrl-C stops; everything submitted is in the record",
    )
    typer.echo("stopped: every submitted review is in the record; serve again to go on")


@adjudicate_app.command("report")
def adjudicate_report(
    record: _RecordArgument,
    corpus: _AdjudicatedCorpusOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON report.")] = False,
) -> None:
    """Agreement with the labels and between reviewers, and every disagreement."""
    import json

    from trustbench.rtb.adjudication import adjudication_report, report_text

    report = adjudication_report(record, corpus)
    typer.echo(json.dumps(report, indent=2) if as_json else report_text(report))


@adjudicate_app.command("apply")
def adjudicate_apply(
    record: _RecordArgument,
    corpus: _AdjudicatedCorpusOption = None,
    sign_key: _SignKeyOption = None,
) -> None:
    """Write each case's reference_status from the record, then a new MANIFEST.json."""
    from trustbench.rtb.adjudication import apply_record

    summary = apply_record(record, corpus, sign_key)
    counts = ", ".join(f"{n} {status}" for status, n in summary["status_counts"].items())
    typer.echo(
        f"applied record {summary['record_sha256'][:16]}...: {counts}; "
        f"{summary['cases_written']} case file(s) written, "
        f"MANIFEST {summary['manifest_sha256_after'][:16]}..."
    )


@adjudicate_app.command("verify")
def adjudicate_verify(
    record: _RecordArgument,
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            help="The signer's Ed25519 public key (KEY.pub from `trustbench keygen`): every "
            "entry must carry a signature that verifies under it (unsigned is refused).",
        ),
    ] = None,
) -> None:
    """Check the record's hash chain and, with --public-key, every entry's signature."""
    from trustbench.rtb.adjudication import verify_record

    checked = verify_record(record, public_key)
    if checked.verified_keyid is not None:
        signing = f"every signature verified under {public_key} (keyid {checked.verified_keyid})"
    elif checked.signed:
        signing = (
            f"{checked.signed} of {checked.entries} entries signed, signatures NOT CHECKED: give "
            "--public-key KEY.pub to check them"
        )
    else:
        signing = "UNSIGNED: the chain detects accidental changes, not a deliberate rewrite"
    typer.echo(f"intact: {checked.entries} entries chained, head {checked.head[:16]}...; {signing}")


@rtb_app.command()
def trace(
    runs: Annotated[
        list[Path],
        typer.Argument(help="Finished run folders of the reviewer, control and workflow tracks."),
    ],
    case: Annotated[str, typer.Option("--case", help="The corpus case id to trace.")],
    fault: Annotated[
        str | None,
        typer.Option(
            "--fault",
            help="A stateful fault kind of the control or workflow track (e.g. "
            "checkpoint_replay_after_revocation); default: the case presented directly.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the trace as JSON.")] = False,
) -> None:
    """One case (or stateful fault) across the tracks: who detects, what stops, what proves.

    Verifies every run first (exit 1 when one does not verify); refuses runs of different
    corpora and a case a run does not hold (exit 2). Every row names its run and ledger rows.
    """
    import json

    from trustbench.rtb.trace import trace_case, trace_text

    traced = trace_case(runs, case, fault)
    typer.echo(json.dumps(traced, indent=2) if as_json else trace_text(traced))
