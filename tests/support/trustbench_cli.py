"""`python -m tests.support.trustbench_cli ...`: the trustbench CLI with the test tracks registered.

Used by subprocess tests (kill-and-resume) that need the echo track in a fresh process.
"""

import sys

from tests.support.echo_track import register

from trustbench.cli import main

if __name__ == "__main__":
    register()
    sys.argv[0] = "trustbench"
    main()
