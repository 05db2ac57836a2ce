"""Cost reports: the usage report every figure is read from (`usage`), what the staff page gathers (`staff`) and the
report pages (`views`)."""
