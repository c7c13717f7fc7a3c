"""trips_client.py: answer trips.py's questions in both eras (run: python trips_client.py, beside trips.py)."""
import sys

import mcpsync


def elicitation(params):  # elicitation/create: show the message and the form, return the user's answer
    print("  the server asks:", params["message"])
    return {"action": "accept", "content": {"city": "Lisbon", "nights": 3}}


def sampling(params):  # sampling/createMessage: ask your model
    return {"role": "assistant", "content": {"type": "text", "text": "the Belem Tower at dusk"}, "model": "my-model"}


def roots(params):  # roots/list
    return {"roots": [{"uri": "file:///home/me/trips", "name": "trips"}]}


for mode in ("auto", "legacy"):  # 2026-07-28, then the handshake era
    with mcpsync.connect(
        [sys.executable, "-m", "mcpsync", "serve", "trips.py"],
        mode=mode,
        elicitation=elicitation,
        sampling=sampling,
        roots=roots,
    ) as session:
        print(session.era.value)
        print(session.call_tool("plan_trip")["content"][0]["text"])
        print(session.call_tool("save_itinerary", {"city": "Lisbon"})["content"][0]["text"])
        print(session.call_tool("yearly_report", {"year": 2026})["content"][0]["text"])
