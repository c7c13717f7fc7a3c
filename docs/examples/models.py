"""models.py: pydantic models as parameters and results (run: python models.py, or serve it: mcpsync serve models.py)."""
import json

from pydantic import BaseModel, Field

from mcpsync import Service


class Line(BaseModel):
    """One line of an order."""

    sku: str = Field(pattern=r"^[A-Z]{3}-\d+$", description="stock keeping unit")
    quantity: int = Field(ge=1, le=99)


class Order(BaseModel):
    customer_id: int = Field(alias="customerId", gt=0)  # the wire says customerId
    lines: list[Line] = Field(min_length=1)


class Receipt(BaseModel):
    order_id: str = Field(alias="orderId")
    items: int


service = Service("shop")


@service.tool
def place_order(order: Order) -> Receipt:
    """Place an order."""
    assert isinstance(order, Order)  # validated by pydantic, built by pydantic
    return Receipt(orderId=f"order-{order.customer_id}", items=sum(line.quantity for line in order.lines))


if __name__ == "__main__":
    tool = service.tools[0].definition()
    print(json.dumps({"inputSchema": tool["inputSchema"], "outputSchema": tool["outputSchema"]}, indent=1))
