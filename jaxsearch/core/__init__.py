"""The library: the public functions (`api`, `cumsum`, `digitize`,
`interp`, `histogram`, `sharded`), the primitives and their rules (`primitive`, `rows`,
`rules`, `partitioning`), the needles' order (`order`), the implementations
(`implementations`), and the CPU and GPU bindings of the kernels (`cpu`,
`gpu`). A search goes down that list and never back up: api -> primitive ->
rows -> cpu or gpu -> the kernels.

It reads the tuning layer (`jaxsearch.tuning`) and the kernels; it imports
no tool (`jaxsearch.tools`).
"""
