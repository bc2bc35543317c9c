"""`commbench model`'s PS section: the PS fit in the issue's terms beside allreduce's fit over
the same workers, and the crossover size (model/ps.py), as console lines."""

from __future__ import annotations

import math

from commbench.output.tables import Column, render

COLUMNS = [
    Column("curve", left=True), Column("sizes", left=True), Column("alpha", "us"),
    Column("beta", "GB/s"), Column("fit", left=True),
]
_UNITS = (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10))


def approx_size(nbytes: float) -> str:
    """A size between powers of two, in 3 significant digits: '191K', '1.5M', '700'."""
    for unit, scale in _UNITS:
        if nbytes >= scale:
            return f"{nbytes / scale:.3g}{unit}"
    return f"{nbytes:.3g}"


def _size(nbytes: int) -> str:
    from commbench.core.sizes import format_size

    return format_size(int(nbytes))


def _number(value: float, digits: int) -> str:
    return "inf" if math.isinf(value) else f"{value:.{digits}f}"


def _fit_word(usable: bool, note: str) -> str:
    if not usable:
        return f"no usable fit ({note})"
    return "latency only" if note == "latency only" else "alpha-beta"


def _rows(pair) -> list[list[str]]:
    rows = []
    for segment in pair.ps_segments():
        usable = segment.usable
        rows.append([pair.ps_label, f"{_size(segment.size_lo)}-{_size(segment.size_hi)}",
                     _number(segment.alpha_us, 2) if usable else "-",
                     _number(segment.beta_gbps, 3) if usable else "-",
                     _fit_word(usable, segment.note)])
    for segment in pair.baseline.segments:
        usable = segment.usable
        rows.append([pair.baseline_label,
                     f"{_size(segment.size_lo)}-{_size(segment.size_hi)}",
                     _number(segment.alpha_us, 2) if usable else "-",
                     _number(segment.beta_gbps, 3) if usable else "-",
                     _fit_word(usable, segment.note)])
    return rows


def verdict_lines(pair) -> list[str]:
    """The crossover sentence(s), each with the measured medians that bear on it."""
    lo, hi = approx_size(pair.search_lo), approx_size(pair.search_hi)
    flips = "; ".join(f"measured {flip.ratio_lo:.2f}x at {_size(flip.size_lo)}, "
                      f"{flip.ratio_hi:.2f}x at {_size(flip.size_hi)}" for flip in pair.flips)
    lines = []
    for crossing in pair.crossovers:
        if not crossing.usable:  # a size read off a line that explains nothing is no answer
            lines.append(f"no crossover claimed near {approx_size(crossing.size_bytes)}: a fit "
                         "there is no usable fit (trust the measured ratios below)")
            continue
        where = ("" if crossing.measured else ", beyond the measured sizes")
        how = " (where a fit changes segment)" if crossing.at_cut else ""
        lines.append(f"crossover at {approx_size(crossing.size_bytes)} "
                     f"({crossing.size_bytes:.0f} B){how}{where}: "
                     f"{crossing.faster_below} faster below, {crossing.faster_above} "
                     "faster above")
    if not pair.crossovers:
        first = pair.ps.time_us(pair.search_lo) < pair.baseline.time_us(pair.search_lo)
        faster, slower = ((pair.ps_label, pair.baseline_label) if first
                          else (pair.baseline_label, pair.ps_label))
        unusable = [label for label, fit in ((pair.ps_label, pair.ps),
                                             (pair.baseline_label, pair.baseline))
                    if not all(segment.usable for segment in fit.segments)]
        doubt = (f" (but {' and '.join(unusable)} {'has' if len(unusable) == 1 else 'have'} "
                 "a segment with no usable fit: trust the measured ratios below)"
                 if unusable else "")
        lines.append(f"no crossover between {lo} and {hi}: {faster} is faster than {slower} "
                     f"at every size the fits cover{doubt}")
    ratios = [t / b for s, t, b in _common(pair)]
    if ratios:
        lines.append(f"(ratio of measured medians, {pair.ps_label} / {pair.baseline_label}: "
                     f"{min(ratios):.2f}x-{max(ratios):.2f}x"
                     + (f"; {flips}" if flips else "; no change of side between sizes")
                     + ")")
    return lines


def _common(pair) -> list[tuple[int, float, float]]:
    times = dict(zip(pair.baseline.sizes, pair.baseline.times_us, strict=True))
    return [(s, t, times[s]) for s, t in zip(pair.ps.sizes, pair.ps.times_us, strict=True)
            if s in times and times[s] > 0]


def beside_lines(pairs: list, width: int | None = None) -> list[str]:
    """A title, the two fits and the verdict per PS curve with a baseline."""
    lines: list[str] = []
    for pair in pairs:
        key = pair.ps.key
        lines += [
            "",
            f"# {pair.ps_label} beside {pair.baseline_label} over the same {pair.workers} "
            f"workers ({key.backend} {key.dtype}, {pair.servers} server(s)): "
            f"{pair.ps_label} t = 2 alpha + max(n, W n/S) / beta (= 2 alpha + "
            f"{pair.load_factor:g} n / beta; beta includes the servers' sums)",
            *render(COLUMNS, _rows(pair), width),
            *verdict_lines(pair),
        ]
    return lines
