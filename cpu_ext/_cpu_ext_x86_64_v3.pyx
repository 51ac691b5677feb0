# _cpu_ext.pyx compiled for x86-64-v3 (AVX2, BMI2, FMA; meson.build's flags):
# the same source, a module of its own name, which jaxsearch/core/cpu.py
# imports in place of _cpu_ext where _cpu_ext.runs_x86_64_v3() says so.
include "_cpu_ext.pyx"
