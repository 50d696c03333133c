"""Row ids from addresses, forms and socket messages, checked against their column's range before
any query: an id out of range is answered like any unknown id (a 404, "not found"), never a 500.

The range is the primary key's own (its validators, which Django derives from the database: on
SQLite every id column is 64-bit, on PostgreSQL a user's id is 32-bit and the rest 64-bit); an id
below 1 is never given. Without the check SQLite cannot bind an int past 64 bits (OverflowError)
and PostgreSQL refuses one past its column.
"""

from __future__ import annotations

from collections.abc import Iterable

from django import forms
from django.core.exceptions import ValidationError
from django.db import models

MAX_DIGITS = 20  # more than any id column holds: a longer string is not an id at all


def highest(model: type[models.Model]) -> int:
    """The largest id `model`'s primary key column holds on this database."""
    limits = [check.limit_value for check in model._meta.pk.validators if hasattr(check, "limit_value")]
    return min([*(limit for limit in limits if limit > 0), 2**63 - 1])


def parse(model: type[models.Model], value: object) -> int | None:
    """`value` as an id of `model`: a whole number or its ASCII digits, in its column's range;
    None for anything else (a float, a list, "1e9", 30 digits)."""
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()) or len(value) > MAX_DIGITS:
            return None
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return None
    try:
        for check in model._meta.pk.validators:
            check(value)
    except ValidationError:
        return None
    return value


def parse_all(model: type[models.Model], values: Iterable[object]) -> list[int]:
    """The ids among `values`, in order, each once; what is not one is left out."""
    found = (parse(model, value) for value in values)
    return list(dict.fromkeys(i for i in found if i is not None))


def converter(model: type[models.Model]) -> type:
    """A URL converter for `model`'s ids: an id out of range matches nothing (a 404)."""

    class IdConverter:
        regex = f"[0-9]{{1,{MAX_DIGITS}}}"

        def to_python(self, value: str) -> int:
            number = parse(model, value)
            if number is None:
                raise ValueError(f"not an id of {model.__name__}")
            return number

        def to_url(self, value: int) -> str:
            return str(int(value))

    return IdConverter


class IdField(forms.IntegerField):
    """A form field for an id of `model`; out of range it is `not_found`, like an unknown id."""

    def __init__(self, model: type[models.Model], not_found: str, **kwargs) -> None:
        messages = {"invalid": not_found, "min_value": not_found, "max_value": not_found}
        super().__init__(min_value=1, max_value=highest(model), error_messages=messages, **kwargs)
