"""A service tunes the cyclic collector once it is up (service.tune_gc): what start-up built
is frozen out of the generations, and the youngest generation waits for 20,000 allocations.
Run in a child interpreter: freezing the test process's heap would change every later test."""

from __future__ import annotations

import json
import subprocess
import sys

from cronhooks_common.service import GC_GEN0_THRESHOLD

PROBE = """
import gc, json
from cronhooks_common.service import tune_gc
before = gc.get_freeze_count()
tune_gc()
print(json.dumps({"before": before, "frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}))
"""


def test_tune_gc_freezes_start_up_objects_and_raises_the_young_threshold() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    assert seen["before"] == 0
    # Everything imported so far (the service's modules among them) is now permanent.
    assert seen["frozen"] > 10_000
    assert seen["threshold"] == [GC_GEN0_THRESHOLD, 20, 20]
