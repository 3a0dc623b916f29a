"""Benchmarks (`make bench`): not tests; they measure and print, and never pass or fail."""
