"""synthetic_tools: 2-5 tool descriptions (function name in `title`, description in `text`) and a
user request that exactly one tool serves; the gold is that function's name
(tool_description_order, diagnostic).

Every capability has three interchangeable function names and one is drawn per item, so the name to
call cannot be guessed from the request alone: it must be read from the tool list.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar, NamedTuple

from facet_probe.core.items import AnswerType, Component, ComponentKind, Item
from facet_probe.datasets.synthetic.base import Draft, SyntheticLoader
from facet_probe.datasets.synthetic.vocab import CITIES, NAMES, OBJECTS


class Capability(NamedTuple):
    names: tuple[str, str, str]
    description: str
    request: str  # with an {x} slot filled from `slot`
    slot: tuple[str, ...]


CAPABILITIES: dict[str, Capability] = {
    "weather": Capability(("get_weather", "fetch_forecast", "weather_lookup"),
                          "Returns the weather forecast for a city.", "Will it rain in {x} tomorrow?", CITIES),
    "time": Capability(("get_time", "current_time", "clock_now"),
                       "Returns the current local time in a city.", "What time is it in {x} now?", CITIES),
    "email": Capability(("send_email", "mail_to", "email_send"),
                        "Sends an email message to a person.", "Please email {x} about the meeting.", NAMES),
    "call": Capability(("phone_call", "start_call", "dial_contact"),
                       "Starts a phone call with a person.", "Please call {x} for me.", NAMES),
    "alarm": Capability(("set_alarm", "alarm_create", "wake_me"),
                        "Sets an alarm clock for a given hour.", "Wake me up at {x} tomorrow.",
                        ("six", "seven", "eight", "nine")),
    "buy": Capability(("buy_item", "order_product", "shop_buy"),
                      "Orders a product from the online shop.", "Please order a new {x} for me.", OBJECTS),
    "find": Capability(("find_item", "locate_object", "where_is"),
                       "Tells where a lost object was last seen.", "Where did I leave my {x}?", OBJECTS),
    "flight": Capability(("book_flight", "flight_search", "plane_ticket"),
                         "Books a flight to a city.", "Book me a flight to {x}.", CITIES),
    "music": Capability(("play_music", "song_play", "start_playlist"),
                        "Plays songs by an artist.", "Play some songs by {x}.", NAMES),
    "translate": Capability(("translate_text", "text_translate", "lang_convert"),
                            "Translates a word into another language.", "How do you say {x} in Spanish?",
                            OBJECTS),
}


class SyntheticTools(SyntheticLoader):
    """A tool list and a request; the answer is the name of the one tool that serves it."""

    facets: ClassVar[tuple[str, ...]] = ("tool_description_order",)
    set_name: ClassVar[str] = "synthetic_tools"

    def draw(self, rng: random.Random) -> Draft:
        caps = rng.sample(sorted(CAPABILITIES), rng.randint(2, 5))
        tools = [{"capability": c, "name": rng.choice(CAPABILITIES[c].names)} for c in caps]
        target = rng.choice(caps)
        cap = CAPABILITIES[target]
        question = cap.request.format(x=rng.choice(cap.slot))
        gold = next(t["name"] for t in tools if t["capability"] == target)
        return Draft(target, {"tools": tools, "question": question, "gold": gold})

    def build(self, draft: Draft, item_id: str, meta: dict[str, Any]) -> Item:
        gold = draft.content["gold"]
        components = tuple(
            Component(id=f"tool-{i}", kind=ComponentKind.TOOL, title=t["name"],
                      text=CAPABILITIES[t["capability"]].description,
                      metadata={"supporting": t["name"] == gold, "answer": t["name"]})
            for i, t in enumerate(draft.content["tools"]))
        return self.make(item_id=item_id, question=draft.content["question"], components=components,
                         answer_type=AnswerType.TOOL, gold_answer=gold, metadata=meta)
