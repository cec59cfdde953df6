"""Hand-written text for ``hf-ext bench keystone`` (English written for this benchmark, not a data set).

* ``PROBE_GROUPS``: 5 disjoint groups of 4 probe prompts (knowledge, math, code, reasoning); group 0
  is the probe.
* ``HELDOUT``: 8 evaluation texts, 2 per domain, disjoint from every probe prompt.
* ``GREEDY``: 3 prompts for greedy continuations.
* ``GIBBERISH``: 4 word-salad prompts (a discovery control: prompts without any capability).
* :func:`invented_facts`: 64 invented "capital of" facts with paraphrases (synthetic, seeded, fixed).
* :func:`format_examples`: a format skill, items rendered as a one-line JSON object (synthetic, seeded).
"""

from __future__ import annotations

import random

DOMAINS = ("knowledge", "math", "code", "reasoning")

PROBE_GROUPS: tuple[dict[str, str], ...] = (
    {
        "knowledge": "The Eiffel Tower is located in Paris, the capital of France. It was completed in 1889.",
        "math": (
            "What is 12 times 7? First multiply 10 by 7 to get 70, then 2 by 7 to get 14, so the answer is "
            "84."
        ),
        "code": "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
        "reasoning": (
            "Alice is taller than Bob, and Bob is taller than Carol. Therefore Alice is taller than Carol."
        ),
    },
    {
        "knowledge": (
            "Mount Everest, on the border of Nepal and China, is the highest mountain above sea level."
        ),
        "math": "The area of a rectangle with sides 6 and 9 is 6 times 9, which equals 54 square units.",
        "code": "for i in range(3):\n    print(i * i)",
        "reasoning": "Every bird in the cage is a parrot. Polly is in the cage, so Polly must be a parrot.",
    },
    {
        "knowledge": "Water boils at 100 degrees Celsius at sea level. The chemical formula of water is H2O.",
        "math": "If a train travels 60 kilometres per hour for 3 hours, it covers 180 kilometres in total.",
        "code": "numbers = [4, 8, 15]\ntotal = sum(numbers)\nprint(total / len(numbers))",
        "reasoning": "If it rains, the ground gets wet. The ground is dry, so it did not rain this morning.",
    },
    {
        "knowledge": (
            "William Shakespeare wrote Hamlet and Macbeth. He was born in Stratford-upon-Avon in 1564."
        ),
        "math": "Half of 250 is 125, and a quarter of 250 is 62.5, so three quarters of 250 is 187.5.",
        "code": "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y",
        "reasoning": (
            "Sam always takes the bus when his bike is broken. Today Sam rode his bike, so it is not broken."
        ),
    },
    {
        "knowledge": (
            "The Pacific Ocean is the largest ocean on Earth and lies between Asia and the Americas."
        ),
        "math": (
            "The sum of the angles in a triangle is 180 degrees, so if two angles are 50 and 60 the third "
            "is 70."
        ),
        "code": "import math\nradius = 2.0\nprint(math.pi * radius ** 2)",
        "reasoning": (
            "Only members may enter the library after six. Dana entered at seven, so Dana is a member."
        ),
    },
)

HELDOUT: dict[str, tuple[str, str]] = {
    "knowledge": (
        "The Amazon river flows through Brazil and carries more water than any other river on Earth. "
        "Its basin "
        "covers about seven million square kilometres of rainforest.",
        "The Great Wall of China was built over many centuries to protect northern borders. Much of the "
        "wall that "
        "survives today dates from the Ming dynasty.",
    ),
    "math": (
        "To solve 3x + 7 = 22, subtract 7 from both sides to get 3x = 15, then divide both sides by 3 "
        "to find x = 5.",
        "A shop sells pencils at 40 cents each. Five pencils cost 200 cents, which is two dollars, and "
        "ten pencils "
        "cost four dollars.",
    ),
    "code": (
        "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
        "def is_even(value):\n    return value % 2 == 0\n\nevens = [x for x in range(10) if is_even(x)]\n",
    ),
    "reasoning": (
        "If all cats are mammals and Tom is a cat, then Tom is a mammal. This is an example of a valid "
        "syllogism.",
        "The meeting is either on Monday or Tuesday. It is not on Monday, so the meeting must be on Tuesday.",
    ),
}

GREEDY = (
    "The capital of France is",
    "def square(x):\n    return",
    "Two plus three equals",
)

GIBBERISH: dict[str, str] = {
    "salad 1": "Purple seventeen quietly the under banana whose ladder sings of with onto umbrella nine.",
    "salad 2": "Although carpet yesterday forty the candle hums beneath of sideways teapot whom marble.",
    "salad 3": "Orbit mustard twelve and the whenever pillow frantic into lantern of maybe saxophone dust.",
    "salad 4": "Velvet because eleven penguin the across fog whistle of elbow quickly sofa tomorrow grain.",
}

_ITEMS = tuple(
    "apple bucket candle drum engine feather guitar hammer igloo jacket kettle lemon magnet needle "
    "orange pencil quilt rocket saddle tomato umbrella violin wagon yarn zipper anchor basket "
    "carrot donkey eagle falcon garlic helmet island jungle kitten ladder mirror napkin oyster "
    "parrot rabbit spoon tunnel velvet walnut button cactus".split()
)

_SYLLABLES = (
    "zor",
    "quel",
    "mar",
    "bri",
    "tan",
    "vel",
    "dor",
    "shi",
    "lun",
    "kap",
    "rho",
    "nex",
    "fal",
    "gri",
    "mo",
)


def invented_facts(n: int = 64) -> list[dict[str, str]]:
    """``n`` invented facts ``{"country", "city", "prompt", "answer", "paraphrase"}``; fixed (seed 1234),
    unique names.

    The model must complete ``prompt`` (``"The capital of Zorbia is"``) with ``answer`` (``" Quelmar."``); the
    paraphrase asks the same fact as ``"Zorbia's capital city is"``.
    """
    rng = random.Random(1234)
    names: set[str] = set()
    facts: list[dict[str, str]] = []
    while len(facts) < n:
        country = "".join(rng.sample(_SYLLABLES, 2)).capitalize() + rng.choice(("ia", "land", "ora"))
        city = "".join(rng.sample(_SYLLABLES, 2)).capitalize() + rng.choice(("ar", "ville", "on"))
        if country in names or city in names:
            continue
        names |= {country, city}
        facts.append(
            {
                "country": country,
                "city": city,
                "prompt": f"The capital of {country} is",
                "answer": f" {city}.",
                "paraphrase": f"{country}'s capital city is",
            }
        )
    return facts


def format_examples(n: int = 48, seed: int = 4321) -> list[dict[str, str]]:
    """``n`` examples of a format skill: ``"Item: lemon, 7\nJSON:"`` -> ``' {"item": "lemon", "count": 7}'``.

    Distinct items (at most 48), counts drawn in ``[2, 99]``; the model must learn the output format, so
    unseen items test the skill rather than memory.
    """
    rng = random.Random(seed)
    items = rng.sample(_ITEMS, n)
    out = []
    for item in items:
        count = rng.randint(2, 99)
        out.append(
            {"prompt": f"Item: {item}, {count}\nJSON:", "answer": f' {{"item": "{item}", "count": {count}}}'}
        )
    return out
