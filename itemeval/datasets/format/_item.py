"""The benchmark `Item` (item spec v3.3): the model, its checks, and lenient parsing of real files.

Two ways in:

* `Item(...)` in code is strict: values must already be what the spec says.
* `parse_item(raw, where)` reads one JSON/YAML object from a file the way real files are: names
  matched case-insensitively; JSON `true`/`false` where the spec says "True"/"False" (how
  itemeval writes booleans, and how the reference reader and the published data do); the
  reference reader's dialect (`shortprose`, ternary `Unknown`, ad hoc attributes under
  `otherargs`); other unambiguous deviations accepted with a warning ("a" for "A", a number where
  text is expected, an empty `taskPrompt`); everything else rejected with a `Problem` naming the
  file, line, item and attribute.

`Item.to_dict()` gives an item back with the attribute names spelled as they were read and every
ad hoc attribute untouched, so nothing read is lost. How an item is written to a file (booleans,
where ad hoc attributes go) is the dialect's business: `itemeval.datasets.format._dialect`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from itemeval.datasets.format._attributes import (
    IDENTIFIER_HINT,
    IDENTIFIER_PATTERN,
    MISSING,
    format_number,
    read_fraction,
    read_identifier,
    read_text,
    split_attributes,
)
from itemeval.datasets.format._findings import Where
from itemeval.datasets.format._modality import (
    BY_VALUE,
    DONT_KNOW,
    LABELS,
    READER_SPELLINGS,
    Modality,
)
from itemeval.errors import Problem

# Spec order; this is the order `to_dict` writes them in.
ITEM_ATTRIBUTES = (
    "identifier",
    "modality",
    "prompt",
    "response",
    "difficulty",
    "support",
    "taskPrompt",
)
_BY_CASEFOLD = {name.casefold(): name for name in ITEM_ATTRIBUTES}
_CANONICAL_NAMES = frozenset(ITEM_ATTRIBUTES)
CLOZE_BLANK = "___"
# where the reference reader (commoneval) keeps an item's ad hoc attributes
OTHERARGS = "otherargs"
# the reference reader's spelling of the ternary "I don't know" (keys casefolded)
_TERNARY_ALIASES = {"unknown": DONT_KNOW}


class Item(BaseModel):
    """One benchmark item. `extras` holds the ad hoc attributes under the names they were read."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    identifier: str
    modality: Modality
    prompt: str
    response: str
    difficulty: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    support: Any = None
    task_prompt: str | None = Field(default=None, alias="taskPrompt")
    extras: dict[str, Any] = Field(default_factory=dict)

    # canonical attribute name -> key as written in the file it came from
    _spellings: dict[str, str] = PrivateAttr(default_factory=dict)

    @field_validator("modality", mode="before")
    @classmethod
    def _modality(cls, value: Any) -> Any:
        return Modality.parse(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> Item:
        if not IDENTIFIER_PATTERN.match(self.identifier):
            raise ValueError(f"identifier {self.identifier!r}: {IDENTIFIER_HINT}")
        if not self.prompt.strip():
            raise ValueError("prompt must not be empty")
        message = response_error(self.modality, self.response, self.prompt)
        if message:
            raise ValueError(message)
        return self

    @property
    def key(self) -> str:
        """The identifier as compared (case-insensitively)."""
        return self.identifier.casefold()

    def to_dict(self) -> dict[str, Any]:
        """The item as read: spec attributes (spelled as read), then the ad hoc attributes."""
        out = self.spec_attributes()
        out.update(self.extras)
        return out

    def spec_attributes(self) -> dict[str, Any]:
        """The spec's attributes that are set, in spec order, spelled as they were read."""
        values = {
            "identifier": self.identifier,
            "modality": self.modality.value,
            "prompt": self.prompt,
            "response": self.response,
            "difficulty": self.difficulty,
            "support": self.support,
            "taskPrompt": self.task_prompt,
        }
        # private attributes are slow to read through pydantic's __getattr__: read the dict once
        spellings = (self.__pydantic_private__ or {}).get("_spellings") or {}
        out: dict[str, Any] = {}
        for name in ITEM_ATTRIBUTES:
            value = values[name]
            if value is not None:
                out[spellings.get(name, name)] = value
        return out


def response_error(modality: Modality, response: str, prompt: str) -> str | None:
    """What is wrong with `response` (or a cloze prompt) for `modality`, or None."""
    labels = LABELS[modality]
    if labels is not None and response not in labels:
        allowed = allowed_responses(labels)
        if modality.n_choices and len(response.strip()) == 1 and response.strip().isalpha():
            return f"letter {response!r} is outside {modality.value}: expected one of {allowed}"
        return f"expected one of {allowed} for {modality.value}, found {response!r}"
    if modality is Modality.CLOZE and CLOZE_BLANK not in prompt:
        return f'a cloze prompt needs a blank "{CLOZE_BLANK}" (three underscores)'
    return None


def parse_item(raw: Any, where: Where) -> tuple[Item | None, list[Problem]]:
    """Read one item leniently (see module doc). Returns the item (None if rejected) and the
    findings; the item is None exactly when a finding is an error."""
    item = canonical_item(raw)
    if item is not None:
        return item, []
    return _parse_lenient(raw, where)


def canonical_item(raw: Any) -> Item | None:
    """The item, when `raw` is one as the spec writes it: attribute names spelled as the spec
    spells them, every value already of the spec's type and valid. Otherwise None, and
    `parse_item` reads it leniently. Nearly every item read is canonical: this path finds the
    same item as the lenient one with no findings (tested), in under half the time (20,000
    items: 0.075 against 0.18 s)."""
    if type(raw) is not dict:
        return None
    identifier = raw.get("identifier")
    spelled = raw.get("modality")
    modality = BY_VALUE.get(spelled) if type(spelled) is str else None
    prompt = raw.get("prompt")
    response = raw.get("response")
    if (
        modality is None
        or type(identifier) is not str
        or type(prompt) is not str
        or type(response) is not str
        or not IDENTIFIER_PATTERN.match(identifier)
        or not prompt.strip()
    ):
        return None
    if response_error(modality, response, prompt) or not response.strip():
        return None
    difficulty = raw.get("difficulty")
    if difficulty is not None:
        if type(difficulty) is not float and type(difficulty) is not int:
            return None
        if not 0.0 <= difficulty <= 1.0:  # also false for NaN
            return None
        difficulty = float(difficulty)
    task_prompt = raw.get("taskPrompt")
    if task_prompt is not None and (type(task_prompt) is not str or not task_prompt.strip()):
        return None
    extras: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _CANONICAL_NAMES:
            continue
        if type(key) is not str or key == OTHERARGS or key.casefold() in _BY_CASEFOLD:
            return None  # an unusual spelling, the reader's stash, or not a name
        extras[key] = value
    return trusted_item(
        identifier, modality, prompt, response, difficulty, raw.get("support"), task_prompt, extras
    )


def _parse_lenient(raw: Any, where: Where) -> tuple[Item | None, list[Problem]]:
    """`parse_item` for any input: every deviation found, accepted with a warning or rejected."""
    problems: list[Problem] = []
    if not isinstance(raw, Mapping):
        kind = "list" if isinstance(raw, list) else type(raw).__name__
        problems.append(where.error(f"expected an item (a JSON object), found a {kind}"))
        return None, problems
    split = split_attributes(raw, _BY_CASEFOLD, where)
    values = split.values
    raw_id = values.get("identifier", MISSING)
    if isinstance(raw_id, str | int) and not isinstance(raw_id, bool):
        where = where.at(item=str(raw_id))
        problems.extend(replace(p, item=where.item) for p in split.problems)
    else:
        problems.extend(split.problems)
    if OTHERARGS in split.extras:
        _unpack_otherargs(split.extras, where, problems)
    identifier = read_identifier(raw_id, "identifier", where, problems)
    modality = _read_modality(values.get("modality", MISSING), where, problems)
    prompt = read_text(values.get("prompt", MISSING), "prompt", where, problems, required=True)
    response = (
        read_response(modality, values.get("response", MISSING), where, problems)
        if modality is not None
        else None
    )
    difficulty = read_fraction(values.get("difficulty"), "difficulty", where, problems)
    support = values.get("support")
    task_prompt = _read_task_prompt(values.get("taskPrompt"), where, problems)

    if modality is Modality.CLOZE and prompt is not None and CLOZE_BLANK not in prompt:
        problems.append(
            where.error(
                f'a cloze prompt needs a blank "{CLOZE_BLANK}" (three underscores)',
                field="prompt",
            )
        )
    if any(p.severity == "error" for p in problems):
        return None, problems
    assert identifier is not None and modality is not None
    assert prompt is not None and response is not None
    item = trusted_item(
        identifier,
        modality,
        prompt,
        response,
        difficulty,
        support,
        task_prompt,
        split.extras,
        spellings=split.spellings,
    )
    return item, problems


def _unpack_otherargs(extras: dict[str, Any], where: Where, problems: list[Problem]) -> None:
    """The reference reader keeps ad hoc attributes in one `otherargs` object; they are the
    item's ad hoc attributes, so they join the others (in place)."""
    nested = extras[OTHERARGS]
    if not isinstance(nested, Mapping):
        return  # not the reader's stash: an ordinary ad hoc attribute
    clashes = [str(k) for k in nested if str(k) in extras or str(k).casefold() in _BY_CASEFOLD]
    if clashes:
        problems.append(
            where.error(
                f"otherargs holds {', '.join(map(repr, clashes))}, which the item also has",
                field=OTHERARGS,
                hint="keep each attribute once",
            )
        )
        return
    del extras[OTHERARGS]
    extras.update((str(k), v) for k, v in nested.items())


def trusted_item(
    identifier: str,
    modality: Modality,
    prompt: str,
    response: str,
    difficulty: float | None,
    support: Any,
    task_prompt: str | None,
    extras: dict[str, Any],
    *,
    spellings: dict[str, str] | None = None,
) -> Item:
    """An `Item` from values that `parse_item` has already checked (the lenient twin of
    `Item._check`), without validating again. This runs once per item read: it is what
    `model_construct` does, minus its generic default handling, and measured 4x faster."""
    fields = {
        "identifier": identifier,
        "modality": modality,
        "prompt": prompt,
        "response": response,
        "difficulty": difficulty,
        "support": support,
        "task_prompt": task_prompt,
        "extras": extras,
    }
    item = Item.__new__(Item)
    object.__setattr__(item, "__dict__", fields)
    given = {k for k, v in fields.items() if v is not None and not (k == "extras" and not v)}
    object.__setattr__(item, "__pydantic_fields_set__", given)
    object.__setattr__(item, "__pydantic_extra__", None)
    object.__setattr__(item, "__pydantic_private__", {"_spellings": spellings or {}})
    return item


def read_response(
    modality: Modality, value: Any, where: Where, problems: list[Problem]
) -> str | None:
    """The `response` normalised for `modality` (see module doc), or None with an error."""
    labels = modality.labels
    if isinstance(value, bool):
        text: str | None = "True" if value else "False"
        if labels is not None and text in labels:
            return text  # how booleans are written: JSON true/false
        if labels is None:
            problems.append(
                where.warning(
                    f'JSON boolean {str(value).lower()} read as "{text}"', field="response"
                )
            )
            return text
        problems.append(
            where.error(_expected(modality, f"JSON {str(value).lower()}"), field="response")
        )
        return None
    if labels is None:
        text = read_text(value, "response", where, problems, required=True, allow_empty=True)
        if text is not None and not text.strip():
            if modality.is_prose:
                problems.append(
                    where.warning(
                        "empty reference response; a judge will grade without a reference",
                        field="response",
                    )
                )
            else:
                problems.append(
                    where.error(
                        f"expected a non-empty response for {modality.value}", field="response"
                    )
                )
                return None
        return text
    if value is None or value is MISSING:
        what = "missing" if value is MISSING else "null"
        problems.append(where.error(f"required attribute is {what}", field="response"))
        return None
    if not isinstance(value, str):
        shown = format_number(value) if isinstance(value, int | float) else type(value).__name__
        problems.append(where.error(_expected(modality, shown), field="response"))
        return None
    key = value.strip().casefold().replace("\u2019", "'")
    if modality is Modality.TERNARY and key in _TERNARY_ALIASES:
        label = _TERNARY_ALIASES[key]
        problems.append(
            where.warning(
                f'{value!r} read as "{label}" (the reference reader\'s spelling)',
                field="response",
            )
        )
        return label
    for label in labels:
        if label.casefold() == key:
            if label != value:
                problems.append(where.warning(f'{value!r} read as "{label}"', field="response"))
            return label
    message = response_error(modality, value, "") or _expected(modality, repr(value))
    problems.append(where.error(message, field="response"))
    return None


def allowed_responses(labels: tuple[str, ...]) -> str:
    """`"A", "B", "C"`; a long run of letters as its ends (`"A" to "J"`)."""
    if len(labels) > 5:
        return f'"{labels[0]}" to "{labels[-1]}"'
    return ", ".join(f'"{label}"' for label in labels)


def _expected(modality: Modality, found: str) -> str:
    allowed = allowed_responses(modality.labels or ())
    if not allowed:
        return f"expected text for {modality.value}, found {found}"
    return f"expected one of {allowed} for {modality.value}, found {found}"


def _read_modality(value: Any, where: Where, problems: list[Problem]) -> Modality | None:
    text = read_text(value, "modality", where, problems, required=True)
    if text is None:
        return None
    try:
        modality = Modality.parse(text)
    except ValueError as exc:
        problems.append(where.error(str(exc), field="modality"))
        return None
    if text != modality.value:
        whose = " (the reference reader's spelling)" if text in READER_SPELLINGS else ""
        problems.append(
            where.warning(f'{text!r} read as "{modality.value}"{whose}', field="modality")
        )
    return modality


def _read_task_prompt(value: Any, where: Where, problems: list[Problem]) -> str | None:
    if value is None:
        return None
    text = read_text(value, "taskPrompt", where, problems, required=False, allow_empty=True)
    if text is not None and not text.strip():
        problems.append(where.warning("empty taskPrompt treated as absent", field="taskPrompt"))
        return None
    return text
