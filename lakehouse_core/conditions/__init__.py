"""Row expressions (conditions and computed columns): the checked grammar and its two evaluators.

* :mod:`~lakehouse_core.conditions.grammar`: parse the text and check it into a typed tree (its
  names are re-exported here);
* :mod:`~lakehouse_core.conditions.spark`: the Spark column of a checked tree (the jobs);
* :mod:`~lakehouse_core.conditions.python`: its value on a row, in plain Python (the reference
  models, the pattern matcher).
"""

from lakehouse_core.conditions.grammar import *  # noqa: F403
from lakehouse_core.conditions.grammar import __all__ as __all__
