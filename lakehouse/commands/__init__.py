"""The command groups of the ``lakehouse`` command line, one module each.

``lakehouse.cli`` registers every command explicitly; :mod:`lakehouse.commands.common` holds
the options, console output and Spark start-up they share.
"""
