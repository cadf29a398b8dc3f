"""Threads and processes: one Plan shared by many threads, fork after use, the thread count's cap."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import fmmkit
from fmmkit import FmkValueError, Status
from conftest import REPO, direct, rel_l2


def test_one_plan_hammered_by_threads():
    """Threads share one plan, some calling set_points with point sets of very different sizes,
    others eval / eval_many / info / memory. Each evaluation must come back sized and valued for
    the points current when it ran: the lock covers sizing, the C call and the result (before, a
    set_points between sizing and the call made the library write past the outputs)."""
    rng = np.random.default_rng(7)
    sizes = (7, 900, 40, 1500)
    points = [rng.random((n, 3)) for n in sizes]
    charges = [rng.standard_normal(n) for n in sizes]
    refs = [direct("laplace", x, q) for x, q in zip(points, charges)]
    by_size = {n: k for k, n in enumerate(sizes)}
    plan = fmmkit.Plan(kernel="laplace", method="direct", backend="cpu", threads=1)
    plan.set_points(points[0])
    errors, checked = [], [0]
    stop = threading.Event()

    def setter(seed):
        r = np.random.default_rng(seed)
        while not stop.is_set():
            plan.set_points(points[r.integers(len(sizes))])

    def evaluator(seed):
        r = np.random.default_rng(seed)
        try:
            for it in range(150):
                k = int(r.integers(len(sizes)))
                many = it % 3 == 0
                try:
                    if many:
                        res = plan.eval_many(np.stack([charges[k], -charges[k]]))
                    else:
                        res = plan.eval(charges[k])
                except FmkValueError as e:  # the points changed to another size first
                    assert "charges must have shape" in e.message, e.message
                    continue
                pot = res.pot[0] if many else res.pot
                grad = res.grad[0] if many else res.grad
                assert by_size[len(pot)] == k and grad.shape == (sizes[k], 3)
                assert rel_l2(pot, refs[k][0]) < 1e-12 and rel_l2(grad, refs[k][1]) < 1e-12
                if many:
                    assert np.array_equal(res.pot[1], -res.pot[0])
                assert res.info.n_sources == sizes[k]
                plan.memory(sizes[k])
                checked[0] += 1
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    setters = [threading.Thread(target=setter, args=(s,)) for s in (1, 2)]
    evaluators = [threading.Thread(target=evaluator, args=(s,)) for s in (3, 4, 5, 6)]
    for t in setters + evaluators:
        t.start()
    for t in evaluators:
        t.join()
    stop.set()
    for t in setters:
        t.join()
    plan.close()
    assert not errors, errors[0]
    assert checked[0] > 0
