"""Conversations for the topic-tree tests: TRACE's stress scenarios and a few-hundred-turn store."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

SARAH_ALLERGY = (
    "My niece Sarah has a severe peanut allergy; even traces of peanuts make her ill.",
    "Understood: Sarah must avoid all peanuts and foods processed with peanuts.",
)
SARAH_CAKE = (
    "I'm baking a birthday cake for Sarah's party on Saturday.",
    "Great: a vanilla sponge with buttercream is a safe classic for a birthday party.",
)
SARAH_THAI = (
    "Can you give me a Thai peanut butter cake recipe?",
    "Thai peanut butter cake: flour, sugar, eggs, peanut butter, coconut milk and lime; bake 35 minutes.",
)
WEATHER = [
    (
        "Will it rain in Boston tomorrow? I need to plan my commute.",
        "Boston tomorrow: showers in the morning, dry afternoon, 12 degrees.",
    ),
    (
        "Should I take an umbrella for the rain then?",
        "Yes, take an umbrella for the morning rain showers.",
    ),
]
BIKE = [
    (
        "My bike tire keeps going flat after every ride.",
        "Check the bike tire for a thorn and replace the inner tube; a slow puncture is likely.",
    ),
    ("What pressure should the bike tire have?", "Road bike tires usually run at 80 to 100 psi."),
]
WINDY = [
    (
        "Is it going to be windy in Boston this weekend?",
        "Boston this weekend: gusty winds, then calm and sunny.",
    )
]

SARAH_SCENARIO = [SARAH_ALLERGY, *WEATHER, SARAH_CAKE, *BIKE, SARAH_THAI, *WINDY]
NUTS_NOW = (
    "Actually, Sarah can eat nuts now: her allergist cleared her last month.",
    "Good news! Then peanuts are fine for Sarah again.",
)

SNAKE = [
    (
        "Python snakes: how big do reticulated pythons grow in the wild?",
        "Reticulated pythons are constrictor snakes; wild snakes exceed six metres and ambush prey.",
    ),
    (
        "What do python snakes eat, and how do these constrictor snakes hunt prey?",
        "Python snakes eat rodents, birds and deer; the constrictor snakes coil around prey.",
    ),
]
CODE = [
    (
        "How do I write a list comprehension in Python code?",
        "In Python code, [x * 2 for x in items] builds a list; an if clause filters items.",
    ),
    (
        "How do I sort a list of dicts by a key in Python code?",
        "In Python code use sorted(items, key=lambda d: d['name']); the list itself is unchanged.",
    ),
]

THESEUS = [
    (
        "The Ship of Theseus puzzle: if every plank of the ship is replaced, is it the same ship?",
        "The Ship of Theseus asks whether the ship keeps its identity when each plank is replaced.",
    ),
    (
        "Back to the Ship of Theseus: what if the old planks are rebuilt into a second ship?",
        "Hobbes added that twist: two ships of Theseus, one of new planks, one of the old planks.",
    ),
    (
        "Does the Ship of Theseus identity depend on the planks or on the ship's form?",
        "Some say the ship of Theseus is its form; others say its planks and their history.",
    ),
    (
        "Is a river like the Ship of Theseus, with new water but the same river?",
        "Heraclitus' river is a cousin of the Ship of Theseus: the parts change, the identity stays.",
    ),
    (
        "Apply the Ship of Theseus to my body: my cells are replaced like planks of a ship.",
        "Your body renews its cells the way the Ship of Theseus renews planks; identity persists.",
    ),
    (
        "How did Plutarch describe the Ship of Theseus and its decaying planks?",
        "Plutarch wrote that the Athenians replaced the ship's decaying planks, keeping the Ship of Theseus.",
    ),
    (
        "Is a band with all members replaced a Ship of Theseus case?",
        "Yes, a band that replaces every member is a Ship of Theseus: new planks, same ship name.",
    ),
    (
        "What does four-dimensionalism say about the Ship of Theseus and its planks?",
        "Four-dimensionalism treats the Ship of Theseus as a worm through time; each plank is a stage.",
    ),
    (
        "Could the Ship of Theseus be two ships at once, the new planks and the old?",
        "If both count, the Ship of Theseus splits into two ships; identity need not be one-to-one.",
    ),
    (
        "Summarise the Ship of Theseus positions on the planks and the ship's identity.",
        "For the Ship of Theseus: form view, material view (old planks), continuity view (new planks).",
    ),
]
DISTRACTORS = [
    (
        "What houseplants survive in a dark apartment?",
        "Snake plants, pothos and ZZ plants tolerate low light.",
    ),
    (
        "How do I descale my espresso machine?",
        "Run a citric acid solution through the espresso machine, then rinse twice.",
    ),
    (
        "Which chess opening suits an aggressive beginner?",
        "Try the Italian Game or the King's Gambit for sharp chess.",
    ),
    (
        "How often should I water tomato seedlings?",
        "Water tomato seedlings when the top soil is dry, usually every two days.",
    ),
    (
        "What is a good stretching routine after running?",
        "Stretch calves, hamstrings and quads for 30 seconds each after running.",
    ),
    (
        "How do I change the guitar strings on an acoustic guitar?",
        "Loosen each guitar string, unwind, fit the new string at the bridge pin, tune up.",
    ),
    (
        "Which telescope is best for viewing Saturn's rings?",
        "A 130 mm reflector telescope shows Saturn's rings clearly.",
    ),
    (
        "How do I clean a cast iron pan?",
        "Scrub the cast iron pan with hot water, dry it, then oil it lightly.",
    ),
    (
        "What is the capital of Mongolia and its population?",
        "Ulaanbaatar, the capital of Mongolia, has about 1.6 million people.",
    ),
    (
        "How do I make sourdough starter from scratch?",
        "Mix flour and water, feed the sourdough starter daily for a week.",
    ),
]

NEEDLE = (
    "By the way, the wifi password at the lake cabin is blue-heron-42.",
    "Got it: the lake cabin wifi password is blue-heron-42.",
)

# Eight subjects, each with its own wording, so that topics differ the way real conversations do.
SUBJECTS = {
    "garden": [
        (
            "My tomato seedlings look leggy, what went wrong?",
            "Leggy tomato seedlings lack light; move them closer to a grow lamp.",
        ),
        (
            "Is compost ready when it smells earthy?",
            "Yes, earthy, crumbly compost with no recognisable scraps is ready for the beds.",
        ),
        (
            "Aphids cover my roses again.",
            "Spray the aphids off the roses with water, then encourage ladybirds.",
        ),
        (
            "How deep should mulch be around shrubs?",
            "Spread mulch five to eight centimetres deep, away from the shrub stems.",
        ),
        (
            "When do I plant garlic cloves?",
            "Plant garlic cloves in autumn, pointy end up, a hand's depth in the soil.",
        ),
        (
            "Raised beds or in-ground beds for carrots?",
            "Raised beds with loose sandy soil grow straighter carrots.",
        ),
    ],
    "coffee": [
        (
            "My espresso tastes sour.",
            "Sour espresso is under-extracted: grind finer or raise the brew temperature.",
        ),
        (
            "Burr grinder or blade grinder for coffee?",
            "A burr grinder gives an even coffee grind; blade grinders make dust and boulders.",
        ),
        (
            "How do I steam milk for a flat white?",
            "Stretch the milk briefly, then swirl it into a glossy microfoam for the flat white.",
        ),
        (
            "Light roast or dark roast beans for filter coffee?",
            "Light roast beans keep fruity notes in filter coffee; dark roasts taste bitter.",
        ),
        (
            "Why is there no crema on my espresso shot?",
            "Stale beans or a coarse grind kill the crema; use beans roasted within a month.",
        ),
        (
            "How much coffee per cup for a pour-over?",
            "Use about 15 grams of coffee for 250 grams of water in a pour-over.",
        ),
    ],
    "chess": [
        (
            "Which chess opening should I learn first?",
            "Learn the Italian Game first: it develops pieces fast and fights for the centre.",
        ),
        (
            "How do I checkmate with king and rook?",
            "Box the enemy king toward the edge with the rook, then bring your king up for mate.",
        ),
        (
            "I keep blundering my queen in blitz.",
            "Before each blitz move, check which of your pieces are attacked, queen first.",
        ),
        (
            "What is the Sicilian Defence about?",
            "The Sicilian Defence answers 1.e4 with c5, trading a wing pawn for the centre.",
        ),
        (
            "How do I improve my chess endgames?",
            "Study king activity and pawn races; rook endgames come up most often.",
        ),
        (
            "What does a pawn structure tell me?",
            "The pawn structure shows which files open and where your pieces belong.",
        ),
    ],
    "running": [
        (
            "How fast should my easy runs be?",
            "Easy runs should feel conversational, about a minute per kilometre slower than race pace.",
        ),
        (
            "My shins hurt after running.",
            "Shin splints come from ramping mileage too fast; rest, then build slowly.",
        ),
        (
            "How often should I replace running shoes?",
            "Replace running shoes every 600 to 800 kilometres, when the foam feels flat.",
        ),
        (
            "What are interval sessions for?",
            "Interval sessions raise your speed: six 800-metre repeats with equal jog recovery.",
        ),
        (
            "How do I pace a marathon?",
            "Start the marathon slightly slower than goal pace and hold back until kilometre 30.",
        ),
        (
            "Should I stretch before a run?",
            "Warm up with drills and leg swings before a run; save static stretching for after.",
        ),
    ],
    "guitar": [
        (
            "My guitar strings buzz on the third fret.",
            "Fret buzz usually means low action or a high fret; raise the saddle slightly.",
        ),
        (
            "Which chords should a guitar beginner learn?",
            "Learn G, C, D, E minor and A minor; they cover hundreds of songs.",
        ),
        (
            "How do I tune a guitar to drop D?",
            "Lower the low E string a whole step until it matches the open D string.",
        ),
        (
            "What does a capo do?",
            "A capo clamps the guitar neck, raising every open string so chord shapes change key.",
        ),
        (
            "How do I practise fingerpicking patterns?",
            "Practise fingerpicking slowly with a metronome, thumb on the bass strings.",
        ),
        (
            "How often should I change guitar strings?",
            "Change guitar strings every two or three months, sooner if they sound dull.",
        ),
    ],
    "astronomy": [
        (
            "What can I see through a small telescope?",
            "A small telescope shows lunar craters, Saturn's rings and Jupiter's moons.",
        ),
        (
            "When is the next lunar eclipse?",
            "Check an eclipse calendar; a total lunar eclipse turns the Moon copper red.",
        ),
        (
            "How do I find the Andromeda galaxy?",
            "Star-hop from Cassiopeia; Andromeda looks like a faint smudge in binoculars.",
        ),
        (
            "Why do stars twinkle?",
            "Stars twinkle because turbulent air bends their light; planets twinkle less.",
        ),
        (
            "What is a nebula?",
            "A nebula is a cloud of gas and dust where new stars form, like Orion's nebula.",
        ),
        (
            "How do I photograph the Milky Way?",
            "Use a wide lens, high ISO and a 20-second exposure under dark skies.",
        ),
    ],
    "taxes": [
        (
            "Which receipts do I keep for my tax return?",
            "Keep receipts for deductible expenses, invoices and donations for seven years.",
        ),
        (
            "When is the tax filing deadline?",
            "The tax filing deadline is 31 July unless an adviser files for you.",
        ),
        (
            "Can I deduct my home office?",
            "A home office is deductible when it is the centre of your self-employed work.",
        ),
        (
            "How do quarterly tax prepayments work?",
            "The tax office sets quarterly prepayments from last year's income.",
        ),
        (
            "Why is my tax refund late?",
            "Tax refunds are late when the office asks for documents; check your letters.",
        ),
        (
            "Do freelancers charge VAT on invoices?",
            "Freelancers charge VAT on invoices unless they use the small-business exemption.",
        ),
    ],
    "travel": [
        (
            "Which train pass is best for Italy?",
            "A regional train pass suits Italy if you hop between nearby towns.",
        ),
        (
            "Do I need a visa for Japan?",
            "Many passports get 90 visa-free days in Japan; check your passport's rules.",
        ),
        (
            "How do I pack light for two weeks of travel?",
            "Pack light: three outfits, laundry stops and one pair of travel shoes.",
        ),
        (
            "Are hostels safe for solo travel?",
            "Most hostels are safe for solo travel; use lockers and read recent reviews.",
        ),
        (
            "How do I plan a travel itinerary without rushing?",
            "Plan two nights minimum per stop and leave a free day in the itinerary.",
        ),
        (
            "What travel budget per day for Portugal?",
            "Budget about 70 euros a day in Portugal for hostels, food and trains.",
        ),
    ],
}


def filler(n_exchanges: int, seed: int = 7) -> list[tuple[str, str]]:
    """Deterministic conversation in runs of a few exchanges per subject (so topics form)."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    names = sorted(SUBJECTS)
    while len(out) < n_exchanges:
        s = rng.choice(names)
        out += rng.sample(SUBJECTS[s], rng.randint(2, 4))
    return out[:n_exchanges]


def subject_of(text: str) -> str | None:
    """Which filler subject a line came from (None for scenario lines)."""
    for name, pairs in SUBJECTS.items():
        if any(text in pair for pair in pairs):
            return name
    return None


def branchy(store):
    """Write-time joins off (`topic_join_threshold` above any cosine): every return to a subject
    opens a new branch, as in a store written before them or by two clones, for `ct reorganize`."""
    from memstore.store import Store

    toml = store.root / "memstore.toml"
    toml.write_text(
        toml.read_text().replace("[settings]", "[settings]\ntopic_join_threshold = 1", 1)
    )
    store.git.run("add", "memstore.toml")
    store.git.run("commit", "-q", "-m", "No write-time joins")
    return Store(store.root)


def converse(
    store,
    exchanges,
    start: str = "2026-11-01T09:00:00",
    step_minutes: int = 5,
    session: str = "main",
    batch: int = 20,
) -> list[list[str]]:
    """Write exchanges as user+assistant records, `batch` exchanges per commit; returns ids per exchange."""
    t = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
    recs, ids = [], []
    for user, reply in exchanges:
        pair = [
            store.normalize({"ts": t.isoformat(), "role": "user", "text": user, "session": session})
        ]
        t += timedelta(minutes=step_minutes)
        if reply:
            pair.append(
                store.normalize(
                    {"ts": t.isoformat(), "role": "assistant", "text": reply, "session": session}
                )
            )
            t += timedelta(minutes=step_minutes)
        ids.append([r["id"] for r in pair])
        recs += pair
    per = 2 * batch
    for i in range(0, len(recs), per):
        # secrets="allow": the scenarios hold a wifi password on purpose (NEEDLE), which the write
        # path would otherwise refuse as a credential, rightly
        store.write(recs[i : i + per], f"Add turns {i}..{i + per}", secrets="allow")
    return ids
