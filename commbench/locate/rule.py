"""The rule a locate run applied, as it applied it (docs/commands/locate.md, "How it decides"):
the pooled z a ``bad`` needed (3.5 raised for the candidate-metrics judged), the min-effect
line per metric and where each came from, and the z a ``slow`` needed. One value, made by the
decision (locate.confirmation.judge) and read by every place that states it (the headline,
summary.md, run.json, --json, every evidence line), so that what is said is what was used: a
headline that quoted a constant said 3.5 while the decision asked 3.9 at 20 candidates.
Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from commbench.locate.noise import LINE_METRICS, Line

# Where a metric's min-effect line came from, in the words run.json and --json use.
SOURCES = {"given": "given", "noise": "noise", "floor": "floor", "cap": "cap"}


@dataclass(frozen=True)
class Rule:
    """What decided: ``z`` (the pooled z a ``bad`` needs) raised for ``candidates``
    candidate-metrics; ``line``, the min-effect per metric with its source; ``slow_z`` raised
    for ``screened`` (the candidate-metrics and every other entity's metrics, each a chance
    for a clean fleet to list one ``slow``)."""

    z: float
    candidates: int
    line: Line
    slow_z: float
    screened: int

    def source(self, metric: str) -> str:
        return self.line.source(metric)

    def as_dict(self) -> dict:
        """run.json's and --json's ``rule``: {"z": 3.9, "candidates": 20, "min_effect":
        {"busbw": 0.18, "lat": 0.3}, "min_effect_from": {"busbw": "noise", "lat": "cap"},
        "slow_z": 4.2, "screened": 38}."""
        return {"z": round(self.z, 2), "candidates": self.candidates,
                "min_effect": {m: round(getattr(self.line, m), 4) for m in LINE_METRICS},
                "min_effect_from": {m: self.source(m) for m in LINE_METRICS},
                "slow_z": round(self.slow_z, 2), "screened": self.screened}

    def z_words(self) -> str:
        """'z 3.9 (3.5 raised for 20 candidate-metrics)', or 'z 3.5 (3 candidate-metrics)'
        where nothing raised it."""
        return f"z {self.z:.1f} ({_raised(self.z, self.candidates, 'candidate-metric')})"

    def line_words(self) -> str:
        """'busbw 18% (noise) / latency 30% (cap)', or '30% (cap)' where both agree."""
        busbw, lat = self.line.busbw, self.line.lat
        if f"{busbw:.0%}" == f"{lat:.0%}" and self.source("busbw") == self.source("lat"):
            return f"{busbw:.0%} ({self.source('busbw')})"
        return (f"busbw {busbw:.0%} ({self.source('busbw')}) / latency {lat:.0%} "
                f"({self.source('lat')})")

    def words(self) -> str:
        """The whole rule in one line (the console's '# rule:' line, summary.md)."""
        return (f"bad = pooled effect at least the min-effect line ({self.line_words()}) and "
                f"pooled {self.z_words()}; slow = pooled z {self.slow_z:.1f} "
                f"({_raised(self.slow_z, self.screened, 'entity-metric')}) under that line")


def _raised(z: float, count: int, what: str) -> str:
    from commbench.locate.attribution import Z_LIMIT

    plural = "" if count == 1 else "s"
    if z > Z_LIMIT + 1e-9:
        return f"{Z_LIMIT:g} raised for {count} {what}{plural}"
    return f"{count} {what}{plural}"
