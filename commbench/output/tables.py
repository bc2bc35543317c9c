"""Text tables that fit the terminal without ever cutting a number.

As the width shrinks, a table first drops its low-value columns (each column says how early it
may go), and when even the essential ones do not fit, each row continues on a second line.
A cell wider than its column widens the line rather than losing digits. Live tables (rows
printed as they are measured) fix their widths up front from ``Column.width``.
"""

from __future__ import annotations

from dataclasses import dataclass

GAP = "  "


@dataclass(frozen=True)
class Column:
    name: str
    unit: str = ""  # a second header line: (us), (GB/s) ...
    width: int = 0  # at least this wide (live tables: wide enough for any value)
    drop: int = 0  # 0: essential; higher numbers go first when the width runs out
    left: bool = False


def _cell_width(column: Column, cells: list[str]) -> int:
    header = max(len(column.name), len(column.unit) + 2 if column.unit else 0)
    return max([column.width, header, *(len(c) for c in cells)])


def fit(columns: list[Column], rows: list[list[str]], width: int | None
        ) -> tuple[list[int], list[int]]:
    """Which columns to show (indices) and how wide, so that a line fits ``width``."""
    widths = [_cell_width(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    if width is None:
        return shown, widths

    def total(indices: list[int]) -> int:
        return sum(widths[i] for i in indices) + len(GAP) * (len(indices) - 1)

    for drop in sorted({c.drop for c in columns if c.drop}, reverse=True):
        if total(shown) <= width:
            break
        for index in sorted((i for i in shown if columns[i].drop == drop), reverse=True):
            if total(shown) <= width:
                break
            shown.remove(index)
    return shown, widths


def _line(cells: list[str], columns: list[Column], widths: list[int]) -> str:
    parts = [cell.ljust(w) if column.left else cell.rjust(w)
             for cell, column, w in zip(cells, columns, widths, strict=True)]
    return GAP.join(parts).rstrip()


def _rows_of(indices: list[int], widths: list[int], width: int | None) -> list[list[int]]:
    """Split the shown columns into lines that fit (one line unless even they do not)."""
    if width is None:
        return [indices]
    lines, current, used = [], [], 0
    for index in indices:
        need = widths[index] + (len(GAP) if current else 0)
        if current and used + need > width:
            lines.append(current)
            current, used = [], 0
            need = widths[index]
        current.append(index)
        used += need
    return [*lines, current] if current else lines


class Layout:
    """A fitted table: header lines, then one (or, wrapped, several) lines per row."""

    def __init__(self, columns: list[Column], rows: list[list[str]], width: int | None) -> None:
        self.columns = columns
        self.shown, self.widths = fit(columns, rows, width)
        self.parts = _rows_of(self.shown, self.widths, width)

    def _format(self, cells: list[str]) -> list[str]:
        lines = []
        for number, part in enumerate(self.parts):
            text = _line([cells[i] for i in part], [self.columns[i] for i in part],
                         [self.widths[i] for i in part])
            lines.append(("  " if number else "") + text)
        return lines

    def header(self) -> list[str]:
        names = self._format([c.name for c in self.columns])
        if not any(c.unit for c in self.columns):
            return names
        units = self._format([f"({c.unit})" if c.unit else "" for c in self.columns])
        # A wrapped part without units has no second header line (not a blank one).
        return [line for pair in zip(names, units, strict=True) for line in pair
                if line.strip()]

    def row(self, cells: list[str]) -> list[str]:
        return self._format(cells)


def render(columns: list[Column], rows: list[list[str]], width: int | None) -> list[str]:
    """A whole table at once: the header, then every row."""
    layout = Layout(columns, rows, width)
    lines = layout.header()
    for cells in rows:
        lines += layout.row(cells)
    return lines


def headers_of(columns: list[Column]) -> list[str]:
    """Column names with their units, for tables that show every column (Markdown, HTML)."""
    return [f"{c.name} ({c.unit})" if c.unit else c.name for c in columns]
