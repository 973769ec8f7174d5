"""Allow `python -m trustbench`."""

from trustbench.cli import main

main()
