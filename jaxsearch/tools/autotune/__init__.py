"""The autotuner: the CPU sweeps (`cpu`), the GPU sweeps (`gpu`) and the
grids they run (`grid`); its command line is `jaxsearch.tools.cli.autotune`.
"""
