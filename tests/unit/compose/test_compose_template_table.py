"""compose-go's interpolation test tables (template/ and interpolation/), restated as data.

Each row is one case of compose-spec/compose-go's own tests, re-expressed here as
(template, environment, expected); tierctl must agree with compose on every one. STRICT is the
mode with a real environment (compose's own), so these rows use it.
"""

from __future__ import annotations

import pytest

from tierctl.compose.interpolation import (
    Interpolation,
    InterpolationError,
    MissingVariable,
    interpolate,
)

# template_test.go's mapping: FOO set, BAR set but empty, JSON set to a JSON text.
TEMPLATE_ENV = {"FOO": "first", "BAR": "", "JSON": '{"json":2}'}
# interpolation_test.go's mapping.
INTERP_ENV = {"USER": "jenny", "FOO": "bar", "count": "5", "REQUIRED": "true"}

SUBSTITUTED: list[tuple[str, dict[str, str], str]] = [
    # escapes and literals
    ("$${foo}", TEMPLATE_ENV, "${foo}"),
    ("foo", TEMPLATE_ENV, "foo"),
    ("a $ string", TEMPLATE_ENV, "a $ string"),
    ("^REGEX$", TEMPLATE_ENV, "^REGEX$"),
    ("$}", TEMPLATE_ENV, "$}"),
    ("$", TEMPLATE_ENV, "$"),
    # the field stories of issue 12: a healthcheck's awk and a relabel replacement
    ("awk '{print $1}'", TEMPLATE_ENV, "awk '{print $1}'"),
    ("replacement: '$1:8000'", TEMPLATE_ENV, "replacement: '$1:8000'"),
    ("cost $5", TEMPLATE_ENV, "cost $5"),
    # plain forms
    ("$FOO-bar", TEMPLATE_ENV, "first-bar"),
    ("This ${missing} var", TEMPLATE_ENV, "This  var"),
    ("This ${BAR} var", TEMPLATE_ENV, "This  var"),
    ("This $FOO var", TEMPLATE_ENV, "This first var"),
    ("This ${FOO} var", TEMPLATE_ENV, "This first var"),
    ("ok ${missing:-def}", TEMPLATE_ENV, "ok def"),
    ("ok ${missing-def}", TEMPLATE_ENV, "ok def"),
    ("${A:+${A},}B", TEMPLATE_ENV, "B"),
    ("${A:-${B}}", TEMPLATE_ENV, ""),
    ("ok ${BAR:-def}", TEMPLATE_ENV, "ok def"),
    ("ok ${FOO:-def}", TEMPLATE_ENV, "ok first"),
    ("ok ${BAR-def}", TEMPLATE_ENV, "ok "),
    ("ok ${UNSET_VAR:+presence_value}", TEMPLATE_ENV, "ok "),
    ("ok ${UNSET_VAR+presence_value}", TEMPLATE_ENV, "ok "),
    ("ok ${FOO:+presence_value}", TEMPLATE_ENV, "ok presence_value"),
    ("ok ${FOO+presence_value}", TEMPLATE_ENV, "ok presence_value"),
    ("ok ${BAR+presence_value}", TEMPLATE_ENV, "ok presence_value"),
    ("ok ${BAR:+presence_value}", TEMPLATE_ENV, "ok "),
    ("ok ${BAR:-/non:-alphanumeric}", TEMPLATE_ENV, "ok /non:-alphanumeric"),
    # operators written as text around a reference do not interfere
    ("-ok ${BAR:-defaultValue}", TEMPLATE_ENV, "-ok defaultValue"),
    ("+ok ${UNSET:-${BAR-defaultValue}}", TEMPLATE_ENV, "+ok "),
    ("-ok ${FOO:-defaultValue}", TEMPLATE_ENV, "-ok first"),
    (":-ok ${UNSET-defaultValue}", TEMPLATE_ENV, ":-ok defaultValue"),
    (":-ok ${BAR-defaultValue}", TEMPLATE_ENV, ":-ok "),
    (":?ok ${BAR-defaultValue}", TEMPLATE_ENV, ":?ok "),
    (":?ok ${BAR:-defaultValue}", TEMPLATE_ENV, ":?ok defaultValue"),
    (":+ok ${BAR:-defaultValue}", TEMPLATE_ENV, ":+ok defaultValue"),
    ("+ok ${BAR-defaultValue}", TEMPLATE_ENV, "+ok "),
    ("?ok ${BAR:-defaultValue}", TEMPLATE_ENV, "?ok defaultValue"),
    # nested expansion in defaults
    ("ok ${UNSET_VAR-$FOO}", TEMPLATE_ENV, "ok first"),
    ("ok ${UNSET_VAR-${FOO}}", TEMPLATE_ENV, "ok first"),
    ("ok ${UNSET_VAR-${FOO} ${FOO}}", TEMPLATE_ENV, "ok first first"),
    ("ok ${BAR:-$FOO}", TEMPLATE_ENV, "ok first"),
    ("ok ${BAR:-${FOO}}", TEMPLATE_ENV, "ok first"),
    ("ok ${BAR:-${FOO} ${FOO}}", TEMPLATE_ENV, "ok first first"),
    ("ok ${BAR+$FOO}", TEMPLATE_ENV, "ok first"),
    ("ok ${BAR+$FOO ${FOO:+second}}", TEMPLATE_ENV, "ok first second"),
    # required, present
    ("ok ${FOO:?err}", TEMPLATE_ENV, "ok first"),
    ("ok ${FOO?err}", TEMPLATE_ENV, "ok first"),
    ("ok ${BAR?err}", TEMPLATE_ENV, "ok "),
    ("ok ${SUBDOMAIN:-redis}.${FOO:?}", TEMPLATE_ENV, "ok redis.first"),
    # precedence: the first operator after the name wins
    ("${UNSET_VAR-myerror?msg}", TEMPLATE_ENV, "myerror?msg"),
    ("${FOO?bar-baz}", TEMPLATE_ENV, "first"),
    ("${BAR:-default_value_for_empty_var}", TEMPLATE_ENV, "default_value_for_empty_var"),
    ("${UNSET_VAR-default_value_for_unset_var}", TEMPLATE_ENV, "default_value_for_unset_var"),
    # braces inside a default: every brace counts, so the JSON stays whole (no stray '}')
    ('ok ${missing:-{"json":1}}', TEMPLATE_ENV, 'ok {"json":1}'),
    ('ok ${missing-{"json":1}}', TEMPLATE_ENV, 'ok {"json":1}'),
    ('ok ${JSON:-{"json":1}}', TEMPLATE_ENV, 'ok {"json":2}'),
    ('ok ${JSON-{"json":1}}', TEMPLATE_ENV, 'ok {"json":2}'),
    # interpolation_test.go: unset / set variables inside literal braces
    ("{{{ ${FOO:-foo_} }}}", {}, "{{{ foo_ }}}"),
    ("{{{ ${FOO:-foo-bar-value} }}}", {}, "{{{ foo-bar-value }}}"),
    ("{{{ ${FOO:-foo?bar?value} }}}", {}, "{{{ foo?bar?value }}}"),
    ("{{{ ${FOO:-foo:?bar:?value} }}}", {}, "{{{ foo:?bar:?value }}}"),
    ("{{{ ${FOO:-foo} ${BAR:-DEFAULT_VALUE} }}}", {}, "{{{ foo DEFAULT_VALUE }}}"),
    ("{{{ ${BAR} }}}", {}, "{{{  }}}"),
    ("${FOO:-baz} }}}", {}, "baz }}}"),
    ("${FOO-baz} }}}", {}, "baz }}}"),
    ("${FOO:-${BAR:-${ZOT:-qix}}}", {}, "qix"),
    ("${FOO:-${BAR:-x}_test_${BAR:-y}}", {}, "x_test_y"),
    ("${FOO:-${BAR:-x}_test}", {}, "x_test"),
    ("${FOO:-${BAR:-${ZOT:-x}}_test}", {}, "x_test"),
    ("{{{ ${FOO:-foo_} }}}", INTERP_ENV, "{{{ bar }}}"),
    ("{{{ ${FOO:-foo} ${USER:-bar} }}}", INTERP_ENV, "{{{ bar jenny }}}"),
    ("{{{ ${USER} }}}", INTERP_ENV, "{{{ jenny }}}"),
    ("${FOO:-baz} }}}", INTERP_ENV, "bar }}}"),
    ("example:${USER}", INTERP_ENV, "example:jenny"),
    ("$FOO:/target", INTERP_ENV, "bar:/target"),
    ("thing_${FOO}", INTERP_ENV, "thing_bar"),
]


@pytest.mark.parametrize(("template", "env", "expected"), SUBSTITUTED)
def test_compose_go_substitution_table(template: str, env: dict[str, str], expected: str) -> None:
    assert interpolate(template, env, Interpolation.STRICT) == expected


REQUIRED_MISSING: list[tuple[str, dict[str, str], str, str]] = [
    ("{{{ ${FOO:?foo_} }}}", {}, "FOO", "foo_"),
    ("{{{ ${FOO:?foo-bar-value} }}}", {}, "FOO", "foo-bar-value"),
    ("{{{ ${FOO:?foo} ${BAR:-DEFAULT_VALUE} }}}", {}, "FOO", "foo"),
    ("${FOO:?foo} ${BAR:?bar}", {}, "FOO", "foo"),
    ("${FOO:?baz} }}}", {}, "FOO", "baz"),
    ("${FOO?baz} }}}", {}, "FOO", "baz"),
    ("not ok ${UNSET_VAR:?Mandatory Variable Unset}", TEMPLATE_ENV, "UNSET_VAR", "Mandatory"),
    ("not ok ${BAR:?Mandatory Variable Empty}", TEMPLATE_ENV, "BAR", "Mandatory Variable Empty"),
    ("not ok ${UNSET_VAR?Mandatory Variable Unset}", TEMPLATE_ENV, "UNSET_VAR", "Unset"),
    ("${UNSET_VAR?bar-baz}", TEMPLATE_ENV, "UNSET_VAR", "bar-baz"),
]


@pytest.mark.parametrize(("template", "env", "name", "reason"), REQUIRED_MISSING)
def test_compose_go_required_table(
    template: str, env: dict[str, str], name: str, reason: str
) -> None:
    with pytest.raises(MissingVariable) as info:
        interpolate(template, env, Interpolation.STRICT)
    assert info.value.name == name
    assert reason in str(info.value)
    # Validation (KEEP) never needs the variable; a plan (DEFAULTS) keeps the expression.
    assert interpolate(template, env, Interpolation.KEEP) == template.replace("$$", "$")


# template_test.go TestInvalid and interpolation_test.go TestInvalidInterpolation.
INVALID = ["${", "${}", "${ }", "${ foo}", "${foo }", "${foo!}"]


@pytest.mark.parametrize("template", INVALID)
def test_compose_go_invalid_table(template: str) -> None:
    for mode in Interpolation:
        with pytest.raises(InterpolationError):
            interpolate(template, TEMPLATE_ENV, mode)


@pytest.mark.parametrize(
    ("template", "operator"),
    [
        ("${VARNAME:?val?ue}", ":?"),
        ("${VARNAME?val:?ue}", "?"),
        ("${VARNAME?va-lu+e:?e}", "?"),
        ("${VARNAME:-value}", ":-"),
        ("${VARNAME-va:-lu:?e}", "-"),
        ("${VARNAME-va+lu?e}", "-"),
        ("${VARNAME:+va:?lu:-e}", ":+"),
        ("${VARNAME+va:+lue}", "+"),
        ("${VARNAME+va?lu-e}", "+"),
    ],
)
def test_compose_go_operator_choice_table(template: str, operator: str) -> None:
    from tierctl.compose.interpolation import references

    [ref] = references(template)
    assert ref.operator == operator
