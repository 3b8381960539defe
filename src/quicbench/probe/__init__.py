"""Active probes of a lab path (paced UDP sequence probe)."""
