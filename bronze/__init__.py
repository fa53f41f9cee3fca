"""Bronze: append-only Delta tables holding every source record as it arrived."""
