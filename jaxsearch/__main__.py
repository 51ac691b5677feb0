"""python -m jaxsearch: placeholder until the benchmark harness lands."""
