"""``python -m lakehouse_demo``: the demo's command line (``demo``, ``generate``, ``produce``)."""

from lakehouse_demo.cli import main

if __name__ == "__main__":
    main()
