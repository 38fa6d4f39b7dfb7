"""The closed vocabulary of the synthetic sets: a few dozen short words per kind.

Small and fixed on purpose, so a tiny model trained on the `train` split can learn every word and
every template. Changing any list changes the generated items: bump `GENERATOR_VERSION` with it.
"""

from __future__ import annotations


def a(word: str) -> str:
    """The word with its indefinite article ("a pear", "an owl")."""
    return f"{'an' if word[0].lower() in 'aeiou' else 'a'} {word}"

#: Saturated colours that stay distinct on a white background at 64x64 pixels.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 20, 20),
    "green": (0, 160, 0),
    "blue": (0, 70, 230),
    "yellow": (240, 210, 0),
    "orange": (255, 128, 0),
    "purple": (130, 0, 200),
    "pink": (255, 100, 190),
    "black": (0, 0, 0),
}

#: Shapes with clearly different silhouettes (see `draw.py`).
SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "diamond", "cross")

NAMES: tuple[str, ...] = (
    "Ana", "Ben", "Cara", "Dan", "Eva", "Finn", "Gus", "Hana", "Ivo", "Jon", "Kai", "Lea",
    "Max", "Nia", "Omar", "Pia", "Raj", "Sam", "Tom", "Uma", "Vic", "Wes", "Yan", "Zoe",
)

CITIES: tuple[str, ...] = (
    "Oslo", "Rome", "Lima", "Kyiv", "Doha", "Bern", "Riga", "Baku",
    "Cairo", "Delhi", "Dakar", "Hanoi", "Lagos", "Quito", "Seoul", "Tunis",
)

JOBS: tuple[str, ...] = (
    "baker", "pilot", "nurse", "farmer", "judge", "chef",
    "actor", "miner", "tailor", "singer", "driver", "painter",
)

#: Words grouped by category: the text MCQ asks for a category member, few-shot codes categories.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "animal": ("cat", "dog", "fox", "owl", "cow", "pig", "hen", "bee", "frog", "duck", "goat", "bear"),
    "fruit": ("apple", "pear", "plum", "fig", "lime", "kiwi", "mango", "peach", "grape", "lemon", "melon",
              "cherry"),
    "tool": ("hammer", "saw", "drill", "wrench", "spade", "axe", "chisel", "rake", "pliers", "file"),
    "vehicle": ("car", "bus", "bike", "train", "boat", "plane", "truck", "tram", "ship", "van"),
}

ANIMALS = CATEGORIES["animal"]
FRUITS = CATEGORIES["fruit"]

#: Small things people own or put somewhere.
OBJECTS: tuple[str, ...] = (
    "ball", "book", "cup", "hat", "kite", "lamp", "pen", "ring",
    "shoe", "key", "coin", "drum", "sock", "bell", "map", "comb",
)

CONTAINERS: tuple[str, ...] = (
    "box", "bag", "drawer", "basket", "jar", "bowl", "case", "chest", "pocket", "tin", "crate", "shelf",
)

#: Made-up labels for the few-shot set (no prior meaning, so only the demonstrations define them).
CODEWORDS: tuple[str, ...] = (
    "zorp", "blick", "mave", "tull", "quix", "drem", "pell", "sork", "vint", "gorn", "lunt", "wemp",
)
