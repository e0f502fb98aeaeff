"""Label and field selectors, parsed and matched the way the Kubernetes apiserver does.

Why a port rather than a regex: clients (kubectl, the official Python clients, Kueue, our adapter) send
selectors the apiserver accepts or rejects by a particular lexer, and the lab must accept and reject the same
strings with the same messages, or a test could pass against the lab that fails against a cluster.

Sources (read through the search tools, not copied):

* Label selectors: ``kubernetes/apimachinery:pkg/labels/selector.go`` -- ``Parse``, ``Lexer.Lex``,
  ``Parser.parse``/``parseRequirement``/``parseKeyAndInferOperator``/``parseOperator``/``parseValues``/
  ``parseIdentifiersList``/``parseExactValue``, ``NewRequirement`` and ``Requirement.Matches``.
* Key and value syntax: ``pkg/api/validate/content`` ``IsLabelKey`` / ``IsLabelValue`` and
  ``pkg/util/validation`` ``IsDNS1123Subdomain``, ``RegexError``, ``MaxLenError``, ``EmptyError``.
* Error text: ``pkg/util/validation/field`` ``Invalid``/``Error.Error`` and ``Path.String`` (a nil path prints
  ``<nil>``), ``pkg/util/errors`` aggregate ``Error`` (one error plain, several as ``[a, b]``).
* Field selectors: ``pkg/fields/selector.go`` -- ``ParseSelector``, ``splitTerms``, ``splitTerm``,
  ``UnescapeValue`` (``InvalidEscapeSequence``/``UnescapedRune``), ``hasTerm``/``notHasTerm`` matching.
* Which fields each kind supports, and the error for the others: the field label conversion functions,
  ``kubernetes/kubernetes:pkg/apis/core/v1/conversion.go`` (Pod, Node, Event, Namespace),
  ``pkg/apis/batch/v1/conversion.go`` (Job), ``staging/src/k8s.io/apimachinery/pkg/runtime/conversion.go``
  ``DefaultMetaV1FieldSelectorConversion`` (kinds without one), ``apiextensions-apiserver``
  ``pkg/apiserver/conversion/converter.go`` ``crConverter.ConvertFieldLabel`` (custom resources). The handler
  (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/get.go`` ``ListResource``) runs them through
  ``Selector.Transform`` after parsing, so parse errors come before unsupported-field errors.
* The values matched against: ``pkg/registry/core/pod/strategy.go`` ``ToSelectableFields``,
  ``pkg/registry/core/node/strategy.go`` ``NodeToSelectableFields``, ``pkg/registry/core/event/strategy.go``
  ``ToSelectableFields``, ``pkg/registry/batch/job/strategy.go`` ``JobToSelectableFields``,
  ``pkg/registry/core/namespace/strategy.go`` ``NamespaceToSelectableFields``.

Every error is a :class:`SelectorError`; the server answers it with 400 BadRequest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dispatch_lab.apiserver.errors import aggregate

__all__ = [
    "FIELD_ALIASES",
    "SUPPORTED_FIELDS",
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "SelectorError",
    "field_values",
    "parse_field_selector",
    "supported_fields",
    "unsupported_field_message",
]


class SelectorError(ValueError):
    """A selector the apiserver would reject; ``str(error)`` is the apiserver's message."""


# ------------------------------------------------------------------------------------------------------------
# Go formatting helpers: the messages embed Go's %q and field.Error renderings.


def _go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` for the characters selectors can contain (``%q`` in the messages)."""
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
    escapes |= {"\t": "\\t", "\v": "\\v"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def _invalid(field: str, value: str, detail: str) -> str:
    """``field.Invalid(path, value, detail).Error()`` for a string value."""
    return f"{field}: Invalid value: {_go_quote(value)}: {detail}"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``validation.RegexError``, including its double space after each example comma."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


# ------------------------------------------------------------------------------------------------------------
# Key and value validation: content.IsLabelKey / IsLabelValue, validation.IsDNS1123Subdomain.

_LABEL_KEY_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_ERR: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT: Final = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_ERR: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
_LABEL_NAME_RE: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN_FMT)
_LABEL_NAME_MAX: Final = 63
_LABEL_VALUE_MAX: Final = 63
_DNS1123_SUBDOMAIN_MAX: Final = 253


def _label_key_errors(key: str) -> list[str]:
    """``content.IsLabelKey``: a qualified name, ``[prefix/]name``."""
    errors: list[str] = []
    prefix, slash, suffix = key.partition("/")
    if not slash:
        name = key
    elif "/" in suffix:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    else:
        name = suffix
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > _DNS1123_SUBDOMAIN_MAX:
                errors.append("prefix part " + _max_len_error(_DNS1123_SUBDOMAIN_MAX))
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                errors.append(
                    "prefix part " + _regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com")
                )
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _LABEL_NAME_MAX:
        errors.append("name part " + _max_len_error(_LABEL_NAME_MAX))
    if not _LABEL_NAME_RE.fullmatch(name):
        errors.append("name part " + _regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errors


def _label_value_errors(value: str) -> list[str]:
    """``content.IsLabelValue``: empty, or a name of at most 63 characters."""
    errors: list[str] = []
    if len(value) > _LABEL_VALUE_MAX:
        errors.append(_max_len_error(_LABEL_VALUE_MAX))
    if value and not _LABEL_NAME_RE.fullmatch(value):
        errors.append(_regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


# ------------------------------------------------------------------------------------------------------------
# Label selector lexer (pkg/labels/selector.go Lexer), token for token.

_END: Final = "end"
_CLOSE: Final = ")"
_COMMA: Final = ","
_NOT: Final = "!"
_DOUBLE_EQUALS: Final = "=="
_EQUALS: Final = "="
_GT: Final = ">"
_IDENT: Final = "identifier"
_IN: Final = "in"
_LT: Final = "<"
_NOT_EQUALS: Final = "!="
_NOT_IN: Final = "notin"
_OPEN: Final = "("

# string2token: the literal tokens (identifiers, end of string and errors are not literals).
_LITERALS: Final[Mapping[str, str]] = {
    ")": _CLOSE,
    ",": _COMMA,
    "!": _NOT,
    "==": _DOUBLE_EQUALS,
    "=": _EQUALS,
    ">": _GT,
    "in": _IN,
    "<": _LT,
    "!=": _NOT_EQUALS,
    "notin": _NOT_IN,
    "(": _OPEN,
}
_SPECIAL: Final = frozenset("=!(),><")
_WHITESPACE: Final = frozenset(" \t\r\n")
_NUL: Final = "\x00"

# The operator names in binaryOperators order, as parseOperator's error lists them (selection.Operator).
_BINARY_OPERATOR_NAMES: Final = "in, notin, =, ==, !=, gt, lt"


def _lex(text: str) -> list[tuple[str, str]]:
    """Scan the whole selector into (token, literal) pairs ending with the end-of-string token.

    Go's lexer reads bytes and its ``read`` returns 0 at the end, so a NUL byte where a token starts ends the
    input, and one inside an identifier ends (and is consumed by) the identifier; this port keeps both.
    """
    pos = 0
    items: list[tuple[str, str]] = []

    def read() -> str:
        nonlocal pos
        if pos < len(text):
            char = text[pos]
            pos += 1
            return char
        return _NUL

    while True:
        char = read()
        while char in _WHITESPACE:
            char = read()
        if char == _NUL:
            items.append((_END, ""))
            return items
        pos -= 1
        if char in _SPECIAL:
            buffer = ""
            last: tuple[str, str] | None = None
            while True:
                char = read()
                if char == _NUL:
                    break
                if char in _SPECIAL:
                    buffer += char
                    if buffer in _LITERALS:
                        last = (_LITERALS[buffer], buffer)
                    elif last is not None:
                        pos -= 1
                        break
                else:
                    pos -= 1
                    break
            # Every single special character is a literal, so `last` is always set here.
            assert last is not None
            items.append(last)
        else:
            buffer = ""
            while True:
                char = read()
                if char == _NUL:
                    break
                if char in _SPECIAL or char in _WHITESPACE:
                    pos -= 1
                    break
                buffer += char
            items.append((_LITERALS.get(buffer, _IDENT), buffer))


@dataclass(frozen=True)
class LabelRequirement:
    """One requirement of a label selector: ``key``, operator (apimachinery ``selection.Operator`` value:
    ``in``, ``notin``, ``=``, ``==``, ``!=``, ``exists``, ``!``, ``gt``, ``lt``) and sorted unique values."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches``: a missing key fails ``in``/``=`` but satisfies ``notin``/``!=``."""
        has = self.key in labels
        if self.operator in ("in", "=", "=="):
            return has and labels[self.key] in self.values
        if self.operator in ("notin", "!="):
            return not has or labels[self.key] not in self.values
        if self.operator == "exists":
            return has
        if self.operator == "!":
            return not has
        if self.operator in ("gt", "lt"):
            if not has or len(self.values) != 1:
                return False
            try:
                actual = _parse_int64(labels[self.key])
                wanted = _parse_int64(self.values[0])
            except ValueError:
                return False
            return actual > wanted if self.operator == "gt" else actual < wanted
        return False

    def __str__(self) -> str:
        """``Requirement.String``."""
        if self.operator in ("exists", "!"):
            return ("!" if self.operator == "!" else "") + self.key
        spelled = {"in": " in ", "notin": " notin ", "gt": ">", "lt": "<"}.get(self.operator, self.operator)
        joined = ",".join(self.values)
        if self.operator in ("in", "notin"):
            joined = f"({joined})"
        return f"{self.key}{spelled}{joined}"


_INT64_RE: Final = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int:
    """``strconv.ParseInt(s, 10, 64)``: optional sign, decimal digits, within int64."""
    if not _INT64_RE.fullmatch(text):
        raise ValueError(text)
    number = int(text)
    if not -(2**63) <= number < 2**63:
        raise ValueError(text)
    return number


class _LabelParser:
    """``labels.Parser``: recursive descent over the scanned tokens, with apimachinery's messages."""

    def __init__(self, text: str) -> None:
        self._items = _lex(text)
        self._position = 0

    @staticmethod
    def _in_context(token: str, values: bool) -> str:
        # In the Values context 'in' and 'notin' are plain identifiers (a key or value may be named 'in').
        if values and token in (_IN, _NOT_IN):
            return _IDENT
        return token

    def _lookahead(self, values: bool = True) -> tuple[str, str]:
        token, literal = self._items[self._position]
        return self._in_context(token, values), literal

    def _consume(self, values: bool = True) -> tuple[str, str]:
        token, literal = self._items[self._position]
        self._position += 1
        return self._in_context(token, values), literal

    def parse(self) -> list[LabelRequirement]:
        requirements: list[LabelRequirement] = []
        while True:
            token, literal = self._lookahead()
            if token in (_IDENT, _NOT):
                try:
                    requirements.append(self._requirement())
                except SelectorError as error:
                    raise SelectorError(f"unable to parse requirement: {error}") from None
                token, literal = self._consume()
                if token == _END:
                    return requirements
                if token == _COMMA:
                    after, after_literal = self._lookahead()
                    if after not in (_IDENT, _NOT):
                        raise SelectorError(f"found '{after_literal}', expected: identifier after ','")
                    continue
                raise SelectorError(f"found '{literal}', expected: ',' or 'end of string'")
            if token == _END:
                return requirements
            raise SelectorError(f"found '{literal}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> LabelRequirement:
        key, operator = self._key_and_inferred_operator()
        if operator in ("exists", "!"):
            return _new_requirement(key, operator, [])
        operator = self._operator()
        values = self._values() if operator in ("in", "notin") else self._exact_value()
        return _new_requirement(key, operator, sorted(values))

    def _key_and_inferred_operator(self) -> tuple[str, str]:
        operator = ""
        token, literal = self._consume()
        if token == _NOT:
            operator = "!"
            token, literal = self._consume()
        if token != _IDENT:
            raise SelectorError(f"found '{literal}', expected: identifier")
        errors = _label_key_errors(literal)
        if errors:
            raise SelectorError(_invalid("<nil>", literal, "; ".join(errors)))
        if self._lookahead()[0] in (_END, _COMMA) and operator != "!":
            operator = "exists"
        return literal, operator

    def _operator(self) -> str:
        token, literal = self._consume(values=False)
        operators = {
            _IN: "in",
            _EQUALS: "=",
            _DOUBLE_EQUALS: "==",
            _GT: "gt",
            _LT: "lt",
            _NOT_IN: "notin",
            _NOT_EQUALS: "!=",
        }
        if token not in operators:
            raise SelectorError(f"found '{literal}', expected: {_BINARY_OPERATOR_NAMES}")
        return operators[token]

    def _values(self) -> set[str]:
        token, literal = self._consume()
        if token != _OPEN:
            raise SelectorError(f"found '{literal}' expected: '('")
        token, literal = self._lookahead()
        if token in (_IDENT, _COMMA):
            values = self._identifiers_list()
            token, _ = self._consume()
            if token != _CLOSE:  # unreachable in apimachinery too: the list stops before ')'
                raise SelectorError(f"found '{literal}', expected: ')'")
            return values
        if token == _CLOSE:  # "()" is the set holding the empty string
            self._consume()
            return {""}
        raise SelectorError(f"found '{literal}', expected: ',', ')' or identifier")

    def _identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self._consume()
            if token == _IDENT:
                values.add(literal)
                after, after_literal = self._lookahead()
                if after == _COMMA:
                    continue
                if after == _CLOSE:
                    return values
                raise SelectorError(f"found '{after_literal}', expected: ',' or ')'")
            if token == _COMMA:  # empty members: "(,a", "a,)", "a,,b" all add ""
                if not values:
                    values.add("")
                after, _ = self._lookahead()
                if after == _CLOSE:
                    values.add("")
                    return values
                if after == _COMMA:
                    self._consume()
                    values.add("")
                continue
            raise SelectorError(f"found '{literal}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        token, _ = self._lookahead()
        if token in (_END, _COMMA):
            return {""}
        token, literal = self._consume()
        if token == _IDENT:
            return {literal}
        raise SelectorError(f"found '{literal}', expected: identifier")


def _new_requirement(key: str, operator: str, values: list[str]) -> LabelRequirement:
    """``NewRequirement``: operator arity and value syntax, errors aggregated under the nil path."""
    errors: list[str] = []
    key_errors = _label_key_errors(key)
    if key_errors:
        errors.append(_invalid("key", key, "; ".join(key_errors)))
    rendered = "[" + ",".join(_go_quote(value) for value in values) + "]"
    if operator in ("in", "notin") and not values:
        errors.append(f"values: Invalid value: {rendered}: for 'in', 'notin' operators, values set can't be empty")
    elif operator in ("=", "==", "!=") and len(values) != 1:
        errors.append(f"values: Invalid value: {rendered}: exact-match compatibility requires one single value")
    elif operator in ("exists", "!") and values:
        errors.append(f"values: Invalid value: {rendered}: values set must be empty for exists and does not exist")
    elif operator in ("gt", "lt"):
        if len(values) != 1:
            errors.append(f"values: Invalid value: {rendered}: for 'Gt', 'Lt' operators, exactly one value is required")
        for index, value in enumerate(values):
            try:
                _parse_int64(value)
            except ValueError:
                errors.append(
                    _invalid(f"values[{index}]", value, "for 'Gt', 'Lt' operators, the value must be an integer")
                )
    for index, value in enumerate(values):
        value_errors = _label_value_errors(value)
        if value_errors:
            errors.append(_invalid(f"values[{index}][{key}]", value, "; ".join(value_errors)))
    if errors:
        raise SelectorError(aggregate(errors))
    return LabelRequirement(key, operator, tuple(values))


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector: the AND of its requirements, sorted by key as apimachinery sorts them."""

    requirements: tuple[LabelRequirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """``labels.Parse``; raises :class:`SelectorError` with the apiserver's message."""
        requirements = _LabelParser(text).parse()
        return cls(tuple(sorted(requirements, key=lambda requirement: requirement.key)))

    @property
    def empty(self) -> bool:
        """True when the selector selects everything (``Selector.Empty``)."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """True when every requirement holds; ``None`` labels are no labels."""
        present = labels if labels is not None else {}
        return all(requirement.matches(present) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


# ------------------------------------------------------------------------------------------------------------
# Field selectors (pkg/fields/selector.go).

_TERM_OPERATORS: Final = ("!=", "==", "=")


def _split_terms(text: str) -> list[str]:
    """``splitTerms``: split on commas not escaped by a backslash (escapes stay in the terms)."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for index, char in enumerate(text):
        if in_slash:
            in_slash = False
        elif char == "\\":
            in_slash = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``splitTerm``: the first operator occurrence splits; the left side has no escaping."""
    for index in range(len(term)):
        for operator in _TERM_OPERATORS:
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def _unescape_value(value: str) -> str:
    """``UnescapeValue``: ``\\\\``, ``\\,`` and ``\\=`` are escapes; a bare ``,`` or ``=`` is an error."""
    if not any(char in value for char in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for char in value:
        if in_slash:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            in_slash = False
            continue
        if char == "\\":
            in_slash = True
        elif char in ",=":
            # UnescapedRune formats the rune with %v, which prints its code point.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


@dataclass(frozen=True)
class FieldRequirement:
    """One field selector term: ``field``, ``=`` (also for ``==``) or ``!=``, and the unescaped value."""

    field: str
    operator: str
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        """A missing field reads as the empty string (``fields.Set.Get``)."""
        actual = fields.get(self.field, "")
        return actual == self.value if self.operator == "=" else actual != self.value


def _not_supported(field: str) -> str:
    return f"field label not supported: {field}"


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: the AND of its terms, in apimachinery's sorted order."""

    requirements: tuple[FieldRequirement, ...] = ()

    @classmethod
    def parse(
        cls,
        text: str,
        supported: Collection[str],
        *,
        aliases: Mapping[str, str] | None = None,
        unsupported: Callable[[str], str] = _not_supported,
    ) -> FieldSelector:
        """Parse ``text`` and check each field against ``supported`` (after ``aliases``, such as Pod's
        legacy ``spec.host``); an unsupported field raises ``SelectorError(unsupported(field))``, by default
        the core types' ``field label not supported: <field>``."""
        parsed: list[FieldRequirement] = []
        for part in sorted(_split_terms(text)):
            if not part:
                continue
            split = _split_term(part)
            if split is None:
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
            field, operator, raw = split
            parsed.append(FieldRequirement(field, "!=" if operator == "!=" else "=", _unescape_value(raw)))
        converted: list[FieldRequirement] = []
        for requirement in parsed:  # Selector.Transform with the kind's field label conversion
            field = (aliases or {}).get(requirement.field, requirement.field)
            if field not in supported:
                raise SelectorError(unsupported(requirement.field))
            converted.append(FieldRequirement(field, requirement.operator, requirement.value))
        return cls(tuple(converted))

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(requirement.matches(fields) for requirement in self.requirements)

    def __str__(self) -> str:
        """``String`` with ``EscapeValue`` applied to each value."""

        def escape(value: str) -> str:
            return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")

        return ",".join(f"{term.field}{term.operator}{escape(term.value)}" for term in self.requirements)


# ------------------------------------------------------------------------------------------------------------
# Per-kind tables: the conversion functions' accepted labels and the strategies' selectable field values.

_META: Final = frozenset({"metadata.name", "metadata.namespace"})

SUPPORTED_FIELDS: Final[dict[str, frozenset[str]]] = {
    # pkg/apis/core/v1/conversion.go, addConversionFuncs "Pod". status.podIPs is accepted but
    # ToSelectableFields has no such field, so it only ever equals "".
    "Pod": _META
    | {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    },
    # "Node" accepts metadata.name and spec.unschedulable only: metadata.namespace is rejected.
    "Node": frozenset({"metadata.name", "spec.unschedulable"}),
    # AddFieldLabelConversionsForEvent (core/v1 Event; events.k8s.io/v1 differs and is not served here).
    "Event": _META
    | {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    # pkg/apis/batch/v1/conversion.go.
    "Job": _META | {"status.successful"},
    # AddFieldLabelConversionsForNamespace: status.phase and metadata.name; metadata.namespace is rejected.
    "Namespace": frozenset({"metadata.name", "status.phase"}),
}

# Labels the conversion function rewrites before matching (old v1 clients send spec.host).
FIELD_ALIASES: Final[dict[str, dict[str, str]]] = {"Pod": {"spec.host": "spec.nodeName"}}

# Kinds whose conversion function words the rejection differently from "field label not supported: <f>".
_JOB_MESSAGE: Final = "field label {field} not supported for batchv1.Job"
_DEFAULT_MESSAGE: Final = '{field} is not a known field selector: only "metadata.name", "metadata.namespace"'
# Built-in kinds with a conversion function using the core wording (pkg/apis/core/v1/conversion.go).
_CORE_WORDING: Final = frozenset({"Pod", "Node", "Event", "Namespace", "Secret", "Service", "ReplicationController"})


def supported_fields(kind: str, *, namespaced: bool = True, custom_resource: bool = False) -> frozenset[str]:
    """The field labels a list of ``kind`` accepts.

    Kinds with a conversion function use its table; a custom resource accepts ``metadata.name`` and, when
    namespaced, ``metadata.namespace`` (``crConverter``; CRD ``selectableFields`` are not modelled); any other
    built-in kind gets ``DefaultMetaV1FieldSelectorConversion``, which accepts both metadata fields.
    """
    if not custom_resource and kind in SUPPORTED_FIELDS:
        return SUPPORTED_FIELDS[kind]
    if custom_resource and not namespaced:
        return frozenset({"metadata.name"})
    return _META


def unsupported_field_message(kind: str, field: str, *, custom_resource: bool = False) -> str:
    """The apiserver's message for a field label ``kind`` does not support."""
    if custom_resource or kind in _CORE_WORDING:
        return _not_supported(field)
    if kind == "Job":
        return _JOB_MESSAGE.format(field=_go_quote(field))
    return _DEFAULT_MESSAGE.format(field=_go_quote(field))


def parse_field_selector(
    kind: str, text: str, *, namespaced: bool = True, custom_resource: bool = False
) -> FieldSelector:
    """Parse a field selector for a list of ``kind`` with that kind's table, aliases and wording."""
    return FieldSelector.parse(
        text,
        supported_fields(kind, namespaced=namespaced, custom_resource=custom_resource),
        aliases={} if custom_resource else FIELD_ALIASES.get(kind, {}),
        unsupported=lambda field: unsupported_field_message(kind, field, custom_resource=custom_resource),
    )


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    current: Any = obj
    for name in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(name)
    return current


def _text(value: Any) -> str:
    """A string field as the typed object holds it: missing (or not a string) is the zero value ""."""
    return value if isinstance(value, str) else ""


def _flag(value: Any) -> str:
    """A bool field rendered by strconv.FormatBool / fmt.Sprint: missing is false."""
    return "true" if value is True else "false"


def field_values(kind: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """The selectable fields of ``obj`` (a ``kind`` as JSON) with the values the apiserver matches against.

    Every kind gets ``metadata.name`` and ``metadata.namespace`` (``generic.ObjectMetaFieldsSet``; a
    cluster-scoped object's namespace is ""). Strings missing from the object are "", bools "true"/"false",
    Job's count a decimal string.
    """
    values = {
        "metadata.name": _text(_get(obj, "metadata", "name")),
        "metadata.namespace": _text(_get(obj, "metadata", "namespace")),
    }
    if kind == "Pod":
        pod_ips = _get(obj, "status", "podIPs")
        first_ip = pod_ips[0] if isinstance(pod_ips, list) and pod_ips else None
        # The internal type keeps only podIPs; conversion from v1 fills it from podIP when podIPs is empty.
        pod_ip = _text(_get(first_ip, "ip")) if isinstance(first_ip, Mapping) else _text(_get(obj, "status", "podIP"))
        values |= {
            "spec.nodeName": _text(_get(obj, "spec", "nodeName")),
            "spec.restartPolicy": _text(_get(obj, "spec", "restartPolicy")),
            "spec.schedulerName": _text(_get(obj, "spec", "schedulerName")),
            "spec.serviceAccountName": _text(_get(obj, "spec", "serviceAccountName")),
            "spec.hostNetwork": _flag(_get(obj, "spec", "hostNetwork")),
            "status.phase": _text(_get(obj, "status", "phase")),
            "status.podIP": pod_ip,
            "status.nominatedNodeName": _text(_get(obj, "status", "nominatedNodeName")),
        }
    elif kind == "Node":
        values["spec.unschedulable"] = _flag(_get(obj, "spec", "unschedulable"))
    elif kind == "Event":
        reporting = _text(obj.get("reportingComponent"))
        values |= {
            f"involvedObject.{name}": _text(_get(obj, "involvedObject", name))
            for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        }
        values |= {
            "reason": _text(obj.get("reason")),
            "reportingComponent": reporting,
            "source": _text(_get(obj, "source", "component")) or reporting,
            "type": _text(obj.get("type")),
        }
    elif kind == "Job":
        succeeded = _get(obj, "status", "succeeded")
        values["status.successful"] = str(succeeded if isinstance(succeeded, int) else 0)
    elif kind == "Namespace":
        values["status.phase"] = _text(_get(obj, "status", "phase"))
    return values
