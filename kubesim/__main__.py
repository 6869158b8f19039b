"""`python -m kubesim --port PORT --kubeconfig PATH [--nodes FILE] [--authz rbac] [--tls] [--token-auth-file CSV] [--kueue] [--faults RATE --seed N]`: kubesim as a process.

Prints exactly one line `kubesim ready <url>` once it accepts requests; exits 0 on SIGINT/SIGTERM.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from kubesim.server import KubeSim


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubesim", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 = a free one)")
    parser.add_argument("--kubeconfig", required=True, help="where to write a kubeconfig for this server")
    parser.add_argument("--nodes", default=None, help="a nodes file (see kubesim/kubelet/nodes.py) instead of the defaults")
    parser.add_argument("--authz", choices=["none", "rbac"], default="none",
                        help="rbac: authenticate tokens and enforce RBAC (the kubeconfig written is the admin's)")
    parser.add_argument("--kueue", action="store_true", help="install Kueue's CRDs (kubesim/kueue simulates Kueue)")
    parser.add_argument("--tls", action="store_true",
                        help="serve HTTPS (self-signed, its certificate in the kubeconfig): kubectl sends the "
                             "kubeconfig's token only over TLS, so use it with --authz rbac")
    parser.add_argument("--token-auth-file", default=None,
                        help="people's bearer tokens, kube-apiserver's CSV format (token,user,uid[,\"groups\"])")
    parser.add_argument("--history", type=int, default=10000, help="watch events kept for resuming")
    parser.add_argument("--faults", type=float, default=0.0,
                        help="fraction of API requests that fail (500/503/429/reset/slow) and resumed watches"
                             " answered 410 Gone; watches are also cut every --cut-every seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --faults random draws")
    parser.add_argument("--cut-every", type=float, default=30.0, help="with --faults: cut open watches this often")
    args = parser.parse_args(argv)

    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        sim = KubeSim(nodes=args.nodes, history=args.history, port=args.port, authz=args.authz,
                      kueue=args.kueue, tls=args.tls).start()
        if args.token_auth_file:
            sim.access.load_token_auth_file(args.token_auth_file)
        if args.faults:
            try:
                sim.set_faults(args.faults, args.seed, cut_every=args.cut_every)
            except BaseException:
                sim.stop()
                raise
    except Exception as e:       # e.g. a bad --nodes file or a port in use: one clear line, exit 2
        cause = e.__cause__ or e
        print(f"kubesim: error: {type(cause).__name__}: {cause}", file=sys.stderr, flush=True)
        return 2
    try:
        sim.write_kubeconfig(args.kubeconfig)
        print(f"kubesim ready {sim.url}", flush=True)
        while not done.wait(0.5):
            pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
