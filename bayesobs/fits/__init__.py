"""The fit wing: run tables, the fitting kernel, batched fits, observers, controls, posteriors."""
