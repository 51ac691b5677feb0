from typing import Any

ORDER_NAMES: dict[str, int]
KERNEL_NAMES: dict[str, int]
MAX_THREADS: int
KEY_DTYPE_NAMES: tuple[str, ...]
WEIGHT_DTYPE_NAMES: tuple[str, ...]
MAX_SEGMENT: int
MAX_HISTOGRAM_EDGES: int
SHORT_ROW_NEEDLES: int
BUCKET_MIN_BYTES: int
BUCKET_KEYS_PER_NEEDLE: int

def handler_capsule() -> Any: ...
def runs_x86_64_v3() -> bool: ...
def planned_threads(rows: int, n: int, m: int, threads: int, min_parallel: int) -> int: ...
def cumsum_handler_capsule() -> Any: ...
def histogram_handler_capsule() -> Any: ...
