"""How Info, Result and Plan show themselves: a one-line repr and, in Jupyter, a small HTML
table (_repr_html_) of method, backend, sizes, eps, the settings the method chose and the phase
times."""
from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from ._plan import Info, Plan, Result

Rows = List[Tuple[str, Any]]


def _seconds(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def _bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.3g} {unit}"
        b /= 1024
    raise AssertionError("not reached: the last unit returns")


def settings(info: Info) -> str:
    """The settings the method chose (what eps became), as text: order and levels (fmm), theta,
    walk and leaf size (tree)."""
    s = []
    if info.method == "fmm":
        s += [f"order {info.order}", f"{info.levels} levels"]
    if info.method == "tree":
        s += [f"theta {info.theta:g}", f"{info.walk} walk"]
    if info.method in ("fmm", "tree") and info.leaf_size > 0:
        s.append(f"leaf size {info.leaf_size}")
    return ", ".join(s)


def phase_times(info: Info) -> Tuple[List[Tuple[str, float]], float]:
    """(phase, seconds) for the phases that ran, and the total."""
    ran = [(k, t) for k, t in info.times.items() if t > 0]
    return ran, sum(t for _, t in ran)


def info_line(info: Info) -> str:
    """Info's repr: one line."""
    ran, total = phase_times(info)
    chosen = settings(info)
    return (f"Info({info.kernel} {info.dim}D, {info.method}/{info.backend} {info.precision}, "
            f"n_sources={info.n_sources}, n_targets={info.n_targets}, eps={info.eps:g}"
            + (f", {chosen}" if chosen else "") + f", time {_seconds(total)})")


def _rows(info: Info) -> Rows:
    rows: Rows = [("kernel", f"{info.kernel} ({info.dim}D)"), ("method", info.method),
            ("backend", info.backend), ("device", info.device_name or "-"),
            ("precision", info.precision),
            ("N", f"{info.n_sources:,} sources, {info.n_targets:,} targets"),
            ("eps", f"{info.eps:g}")]
    chosen = settings(info)
    if chosen:
        rows.append(("settings", chosen))
    if info.interactions_p2p or info.interactions_far:
        rows.append(("interactions", f"{info.interactions_p2p:,} direct, "
                                     f"{info.interactions_far:,} far"))
    memory = _bytes(info.bytes_host) + " host"
    if info.bytes_device:
        memory += ", " + _bytes(info.bytes_device) + " device"
    rows.append(("memory", memory))
    ran, total = phase_times(info)
    if ran:
        # "setup" is the last set_points, the other phases the last evaluation
        rows.append(("time", ", ".join(f"{k} {_seconds(t)}" for k, t in ran)
                     + f" (total {_seconds(total)})"))
    return rows


def table(title: str, rows: Sequence[Tuple[str, Any]]) -> str:
    """An HTML table of (name, value) rows under a bold title."""
    body = "".join(f"<tr><th style=\"text-align:left\">{escape(k)}</th>"
                   f"<td style=\"text-align:left\">{escape(str(v))}</td></tr>" for k, v in rows)
    return f"<table><caption><b>{escape(title)}</b></caption>{body}</table>"


def info_html(info: Info, title: str = "fmmkit.Info") -> str:
    return table(title, _rows(info))


def _array(a: Any) -> str:
    if a is None:
        return "not requested"
    return f"{type(a).__module__.split('.')[0]} {tuple(a.shape)} {a.dtype}"


def result_html(result: Result) -> str:
    rows = [("pot", _array(result.pot)), ("grad", _array(result.grad))]
    return table("fmmkit.Result", rows + _rows(result.info))


def plan_html(plan: Plan, info: Optional[Info], n_sources: Optional[int]) -> str:
    """info None: the plan is closed."""
    if info is None:
        return table("fmmkit.Plan", [("state", "closed")])
    rows = _rows(info)
    if n_sources is None:
        rows = [("N", "no points yet") if k == "N" else (k, v) for k, v in rows]
    return table("fmmkit.Plan" + (" (distributed)" if plan.distributed else ""), rows)
