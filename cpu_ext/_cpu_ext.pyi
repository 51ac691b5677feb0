from typing import Any

ORDER_NAMES: dict[str, int]
KERNEL_NAMES: dict[str, int]
MAX_THREADS: int
KEY_DTYPE_NAMES: tuple[str, ...]
WEIGHT_DTYPE_NAMES: tuple[str, ...]
MAX_SEGMENT: int
MAX_HISTOGRAM_EDGES: int

def handler_capsule() -> Any: ...
def planned_threads(rows: int, m: int, threads: int, min_parallel: int) -> int: ...
def cumsum_handler_capsule() -> Any: ...
def histogram_handler_capsule() -> Any: ...
