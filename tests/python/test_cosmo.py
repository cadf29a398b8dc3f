"""fmmkit.cosmology, fmmkit.cosmo_ic and comoving Simulations on the CPU: presets and overrides,
the initial conditions' sizes and determinism, a 2000-particle sphere from z = 49 (the redshift
falls, the Layzer-Irvine check holds, snapshot headers by h5py, listed output times landed on),
Simulation.cosmo and its energy reference (the unperturbed lattice, lpt 0), bad options."""
import dataclasses
import math
import os

import numpy as np
import pytest

import fmmkit
from fmmkit import FmkStateError, FmkUnavailableError, FmkValueError, Simulation

A0 = 1 / 50  # z = 49


def needs_fftw(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except FmkUnavailableError as e:
        pytest.skip(f"built without FFTW or HDF5: {e}")


def small_ic(seed=1, lpt=1):
    return needs_fftw(fmmkit.cosmo_ic, 2000, radius=20, z_start=49, seed=seed, lpt=lpt,
                      threads=1)


def comoving_sim(ic, steps=50, z_end=5, **options):
    dt = fmmkit.cosmology().comoving_dt(A0, 1 / (1 + z_end), steps, "loga")
    kw = dict(method="tree", theta=0.6, softening=0.2, backend="cpu", threads=1)
    if options.get("method", "tree") != "tree":
        del kw["theta"]
    kw.update(options)
    return Simulation(ic.mass, ic.pos, ic.vel, comoving=True, a_start=A0, dt=dt, spacing="loga",
                      **kw)


def test_presets_and_overrides():
    w = fmmkit.cosmology()
    assert w == fmmkit.cosmology("wmap")
    assert (w.omega_m, w.omega_lambda, w.omega_b, w.h, w.n_s, w.sigma_8, w.t_cmb) == \
        (0.3, 0.7, 0.04, 0.7, 1.0, 0.9, 2.7255)
    p = fmmkit.cosmology("planck18")
    assert (p.omega_m, p.omega_lambda, p.omega_b, p.h, p.n_s, p.sigma_8) == \
        (0.3111, 0.6889, 0.04897, 0.6766, 0.9665, 0.8102)
    q = fmmkit.cosmology("planck18", sigma_8=0.8, h=0.7)
    assert (q.sigma_8, q.h, q.omega_m) == (0.8, 0.7, 0.3111)
    assert fmmkit.cosmology(q, n_s=1) == dataclasses.replace(q, n_s=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.h = 0.5
    for name, kw in (("nope", {}), ("wmap", {"omega_m": math.nan}), ("wmap", {"h": -1}),
                     ("wmap", {"omega_b": 0.5}), ("wmap", {"hubble": 0.7}),
                     ("wmap", {"sigma_8": math.inf})):
        with pytest.raises(FmkValueError):
            fmmkit.cosmology(name, **kw)
    with pytest.raises(FmkValueError):
        fmmkit.cosmology(3)
    # the step that spans a0 to a1 in N steps: uniform in a is (a1 - a0) / N
    assert w.comoving_dt(0.1, 0.5, 8, "a") == pytest.approx(0.05, rel=1e-14)
    assert w.comoving_dt(0.1, 0.5, 8, "loga") == pytest.approx(math.log(5) / 8, rel=1e-14)


def test_cosmo_ic_sizes_and_determinism():
    count, mass, grid, box = fmmkit._cosmo.cosmo_ic_size(4000, radius=20)
    ic = needs_fftw(fmmkit.cosmo_ic, 4000, radius=20, threads=1)
    assert ic.n == count and abs(count - 4000) < 200
    assert ic.mass.shape == (count,) and ic.pos.shape == ic.vel.shape == (count, 3)
    assert (ic.grid, ic.box) == (grid, box) and np.all(ic.mass == mass)
    d = (4 * math.pi * 20 ** 3 / (3 * 4000)) ** (1 / 3)
    assert ic.spacing == pytest.approx(d, rel=1e-12) and ic.box >= 2 * 20 + 4 * d - 1e-9
    w = fmmkit.cosmology()  # every particle: rho_m d^3
    rho_m = 3 * (100 * w.h) ** 2 * w.omega_m / (8 * math.pi * 43.00917)
    assert mass == pytest.approx(rho_m * d ** 3, rel=1e-12)
    r = np.linalg.norm(ic.pos, axis=1)
    assert r.max() < 20 + d and np.all(np.isfinite(ic.vel)) and np.abs(ic.vel).max() > 0
    again = fmmkit.cosmo_ic(4000, radius=20, threads=1)
    assert all(np.array_equal(a, b) for a, b in zip(ic[:3], again[:3]))
    other = fmmkit.cosmo_ic(4000, radius=20, seed=2, threads=1)
    assert other.n == ic.n and not np.array_equal(other.pos, ic.pos)
    second = fmmkit.cosmo_ic(4000, radius=20, lpt=2, threads=1)  # 2LPT: a small correction
    shift = np.linalg.norm(second.pos - ic.pos, axis=1).max()
    assert 0 < shift < 0.1 * d
    mass_p, _, _, _ = fmmkit._cosmo.cosmo_ic_size(spacing=2.0, radius=20, cosmology="planck18")
    assert mass_p > 0
    for kw in ({"radius": -1}, {"lpt": 3}, {"z_start": 0}, {"n": 0}, {"spacing": -1},
               {"seed": -1}, {"cosmology": "nope"}):
        with pytest.raises(FmkValueError):
            fmmkit.cosmo_ic(**{"n": 100, "radius": 5, **kw})


def test_comoving_run(tmp_path):
    h5py = pytest.importorskip("h5py")
    ic = small_ic()
    with comoving_sim(ic) as sim:
        i0 = sim.info
        assert i0.comoving and i0.a == i0.time == A0 and i0.redshift == pytest.approx(49)
        assert i0.n == ic.n and i0.plan.method == "tree"
        out = str(tmp_path / "run")
        times = [0.05, 0.1, 0.125]
        try:
            sim.set_output(out, diag_every=10, png=True, times=times[::-1])  # sorted by the binding
        except FmkUnavailableError as e:
            pytest.skip(f"built without HDF5: {e}")
        sim.set_png(axis=1, width=64, extent=30)
        z = [i0.redshift]
        for _ in range(4):
            sim.run(steps=10)
            z.append(sim.info.redshift)
        sim.run(t_end=1 / 6)
        info = sim.info
        print(f"Layzer-Irvine error {info.layzer_irvine_error:.3e} at z = {info.redshift:.3f}, "
              f"K {info.kinetic:.4g}, W {info.potential:.4g}, C {info.layzer_irvine:.6g}")
        assert all(b < a for a, b in zip(z, z[1:]))
        # 50 steps uniform in ln a to z = 5, and the listed times' shortened steps
        assert 50 <= info.step <= 54 and info.time == 1 / 6 and z[-1] > info.redshift
        assert abs(info.layzer_irvine_error) < 1e-3  # measured 6.5e-5
        assert info.kinetic > i0.kinetic > 0 and info.interactions_total > 0
        sim.snapshot(tmp_path / "final.hdf5")
        final = sim.state()
        sim.restart(tmp_path / "final.h5")
    snaps = sorted(f for f in os.listdir(out) if f.endswith(".hdf5"))
    assert snaps == ["snapshot_000.hdf5", "snapshot_001.hdf5", "snapshot_002.hdf5"]
    assert sorted(f for f in os.listdir(out) if f.endswith(".png")) == \
        [s.replace("hdf5", "png") for s in snaps]
    for name, a in zip(snaps, times):
        with h5py.File(os.path.join(out, name), "r") as f:
            assert f["Header"].attrs["Time"] == a  # landed on exactly
            assert f["Header"].attrs["Redshift"] == pytest.approx(1 / a - 1, rel=1e-14)
    with h5py.File(tmp_path / "final.hdf5", "r") as f:
        h = f["Header"].attrs
        assert h["Time"] == info.time and h["Redshift"] == pytest.approx(5, abs=1e-9)
        assert (h["Omega0"], h["OmegaLambda"], h["HubbleParam"]) == (0.3, 0.7, 0.7)
        assert (h["UnitLength_in_cm"], h["UnitMass_in_g"], h["UnitVelocity_in_cm_per_s"]) == \
            (3.085678e24, 1.98841e43, 1e5)
        np.testing.assert_array_equal(f["PartType1/Coordinates"][:], final.pos)
        np.testing.assert_allclose(f["PartType1/Velocities"][:], final.vel / info.time ** 1.5,
                                   rtol=1e-14)
    with open(os.path.join(out, "diagnostics.csv")) as f:
        assert f.readline().startswith("step,a,z,")
    with Simulation.from_file(tmp_path / "final.h5") as again:  # a restart: comoving, found out
        assert again.info.comoving and again.a == info.time
        assert again.info.layzer_irvine == info.layzer_irvine


def test_newtonian_info_and_output_times(tmp_path):
    with Simulation.kepler(0.5, dt=0.01, method="direct") as sim:
        i = sim.info
        assert not i.comoving and i.a is None and sim.a is None
        assert (i.redshift, i.layzer_irvine, i.layzer_irvine_error) == (0, 0, 0)
        assert i.interactions_total == 2  # the initial forces: n (n - 1)
        with pytest.raises(FmkValueError):
            sim.set_output_times(z=[1, 0])
        try:
            sim.set_output(tmp_path, times=[0.105, 0.2])
        except FmkUnavailableError as e:
            pytest.skip(f"built without HDF5: {e}")
        sim.run(t_end=0.3)
        assert sim.info.interactions_total == 2 * (sim.info.step + 1)
    assert sorted(os.listdir(tmp_path)) == ["snapshot_000.hdf5", "snapshot_001.hdf5"]


def test_simulation_cosmo(monkeypatch):
    seen = []
    reference = Simulation._reference
    monkeypatch.setattr(Simulation, "_reference",
                        lambda self, args: (seen.append(args), reference(self, args)))
    with needs_fftw(Simulation.cosmo, 2000, radius=20, z_start=49, z_end=5, steps=20,
                    spacing="loga", theta=0.6, softening=0.2, threads=1, seed=3) as sim:
        i0 = sim.info
        assert i0.comoving and i0.time == A0 and sim.a_end == pytest.approx(1 / 6, rel=1e-15)
        assert i0.plan.method == "tree" and i0.plan.precision == "fp32"  # as the command does
        assert i0.dt == 0 and i0.n == fmmkit.cosmo_ic(2000, radius=20, seed=3).n
        assert seen == [dict(n=2000, radius=20, z_start=49.0, cosmology=fmmkit.cosmology(),
                             seed=3, threads=1)]
        sim.run()  # to a_end
        i = sim.info
        assert i.step == 20 and i.time == sim.a_end
        assert i.dt == pytest.approx(math.log(50 / 6) / 20, rel=1e-12)
        print(f"Simulation.cosmo: Layzer-Irvine error {i.layzer_irvine_error:.3e}")
        assert abs(i.layzer_irvine_error) < 0.05  # measured 3.9e-3 (fp32, 20 steps)
    with Simulation.cosmo(2000, radius=20, z_end=9, dt=0.01, spacing="a", precision="fp64",
                          method="direct", threads=1, cosmology="planck18") as sim:
        assert sim.info.plan.precision == "fp64" and sim.info.plan.method == "direct"
        sim.run(steps=2)
        assert sim.info.dt == pytest.approx(0.01, rel=1e-12)


def test_energy_reference():
    ic = small_ic(seed=3)
    lattice = fmmkit.cosmo_ic(2000, radius=20, seed=3, lpt=0, threads=1)
    assert lattice.n == ic.n and np.all(lattice.vel == 0) and np.all(lattice.mass == ic.mass)
    assert 0 < np.abs(ic.pos - lattice.pos).max() < lattice.spacing
    fp64 = dict(method="direct", precision="fp64")
    with comoving_sim(ic, **fp64) as plain:  # W against the uniform sphere (the default)
        w0, a0 = plain.info.potential, plain.info.time
        plain.run(steps=1)
        w1, a1 = plain.info.potential, plain.info.time
    # against the initial positions themselves: W1 = (U1 - U0) / a1 = w1 - a0 w0 / a1
    with comoving_sim(ic, **fp64) as sim:
        sim.set_energy_reference(ic.pos)
        sim.run(steps=1)
        assert sim.info.potential == pytest.approx(w1 - a0 * w0 / a1, abs=1e-9 * abs(w0))
        with pytest.raises(FmkValueError):
            sim.set_energy_reference(np.zeros((3, 3)))
        with pytest.raises(FmkStateError):  # after the first step
            sim.set_energy_reference(ic.pos)
    # Simulation.cosmo: against the lattice, the peculiar W of linear theory (W = -3/2 K in
    # Einstein-de Sitter), far below the lattice's own energy against the uniform sphere
    with Simulation.cosmo(2000, radius=20, z_end=5, steps=50, spacing="loga", softening=0.2,
                          threads=1, seed=3, **fp64) as sim:
        sim.run(steps=1)
        i = sim.info
        print(f"W against the lattice {i.potential:.4g}, against the uniform sphere {w1:.4g}; "
              f"K {i.kinetic:.4g}")
        assert i.potential < 0 and abs(i.potential) < 0.2 * abs(w1)  # measured -2.7e8, 1.0e10


def test_bad_options():
    ic = small_ic()
    m, x, v = ic[:3]
    bad = [dict(spacing="a"), dict(cosmology="wmap"), dict(a_start=0.1),  # without comoving
           dict(comoving=True, dt=1e-3),  # no a_start
           dict(comoving=True, a_start=A0, dt=1e-3, spacing="linear"),
           dict(comoving=True, a_start=A0, dt=1e-3, soft_mode="proper"),
           dict(comoving=True, a_start=A0, dt=1e-3, soft_max=0.1),  # needs soft_mode physical
           dict(comoving=True, a_start=A0, dt=1e-3, cosmology="nope"),
           dict(comoving=True, a_start=A0, dt=1e-3, adaptive=True, softening=0.1),
           dict(comoving=True, a_start=A0, dt=1e-3, G=1.5),
           dict(comoving=True, a_start=A0, dt=1e-3, soft_mode="physical", softening=0.1)]
    for kw in bad:
        with pytest.raises(FmkValueError):
            Simulation(m, x, v, **kw)
    for kw in (dict(z_end=49), dict(z_end=-1), dict(z_start=0), dict(steps=None),
               dict(dt=0.1), dict(a_start=0.1), dict(comoving=False), dict(spacing="bad")):
        with pytest.raises(FmkValueError):
            Simulation.cosmo(**{"n": 500, "radius": 10, "steps": 4, **kw})
    with comoving_sim(ic, steps=4) as sim:
        for call in (lambda: sim.set_png(axis=3), lambda: sim.set_png(width=4),
                     lambda: sim.set_png(extent=-1), lambda: sim.set_output_times([0.1, 0.1]),
                     lambda: sim.set_output_times([-0.1]), lambda: sim.set_output_times([[0.1]]),
                     lambda: sim.set_output_times(), lambda: sim.run()):
            with pytest.raises(FmkValueError):
                call()
        sim.set_output_times(z=[9, 19]).set_output_times([])  # cleared
