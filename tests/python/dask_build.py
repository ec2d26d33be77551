"""Builds a pack in parts on a real Dask cluster, for test_merge.py (and by
hand: it prints how long each step took).

    <dask venv>/bin/python tests/python/dask_build.py SRC OUT [--parts N] [--workers W]

Starts a distributed.LocalCluster of W worker processes on loopback, runs
ufspack.build(SRC, OUT, parts=N, executor=client.get_executor()), and prints
key=value lines: parts, records, seconds, cluster_seconds, tasks (part
builds the scheduler ran) and workers (how many worker processes ran them).
"""

import argparse
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    import distributed

    import ufspack

    t0 = time.monotonic()
    with distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(args.workers, timeout=120)
        started = time.monotonic()
        with distributed.get_task_stream(client) as stream:
            s = ufspack.build(args.src, args.out, parts=args.parts, executor=client.get_executor(),
                              progress=False)
        seconds = time.monotonic() - started
        builds = [t for t in stream.data if "_build_part" in t["key"]]
        workers = {t["worker"] for t in builds}
    print(f"parts={s['parts']} records={s['records']} seconds={seconds:.3f} "
          f"cluster_seconds={time.monotonic() - t0:.3f} tasks={len(builds)} workers={len(workers)}")


if __name__ == "__main__":
    main()
