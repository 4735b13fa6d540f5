"""What `kbench mcp`'s tools answer: the structured (schema'd) models, each kept under ANSWER_CHARS characters as the
client receives it (report.md and files paged, long fields cut, lists shortened, saying what was left out), and
errors as one line."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, ParamSpec, TypeVar

import pydantic_core
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from kbench.errors import KbenchError, UsageError, bad_name, first_line
from kbench.model import Model
from kbench.report.comparison import Comparison
from kbench.report.models import ProfileResult
from kbench.report.report_json import SCHEMA_ID
from kbench.report.runs import RunRow

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)
# Every answer stays under ANSWER_CHARS characters as the client receives it (about 10k tokens; Claude Code refuses a
# tool result over 25,000 tokens). The SDK sends the structured answer twice (as structured content and as its JSON
# text), so the structured answer is held under JSON_CHARS: report.md and files are paged, report.json is left out of
# a profile/analyze answer that would pass it (read_report pages it), lists are cut.
ANSWER_CHARS = 40_000
JSON_CHARS = ANSWER_CHARS // 2 - 1_000
MD_CHARS = 8_000
FIELD_CHARS = 500  # a run's error, a note, a parameter's value: longer ones are cut, saying how long they were
UNION_MEMBERS = {"str", "int", "float", "bool"}  # how pydantic names the members of a parameter value's type


def one_line_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """A KbenchError as its one line; any other exception as a one-line kbench bug (exit 70 on the CLI)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ToolError:
            raise
        except KbenchError as e:
            raise ToolError(cut_line(first_line(e))) from None
        except Exception as e:
            if (bad := bad_name(e)) is not None:
                raise ToolError(str(bad)) from None
            raise ToolError(cut_line(f"kbench bug ({type(e).__name__}): {first_line(e)}")) from None

    return wrapper


ERROR_CHARS = 2_000  # a tool error's line: it may quote a name a planted file holds, of any length


def cut_line(line: str) -> str:
    """An error line of at most ERROR_CHARS characters, saying how long it was where it is cut."""
    return line if len(line) <= ERROR_CHARS else f"{line[: ERROR_CHARS - 60]}... (cut: {len(line):,} characters)"


def bad_arguments(errors: Sequence[Any]) -> str:
    """Pydantic's validation errors of a tool's arguments in one line: each argument (union members folded into
    it) with what was wrong, no URL."""
    said: dict[str, str] = {}
    members: dict[str, list[str]] = {}  # an argument of a union type fails once per member: say them together
    for err in errors:
        parts = [str(part) for part in err["loc"]]
        where = ".".join(p for p in parts if p not in UNION_MEMBERS) or "arguments"
        said.setdefault(where, str(err["msg"]))
        members.setdefault(where, []).extend(p for p in parts if p in UNION_MEMBERS)
    for where, types in members.items():
        if len(types) > 1:
            said[where] = f"expected one of {', '.join(types)}"
    return "bad arguments: " + "; ".join(f"{where}: {what}" for where, what in said.items())


class Param(Model):
    name: str
    type: str
    default: Any
    help: str
    choices: list[Any] = Field(default_factory=list)
    ge: float | None = Field(default=None, description="the smallest value allowed (None: no bound)")
    le: float | None = Field(default=None, description="the largest value allowed (None: no bound)")


class Version(Model):
    version: str
    doc: str
    broken: str | None = None  # why it cannot be imported


class KernelPackage(Model):
    package: str
    doc: str
    origin: str  # "kbench" or the folder it came from
    baseline: str
    versions: list[Version]
    params: list[Param]
    broken: str | None = None  # why the package cannot be imported


class Kernels(Model):
    kernels: list[KernelPackage]


class RunDone(Model):
    run: str  # the run folder
    report_md: str = Field(description="report.md as written, its first MD_CHARS characters when longer")
    report_md_chars: int = Field(description="report.md's whole length")
    # report.json's facts as a plain object: its schema (docs/schema/report.schema.json) repeated in the profile and
    # analyze tools' output schemas passed the tool list's bound once the Distance parts joined it (issue 51)
    report: dict[str, Any] | None = Field(
        description=f"report.json's facts (JSON Schema {SCHEMA_ID}, docs/schema/report.schema.json); None when they "
        "would pass the answer's bound"
    )
    more: str | None = Field(description="what was left out of this answer, and the read_report call that pages it")


class ReportText(Model):
    run: str
    format: Literal["md", "json"]
    text: str = Field(
        description="md: the file from offset, at most max_chars characters. json: a JSON object holding whole parts "
        "of report.json (see parts) where report.json has them"
    )
    offset: int = Field(description="md: the character it starts at; json: the index of its first part")
    total_chars: int
    next_offset: int | None = Field(description="where the rest starts (call again with it); None at the end")
    parts: list[str] | None = Field(
        default=None,
        description="json: the JSON pointers (RFC 6901) of the whole values this page holds, each at the same "
        "pointer in text (a list split over pages has its items keyed by index there); None when paged by characters",
    )
    more: str | None = Field(default=None, description="how the report was paged, and how to read on or one part")


class Checked(Model):
    passed: bool
    exit_code: int
    output: str = Field(description="`kbench check`'s lines: each version and configuration with its verdict")


class Runs(Model):
    runs: list[RunRow]
    more: str | None = Field(default=None, description="what was left out (runs, long fields), and how to ask for it")


class Compared(Comparison):
    more: str | None = Field(default=None, description="what was left out (rows, notes, long fields)")


class Logged(Model):
    path: str
    entry: str = Field(description="the entry appended (its head when long: the file holds it whole)")
    more: str | None = Field(default=None, description="what was left out of the entry, and where it is")


def logged(path: str, entry: str) -> Logged:
    """The devlog's answer: the entry's head when it passes MD_CHARS (it quotes result.json and the insights)."""
    head, rest = page(entry, 0, MD_CHARS)
    more = None if rest is None else f"the entry's first {len(head):,} of {len(entry):,} characters: {path} holds it"
    return Logged(path=path, entry=head, more=more)


class Cloned(Model):
    path: str
    renamed: dict[str, str]
    package: str = Field(description="the package the new version is in (a shipped one's copy: my_<pkg>)")
    edit: list[str] = Field(description="the files to edit: the new version and its own copies of kernel helpers")
    shared: list[str] = Field(description="modules of its package it imports, shared with the other versions")
    kernel_path: str | None = Field(description="where a shipped package was copied: pass it as kernel_path")
    profile: dict[str, str] = Field(
        default_factory=dict,
        description="the profile tool's arguments for the new version (add the mode and params of the run you compare "
        "it with)",
    )
    next: str = Field(default="", description="the loop's next calls, in words: what to edit, profile, compare")


def cloned(made: Any, source: str, target: str, kernel_path: str | None) -> Cloned:
    """clone_version's answer from kbench.plan.clone's ``Cloned``: the files to edit and the calls that follow."""
    edit = [str(made.path), *(str(p) for p in made.own)]
    call = {"kernel": made.package, "version": target}
    from kbench.plan.clone import copied_from

    origin = f", else of {shipped}" if (shipped := copied_from(made.package)) else ""
    steps = (
        f"edit {', '.join(edit)}; then profile(kernel={made.package!r}, version={target!r}, mode=..., params=...) with "
        f"the mode and params of the {source} run you compare it with; then compare(a=<that run>, b=<the new run>), "
        f"or compare(a=<the new run>, previous=true), which takes the latest earlier run of {made.package}{origin} "
        "with the same mode and params"
    )
    return Cloned(path=str(made.path), renamed=made.renamed, package=made.package, edit=edit,
                  shared=list(made.shared), kernel_path=kernel_path, profile=call, next=steps)  # fmt: skip


def kernels(kernel_path: list[str]) -> Kernels:
    from kbench.plan.discovery import catalogue

    return Kernels(
        kernels=[
            KernelPackage(
                package=pkg.name,
                doc=pkg.doc,
                origin=pkg.origin,
                baseline=pkg.baseline,
                versions=[Version(version=v.version, doc=v.doc, broken=v.broken) for v in pkg.versions],
                params=[
                    Param(
                        name=p.name,
                        type=p.type_name,
                        default=p.default,
                        help=p.help,
                        choices=list(p.choices),
                        ge=p.ge,
                        le=p.le,
                    )
                    for p in pkg.params
                ],
                broken=pkg.broken,
            )
            for pkg in catalogue(kernel_path)
        ]
    )


def done(result: ProfileResult) -> RunDone:
    """The answer to a profile or analyze: the run folder, its report.md as written (its head when long), and
    report.json's facts (built from the same result the pipeline wrote them from) when the answer stays bounded."""
    from kbench.report import report_json

    md = result.report_md
    facts = report_json.build(result)
    more: list[str] = []
    if len(md) > MD_CHARS:
        more.append(f"report.md is {len(md)} characters, {MD_CHARS} here: read_report(run, offset={MD_CHARS}) pages it")
        md = md[:MD_CHARS]
    answer = RunDone(
        run=result.out_dir,
        report_md=md,
        report_md_chars=len(result.report_md),
        report=facts.model_dump(mode="json"),
        more=None,
    )
    if sent(answer) > ANSWER_CHARS - 1_000:  # what the client receives: the structured answer and its text copy
        more.append(
            "report.json left out (it would pass this answer's bound): read_report(run, format='json') pages it"
        )
        answer.report = None
    answer.more = "; ".join(more) or None
    return answer


def page(text: str, offset: int, max_chars: int) -> tuple[str, int | None]:
    """``text`` from ``offset``, at most ``max_chars`` characters (and never so many that the answer passes
    JSON_CHARS once escaped as a JSON string), and where the rest starts (None at the end)."""
    if offset < 0 or max_chars < 1:
        raise UsageError(f"offset {offset} and max_chars {max_chars}: offset >= 0, max_chars >= 1")
    end = offset + min(max_chars, JSON_CHARS - 1_000)
    while end > offset + 1 and len(json.dumps(text[offset:end])) > JSON_CHARS - 1_000:  # quotes and newlines escaped
        end = offset + (end - offset) * 3 // 4
    return text[offset:end], (end if end < len(text) else None)


def sent(answer: BaseModel) -> int:
    """The characters a client receives for ``answer``: its structured content and the SDK's indented JSON text."""
    data = answer.model_dump(mode="json")
    return len(json.dumps(data)) + len(pydantic_core.to_json(data, indent=2))


def cut(text: str) -> str:
    """``text``, or its head and how long it was when it passes FIELD_CHARS."""
    return text if len(text) <= FIELD_CHARS else f"{text[:FIELD_CHARS]}... (cut: {len(text)} characters)"


def _short(item: M) -> tuple[M, bool]:
    """``item`` with every text field and every long value of a dict field cut; and whether anything was."""
    update: dict[str, Any] = {}
    for name, value in item:
        if isinstance(value, str) and len(value) > FIELD_CHARS:
            update[name] = cut(value)
        elif isinstance(value, dict):
            try:
                whole = json.dumps(value, default=str)
            except (ValueError, RecursionError):  # a hand-edited file's value nested past the encoder's depth
                whole = "(nested too deep to show)"
            if len(whole) > FIELD_CHARS:
                update[name] = {"(cut)": cut(whole)}
    return (item.model_copy(update=update), True) if update else (item, False)


def fitted(
    answer: M, field: str, what: str, total: int | None = None, skipped: int = 0, hint: str = "", trimmed: bool = False
) -> M:
    """``answer`` with its list ``field`` shortened from the end and long fields cut until the client receives
    fewer than ANSWER_CHARS characters; ``more`` says what was left out (of ``total`` items when more were found,
    the first ``skipped`` of them not asked for) and ``hint`` how to ask for the rest ({next}: where it starts);
    ``trimmed``: the caller cut fields of its own."""
    shortened = [_short(item) for item in getattr(answer, field)]
    items = [item for item, _ in shortened]
    bare = answer.model_copy(update={field: [], "more": "x" * 300})  # room for what `more` will say
    room = ANSWER_CHARS - 1_000 - sent(bare)
    kept = 0
    for item in items:
        room -= sent(item)  # a first estimate: nested deeper, an item's indented text is a little longer
        if room < 0:
            break
        kept += 1
    while kept and sent(answer.model_copy(update={field: items[:kept], "more": "x" * 300})) >= ANSWER_CHARS - 1_000:
        kept -= 1
    whole = total if total is not None else len(items)
    said = []
    if kept + skipped < whole:
        said.append(f"{what} {skipped + 1}-{skipped + kept} of {whole} shown" + hint.format(next=skipped + kept))
    if trimmed or any(was for _, was in shortened[:kept]):
        said.append(f"fields over {FIELD_CHARS} characters cut (each says its length)")
    return answer.model_copy(update={field: items[:kept], "more": "; ".join(said) or None})


def compared(c: Comparison) -> Compared:
    """A comparison within the answer's bound: long labels and notes cut, rows beyond the bound left out."""
    short, trimmed = _short(c)
    notes = [cut(n) for n in c.notes]
    whole = Compared(**{**short.model_dump(), "notes": notes})
    trimmed = trimmed or notes != c.notes
    return fitted(whole, "rows", "rows", hint=" (`kbench compare` on the command line shows them all)", trimmed=trimmed)
