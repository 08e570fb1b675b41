"""
The base of every JSON shape this worker reads: keys spelled as in the TypeScript side (camelCase,
given by each field's alias), unknown keys ignored (a newer TypeScript side may send more), and
validation errors turned into one message that names each bad field by its JSON path.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


Model = TypeVar("Model", bound=BaseModel)


def describe_errors(err: ValidationError) -> str:
    """`trainer.loss.epsilon: Input should be less than 1; runId: Field required`."""
    return "; ".join(f"{'.'.join(str(part) for part in e['loc']) or '(root)'}: {e['msg']}" for e in err.errors())


def parse(model: type[Model], value: Any, what: str) -> Model:
    """`value` as `model`, or a ValueError saying which fields of `what` are wrong."""
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise ValueError(f"invalid {what}: {describe_errors(err)}") from None
