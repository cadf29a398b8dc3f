"""fmmkit.Simulation on the CPU: a Kepler orbit's energy, a short Plummer run, bad input, a
snapshot read back, a restart continued bit for bit, Ctrl-C after a whole step; the GPU version
(device arrays against numpy) is marked gpu."""
import math
import os
import signal
import threading

import numpy as np
import pytest

import fmmkit
from fmmkit import FmkStateError, FmkTypeError, FmkUnavailableError, FmkValueError, Simulation

PERIOD = 2 * math.pi  # Kepler: a = 1, total mass 1, G = 1


def needs_hdf5(fn, *args):
    try:
        return fn(*args)
    except FmkUnavailableError as e:
        pytest.skip(f"built without HDF5: {e}")


def test_kepler_energy_conserved():
    with Simulation.kepler(0.5, dt=PERIOD / 1000, method="direct") as sim:
        e0 = sim.energy()
        assert e0.total == pytest.approx(-0.125, abs=1e-12)
        assert e0.kinetic + e0.potential == pytest.approx(e0.total, abs=1e-15)
        sim.run(steps=2000)
        info = sim.info
        assert info.step == 2000 and info.time == pytest.approx(2 * PERIOD, abs=1e-9)
        assert info.method == "direct" and info.backend == "cpu" and info.n == 2
        assert abs((sim.energy().total - e0.total) / e0.total) < 1e-9
        s = sim.state()
        r = np.linalg.norm(s.pos[0] - s.pos[1])
        assert r == pytest.approx(1.5, abs=1e-6)  # back at apocentre: a (1 + e)
        sim.run(t_end=2.5 * PERIOD)  # by time: the last step lands on t_end
        assert sim.time == 2.5 * PERIOD


def test_plummer_short_run():
    with Simulation.plummer(512, seed=3, dt=0.01, softening=0.05, method="tree",
                            theta=0.5) as sim:
        s0 = sim.state()
        assert s0.mass.shape == (512,) and s0.pos.shape == (512, 3) and s0.acc.shape == (512, 3)
        assert s0.mass.sum() == pytest.approx(1.0)
        assert np.all(s0.pot > 0)
        e0 = sim.energy().total
        sim.run(steps=10)
        assert abs(sim.energy().total / e0 - 1) < 1e-3
        assert sim.info.plan.method == "tree"
        assert not np.array_equal(sim.state().pos, s0.pos)
        p = sim.info.momentum
        assert max(abs(c) for c in p) < 1e-5  # the tree: not exactly
    assert "closed" in repr(sim)
    with pytest.raises(FmkStateError):
        sim.step()


def test_same_seed_same_particles():
    a = Simulation.cold(100, seed=5, dt=0.01, softening=0.05).state()
    b = Simulation.cold(100, seed=5, dt=0.01, softening=0.05).state()
    c = Simulation.cold(100, seed=6, dt=0.01, softening=0.05).state()
    assert np.array_equal(a.pos, b.pos) and not np.array_equal(a.pos, c.pos)


def test_bad_input():
    m, x, v = np.full(4, 0.25), np.random.default_rng(1).random((4, 3)), np.zeros((4, 3))
    with pytest.raises(FmkValueError, match="dt"):
        Simulation(m, x, v)  # no dt
    with pytest.raises(FmkValueError):
        Simulation(m, x, v, dt=-1.0)
    bad = x.copy()
    bad[2, 1] = np.nan
    with pytest.raises(FmkValueError):
        Simulation(m, bad, v, dt=0.1)
    with pytest.raises(FmkValueError):
        Simulation(-m, x, v, dt=0.1)
    with pytest.raises(FmkValueError, match="shape"):
        Simulation(m, x[:, :2], v, dt=0.1)
    with pytest.raises(FmkTypeError):
        Simulation(m, x.astype(complex), v, dt=0.1)
    with pytest.raises(FmkValueError):
        Simulation(m, x, v, dt=0.1, method="magic")
    with pytest.raises(FmkValueError, match="precision"):
        Simulation(m, x, v, dt=0.1, precision="fp16")
    with pytest.raises(FmkValueError):
        Simulation.kepler(1.5, dt=0.1)
    with pytest.raises(FmkValueError):
        Simulation.plummer(0, dt=0.1)
    with Simulation(m, x, v, dt=0.1, softening=0.1) as sim:
        with pytest.raises(FmkValueError):
            sim.run()
        with pytest.raises(FmkValueError):
            sim.run(steps=-1)
        with pytest.raises(FmkValueError):
            sim.png("x.png", axis=3)
        with pytest.raises(FmkValueError):
            sim.set_output("out", snap_every=-1)
    with pytest.raises(FmkValueError):
        Simulation.from_file("/nonexistent/snapshot.hdf5")


def test_snapshot_read_back(tmp_path):
    sim = Simulation.plummer(300, seed=2, dt=0.01, softening=0.05, method="direct")
    sim.run(steps=3)
    needs_hdf5(sim.snapshot, tmp_path / "snap.hdf5")
    s = sim.state()
    with Simulation.from_file(tmp_path / "snap.hdf5", dt=0.01, softening=0.05,
                              method="direct") as back:
        t = back.state()
        assert np.array_equal(s.pos, t.pos) and np.array_equal(s.vel, t.vel)
        assert np.array_equal(s.mass, t.mass)
        assert back.time == sim.time and back.info.step == 0
    try:
        sim.png(tmp_path / "snap.png", axis=1, width=64)
        assert (tmp_path / "snap.png").read_bytes()[:4] == b"\x89PNG"
    except FmkUnavailableError:
        pass
    sim.set_output(tmp_path / "run", snap_every=2, diag_every=1)
    sim.run(steps=4)  # steps 3..7: snapshots at 4 and 6, a row at each
    names = sorted(os.listdir(tmp_path / "run"))
    assert names == ["diagnostics.csv", "snapshot_000.hdf5", "snapshot_001.hdf5"]
    rows = (tmp_path / "run" / "diagnostics.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in rows] == [3, 4, 5, 6, 7]
    sim.close()


def test_restart_bit_for_bit(tmp_path):
    opts = dict(dt=0.01, softening=0.05, method="tree", theta=0.5)
    full = Simulation.plummer(256, seed=4, **opts).run(steps=20)
    with Simulation.plummer(256, seed=4, **opts) as half:
        half.run(steps=10)
        needs_hdf5(half.restart, tmp_path / "r.h5")
    with Simulation.from_file(tmp_path / "r.h5") as cont:
        assert cont.info.step == 10
        cont.run(steps=10)
        a, b = full.state(), cont.state()
        for name in ("pos", "vel", "acc", "pot", "mass"):
            assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), name
        assert full.time == cont.time


def test_ctrl_c_stops_after_a_whole_step():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    sim = Simulation.kepler(0.5, dt=1e-4, method="direct")
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        sim.run(steps=10**9)
    timer.join()
    step = sim.info.step
    assert 0 < step < 10**9
    sim.run(steps=5)  # still usable
    assert sim.info.step == step + 5


@pytest.mark.gpu
def test_device_arrays_match_numpy():
    if fmmkit.cuda_device_count() == 0:
        pytest.skip("no CUDA device (or a CPU-only build of libfmmkit)")
    cupy = pytest.importorskip("cupy")
    ic = Simulation.plummer(2048, seed=7, dt=0.01, softening=0.02, method="direct",
                            backend="cuda").state()
    opts = dict(dt=0.01, softening=0.02, method="direct", backend="cuda")
    host = Simulation(ic.mass, ic.pos, ic.vel, **opts)
    dev = Simulation(cupy.asarray(ic.mass), cupy.asarray(ic.pos), cupy.asarray(ic.vel), **opts)
    host.run(steps=5)
    dev.run(steps=5)
    s = dev.state(device=True)
    assert isinstance(s.pos, cupy.ndarray) and s.pos.shape == (2048, 3)
    h = host.state()
    assert np.abs(cupy.asnumpy(s.pos) - h.pos).max() < 1e-12
    assert np.abs(cupy.asnumpy(s.vel) - h.vel).max() < 1e-12
    assert dev.energy().total == pytest.approx(host.energy().total, rel=1e-12)


def test_kepler_fourth_order_closes():
    """integrator="yoshida4": the e = 0.5 orbit closes to 1e-4 a after 10 periods at 1000 steps
    a period (the leapfrog's apse turn leaves it 2.25e-3 a away)."""
    out = {}
    for name in ("leapfrog", "yoshida4"):
        sim = fmmkit.Simulation.kepler(0.5, method="direct", backend="cpu", dt=2 * math.pi / 1000,
                                       integrator=name)
        x0 = sim.state().pos.copy()
        sim.run(steps=10000)
        x = sim.state().pos
        out[name] = np.linalg.norm((x[0] - x[1]) - (x0[0] - x0[1]))
        sim.close()
    assert out["yoshida4"] < 1e-4 < out["leapfrog"]
    with pytest.raises(fmmkit.FmkValueError):
        fmmkit.Simulation.kepler(0.5, dt=0.01, integrator="rk4")
