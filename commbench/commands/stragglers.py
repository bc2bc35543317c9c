"""``commbench stragglers SOURCE...``: who made a live job wait (docs/commands/stragglers.md).

Read the trace or the dumps, match the calls, judge each rank (commbench.stragglers), print
the table or ``--json``, write the files with ``--out``. Exit 0: nobody late beyond the
noise; 1: a culprit, a transient or a missing rank; 2: usage; 3: an unreadable source.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from commbench.specs.stragglers import StragglersSpec


def run_stragglers(spec: StragglersSpec) -> int:
    from commbench import results, stragglers
    from commbench.core.errors import UsageError
    from commbench.importers.trace_source import load_source
    from commbench.output import stragglers as render
    from commbench.results import stragglers as files

    folder = files.prepare(Path(spec.out), spec.force) if spec.out else None
    trace, notes = load_source(list(spec.sources))
    if spec.group is not None and spec.group not in trace.groups:
        raise UsageError(f"--group {spec.group}: the trace has groups "
                         f"{', '.join(sorted(trace.groups))}")
    analysis = stragglers.analyse(trace, steps=spec.steps, group=spec.group)
    if spec.steps is not None and not analysis.steps and not analysis.missing:
        raise UsageError(f"--steps {spec.steps[0]}..{spec.steps[1]}: no matched call in those "
                         f"steps (the trace has steps {_span(trace.steps())})")
    doc = stragglers.to_json(analysis)
    doc["notes"] = [*notes, *doc["notes"]]
    source = " ".join(spec.sources)
    for note in doc["notes"]:
        print(f"note: {note}", file=sys.stderr)
    if spec.json_out:
        print(json.dumps(doc))
    else:
        print("\n".join(render.table_lines(doc, source)))
    if folder is not None:
        files.write(folder, doc, {"command_line": list(spec.command_line), "source": source,
                                  "created": results.now()})
        (folder / files.SUMMARY).write_text(render.summary_markdown(doc, source))
        render.heatmap(folder / files.HEATMAP, doc)
        if not spec.json_out:
            print(f"# files: {folder}/ ({', '.join(files.FILES)})")
    return analysis.exit_code


def _span(steps: list[int]) -> str:
    return f"{steps[0]}-{steps[-1]}" if steps else "none"
