"""``python -m lakehouse`` and ``spark-submit .../lakehouse/__main__.py``: the command line."""

from lakehouse.cli import main

if __name__ == "__main__":
    main()
