"""Conversations for the topic-tree tests: TRACE's stress scenarios and a few-hundred-turn store."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

SARAH_ALLERGY = ("My niece Sarah has a severe peanut allergy; even traces of peanuts make her ill.",
                 "Understood: Sarah must avoid all peanuts and foods processed with peanuts.")
SARAH_CAKE = ("I'm baking a birthday cake for Sarah's party on Saturday.",
              "Great: a vanilla sponge with buttercream is a safe classic for a birthday party.")
SARAH_THAI = ("Can you give me a Thai peanut butter cake recipe?",
              "Thai peanut butter cake: flour, sugar, eggs, peanut butter, coconut milk and lime; bake 35 minutes.")
WEATHER = [("Will it rain in Boston tomorrow? I need to plan my commute.",
            "Boston tomorrow: showers in the morning, dry afternoon, 12 degrees."),
           ("Should I take an umbrella for the rain then?", "Yes, take an umbrella for the morning rain showers.")]
BIKE = [("My bike tire keeps going flat after every ride.",
         "Check the bike tire for a thorn and replace the inner tube; a slow puncture is likely."),
        ("What pressure should the bike tire have?", "Road bike tires usually run at 80 to 100 psi.")]
WINDY = [("Is it going to be windy in Boston this weekend?", "Boston this weekend: gusty winds, then calm and sunny.")]

SARAH_SCENARIO = [SARAH_ALLERGY, *WEATHER, SARAH_CAKE, *BIKE, SARAH_THAI, *WINDY]
NUTS_NOW = ("Actually, Sarah can eat nuts now: her allergist cleared her last month.",
            "Good news! Then peanuts are fine for Sarah again.")

SNAKE = [("Python snakes: how big do reticulated pythons grow in the wild?",
          "Reticulated pythons are constrictor snakes; wild snakes exceed six metres and ambush prey."),
         ("What do python snakes eat, and how do these constrictor snakes hunt prey?",
          "Python snakes eat rodents, birds and deer; the constrictor snakes coil around prey.")]
CODE = [("How do I write a list comprehension in Python code?",
         "In Python code, [x * 2 for x in items] builds a list; an if clause filters items."),
        ("How do I sort a list of dicts by a key in Python code?",
         "In Python code use sorted(items, key=lambda d: d['name']); the list itself is unchanged.")]

THESEUS = [
    ("The Ship of Theseus puzzle: if every plank of the ship is replaced, is it the same ship?",
     "The Ship of Theseus asks whether the ship keeps its identity when each plank is replaced."),
    ("Back to the Ship of Theseus: what if the old planks are rebuilt into a second ship?",
     "Hobbes added that twist: two ships of Theseus, one of new planks, one of the old planks."),
    ("Does the Ship of Theseus identity depend on the planks or on the ship's form?",
     "Some say the ship of Theseus is its form; others say its planks and their history."),
    ("Is a river like the Ship of Theseus, with new water but the same river?",
     "Heraclitus' river is a cousin of the Ship of Theseus: the parts change, the identity stays."),
    ("Apply the Ship of Theseus to my body: my cells are replaced like planks of a ship.",
     "Your body renews its cells the way the Ship of Theseus renews planks; identity persists."),
    ("How did Plutarch describe the Ship of Theseus and its decaying planks?",
     "Plutarch wrote that the Athenians replaced the ship's decaying planks, keeping the Ship of Theseus."),
    ("Is a band with all members replaced a Ship of Theseus case?",
     "Yes, a band that replaces every member is a Ship of Theseus: new planks, same ship name."),
    ("What does four-dimensionalism say about the Ship of Theseus and its planks?",
     "Four-dimensionalism treats the Ship of Theseus as a worm through time; each plank is a stage."),
    ("Could the Ship of Theseus be two ships at once, the new planks and the old?",
     "If both count, the Ship of Theseus splits into two ships; identity need not be one-to-one."),
    ("Summarise the Ship of Theseus positions on the planks and the ship's identity.",
     "For the Ship of Theseus: form view, material view (old planks), continuity view (new planks)."),
]
DISTRACTORS = [
    ("What houseplants survive in a dark apartment?", "Snake plants, pothos and ZZ plants tolerate low light."),
    ("How do I descale my espresso machine?", "Run a citric acid solution through the espresso machine, then rinse twice."),
    ("Which chess opening suits an aggressive beginner?", "Try the Italian Game or the King's Gambit for sharp chess."),
    ("How often should I water tomato seedlings?", "Water tomato seedlings when the top soil is dry, usually every two days."),
    ("What is a good stretching routine after running?", "Stretch calves, hamstrings and quads for 30 seconds each after running."),
    ("How do I change the guitar strings on an acoustic guitar?", "Loosen each guitar string, unwind, fit the new string at the bridge pin, tune up."),
    ("Which telescope is best for viewing Saturn's rings?", "A 130 mm reflector telescope shows Saturn's rings clearly."),
    ("How do I clean a cast iron pan?", "Scrub the cast iron pan with hot water, dry it, then oil it lightly."),
    ("What is the capital of Mongolia and its population?", "Ulaanbaatar, the capital of Mongolia, has about 1.6 million people."),
    ("How do I make sourdough starter from scratch?", "Mix flour and water, feed the sourdough starter daily for a week."),
]

NEEDLE = ("By the way, the wifi password at the lake cabin is blue-heron-42.",
          "Got it: the lake cabin wifi password is blue-heron-42.")

SUBJECTS = {
    "garden": ["tomatoes", "compost", "seedlings", "mulch", "raised beds", "aphids"],
    "coffee": ["espresso", "grinder", "roast", "crema", "milk frothing", "beans"],
    "chess": ["openings", "endgames", "tactics", "the sicilian", "rooks", "pawn structure"],
    "running": ["intervals", "marathon pace", "shoes", "shin splints", "tempo runs", "stretching"],
    "guitar": ["chords", "strings", "scales", "fingerpicking", "capo", "tuning"],
    "astronomy": ["telescopes", "saturn", "nebulae", "star charts", "eclipses", "jupiter moons"],
    "taxes": ["deductions", "receipts", "quarterly payments", "the filing deadline", "invoices", "refunds"],
    "travel": ["train tickets", "hostels", "the itinerary", "packing lists", "visas", "the budget"],
}
TEMPLATES_Q = ["Tell me more about {t} for my {s} hobby.", "What mistakes do people make with {t} in {s}?",
               "How should a beginner approach {t} in {s}?", "Any advice on {t}? It's for {s}."]
TEMPLATES_A = ["For {s}, {t} matters most early on; practise {t} a little every week.",
               "In {s}, people often rush {t}; slow down and keep notes about {t}.",
               "Start {t} simply: {s} rewards patience, and {t} improves with repetition."]


def filler(n_exchanges: int, seed: int = 7) -> list[tuple[str, str]]:
    """Deterministic chit-chat in runs of a few exchanges per subject (so topics form)."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    names = sorted(SUBJECTS)
    while len(out) < n_exchanges:
        s = rng.choice(names)
        for _ in range(rng.randint(2, 5)):
            t = rng.choice(SUBJECTS[s])
            out.append((rng.choice(TEMPLATES_Q).format(t=t, s=s), rng.choice(TEMPLATES_A).format(t=t, s=s)))
    return out[:n_exchanges]


def converse(store, exchanges, start: str = "2026-11-01T09:00:00", step_minutes: int = 5, session: str = "main",
             batch: int = 20) -> list[list[str]]:
    """Write exchanges as user+assistant records, `batch` exchanges per commit; returns ids per exchange."""
    t = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
    recs, ids = [], []
    for user, reply in exchanges:
        pair = [store.normalize({"ts": t.isoformat(), "role": "user", "text": user, "session": session})]
        t += timedelta(minutes=step_minutes)
        if reply:
            pair.append(store.normalize({"ts": t.isoformat(), "role": "assistant", "text": reply, "session": session}))
            t += timedelta(minutes=step_minutes)
        ids.append([r["id"] for r in pair])
        recs += pair
    per = 2 * batch
    for i in range(0, len(recs), per):
        store.write(recs[i : i + per], f"Add turns {i}..{i + per}")
    return ids
