"""What the gate says about a comparison, for ``compare`` and ``ab`` alike: the summary lines
(verdict counts; the rule, level and what held; the noise the intervals rest on) and the
reasons ``--fail-on-regression`` fails. Text from data; no torch."""

from __future__ import annotations

from commbench.compare.familywise import Gate
from commbench.compare.noise import noise_line
from commbench.compare.runs import Comparison


def summary_lines(result: Comparison, threshold: float, metric: str, gate: Gate,
                  source: str | None, noise: str | None = None,
                  floor: float | None = None) -> list[str]:
    """One line each: the verdict counts and gaps, the gate, the noise (``noise``: what the
    intervals rest on where it is not a history store, as ab's paired launches; ``floor``:
    noise.holds_from's figure where a history store was used)."""
    counts = result.counts()
    text = (f"{counts['slower']} slower, {counts['faster']} faster, {counts['noisy']} noisy, "
            f"{counts['same']} same (threshold {threshold:.0%}, metric {metric})")
    gaps = []
    if result.apart:
        gaps.append(f"{len(result.apart)} kind(s) of rows kept apart")
    if result.missing:
        gaps.append(f"{len(result.missing)} series with sizes missing")
    if result.incomplete:
        gaps.append("; ".join(result.incomplete))
    text += f"; {'; '.join(gaps)}" if gaps else ""
    return [text, gate.line(), noise or noise_line(result.frame, source, floor)]


def gate_failures(result: Comparison, gate: Gate, allow_partial: bool) -> list[str]:
    """Why --fail-on-regression fails this comparison (none: it passes)."""
    reasons = []
    if gate.slower:
        reasons.append(f"{gate.slower} row(s) slower after {gate.rule}'s correction over "
                       f"{gate.rows} row(s) at alpha {gate.alpha * 100:g}%")
    if result.incomplete and not allow_partial:
        reasons.append(f"{'; '.join(result.incomplete)}: a partial or failed run cannot "
                       "pass the gate (add --allow-partial to accept it)")
    # A gap is no pass: rows kept apart were not compared, and sizes one side lacks were
    # not measured (in a partial run that --allow-partial accepts, lacking is expected).
    if result.apart:
        reasons.append(f"{len(result.apart)} row group(s) kept apart, not compared")
    if result.missing and not (allow_partial and result.incomplete):
        reasons.append(f"{len(result.missing)} series lack sizes the other run has")
    return reasons
