"""sim_torch.py -- the simulation driver against a leapfrog written by hand over fmmkit's plan API,
in the same process on the same GPU (issue 34's comparison).

    PYTHONPATH=python FMMKIT_LIBRARY=build/libfmmkit.so python3 bench/sim_torch.py \
        [--log2 20] [--steps 50] [--json]

The particles: fmk_sim_ic_plummer (Henon units, seed 1), Plummer softening 0.98 N^-0.26, dt 0.005,
the treecode at theta 0.6 in fp32 forces. Three loops take the same steps:

  driver        fmmkit.Simulation on torch device arrays (the state, kicks and drifts on the GPU
                inside the C driver), run(steps=K)
  torch         the kick-drift-kick loop in torch on the GPU: v += a dt/2; x += v dt;
                plan.set_points(x); a = plan.eval(q).grad; v += a dt/2 (fp64 state, q = G m)
  numpy         the same loop with numpy arrays (the plan copies the points to the GPU and the
                results back on each step)

Each loop takes 3 untimed steps, then K timed ones (torch.cuda.synchronize() around the timed
part). Printed: steps/s and ms a step, and the largest difference of the positions after the
steps between the driver and each hand-written loop (the same arithmetic in another order: a
rounding-level difference amplified by the chaos of K steps, not an error).
"""
import argparse
import json
import sys
import time

import numpy as np

import fmmkit


def plummer(n):
    sim = fmmkit.Simulation.plummer(n, seed=1, dt=0.005, backend="cuda", method="tree",
                                    precision="fp32", theta=0.6, softening=0.98 * n ** -0.26)
    st = sim.state()
    sim.close()
    return st.mass.copy(), st.pos.copy(), st.vel.copy()


def opts(n):
    return dict(kernel="plummer", method="tree", backend="cuda", precision="fp32", theta=0.6,
                softening=0.98 * n ** -0.26)


def hand_loop(xp, m, x, v, n, steps, sync):
    """The KDK leapfrog over the plan API with array module xp (torch on the GPU or numpy)."""
    dt = 0.005
    with fmmkit.Plan(**opts(n)) as plan:
        a = plan.set_points(x).eval(m, pot=False).grad
        t0 = None
        for s in range(steps + 3):
            if s == 3:
                sync()
                t0 = time.perf_counter()
            v += a * (0.5 * dt)
            x += v * dt
            a = plan.set_points(x).eval(m, pot=False).grad
            v += a * (0.5 * dt)
        sync()
        return time.perf_counter() - t0, x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log2", type=int, default=20)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-numpy", action="store_true")
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("sim_torch: no GPU", file=sys.stderr)
        return 1
    n, k = 1 << args.log2, args.steps
    m, x, v = plummer(n)
    dev = torch.device("cuda")
    sync = torch.cuda.synchronize
    rows = []

    # the driver, state on the device
    tm, tx, tv = (torch.tensor(a, dtype=torch.float64, device=dev) for a in (m, x, v))
    o = opts(n)
    sim = fmmkit.Simulation(tm, tx, tv, method="tree", backend="cuda", precision="fp32",
                            theta=0.6, softening=o["softening"], dt=0.005)
    sim.run(steps=3)
    sync()
    t0 = time.perf_counter()
    sim.run(steps=k)
    sync()
    wall = time.perf_counter() - t0
    x_driver = np.asarray(sim.state().pos)
    sim.close()
    rows.append(("driver (fmmkit.Simulation, torch arrays)", wall, None))

    # the hand-written torch loop
    wall, xt = hand_loop(torch, tm.clone(), tx.clone(), tv.clone(), n, k, sync)
    rows.append(("hand-written torch loop", wall, np.abs(xt.cpu().numpy() - x_driver).max()))

    if not args.skip_numpy:
        wall, xn = hand_loop(np, m.copy(), x.copy(), v.copy(), n, k, lambda: None)
        rows.append(("hand-written numpy loop", wall, np.abs(xn - x_driver).max()))

    name = torch.cuda.get_device_name(0)
    if args.json:
        print(json.dumps({"device": name, "n": n, "steps": k, "rows": [
            {"loop": r[0], "steps_per_s": k / r[1], "step_ms": 1e3 * r[1] / k,
             "max_dx_vs_driver": r[2]} for r in rows]}))
        return 0
    print(f"Leapfrog loops on {name}: Plummer N = {n:,}, tree theta 0.6 fp32, {k} timed steps")
    print(f"{'loop':44s} {'steps/s':>9s} {'step ms':>9s} {'max |dx| vs driver':>19s}")
    for label, wall, dx in rows:
        dxs = "-" if dx is None else f"{dx:.1e}"
        print(f"{label:44s} {k / wall:9.1f} {1e3 * wall / k:9.3f} {dxs:>19s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
