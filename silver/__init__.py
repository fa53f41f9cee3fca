"""Silver layer: the per-key latest state of each entity, folded from bronze change records."""
