"""shapes.py: JSON Schemas from type hints (run: python shapes.py, or serve it: mcpsync serve shapes.py)."""
import dataclasses
import enum
import json
from typing import Annotated, Literal, Optional, TypedDict

from mcpsync import Service


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Box:
    width: int
    height: int = 1


class Tag(TypedDict):
    name: str
    weight: float


service = Service("shapes")


@service.tool
def paint(
    box: Box,                                   # object, closed, width required
    color: Color,                               # {"enum": ["red", "green"], "type": "string"}
    tags: list[Tag],                            # array of objects
    finish: Literal["matte", "gloss"] = "matte",
    note: Optional[str] = None,                 # {"type": ["string", "null"], "default": null}
    extra: dict[str, int] | None = None,        # anyOf object-of-integers / null
    coats: Annotated[int, "how many coats of paint"] = 2,
) -> str:
    """Paint a box.

    Args:
        box: the box to paint.
        color: the paint color.
    """
    assert isinstance(box, Box) and isinstance(color, Color)
    return f"{box.width}x{box.height} {color.value} {finish}, {coats} coats"


if __name__ == "__main__":
    print(json.dumps(service.tools[0].definition()["inputSchema"], indent=1))
