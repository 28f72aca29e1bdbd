"""TC007 schema: the file validates against the compose-spec JSON schema.

The schema is vendored unchanged (``schema/compose-spec.json``, Apache-2.0, provenance in
``schema/SOURCE.json``) so validation works offline and does not drift under the user.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tierctl.compose import ComposeFile
from tierctl.compose.project import ProjectOptions, project_config
from tierctl.compose.unique_items import UniqueLists, equal_items_text
from tierctl.contracts.context import Context
from tierctl.contracts.report import Violation
from tierctl.errors import FOUND_MAX_CHARS, ComposeInputError, shortened

MAX_PER_FILE = 20

#: The most schema errors drawn from the validator for one document (the rest are not
#: computed: each costs a walk of its part of the schema).
MAX_COLLECTED = 1000

#: The longest schema message printed (past the value it names, which is cut on its own).
MAX_MESSAGE_CHARS = 2000


@functools.cache
def _fast_validator() -> Any | None:
    """jsonschema-rs when installed (extra ``fast``): a quick yes/no on a valid file.

    Messages always come from the pure-Python validator, so the report does not depend on
    which one is installed.
    """
    try:
        import jsonschema_rs
    except ImportError:
        return None
    return jsonschema_rs.Draft7Validator(_schema())


@functools.cache
def _schema() -> Any:
    # The package's own file, beside this module (importlib.resources would import tempfile,
    # shutil and lzma for it: a few ms of every validate's start).
    text = (Path(__file__).parent / "schema" / "compose-spec.json").read_text(encoding="utf-8")
    return json.loads(text)


def _draft7() -> Any:
    """jsonschema's draft-07 validator, bounded (imported here: a file jsonschema-rs passes
    never needs the pure-Python validator, whose import is a fifth of ``validate``'s start)."""
    import jsonschema

    from tierctl.bounded_schema import bounded

    return bounded(jsonschema.Draft7Validator)


@functools.cache
def _validator() -> Any:
    schema = _schema()
    # The file declares draft-07 as "https://json-schema.org/draft-07/schema" (no trailing
    # "#"), which jsonschema does not recognise; name the draft explicitly. anyOf and oneOf
    # are replaced by versions whose work is bounded by the document, not by its errors.
    return _draft7()(schema)


def _explain(error: Any) -> str:
    """jsonschema's message, reworded where it is cryptic (unknown keys)."""
    if "does not match any of the regexes: '^x-'" in error.message:
        key = error.message.split("'")[1]
        return (
            f"unknown key {shortened(repr(key))} (not a compose key; extensions must start with x-)"
        )
    return _message(error)


def _message(error: Any) -> str:
    """jsonschema's message with the offending value cut to FOUND_MAX_CHARS (its messages
    print the whole value: a 200,000-item list made a 600 KB line)."""
    message = str(error.message)
    shown = repr(error.instance)
    if len(shown) > FOUND_MAX_CHARS and shown in message:
        message = message.replace(shown, shortened(shown), 1)
    return shortened(message, MAX_MESSAGE_CHARS)


def check(ctx: Context) -> Iterator[Violation]:
    """Schema errors, at most MAX_PER_FILE, each with its path."""
    yield from check_document(ctx.compose)


def check_document(compose: ComposeFile) -> Iterator[Violation]:
    """TC007 on a compose document (with or without a spec)."""
    data = _json_shaped(compose.data)
    fast = _fast_validator()
    if fast is not None and fast.is_valid(data):
        return
    # The validator yields errors lazily: at most MAX_COLLECTED are drawn (a flow list of
    # 200,000 wrong items made 200,000 errors, 20 s of validate, sorted to print 20).
    drawn = list(itertools.islice(_validator().iter_errors(data), MAX_COLLECTED + 1))
    counted = "" if len(drawn) <= MAX_COLLECTED else "at least "
    errors = sorted(drawn[:MAX_COLLECTED], key=lambda e: list(e.path))
    for error in errors[:MAX_PER_FILE]:
        yield _violation(compose, error, _explain(error))
    if len(drawn) > MAX_PER_FILE:
        yield Violation(
            rule="TC007",
            service=None,
            message=f"... and {counted}{len(errors) - MAX_PER_FILE} more schema errors",
        )


def equal_items(
    files: Sequence[ComposeFile], reported: Sequence[Violation] = ()
) -> Iterator[Violation]:
    """TC007's ``uniqueItems`` as Compose v2 enforces it, file by file as it merges them
    (:class:`tierctl.compose.unique_items.UniqueLists`): two ports it calls equal only one
    way round (``published: "8000"`` then ``published: 8000``), or a repeated entry of a list
    it keeps no key for, possibly across files. Each is located in the file whose merge makes
    the list refused; a list ``reported`` already names (the schema's own ``uniqueItems`` on
    the merged document) is not reported twice."""
    seen = {v.message.split(":", 1)[0] for v in reported if v.rule == "TC007"}
    unique = UniqueLists()
    for compose in files:
        for service, key, j, i in unique.add_file(compose.tagged.get("services")):
            dotted = f"services.{service}.{key}"
            if dotted in seen:
                continue
            seen.add(dotted)
            message, rule, fix = equal_items_text(key, j, i)
            yield Violation(
                rule="TC007",
                service=service,
                message=f"{dotted}: {message} ({rule})",
                location=compose.location("services", service, key),
                fix=fix,
            )


def project_refusals(
    paths: Sequence[str | Path],
    reported: Sequence[Violation] = (),
    profiles: Sequence[str] | None = None,
) -> Iterator[Violation]:
    """TC007 for a project that tierctl's whole reading (:func:`project_config`, as
    ``tierctl compose config`` reads: interpolation, merge, the Go types Compose decodes into)
    refuses although its files pass the schema: a ulimit or a file mode past int64, say.
    ``validate`` said "ok" to such a file and Compose then refused it. Nothing when a schema
    error is ``reported`` already (the reading stops at it). An unset required variable
    (``${VAR:?required}``: a generated file holds them for the host's environment) is not a
    refusal, but it must not hide one behind it (:func:`_refusal_behind_required`).
    ``profiles``: the active ones (None: the default set)."""
    if any(v.rule == "TC007" for v in reported):
        return
    options = ProjectOptions(profiles=tuple(profiles or ()), environ=dict(os.environ))
    exc = _refusal_behind_required(paths, options)
    if exc is not None:
        yield Violation(
            rule="TC007",
            service=None,
            message=f"Compose would refuse the project: {exc.message}",
            location=exc.location,
            found=None if exc.value is None else shortened(repr(exc.value)),
            expected=exc.rule,
            fix=exc.fix or "fix the value named",
        )


#: Values an unset required variable stands in with, one reading each: a refusal counts
#: only when both readings make it, so that no value the host might set is blamed (`1` is
#: a fine port and a bad volume source, `/1` the other way round).
_STAND_INS = ("1", "/1")
#: How many unset required variables one reading stands in for at most.
_MAX_STAND_INS = 20
_REQUIRED = re.compile(r"required variable (\S+) is missing a value")


def _refusal_behind_required(
    paths: Sequence[str | Path], options: ProjectOptions
) -> ComposeInputError | None:
    """What the reading refuses besides unset required variables: read again with each one
    set to a stand-in (an unterminated quote later in the same env file, a secret without a
    source still refuse); None when nothing else is refused."""
    found: list[ComposeInputError | None] = []
    for stand_in in _STAND_INS:
        environ = dict(options.environ or {})
        refusal: ComposeInputError | None = None
        for _ in range(_MAX_STAND_INS):
            try:
                project_config(
                    paths, dataclasses.replace(options, environ=environ), check=refuse_invalid
                )
            except ComposeInputError as exc:
                missing = _REQUIRED.search(exc.message) if unset_required(exc.message) else None
                if missing is not None and missing.group(1) not in environ:
                    environ[missing.group(1)] = stand_in
                    continue
                refusal = None if unset_required(exc.message) else exc
            break
        if refusal is None:
            return None
        if environ == dict(options.environ or {}):
            return refusal  # no stand-in was needed: the project's own refusal
        found.append(refusal)
    first, second = found
    return (
        first
        if first is not None and second is not None and first.message == second.message
        else None
    )


def unset_required(message: str) -> bool:
    """Whether a reader's refusal (tierctl's or the Compose binary's) is only a required
    variable (``${VAR:?...}``) unset in this environment."""
    return "required variable" in message or "missing a value" in message


def type_errors(compose: ComposeFile) -> Iterator[Violation]:
    """TC007's errors of one kind only: a value of the wrong JSON type (``logging: x`` where
    compose wants a mapping). Readers that walk a file's structure (``tierctl import``) refuse
    these first; the schema's finer rules (name patterns) stay validate's to report."""
    data = _json_shaped(compose.data)
    fast = _fast_validator()
    if fast is not None and fast.is_valid(data):
        return
    for error in itertools.islice(_validator().iter_errors(data), MAX_COLLECTED):
        if _wrong_type(error):
            yield _violation(compose, error, _message(error))


def _violation(compose: ComposeFile, error: Any, why: str) -> Violation:
    """One schema error as a TC007 violation, located at its path."""
    path = [str(p) if not isinstance(p, int) else p for p in error.absolute_path]
    service = str(path[1]) if len(path) > 1 and path[0] == "services" else None
    dotted = ".".join(str(p) for p in path) or "(top level)"
    return Violation(
        rule="TC007",
        service=service,
        message=f"{dotted}: {why}",
        location=compose.location(*path),
        fix="see the compose specification for this key "
        "(https://github.com/compose-spec/compose-spec)",
    )


def _wrong_type(error: Any) -> bool:
    """A type error, or an anyOf/oneOf whose every alternative refused the value's type."""
    if error.validator == "type":
        return True
    if error.validator in ("anyOf", "oneOf") and error.context:
        return all(_wrong_type(e) for e in error.context)
    return False


def _json_shaped(node: Any) -> Any:
    """The document as JSON holds it: mapping keys as strings (YAML allows ``1: x`` and
    ``null: x``; compose reads every key as a string), so the validators never meet a key
    type JSON has not. Depth is bounded by the reader (tierctl.readers). A document whose
    keys are all strings already (what the compose reader gives) is returned as it is."""
    return _with_str_keys(node) if _foreign_key(node) else node


def _foreign_key(node: Any) -> bool:
    """Whether any mapping in ``node`` has a key that is not a string (walked, not copied)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    return True
                if isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, dict | list))
    return False


def _with_str_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k) if not isinstance(k, str) else k: _with_str_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_str_keys(v) for v in node]
    return node


def _without_unique_items(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_unique_items(v) for k, v in node.items() if k != "uniqueItems"}
    if isinstance(node, list):
        return [_without_unique_items(v) for v in node]
    return node


@functools.cache
def _compose_validator() -> Any:
    """The schema as Compose v2 applies it: it does not enforce ``uniqueItems`` (a list that
    repeats an entry is read, its repeats dropped), found by the differential suite."""
    return _draft7()(_without_unique_items(_schema()))


def refuse_invalid(compose: ComposeFile) -> None:
    """Raise on the first schema error, as ``docker compose config`` refuses such a file.

    Raises:
        ComposeInputError: the file breaks the compose-spec schema as Compose applies it;
            located at the key.
    """
    data = _json_shaped(compose.data)
    fast = _fast_validator()
    if fast is not None and fast.is_valid(data):
        return
    # The first by path among at most MAX_COLLECTED drawn (all 200,000 of a long wrong list
    # were computed and sorted to raise one).
    drawn = itertools.islice(_compose_validator().iter_errors(data), MAX_COLLECTED)
    for error in sorted(drawn, key=lambda e: list(e.path)):
        path = [str(p) if not isinstance(p, int) else p for p in error.absolute_path]
        dotted = ".".join(str(p) for p in path) or "(top level)"
        raise ComposeInputError(
            f"{dotted}: {_explain(error)}",
            location=compose.location(*path),
            rule="compose-spec schema (docker compose validates every file against it)",
            fix="see the compose specification for this key "
            "(https://github.com/compose-spec/compose-spec)",
        )
