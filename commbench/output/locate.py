"""locate's text and pictures: the suspects table on the console, summary.md, and every file
of a finished run (``write_files``: the CSV tables through results.locate, the heatmaps, the
host lists). Data in (locate.findings' rows), text or files out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from commbench.output.console import make_console
from commbench.output.markdown import markdown_table

SUSPECT_HEADERS = ["verdict", "entity", "hosts", "ranks", "busbw", "latency", "evidence"]


def _ratio(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}x"


def suspect_cells(suspects: Sequence[dict]) -> list[list[str]]:
    return [[s["verdict"], s["entity"], ",".join(s["hosts"]),
             ",".join(map(str, s["ranks"])), _ratio(s["busbw_ratio"]), _ratio(s["lat_ratio"]),
             s["evidence"]] for s in suspects]


def console_lines(suspects: Sequence[dict], transient: Sequence[dict], head: dict,
                  slow: Sequence[dict] = ()) -> list[str]:
    """What the console shows: the run in one line, the rule it applied, then each suspect
    (and each ``slow`` entity) with its evidence."""
    lines = [f"# locate: {fleet_words(head)}, {head['pairs']} pairs in "
             f"{head['rounds']} rounds (+{head['confirm_rounds']} confirmation), "
             f"busbw at {head['large']}, latency at {head['small']}"
             + (f", under {head['leaves']} leaf switches (--topology)" if head.get("leaves")
                else "")]
    if head.get("min_effect_line"):
        lines.append(f"# min effect: {head['min_effect_line']}")
    if head.get("rule"):
        lines.append(f"# rule: {head['rule']}")
    verdict = headline(suspects, transient, head, slow)
    if verdict:
        lines.append(f"# {verdict}")
    for s in suspects:
        lines.append(f"{s['verdict']:<12} {s['evidence']}")
    for s in slow:
        lines.append(f"{'slow':<12} {s['evidence']}")
    for s in transient:
        lines.append(f"{'transient':<12} {s['evidence']} (did not reproduce)")
    return lines


def fleet_words(head: dict) -> str:
    """The fleet in words that fit the run: gpu-level entities of a CPU run (gloo) are its
    ranks ("4 ranks", not "4 gpu entities"); else "<n> <level> entities"."""
    n = head["entities"]
    if head["level"] == "gpu" and head.get("backend") != "nccl":
        return f"{n} rank{'' if n == 1 else 's'}"
    return f"{n} {head['level']} entit{'y' if n == 1 else 'ies'}"


def headline(suspects: Sequence[dict], transient: Sequence[dict], head: dict,
             slow: Sequence[dict] = ()) -> str:
    """The verdict in words when no suspect line says it: nothing measured is no verdict;
    transients are named as such (they exceeded the bounds once), ``slow`` entities too
    (never "no suspect" while one stands); the bounds quoted are the ones the decision used
    (``head``: min_effect, z_limit and the candidates it was raised for, from the run's
    locate.rule.Rule). Empty when suspects speak."""
    if not head.get("measured_pairs", head.get("pairs")):
        return (f"nothing measured: {head['pairs']} pairs in {head['rounds']} rounds, so no "
                "verdict (this is not 'no suspect')")
    if suspects:
        return ""
    scope = ("" if head.get("status", "complete") == "complete"
             else f" among the {head['measured_pairs']} pairs measured before the run stopped")
    bound = _z_bound(head)
    if slow:
        named = ", ".join(s["entity"] for s in slow)
        found = (f"no bad entity or link{scope}; {len(slow)} slow: {named} (beyond "
                 f"{head.get('slow_z', head['z_limit']):.1f} z on its measurements, under the "
                 "min-effect line)")
        if transient:
            found += f"; {len(transient)} transient (did not reproduce on retest)"
        return found
    if transient:
        return (f"no confirmed suspect{scope}; {len(transient)} transient (slow in the matrix, "
                "did not reproduce on retest)")
    return (f"no suspect{scope}: no entity or link at least {_share(head['min_effect'])} "
            f"slower and {bound} below the fleet on its pooled evidence")


def _z_bound(head: dict) -> str:
    """'3.9 z (3.5 raised for 20 candidate-metrics)', the z the decision used; without the
    count (an older head): '3.5 z'."""
    z = head["z_limit"]
    if "candidates" not in head:
        return f"{z:g} z"
    from commbench.locate.rule import _raised

    return f"{z:.1f} z ({_raised(z, head['candidates'], 'candidate-metric')})"


def _share(value) -> str:
    """--min-effect as the command quoted it (per metric), or a plain share."""
    return f"{value:.0%}" if isinstance(value, float) else str(value)


def summary_markdown(suspects: Sequence[dict], transient: Sequence[dict], head: dict,
                     entity_rows: Sequence[dict], meta: dict, slow: Sequence[dict] = ()) -> str:
    """summary.md: the run, the rule it applied, the suspects table, the slow ones, then
    every entity."""
    versions = meta.get("versions", {})
    fleet = fleet_words(head)
    world = "" if fleet.endswith(("rank", "ranks")) else f"{meta.get('world_size', '?')} ranks, "
    parts = ["# commbench locate", "",
             f"{fleet} on {meta.get('nnodes', '?')} node(s) "
             f"({world}{head['backend']}), {head['pairs']} pairs "
             f"in {head['rounds']} rounds + {head['confirm_rounds']} confirmation round(s); "
             f"busbw: bidirectional p2p at {head['large']}, latency: at {head['small']}; "
             f"torch {versions.get('torch', '?')}, status **{meta.get('status', '?')}**.",
             "",
             f"Every entity or link at least {_share(head['min_effect'])} slower than the fleet "
             "in the matrix is a candidate; candidates are retested (known-good partners, a "
             "link its own pair) until their pooled evidence settles, and called bad when the "
             f"pooled effect is at least that and {_z_bound(head)} beyond this run's "
             "noise.", ""]
    if head.get("min_effect_line"):
        parts += [f"Min effect: {head['min_effect_line']}.", ""]
    if head.get("rule"):
        parts += [f"Rule applied: {head['rule']}.", ""]
    if meta.get("error"):
        parts += [f"> error: {meta['error']}", ""]
    if suspects:
        parts += ["## Suspects", "", markdown_table(SUSPECT_HEADERS, suspect_cells(suspects)), ""]
    if slow:
        parts += ["## Slow (beyond the noise, under the min-effect line; exit 0)", "",
                  markdown_table(SUSPECT_HEADERS, suspect_cells(slow)), ""]
    verdict = headline(suspects, transient, head, slow)
    if verdict:
        parts += [f"**{verdict[0].upper()}{verdict[1:]}.**", ""]
    if transient:
        parts += ["Did not reproduce (transient):", ""]
        parts += [f"- {s['evidence']}" for s in transient] + [""]
    headers = ["entity", "hosts", "ranks", "busbw", "z", "latency", "z ", "verdict"]
    rows = [[r["entity"], r["host"], r["ranks"], _ratio(r["busbw_ratio"]),
             _z(r["busbw_z"]), _ratio(r["lat_ratio"]), _z(r["lat_z"]), r["verdict"]]
            for r in entity_rows if r["kind"] not in ("link", "switch")]
    parts += ["## Entities", "", markdown_table(headers, rows), "",
              "heatmap_busbw.png and heatmap_lat.png: every pair as a ratio to the fleet "
              "median pair.", ""]
    return "\n".join(parts)


def _z(value) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.1f}"


COMPARE_HEADERS = ["entity", "busbw before", "after", "ratio", "lat us before", "after",
                   "ratio", "before", "after", "change"]
CHANGES = ("repaired", "still bad", "new", "not measured")


def compare_cells(rows: Sequence[dict]) -> list[list[str]]:
    """The before / after rows of two locate runs as table cells (report.md, report.html)."""

    def number(value) -> str:
        return "-" if not math.isfinite(value) else f"{value:.3g}"

    return [[r["entity"], number(r["busbw_before"]), number(r["busbw_after"]),
             _ratio(r["busbw_ratio"]), number(r["lat_before"]), number(r["lat_after"]),
             _ratio(r["lat_ratio"]), r["before"], r["after"], r["change"]] for r in rows]


def compare_summary(rows: Sequence[dict], names: Sequence[str]) -> str:
    """Two locate runs in one line: what each verdict became."""
    counts = {c: sum(1 for r in rows if r["change"] == c) for c in CHANGES}
    found = ", ".join(f"{n} {c}" for c, n in counts.items() if n) or "nothing changed"
    return f"{names[1]} vs {names[0]} (locate, per entity and link): {found}"


def compare_lines(rows: Sequence[dict], paths: Sequence[str]) -> list[str]:
    """The before / after table of two locate runs, entities then links."""

    def number(value, digits=3) -> str:
        return "-" if not math.isfinite(value) else f"{value:.{digits}g}"

    lines = [f"# before: {paths[0]}", f"# after:  {paths[1]}",
             f"{'entity':<20} {'busbw before':>12} {'after':>8} {'ratio':>6} "
             f"{'lat us before':>13} {'after':>8} {'ratio':>6}  {'before':<12} {'after':<12} "
             "change"]
    for r in rows:
        lines.append(f"{r['entity']:<20} {number(r['busbw_before']):>12} "
                     f"{number(r['busbw_after']):>8} {_ratio(r['busbw_ratio']):>6} "
                     f"{number(r['lat_before']):>13} {number(r['lat_after']):>8} "
                     f"{_ratio(r['lat_ratio']):>6}  {r['before']:<12} {r['after']:<12} "
                     f"{r['change']}")
    lines.append("# busbw GB/s (fastest decile of calls), latency of the fastest call; ratio = "
                 "after / before")
    return lines


class RoundsBar:
    """locate's live progress on a terminal: rounds, pairs and an ETA, under rich (off when
    stdout is not a terminal: a log gets no redraws). On stdout, as measure's bar: a local
    rank's stderr goes through the launcher's log copier, which is no terminal.

    A sink beside the file sink, built in the command and started in rank 0 (not pickled
    live): ``planned`` adds the pairs of the rounds the ranks were handed (the main ones,
    then the confirmation), each ``pair`` counts one, a round is done when its first pair
    arrives (rank 0 hands a round's pairs together)."""

    def __init__(self, files, show: bool, console=None) -> None:
        self.files, self.show = files, show
        self._console = console
        self._bar = None
        self._task = None
        self._rounds: set[tuple[str, int]] = set()
        self._planned_rounds = 0

    def begin(self, meta: dict, *args) -> None:
        self.files.begin(meta, *args)
        if not self.show:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn("{task.description}", markup=False), BarColumn(bar_width=20),
            TextColumn("pairs", markup=False), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta", markup=False), TimeRemainingColumn(),
            console=self._console or make_console(), transient=True)
        self._bar.start()
        self._task = self._bar.add_task("locate: planning", total=None)

    def planned(self, rounds: int, pairs: int) -> None:
        self.files.planned(rounds, pairs)
        self._planned_rounds += rounds
        if self._bar is not None:
            total = (self._bar.tasks[0].total or 0) + pairs
            self._bar.update(self._task, total=max(total, 1), description=self._where())

    def pair(self, record: dict) -> None:
        self.files.pair(record)
        self._rounds.add((record.get("phase", "main"), record["round"]))
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=self._where())

    def _where(self) -> str:
        return f"locate: round {len(self._rounds)}/{self._planned_rounds}"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self.files.close()


def write_files(path: Path, found: Sequence, records: Sequence[dict], view, head: dict,
                meta: dict) -> None:
    """Every file of a finished locate run from its findings (locate.findings.Findings):
    pairs.csv, entities.csv, the matrices and heatmaps, bad-hosts.txt, good-hosts.txt and
    summary.md (docs/commands/locate.md, "Files")."""
    from commbench.locate.attribution import matrix
    from commbench.locate.findings import good_hosts, pair_result
    from commbench.locate.verdict import GROUPS, failed
    from commbench.output import heatmap
    from commbench.results import locate as files

    labels = [_label(e, found) for e in found]
    rows = []
    for r in records:
        a, b = found[r["a"]], found[r["b"]]
        rows.append({**r, "entity_a": labels[r["a"]], "entity_b": labels[r["b"]],
                     "hosts": ";".join(dict.fromkeys((*a.hosts, *b.hosts))),
                     "ranks": ";".join(f"{x}-{y}" for x, y in r["ranks"])})
    files.write_csv(path / files.PAIRS_CSV, rows, files.PAIR_COLUMNS)
    files.write_csv(path / files.ENTITIES_CSV, view.entities, files.ENTITY_COLUMNS)
    pairs = [pair_result(r) for r in records]
    n = len(found)
    for metric in files.METRICS:
        files.write_matrix(path / files.matrix_csv(metric), matrix(n, pairs, metric, False),
                           labels)
    bad_entities = sorted({i for s in view.suspects if s["kind"] not in GROUPS
                           for i in s["entities"]})
    groups = None
    if view.leaves:  # rows and columns by leaf, a suspect switch's leaf named in red
        groups = heatmap.Groups(view.leaves, frozenset(
            s["entity"] for s in view.suspects if s["kind"] == "switch"))
    links = [tuple(s["entities"]) for s in view.suspects if s["kind"] == "link"]
    titles = {"busbw": f"busbw of each pair (fastest decile of calls, {head['large']}B)",
              "lat": f"latency of each pair (fastest call, {head['small']}B)"}
    for metric, slower_high in (("busbw", False), ("lat", True)):
        if n >= 2:
            column = "busbw_ratio" if metric == "busbw" else "lat_ratio"
            heatmap.heatmap(path / files.heatmap_png(metric), matrix(n, pairs, metric),
                            labels, f"locate: {titles[metric]} / fleet median", slower_high,
                            bad_entities, links,
                            [r[column] for r in view.entities if r["kind"] not in GROUPS],
                            groups)
    files.write_hosts(path / files.BAD_HOSTS, list(dict.fromkeys(
        h for s in view.suspects if failed(s["verdict"]) for h in s["hosts"])))
    files.write_hosts(path / files.GOOD_HOSTS, good_hosts(found, view.entities, view.suspects))
    (path / "summary.md").write_text(summary_markdown(view.suspects, view.transient, head,
                                                      view.entities, meta, view.slow))


def _label(entity, found: Sequence) -> str:
    """An entity's axis label: with its host where the fleet spans several."""
    hosts = {h for e in found for h in e.hosts}
    if entity.kind == "gpu" and len(hosts) > 1:
        return f"{entity.hosts[0]}:{entity.ranks[0]}"
    return entity.name
