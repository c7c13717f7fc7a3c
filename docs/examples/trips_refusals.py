"""trips_refusals.py: questions that go unanswered (run: python trips_refusals.py, beside trips.py)."""
import sys

import mcpsync
from mcpsync import InputRoundsExceeded, McpError


def elicitation(params):  # the user closes the form
    raise McpError(-1, "the user closed the dialog")


calls = [("plan_trip", {}), ("save_itinerary", {"city": "Porto"}), ("yearly_report", {"year": 1999})]
for mode in ("auto", "legacy"):
    # No roots callback: the session does not declare roots. Two rounds at most per call.
    with mcpsync.connect(
        [sys.executable, "-m", "mcpsync", "serve", "trips.py"], mode=mode, elicitation=elicitation, max_input_rounds=2
    ) as session:
        print(session.era.value)
        for name, arguments in calls:
            try:
                result = session.call_tool(name, arguments)
                print(f"  {name}: isError={result['isError']}: {result['content'][0]['text']}")
            except (McpError, InputRoundsExceeded) as exc:
                print(f"  {name}: {type(exc).__name__}: {exc}")
