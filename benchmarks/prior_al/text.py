"""A small hand-written topic set for the text setting: five topics, 48 sentences each.

Each sentence joins one of eight hand-written openings of its topic with one of six hand-written
continuations, so the set ships as a few lines of text. Scores on it are indicative only.
"""

from __future__ import annotations

import numpy as np

LABEL_TEXTS = {
    0: "sports",
    1: "computers and technology",
    2: "health and medicine",
    3: "food and cooking",
    4: "money and finance",
}

_OPENINGS = {
    0: (
        "The striker scored twice in the second half",
        "Our team lost the final on penalties",
        "The marathon runner set a new course record",
        "The coach changed the starting lineup",
        "The tennis match went to a fifth set",
        "Fans filled the stadium for the derby",
        "The goalkeeper saved three shots",
        "The cycling team won the mountain stage",
    ),
    1: (
        "The new laptop ships with a faster processor",
        "Engineers released a patch for the operating system",
        "The app crashed after the latest update",
        "Our servers moved to a cloud provider",
        "The startup trained a larger language model",
        "The phone's battery drains when the screen is on",
        "Developers rewrote the database driver",
        "The router firmware fixed a security hole",
    ),
    2: (
        "The doctor prescribed antibiotics for the infection",
        "Nurses monitored the patient's blood pressure",
        "The vaccine trial enrolled thousands of volunteers",
        "Regular exercise lowers the risk of heart disease",
        "The clinic offers free flu shots",
        "Surgeons repaired the torn ligament",
        "The study linked poor sleep to depression",
        "Pharmacists warned about the drug interaction",
    ),
    3: (
        "Simmer the onions until they turn golden",
        "The bakery sells sourdough every morning",
        "She seasoned the soup with fresh thyme",
        "The recipe needs two cups of flour",
        "Grill the salmon skin side down",
        "The chef plated the dessert with berries",
        "Roast the vegetables in a hot oven",
        "Our dinner started with a tomato salad",
    ),
    4: (
        "The central bank raised interest rates",
        "Shares fell after the earnings report",
        "The company issued new bonds to investors",
        "Inflation eroded household savings",
        "The fund rebalanced its stock portfolio",
        "Mortgage payments rose for many homeowners",
        "The bank approved the small business loan",
        "Quarterly revenue beat analyst forecasts",
    ),
}

_CONTINUATIONS = {
    0: (
        "and the crowd cheered.",
        "before the league table changed.",
        "according to the match report.",
        "in front of a sold-out arena.",
        "during the championship season.",
        "and the players celebrated.",
    ),
    1: (
        "and users noticed the change.",
        "according to the release notes.",
        "after months of software testing.",
        "so the code now runs faster.",
        "while the network stayed online.",
        "and the tech press covered it.",
    ),
    2: (
        "at the regional hospital.",
        "according to the medical journal.",
        "and symptoms improved within days.",
        "under supervision of a physician.",
        "as part of routine patient care.",
        "to prevent further illness.",
    ),
    3: (
        "and serve it warm.",
        "with a pinch of salt.",
        "before adding the butter.",
        "for a family dinner.",
        "until the kitchen smelled wonderful.",
        "and taste as you go.",
    ),
    4: (
        "as markets reacted.",
        "according to the financial statement.",
        "and investors took notice.",
        "amid concerns about the economy.",
        "while the dollar weakened.",
        "ahead of the tax deadline.",
    ),
}


def topic_sentences() -> tuple[list[str], np.ndarray]:
    """``(sentences, labels)``: 240 sentences, 48 per topic, labels ``0..4`` in :data:`LABEL_TEXTS`."""
    texts, labels = [], []
    for c in LABEL_TEXTS:
        for opening in _OPENINGS[c]:
            for cont in _CONTINUATIONS[c]:
                texts.append(f"{opening} {cont}")
                labels.append(c)
    return texts, np.asarray(labels)
