"""trips.py: tools that ask the client while they run (run: mcpsync serve trips.py)."""
import threading
import time

from mcpsync import Context, Era, InputRequired, Question, Service

service = Service("trips")

WHERE = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "Where to"},
        "nights": {"type": "integer", "minimum": 1, "default": 2},
    },
    "required": ["city"],
}


@service.tool
def plan_trip(ctx: Context) -> str:
    """Ask the user where to go, then ask the client's model what to see there."""
    answer = ctx.elicit("Where would you like to go?", WHERE)  # elicitation/create: a form
    if answer["action"] != "accept":                           # "decline" or "cancel"
        return "No trip, then."
    city, nights = answer["content"]["city"], answer["content"].get("nights", 2)
    reply = ctx.sample(f"One sight to see in {city}, in five words.", max_tokens=30)  # sampling/createMessage
    return f"{nights} nights in {city}. Don't miss: {reply['content']['text']}"


@service.tool
def save_itinerary(ctx: Context, city: str) -> str:
    """Ask for a confirmation and for the client's roots in one round, then save."""
    confirm, roots = ctx.ask(
        Question.elicitation(f"Save the itinerary for {city}?", key="confirm"),  # an empty form: yes or no
        Question.roots(key="roots"),                                            # roots/list
    )
    if confirm["action"] != "accept" or not roots:
        return "Not saved."
    return f"Saved to {roots[0]['uri']}/{city.lower()}.md"


JOBS: dict[str, threading.Thread] = {}  # this process's jobs; several processes need a shared store


@service.tool
def yearly_report(ctx: Context, year: int) -> str:
    """Long work: a 2026-07-28 client is told to come back until the report is ready."""
    job = ctx.state or f"report-{year}"  # the state the previous round returned, or a new job
    if job not in JOBS:
        JOBS[job] = threading.Thread(target=time.sleep, args=(0.3,))  # stands for the slow work
        JOBS[job].start()
    if ctx.era is Era.MODERN and JOBS[job].is_alive():
        return InputRequired(state=job)  # no question: "call again a little later"
    JOBS[job].join()                     # the handshake era has no retry: wait here
    return f"{job} is ready"
