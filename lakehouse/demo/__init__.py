"""The demo: the shop's workload (``generator``, ``shop``, ``producer``), its pipeline settings
(``settings``), an example scoring function (``custom_scores``) and the main job that runs it
through every layer (``job``). The product imports nothing of it (an import-linter contract)."""
