"""maxCostPerDay (CONTRACT §16.4): a cron webhook's daily cost limits, checked. Pure.

Units follow the names answers may report (§16.1: 1-64 characters of [A-Za-z0-9_.:-]),
each at most once — two limits of one unit would leave which one holds to chance — and
at most 32 of them, as many units as an answer may report. Amounts are more than 0: a
limit of 0 would be a pause in disguise (pause is `enabled`), as for maxDeliveriesPerDay.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cronhooks_admin.errors import InputError
from cronhooks_common.events import CostAmountData

FIELD = "maxCostPerDay"
MAX_LIMITS = 32
UNIT = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def check_cost_limits(limits: Sequence[Mapping[str, Any]]) -> list[CostAmountData]:
    """The limits as given (`[{unit, amount}]`, in their order), or InputError naming the
    field and the offending entry."""
    if len(limits) > MAX_LIMITS:
        raise InputError(FIELD, f"at most {MAX_LIMITS} units")
    seen: set[str] = set()
    out: list[CostAmountData] = []
    for i, limit in enumerate(limits):
        unit, amount = limit["unit"], float(limit["amount"])
        if not UNIT.fullmatch(unit):
            raise InputError(FIELD, f"[{i}]: unit names are 1-64 characters of [A-Za-z0-9_.:-]")
        if unit in seen:
            raise InputError(FIELD, f"[{i}]: unit {unit!r} appears twice")
        if not math.isfinite(amount) or amount <= 0:
            raise InputError(FIELD, f"[{i}]: amount must be more than 0")
        seen.add(unit)
        out.append({"unit": unit, "amount": amount})
    return out
