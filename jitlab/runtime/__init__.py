"""Executors per level, memory pool, compile cache, dry run, profiling."""
