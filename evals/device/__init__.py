"""GPU evidence: scripts that profile suite problems on the device machine and turn the results into reports."""
