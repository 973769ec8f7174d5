"""The `trustbench trb` command group: adapter checks, audits, corpora (made or imported), runs.

`trb run` freezes a built-in (or given) spec of the `trb/profile` track, runs it through the
shared ledger and writes `record.json` and `report.html`; `trb smoke` is the quick direct
look that prints results without a run folder. Failures raise `CheckFailed`
(exit 1) or `InputError` (exit 2), which the top-level entry point turns into messages.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from trustbench._lazy_commands import lazy_group
from trustbench._quick_model import (
    Concurrency,
    Limit,
    MaxTokens,
    New,
    Timeout,
    api_key_env_option,
    base_url_option,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.trb._cli_tables import (
    _fmt,
    _interval,
    _print_audit,
    _print_goodhart,
    _print_profile_record,
)

# `collect` is built when looked up (`trb --help`, `trb collect ...`): importing its package
# builds the collection and TRB corpus models, which `trustbench --help` has no use for.
trb_app = typer.Typer(
    help="Trace AI Reflection Benchmark (TRB).",
    no_args_is_help=True,
    cls=lazy_group({"collect": "trustbench.trb.collect.cli:collect_app"}),
)

_Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="openai/NAME: add this chat model (any OpenAI-compatible server) to the spec as a "
        "candidate through the proxy adapter, without writing a spec.",
    ),
]
_BaseUrl = Annotated[str | None, base_url_option(prefix="With --model: ")]
_ApiKeyEnv = Annotated[str | None, api_key_env_option("OPENAI_API_KEY", prefix="With --model: ")]


@trb_app.command("check-adapter")
def check_adapter_command(
    spec: Annotated[str, typer.Argument(help="MODULE:FACTORY returning an adapter.")],
    traces: Annotated[int, typer.Option(help="Reference-world traces to exercise it on.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed for the determinism check.")] = 0,
) -> None:
    """Run the conformance kit on an adapter: types, distributions, determinism, override."""
    from rich.console import Console
    from rich.table import Table

    from trustbench.trb.adapter._conformance import check_adapter, load_factory

    results = check_adapter(load_factory(spec), n_traces=traces, seed=seed)
    table = Table(title=f"TRB adapter conformance: {spec}")
    for column in ("hook", "check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for r in results:
        verdict = "[green]pass[/]" if r.passed else "[bold red]FAIL[/]"
        table.add_row(r.hook, r.check, verdict, r.detail)
    Console().print(table)
    failed = [r for r in results if not r.passed]
    if failed:
        first = failed[0]
        raise CheckFailed(
            f"{len(failed)} conformance check(s) failed; first: {first.hook} / {first.check}: "
            f"{first.detail}",
            location=spec,
        )


@trb_app.command()
def audit(
    traces: Annotated[int, typer.Option(help="Eval traces to audit on.")] = 60,
    seed: Annotated[int, typer.Option(help="Seed of the audit corpus.")] = 7,
    cheats: Annotated[
        bool,
        typer.Option(
            help="Also submit the seven cheats (trustbench.trb.cheats) through `trb run`: each "
            "must get a 'not trustworthy' verdict (minutes on a busy 2-core machine)."
        ),
    ] = True,
    cheat_traces: Annotated[int, typer.Option(help="Eval traces of the cheat run.")] = 12,
    adapter: Annotated[
        str | None,
        typer.Option(
            "--adapter",
            metavar="MODULE:ATTR",
            help="Audit your adapter instead: submit it (sandboxed, as `trb run` does) to the "
            "cheat audit's run and report every cheat detector's result; exit 1 if any fires. "
            "--cheat-traces sizes the run.",
        ),
    ] = None,
) -> None:
    """Score oracles against closed forms and Goodhart adapters against their signatures.

    Exits 1 on any deviation from a closed form, any cheat whose signature does not hold, or
    any of the seven submitted cheats not judged "not trustworthy" by the combined verdict.
    With --adapter, runs that adapter through every cheat detector instead (exit 1 when any
    fires, 2 when it cannot be loaded).
    """
    if adapter is not None:
        _audit_adapter(adapter, cheat_traces, seed)
        return
    from trustbench.trb.corpus._generate import generate_split
    from trustbench.trb.instruments._goodhart import goodhart_audit
    from trustbench.trb.instruments._oracles import audit as run_audit

    split = generate_split("eval", traces, seed)
    rows = run_audit(split)
    _print_audit(rows)
    goodhart = goodhart_audit(split)
    _print_goodhart(goodhart)
    _fail_on_first(
        rows,
        lambda f: (
            f"harness audit failed: {f['oracle']} {f['metric']} measured "
            f"{_fmt(f['measured'], 6)}, expected {f['expected']:.6f} (tolerance {f['tolerance']:g})"
        ),
    )
    _fail_on_first(
        goodhart,
        lambda f: (
            f"Goodhart audit failed: {f['adapter']} does not show its signature "
            f"({f['signature']}); measured {f['measured']}"
        ),
    )
    if cheats:
        from trustbench.trb.track._pipeline import cheat_audit, print_cheats

        submitted = cheat_audit(cheat_traces, seed)
        print_cheats(submitted)
        _fail_on_first(
            submitted,
            lambda f: (
                f"cheat audit failed: {f['adapter']} got {f['verdict']!r}, "
                f"expected {f['expected']} ({f['why']})"
            ),
        )


def _audit_adapter(target: str, eval_traces: int, seed: int) -> None:
    """`trb audit --adapter`: every cheat detector on one adapter; exit 1 when any fires.

    Raises:
        CheckFailed: a detector fired (or the adapter failed the conformance kit at freeze).
    """
    from trustbench.trb.track._pipeline import adapter_audit, print_adapter_audit

    result = adapter_audit(target, eval_traces, seed)
    print_adapter_audit(result)
    fired = [r["detector"] for r in result["detectors"] if r["fired"]]
    if fired:
        raise CheckFailed(
            f"{len(fired)} cheat detector(s) fired on {target}: {', '.join(fired)}",
            location="trb audit --adapter",
        )
    typer.echo(f"no cheat detector fired on {target}; combined verdict: {result['verdict']}")


def _fail_on_first(rows: list[dict[str, Any]], message: Callable[[dict[str, Any]], str]) -> None:
    """Exit 1 (`CheckFailed`) with `message` of the first audit row that did not pass, if any.

    Raises:
        CheckFailed: some row did not pass.
    """
    failed = next((r for r in rows if not r["passed"]), None)
    if failed is not None:
        raise CheckFailed(message(failed), location="trb audit")


def _record(text: str) -> dict[str, Any]:
    """A run's `record.json`, given the file or its run folder.

    Raises:
        InputError: no such file, or not a JSON object.
    """
    path = Path(text)
    path = path / "record.json" if path.is_dir() else path
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read a record: {error}", location=str(path)) from None
    if not isinstance(record, dict):
        raise InputError("not a JSON object", location=str(path))
    return record


@trb_app.command()
def compare(
    first: Annotated[str, typer.Argument(help="A trb/profile run folder or its record.json.")],
    second: Annotated[str, typer.Argument(help="The run folder or record.json to compare with.")],
) -> None:
    """Print two runs' eval-split headlines side by side.

    Refused (exit 2), naming both, unless both were computed under one TRB version and one
    metric-definition digest (`metric_digest` in every row): a changed definition makes the
    numbers incomparable.
    """
    from trustbench.trb.track._versioning import compare_records

    paired = compare_records(_record(first), _record(second), a_name=first, b_name=second)
    for row in paired:
        if row["split"] == "eval" and "[" not in row["metric"]:
            typer.echo(f"{row['candidate']}  {row['metric']}: {_fmt(row['a'])} vs {_fmt(row['b'])}")


@trb_app.command()
def corpus(
    out_text: Annotated[
        str,
        typer.Argument(
            metavar="OUT", help="Folder for train/dev/eval and transfer_<family> JSONL."
        ),
    ],
    seed: Annotated[int, typer.Option(help="Corpus seed.")] = 0,
    train: Annotated[int, typer.Option(help="Train traces.")] = 1500,
    dev: Annotated[int, typer.Option(help="Dev traces.")] = 200,
    eval_traces: Annotated[int, typer.Option("--eval", help="Eval traces.")] = 300,
    transfer: Annotated[
        int, typer.Option(help="Transfer traces in all, split between the transfer families.")
    ] = 200,
    world: Annotated[
        str, typer.Option("--world", help="The world to generate: corridor or text-ops.")
    ] = "corridor",
) -> None:
    """Generate and write a synthetic corpus with its manifest and JSON Schema.

    One held-out split per Track 6 transfer family (`transfer_<family>`), as the built-in
    corpus of `trb run` has; the manifest records each split's report encoding. `--world
    text-ops` writes the text world's corpus instead, so a language model can be tried on
    the text world without writing Python (the worked example in docs/trb.md starts here).
    """
    from trustbench.core import check_output_folder, output_path
    from trustbench.trb.corpus._format import corpus_json_schema
    from trustbench.trb.corpus._generate import (
        TEXT_TRANSFER_SPLITS,
        generate_reference_corpus,
        generate_text_corpus,
    )
    from trustbench.trb.corpus._store import write_corpus

    if world not in ("corridor", "text-ops"):
        from trustbench.trb.world import world_for

        try:
            world_for(world)
            why = (
                f"trb corpus cannot generate world {world!r} (it generates corridor and "
                f"text-ops); write a corpus of it with `trustbench trb import --world {world}`"
            )
        except InputError as error:  # unregistered: the message says how to register one
            why = error.message
        typer.echo(f"--world: {why}", err=True)
        raise typer.Exit(2)
    out = check_output_folder(output_path(out_text, "OUT"), option="OUT")
    sizes = {"train": train, "dev": dev, "eval": eval_traces, "transfer": transfer}
    if world == "text-ops":  # the text generator takes traces per family: share the total
        per_family = transfer // len(TEXT_TRANSFER_SPLITS)
        splits = generate_text_corpus({**sizes, "transfer": per_family}, seed=seed)
    else:
        splits = generate_reference_corpus(sizes, seed=seed, transfer_families=True)
    manifest = write_corpus(out, {k: v for k, v in splits.items() if v})
    (out / "trace.schema.json").write_text(json.dumps(corpus_json_schema(), indent=2))
    typer.echo(
        f"corpus {manifest.corpus_sha256} ({manifest.kind}, world {manifest.world_id}) "
        f"written to {out}"
    )
    for name, info in manifest.splits.items():
        typer.echo(f"  {name}: {info.n_traces} traces, report encoding {info.report_encoding}")
    typer.echo(
        f"counterfactuals: {manifest.provenance.synthetic} synthetic, "
        f"{manifest.provenance.human} human; cap status {manifest.provenance.cap_status}"
    )


@trb_app.command("import")
def import_command(
    sessions: Annotated[Path, typer.Argument(help="Session file (JSONL, one session a line).")],
    out_text: Annotated[str, typer.Option("--out", help="New corpus folder to write.")],
    world: Annotated[
        str, typer.Option("--world", help="The world the sessions are recorded in.")
    ] = "corridor",
) -> None:
    """Import real sessions into a TRB corpus (docs/trb.md "Importing real sessions").

    Every line is checked first (unknown slot, a value outside its type, a step without
    observation, a Phi for an r' that does not exist: one message naming file, line and field);
    nothing is written unless all are valid. Prints the provenance shares, the 3:1 cap status
    and the human data the "TRB score" guard counts on the eval split.
    """
    from trustbench.core import check_output_folder, output_path
    from trustbench.trb.corpus._import import import_sessions
    from trustbench.trb.corpus._store import over_cap_label

    out = check_output_folder(output_path(out_text, "--out"))
    manifest, evidence = import_sessions(sessions, out, world)
    share = manifest.provenance
    typer.echo(
        f"corpus {manifest.corpus_sha256} ({manifest.kind}, world {manifest.world_id}) "
        f"written to {out}"
    )
    typer.echo(f"world {manifest.world_id} {manifest.world_sha256}")
    for name, info in manifest.splits.items():
        by = ", ".join(info.collected_by)
        typer.echo(f"  {name}: sessions {info.n_traces}, collected by {by}")
    percent = "n/a" if share.synthetic_share is None else f"{share.synthetic_share:.1%}"
    typer.echo(
        f"counterfactuals: {share.synthetic} synthetic, {share.human} human (same-session "
        f"revisions and paired sessions); synthetic share {percent} of "
        f"{share.synthetic + share.human}; 3:1 cap {share.cap_status}"
    )
    if (label := over_cap_label(share)) is not None:
        typer.echo(label)
    typer.echo(
        f"eval split: {evidence['human_phi']} human Phi(r') (N1 = {evidence['n1']}), "
        f"{evidence['human_labels']} human-session Track 3 labels (N3 = {evidence['n3']}); "
        + ("a TRB score can be reported" if evidence["is_score"] else str(evidence["line"]))
    )


@trb_app.command("seal-transfer")
def seal_transfer_command(
    corpus_dir: Annotated[Path, typer.Argument(metavar="CORPUS", help="TRB corpus folder.")],
    split: Annotated[str, typer.Option(help="The transfer split to seal (transfer_<family>).")],
    recipient: Annotated[
        str,
        typer.Option(help="The collector's public key (tbx25519-public:..., `rtb keygen-seal`)."),
    ],
    budget: Annotated[int, typer.Option(help="Runs allowed before a run needs a reason.")] = 5,
) -> None:
    """Seal a transfer split to the key of the party that collected it, in place.

    Its traces are encrypted as an RTB held-out set's answer key is; a run over it needs the
    collector's key ($TRUSTBENCH_HELDOUT_KEY) and is counted in the split's exposure log.
    """
    from trustbench.trb.corpus._sealed import seal_split

    sealed = seal_split(corpus_dir, split, recipient, budget=budget)
    typer.echo(
        f"{split} sealed to {sealed.recipient} as {sealed.set_id} (budget {budget} runs): "
        f"{sealed.file}; the clear split file is removed, the corpus hash is unchanged"
    )


@trb_app.command("sealed-report")
def sealed_report_command(
    split: Annotated[str, typer.Option(help="The sealed transfer split to report in full.")],
    run_dir: Annotated[Path, typer.Option("--run", help="A TRB run folder over the split.")],
    out_text: Annotated[
        str, typer.Option("--out", help="Folder for the owner's report (outside the run folder).")
    ],
    key: Annotated[
        Path | None,
        typer.Option(help="The collector's private key file (else $TRUSTBENCH_HELDOUT_KEY)."),
    ] = None,
) -> None:
    """Write the owner's report of a run over a sealed split: its every trial, trace and reply.

    The run folder's own report is the candidate's (the split's figures and intervals only); this
    one, for the collector who holds the key, goes into `--out`, never into the run folder.
    """
    from trustbench.core import read_manifest, report_run
    from trustbench.rtb.heldout._crypto import KEY_ENV
    from trustbench.rtb.heldout._pipeline import owner_report_folder
    from trustbench.trb.corpus._sealed import owner_split_report, verified_owner
    from trustbench.trb.track._adapters import corpus_folder
    from trustbench.trb.track._pipeline import track_options

    out = owner_report_folder(out_text, run_dir)  # checked first: a refusal writes nothing
    frozen = read_manifest(run_dir)
    if frozen.spec.track_id != "trb/profile":
        raise InputError(
            f"a {frozen.spec.track_id} run, not a TRB profile run", location=str(run_dir)
        )
    folder = corpus_folder(frozen.spec, track_options(frozen.spec), Path(frozen.base_dir))
    private, summary = verified_owner(folder, split, key, run_dir)
    before = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = private  # the grading opens the split as `report` does
    try:
        out.mkdir(parents=True, exist_ok=True)
        with owner_split_report(split):
            result = report_run(run_dir, out_dir=out)
    finally:
        if before is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = before
    typer.echo(
        f"sealed split {split} ({summary['set_id']}): run {summary['runs']} times (budget "
        f"{summary['budget']}); wrote the owner's report: {result.record_path} and "
        f"{result.html_path}"
    )


def _print_result(result: dict[str, Any], *, to_stderr: bool = False) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(stderr=to_stderr)  # stderr when the JSON result goes to stdout
    console.print(f"[bold]{result['trb_version']}[/]  corpus {result['corpus']['sha256'][:16]}…")
    console.print(f"[yellow]{escape(result['label'])}[/]")
    table = Table(title="Baselines (spec §4), eval split")
    for column in ("baseline", "tier", "status", "G", "balanced accuracy"):
        table.add_column(column, overflow="fold")
    for b in result["baselines"]:
        table.add_row(
            b["baseline"], b["adapter_tier"], b["status"], _fmt(b["G"]),
            _fmt(b["balanced_accuracy"]),
        )  # fmt: skip
    console.print(table)
    detail = Table(title="Track 1 / Track 3 detail (95% trace-clustered intervals)")
    detail.add_column("model", no_wrap=True)  # a model's full name, never cut
    for column in ("figure", "value", "interval", "n"):
        detail.add_column(column, overflow="fold")
    for name, t in result["tracks"].items():
        g = t["governance"]
        star = g.get("G_star") or {}
        detail.add_row(
            name, "G* = (G - floor)/(1 - floor)",
            _fmt(star.get("value")) if star.get("value") is not None else "not applicable",
            _interval(star), str(g["G"]["items"]),
        )  # fmt: skip
        detail.add_row(
            name, "G (edits)", _fmt(g["G"]["value"]), _interval(g["G"]), str(g["G"]["items"])
        )
        for key, text in (("G_null_edit_floor", "floor: G ignoring every edit"),
                          ("G_r_ignoring_ceiling", "best r-ignoring G (bound)"),
                          ("self_consistency", "self-consistency (T1b)")):  # fmt: skip
            if key in g:
                detail.add_row(name, text, _fmt(g[key]["value"]), _interval(g[key]),
                               str(g[key]["items"]))  # fmt: skip
        for slot, fig in g["G_per_slot"].items():
            detail.add_row(
                name, escape(f"G[{slot}]"), _fmt(fig["value"]), _interval(fig), str(fig["items"])
            )
        null = g["G_null_edit"]
        detail.add_row(
            name, "G null edit (r'=r)", _fmt(null["value"]), _interval(null), str(null["items"])
        )
        h = g["hard_interchange_accuracy"]
        detail.add_row(
            name,
            "hard interchange acc",
            _fmt(h["value"]),
            "—",
            f"{h['numerator']}/{h['denominator']}",
        )
        for slot, fig in g["slot_accuracy"].items():
            detail.add_row(
                name,
                escape(f"slot acc[{slot}]"),
                _fmt(fig["value"]),
                "—",
                f"{fig['numerator']}/{fig['denominator']}",
            )
        ba = t["attribution"]["balanced_accuracy"]
        detail.add_row(
            name,
            "balanced accuracy (T3)",
            _fmt(ba["value"]),
            _interval(ba),
            f"{ba['sensitivity']['denominator']}+{ba['specificity']['denominator']}",
        )
        tr = t.get("transfer_governance", {})
        if tr.get("status") == "run":
            for split, context in tr["contexts"].items():
                if context["status"] != "run":
                    detail.add_row(name, f"G on {split}", "not run", "—",
                                   escape(f"not applicable: {context['why']}"))  # fmt: skip
                    continue
                g = context["G"]
                detail.add_row(name, f"G on {split}", _fmt(g["value"]), _interval(g),
                               f"{g['items']} (drop {context['drop_from_eval']:+.3f})")  # fmt: skip
            detail.add_row(
                name, f"G min over transfer contexts ({tr['min_context']})",
                _fmt(tr["G"]["value"]), _interval(tr["G"]),
                f"{tr['G']['items']} (drop {tr['drop_from_eval']:+.3f})",
            )  # fmt: skip
        fc = t["attribution"]["false_credit"]
        detail.add_row(
            name,
            "false_credit claimed",
            _fmt(fc["false_credit_rate"]),
            "—",
            f"{fc['claimed_self']}/{fc['cells']}",
        )
    console.print(detail)  # fmt: skip
    gap = result["governance_gap"]
    console.print(
        f"Delta_gov = {gap['estimate']:.3f} 95% CI [{_fmt(gap['low'])}, {_fmt(gap['high'])}] "
        f"({gap['method']}, seed {gap['seed']}, {gap['resamples']} resamples, "
        f"{gap['clusters']} traces); sign-flip p = {gap['sign_flip_p']:.4f}; "
        f"pass bar (CI > 0): {'met' if gap['pass_bar_met'] else 'NOT met'}"
    )
    audit_ok = all(r["passed"] for r in result["audit"])
    console.print(
        f"harness audit: {'pass' if audit_ok else 'FAIL'} ({len(result['audit'])} checks)"
    )


def _finish(result: dict[str, Any], out: Path | None) -> None:
    from trustbench.core import is_standard_output, write_output

    to_stderr = out is not None and is_standard_output(out)
    _print_result(result, to_stderr=to_stderr)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_output(out, (json.dumps(result, indent=2) + "\n").encode("utf-8"))
        typer.echo(f"result written to {out}", err=to_stderr)
    if not all(r["passed"] for r in result["audit"]):
        raise CheckFailed("harness audit failed during the run", location="trb smoke")


@trb_app.command()
def run(
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Run folder: manifest, ledger, record, report (with --model: runs/trb-NAME).",
        ),
    ] = None,
    spec: Annotated[
        str, typer.Option(help="Built-in spec (smoke, reference) or a TRB spec file.")
    ] = "smoke",
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    model: _Model = None,
    base_url: _BaseUrl = None,
    api_key_env: _ApiKeyEnv = None,
    limit: Limit = None,
    timeout: Timeout = None,
    concurrency: Concurrency = None,
    max_tokens: MaxTokens = None,
    new: New = False,
) -> None:
    """Freeze a TRB spec, run it through the ledger and report it (exit 1 on a failed gate).

    Same as `trustbench freeze SPEC --out DIR && trustbench run DIR && trustbench report DIR`;
    running again into the same folder resumes it. With `--model openai/NAME` the spec is the
    built-in one with that chat model added as a candidate through the proxy adapter, written
    as RUN/spec.toml before it is frozen: edit it and rerun it with `--spec RUN/spec.toml`
    (`--timeout` and `--concurrency` set its timeout_s and concurrency, `--max-tokens` the
    model's settings.max_tokens, for the reply that must end with its slot block; `--new`
    writes the next free folder instead of resuming or re-reporting RUN). Exit codes as
    `report`'s: 4 for an incomplete run (e.g. with --limit), 1 for a failed gate.
    """
    from trustbench._quick_model import CallLimits, removed_if_refused
    from trustbench.core import NoProgress, default_progress, output_path
    from trustbench.trb._quick import QuickOptions, spec_and_folder
    from trustbench.trb.track._pipeline import freeze_run_report

    given = None if out is None else output_path(out)  # "" is refused, not the working folder
    call = CallLimits(timeout, concurrency, max_tokens)
    quick = QuickOptions(model, base_url, api_key_env, call, new)
    spec_path, folder, made_here = spec_and_folder(spec, given, quick)
    with removed_if_refused(folder, made_here=made_here):
        result = freeze_run_report(
            spec_path, folder, NoProgress() if quiet else default_progress(), limit=limit
        )
    record = json.loads(result.record_path.read_text(encoding="utf-8"))
    _print_profile_record(record)
    for gate in sorted(result.gates, key=lambda g: g.status == "passed"):
        typer.echo(gate.console_line())
    typer.echo(f"wrote {result.record_path} and {result.html_path}")
    failed_checks = [c for c in record["trb"]["oracle_checks"] if not c["passed"]]
    if failed_checks:
        first = failed_checks[0]
        raise CheckFailed(
            f"harness self-check failed: {first['oracle']} {first['metric']} measured "
            f"{first['measured']}, closed form {first['expected']:.6f}",
            location=str(result.record_path),
        )
    from trustbench.core.cli import release_exit

    release_exit(result, finish="rerun the same command (or `trustbench run RUN`) to finish it")


@trb_app.command("smoke")
def smoke_command(
    out: Annotated[
        str | None, typer.Option(help="Write the JSON result here (- for standard output).")
    ] = None,
    corpus_dir: Annotated[
        Path | None, typer.Option("--corpus", help="Stored corpus instead of the generated one.")
    ] = None,
    full: Annotated[bool, typer.Option(help="Full-size reference configuration.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file.")] = False,
) -> None:
    """Quick look without a run folder: the reference pair through Tracks 1 & 3 and the gap.

    Prints results directly (no manifest, ledger or report); `trb run` is the recorded run.
    """
    from trustbench.core import check_output_file, output_path
    from trustbench.trb.profile._run import SMOKE_CONFIG, RunConfig, run_reference

    path = None  # checked before the run, not after it
    if out is not None:
        path = check_output_file(output_path(out), force=force)
    _finish(run_reference(RunConfig() if full else SMOKE_CONFIG, corpus_dir), path)
