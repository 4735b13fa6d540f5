"""read_report's JSON pages: report.json cut into valid JSON objects of whole values (each at its own JSON pointer),
so that a client reads it a part at a time without ever parsing half an object; characters where JSON cannot be
paged, saying so."""

from __future__ import annotations

import json
from typing import Any

from kbench.cli.mcp_answers import JSON_CHARS, ReportText, cut, cut_line, page
from kbench.errors import UsageError, first_line

PARSED_CHARS = 2_000_000  # a report.json longer (kbench writes them under 100 kB) is paged by characters: bounded work
# a JSON page's text (escaped as a JSON string) and its pointers (indented in the SDK's text copy): with `more` and the
# other fields, twice over, under ANSWER_CHARS
PAGE_CHARS = JSON_CHARS - 3_000


def json_page(run: str, whole: str, offset: int, max_chars: int, part: str | None) -> ReportText:
    """A page of report.json (``whole``) holding whole parts of it: from the ``offset``-th part (the entries of the
    value at the JSON pointer ``part``, or of the whole report), as many as fit in ``max_chars`` and the answer's
    bound, as one JSON object in which each part sits at its own pointer. A value too long for a page is split into
    its members (a list's items keyed by their index in the page). A file that is not JSON, nests too deeply or
    whose one value passes a page alone is paged by characters instead, saying so (``part`` then refused)."""
    if offset < 0 or max_chars < 1:
        raise UsageError(f"offset {offset} and max_chars {max_chars}: offset >= 0, max_chars >= 1")
    if part and not part.startswith("/"):
        part = "/" + part  # a top-level entry by its name: top3
    budget = min(max_chars, PAGE_CHARS)
    try:
        if len(whole) > PARSED_CHARS:
            raise ValueError(f"it is {len(whole):,} characters, over the {PARSED_CHARS:,} paged by parts")
        tokens = _tokens(part or "")
        top = _at(json.loads(whole), tokens, part or "")
        sizes: dict[int, int] = {}
        _measure(top, sizes)
        every = _split(top, tokens, budget, sizes)
        if offset >= len(every) and offset:
            raise UsageError(f"offset {offset} is past report.json's {len(every)} parts (offset 0 starts it)")
        chosen = _fill(every, offset, budget)
    except (ValueError, RecursionError) as e:  # not JSON, too deep, or a value no page holds: characters
        if part:
            raise UsageError(f"report.json of {run} cannot be read by parts ({first_line(e)}): omit part") from None
        text, rest = page(whole, offset, max_chars)
        more = f"report.json paged by characters ({first_line(e)}): read_report(run, format='json', offset={rest})"
        return ReportText(run=run, format="json", text=text, offset=offset, total_chars=len(whole),
                          next_offset=rest, more=cut(more) if rest is not None else None)  # fmt: skip
    end = offset + len(chosen)
    rest = end if end < len(every) else None
    return ReportText(
        run=run,
        format="json",
        text=json.dumps(_nest(chosen), ensure_ascii=False),
        offset=offset,
        total_chars=len(whole),
        next_offset=rest,
        parts=[_pointer(t) for t, _ in chosen],
        more=_json_more(every, offset, end, part or ""),
    )


Tokens = tuple[str | int, ...]  # a JSON pointer's reference tokens: object members by name, list items by index
Part = tuple[Tokens, Any, int]  # a part of report.json: its tokens, its value, the characters it takes in a page


def _pointer(tokens: Tokens) -> str:
    return "".join("/" + str(t).replace("~", "~0").replace("/", "~1") for t in tokens)


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]] if pointer else []


def _at(value: Any, tokens: list[str], pointer: str) -> Any:
    """The value at ``pointer`` (its ``tokens``), or UsageError naming report.json's top-level entries."""
    for token in tokens:
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise UsageError(f"report.json has no part {cut(pointer)}: a JSON pointer such as /top3 or /stages/0")
    return value


def _measure(value: Any, sizes: dict[int, int]) -> int:
    """The characters ``value`` takes in a page's JSON text (json.dumps's default separators), each object's and
    list's kept in ``sizes`` by id, so that splitting never measures a value twice."""
    if isinstance(value, dict):
        inner = sum(len(json.dumps(k, ensure_ascii=False)) + 4 + _measure(v, sizes) for k, v in value.items())
        sizes[id(value)] = size = 2 + inner - 2 * bool(value)
    elif isinstance(value, list):
        sizes[id(value)] = size = 2 + sum(_measure(v, sizes) + 2 for v in value) - 2 * bool(value)
    else:
        size = len(json.dumps(value, ensure_ascii=False))
    return size


MAX_PARTS = 10_000  # report.json as kbench writes it has a few hundred parts; more are paged by characters
MAX_DEPTH = 64  # likewise for values nested deeper: the work per part stays bounded whatever the file holds


def _split(value: Any, tokens: Tokens | list[str], budget: int, sizes: dict[int, int]) -> list[Part]:
    """The parts of ``value`` (at ``tokens``) in document order: itself where it fits a page with the members
    holding it, else each of its members split alike; with the characters each takes in a page (``sizes``:
    ``_measure``'s). ValueError past MAX_PARTS parts or MAX_DEPTH levels (the caller pages by characters)."""
    out: list[Part] = []
    root = tuple(tokens)
    stack = [(root, value, sum(len(json.dumps(str(t), ensure_ascii=False)) + 4 for t in root))]  # {"key": ...}
    while stack:
        path, item, held = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ValueError(f"it nests deeper than {MAX_DEPTH} levels")
        members = (
            list(item.items()) if isinstance(item, dict) else list(enumerate(item)) if isinstance(item, list) else []
        )
        size = (sizes[id(item)] if isinstance(item, dict | list) else _measure(item, sizes)) + held
        if size <= budget or not members:
            if size > budget:
                raise ValueError(f"its value at {_pointer(path) or '/'} alone passes a page")
            out.append((path, item, size))
            if len(out) > MAX_PARTS:
                raise ValueError(f"it has more than {MAX_PARTS:,} parts")
            continue
        if len(out) + len(stack) + len(members) > MAX_PARTS:
            raise ValueError(f"it has more than {MAX_PARTS:,} parts")
        for key, member in reversed(members):  # popped in document order
            stack.append(((*path, key), member, held + len(json.dumps(str(key), ensure_ascii=False)) + 4))
    return out


def _fill(every: list[Part], offset: int, budget: int) -> list[tuple[Tokens, Any]]:
    """The parts from ``offset`` that fit one page: at least one, then while the page's text and its pointers stay
    within ``budget`` as the client receives them (the text escaped once more as a JSON string)."""
    chosen: list[tuple[Tokens, Any]] = []
    used = 0
    for tokens, value, size in every[offset:]:
        used += size + len(_pointer(tokens)) + 8
        if chosen and used > budget:
            break
        chosen.append((tokens, value))
    while len(chosen) > 1 and _sent_chars(chosen) > PAGE_CHARS:
        del chosen[max(1, len(chosen) * 9 // 10) :]  # a tenth at a time: pages of many small parts
    if _sent_chars(chosen) > PAGE_CHARS:
        raise ValueError(f"its value at {_pointer(chosen[0][0])} alone passes a page once escaped")
    return chosen


def _sent_chars(chosen: list[tuple[Tokens, Any]]) -> int:
    """What a page's text and pointers take in the answer (the text escaped as a JSON string)."""
    text = json.dumps(_nest(chosen), ensure_ascii=False)
    return len(json.dumps(text)) + sum(len(_pointer(t)) + 8 for t, _ in chosen)


def _nest(chosen: list[tuple[Tokens, Any]]) -> dict[str, Any]:
    """One JSON object holding each part at its pointer; every object or list above a part is an object there, a
    list's items keyed by their index."""
    page: dict[str, Any] = {}
    for tokens, value in chosen:
        if not tokens:  # the whole report in one page: an object, as kbench writes it
            if not isinstance(value, dict):
                raise ValueError("it is no JSON object")
            return value
        here = page
        for t in tokens[:-1]:
            here = here.setdefault(str(t), {})
        here[str(tokens[-1])] = value
    return page


def _json_more(every: list[Part], start: int, end: int, part: str) -> str | None:
    """How report.json was paged, where each of its top-level entries starts, and how to read one part whole."""
    if start == 0 and end == len(every):
        return None
    depth = len(_tokens(part)) + 1
    first: dict[str, int] = {}
    for i, (tokens, _, _) in enumerate(every):
        if len(tokens) >= depth:
            first.setdefault(_pointer(tokens[:depth]), i)
    shown = ", ".join(f"{p} at {i}" for p, i in list(first.items())[:40]) + (", ..." if len(first) > 40 else "")
    return cut_line(
        f"parts {start + 1}-{end} of {len(every)} (whole values of report.json; one too long for a page split into "
        f"its members): read_report(run, format='json', offset={end}) reads on; its entries start at offsets: "
        f"{shown}; read_report(run, format='json', part='/top3') reads one entry (a JSON pointer) alone"
    )
