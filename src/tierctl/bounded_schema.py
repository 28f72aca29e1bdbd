"""JSON-schema validation whose work is bounded by the document, not by its errors.

jsonschema's ``anyOf`` and ``oneOf`` draw every error of each alternative they reject, only
to keep them as context: a compose ``build:`` (a oneOf of string or mapping) whose
``secrets`` was a flow list of 200,000 ints cost 20 s of ``tierctl validate``, none of it
printed. :func:`bounded` gives a validator class whose two keywords draw at most
:data:`MAX_CONTEXT` errors per alternative, and say the same thing otherwise.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

import jsonschema

from tierctl.errors import shortened

#: The most errors an ``anyOf``/``oneOf`` draws from each alternative it rejects (one is
#: enough to know that it rejects; the rest are context for the message).
MAX_CONTEXT = 20


@functools.cache
def bounded(validator_class: Any) -> Any:
    """``validator_class`` with bounded ``anyOf`` and ``oneOf``."""
    return jsonschema.validators.extend(validator_class, {"anyOf": _any_of, "oneOf": _one_of})


def _rejections(validator: Any, alternatives: Any, instance: Any) -> Iterator[Any]:
    """For each alternative in turn, up to MAX_CONTEXT of its errors (an empty list for the
    first that accepts ``instance``, then no more)."""
    for index, alternative in enumerate(alternatives):
        errors = list(
            itertools.islice(
                validator.descend(instance, alternative, schema_path=index), MAX_CONTEXT
            )
        )
        yield errors
        if not errors:
            return


def _none_valid(instance: Any, context: list[Any]) -> Any:
    return jsonschema.ValidationError(
        f"{shortened(repr(instance))} is not valid under any of the given schemas",
        context=context,
    )


def _any_of(validator: Any, alternatives: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``anyOf``: valid under at least one alternative."""
    context: list[Any] = []
    for errors in _rejections(validator, alternatives, instance):
        if not errors:
            return
        context.extend(errors)
    yield _none_valid(instance, context)


def _one_of(validator: Any, alternatives: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``oneOf``: valid under exactly one alternative."""
    context: list[Any] = []
    accepted = None
    for index, errors in enumerate(_rejections(validator, alternatives, instance)):
        if not errors:
            accepted = index
            break
        context.extend(errors)
    if accepted is None:
        yield _none_valid(instance, context)
        return
    also = [
        each
        for each in alternatives[accepted + 1 :]
        if validator.evolve(schema=each).is_valid(instance)
    ]
    if also:
        shown = ", ".join(repr(each) for each in [*also, alternatives[accepted]])
        yield jsonschema.ValidationError(
            f"{shortened(repr(instance))} is valid under each of {shown}"
        )


__all__ = ["MAX_CONTEXT", "bounded"]
