"""Experiments of the cost-model paper (brief-costmodel §5) on the real engine."""
