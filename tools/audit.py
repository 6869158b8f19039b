"""``make audit``: pip-audit over the pinned runtime requirements, reported honestly.

pip-audit prints "No known vulnerabilities found" even when it could look nothing up (every package skipped
as "Dependency not found", e.g. behind a mirror without PyPI's JSON API, or with the OSV service unreachable).
This wrapper reads its JSON report and says how many packages were really audited; it exits 0 only when every
pinned package was audited and none has a known vulnerability, 1 on findings, 2 when anything was not audited.
Not part of ``make test``: it needs the network.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = Path(__file__).parents[1] / "requirements.txt"


def main(argv: list[str]) -> int:
    requirements = argv[0] if argv else str(REQUIREMENTS)
    cmd = [sys.executable, "-m", "pip_audit", "--disable-pip", "--no-deps", "-r", requirements,
           "--format", "json", "--progress-spinner", "off", *argv[1:]]
    run = subprocess.run(cmd, capture_output=True, text=True)
    try:
        report = json.loads(run.stdout)
    except ValueError:
        last = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"pip-audit failed (exit {run.returncode}); nothing was audited: {last}")
        return 2
    deps = report.get("dependencies", [])
    skipped = [d for d in deps if d.get("skip_reason")]
    vulnerable = [d for d in deps if d.get("vulns")]
    audited = len(deps) - len(skipped)
    print(f"pip-audit ({requirements}): {audited} of {len(deps)} pinned packages audited, "
          f"{len(skipped)} NOT audited, {len(vulnerable)} with known vulnerabilities")
    for d in vulnerable:
        for v in d["vulns"]:
            print(f"  VULNERABLE {d['name']}=={d['version']}: {v['id']} (fixed in {', '.join(v.get('fix_versions') or ['?'])})")
    for d in skipped:
        print(f"  NOT AUDITED {d['name']}: {d['skip_reason']}")
    if vulnerable:
        return 1
    if skipped or not deps:
        print("RESULT: incomplete - the vulnerability data could not be fetched for every package; "
              "no claim is made about the packages not audited")
        return 2
    print("RESULT: every pinned package audited, no known vulnerabilities")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
