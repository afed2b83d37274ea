"""One seeded "world" per bundle: the people, organisations, dates and figures that recur across its files.

Every random choice derives from ``sub_seed(task_id, seed, *parts)`` (SHA-256, never Python's ``hash()``), so the
same (task, seed) always gives the same world. Faker en_US and zh_CN are seeded with ``Faker.seed_instance``.
"""

from __future__ import annotations

import hashlib
import random
import string
from datetime import date, datetime, timedelta

from faker import Faker


def sub_seed(*parts: object) -> int:
    """A stable 63-bit seed from any parts (SHA-256 of their ``repr`` joined by '|')."""
    digest = hashlib.sha256("|".join(repr(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


#: Real listed companies the finance scenarios track (T-16 prompt names TSMC, Sea Ltd, Intel; ref §6.3).
TECH_TICKERS = [("TSMC", "Taiwan Semiconductor Manufacturing", "TSM"), ("Intel", "Intel Corporation", "INTC"),
                ("SeaLtd", "Sea Limited", "SE"), ("Nvidia", "NVIDIA Corporation", "NVDA"),
                ("AMD", "Advanced Micro Devices", "AMD"), ("Microsoft", "Microsoft Corporation", "MSFT")]


class World:
    """Entities of one bundle.

    Attributes: owner (the workspace owner's name), people (8 recurring names), companies (6 fictional firms),
    clients (5), tickers (3–4 tracked listed companies), start (a date in 2024 the timeline starts from),
    city, firm (the owner's employer), language ("en" | "zh" | "mixed").
    """

    def __init__(self, task_id: str, seed: int, language: str = "en"):
        self.task_id, self.seed, self.language = task_id, seed, language
        self.rng = random.Random(sub_seed(task_id, seed, "world"))
        self.fake = Faker("en_US")
        self.fake.seed_instance(sub_seed(task_id, seed, "faker-en"))
        self.fake_zh = Faker("zh_CN")
        self.fake_zh.seed_instance(sub_seed(task_id, seed, "faker-zh"))
        names = _unique(lambda: self.fake.name(), 10)
        zh_names = _unique(lambda: self.fake_zh.name(), 6)
        self.owner = zh_names[0] if language == "zh" else names[0]
        self.owner_en = names[0]
        self.people = names[1:9]
        self.zh_people = zh_names[1:]
        self.companies = _unique(lambda: self.fake.company(), 6)
        self.clients = names[5:10]
        self.firm = self.fake.company() + (" Capital" if self.rng.random() < 0.5 else " Partners")
        self.city = self.fake.city()
        self.start = date(2024, self.rng.randint(1, 9), self.rng.randint(1, 28))
        self.tickers = self.rng.sample(TECH_TICKERS[:3], 3) + self.rng.sample(TECH_TICKERS[3:], 1)
        self.case_numbers = [f"{self.rng.choice(['FAM', 'CR', 'CIV'])}-{2024}-{self.rng.randint(1000, 9999)}"
                             for _ in range(5)]

    # ------------------------------------------------------------------ helpers
    def day(self, offset: int) -> date:
        return self.start + timedelta(days=offset)

    def when(self, offset: int, hour: int = 9, minute: int = 0) -> datetime:
        return datetime.combine(self.day(offset), datetime.min.time()).replace(hour=hour, minute=minute)

    def email(self, name: str, domain: str | None = None) -> str:
        local = "".join(c for c in name.lower().replace(" ", ".") if c in string.ascii_lowercase + ".")
        return f"{local or 'user'}@{domain or 'example.com'}"

    def pick(self, seq, rng: random.Random | None = None):
        return (rng or self.rng).choice(list(seq))

    def money(self, rng: random.Random, lo: float, hi: float, unit: str = "M") -> str:
        return f"${rng.uniform(lo, hi):,.1f}{unit}"


def _unique(make, n: int) -> list[str]:
    out: list[str] = []
    for _ in range(n * 20):
        v = make()
        if v not in out:
            out.append(v)
        if len(out) == n:
            break
    return out
