"""The one-line reprs and Jupyter's HTML tables (_repr_html_) of Info, Result and Plan."""
import html.parser

import numpy as np

import fmmkit


class _Cells(html.parser.HTMLParser):
    """The text of a table's cells, and whether every tag opened was closed."""

    def __init__(self):
        super().__init__()
        self.text, self.open = [], []

    def handle_starttag(self, tag, attrs):
        self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open.pop() == tag, f"</{tag}> closes nothing"

    def handle_data(self, data):
        self.text.append(data)


def cells(markup):
    p = _Cells()
    p.feed(markup)
    p.close()
    assert p.open == [], f"unclosed tags {p.open}"
    assert markup.startswith("<table>") and markup.endswith("</table>")
    return " | ".join(p.text)


def points(n, dim, seed=3):
    rng = np.random.default_rng(seed)
    return rng.random((n, dim)), rng.random(n) - 0.5


def test_result_of_each_method():
    x, q = points(3000, 3)
    for method, words in (("direct", []), ("tree", ["theta", "walk"]),
                          ("fmm", ["order", "levels", "leaf size"])):
        r = fmmkit.laplace3d(x, q, method=method, eps=1e-3, threads=1)
        text = cells(r._repr_html_())
        assert "fmmkit.Result" in text and f"method | {method}" in text
        assert "numpy (3000,) float64" in text and "numpy (3000, 3) float64" in text
        assert "3,000 sources, 3,000 targets" in text and "eps | 0.001" in text
        assert "backend | cpu" in text or "backend | cuda" in text
        assert "time |" in text and "setup" in text and "total" in text
        for w in words:
            assert w in text, (method, w, text)
        assert ("settings" in text) == bool(words)
        line = repr(r.info)
        assert line.startswith("Info(laplace 3D, " + method) and "\n" not in line
        assert "eps=0.001" in line and "n_sources=3000" in line and len(line) < 200
        for w in words:
            assert w in line


def test_result_without_pot_and_complex():
    x, q = points(200, 2)
    r = fmmkit.cauchy2d(x, q + 1j * q, pot=False)
    text = cells(r._repr_html_())
    assert "pot | not requested" in text and "numpy (200,) complex128" in text
    assert "cauchy2d (2D)" in text


def test_plan_life_cycle():
    plan = fmmkit.Plan(kernel="plummer", softening=0.1, eps=1e-6, threads=1)
    text = cells(plan._repr_html_())
    assert "fmmkit.Plan" in text and "no points yet" in text and "plummer (3D)" in text
    x, q = points(500, 3)
    plan.set_points(x)
    text = cells(plan._repr_html_())
    assert "500 sources, 500 targets" in text and "setup" in text
    plan.eval(q)
    text = cells(plan._repr_html_())
    assert "interactions" in text and "total" in text
    assert cells(plan.info._repr_html_()).startswith("fmmkit.Info")
    plan.close()
    assert cells(plan._repr_html_()) == "fmmkit.Plan | state | closed"


def test_text_is_escaped():
    from fmmkit import _repr
    assert "&lt;b&gt;" in _repr.table("t", [("name", "<b>")])
