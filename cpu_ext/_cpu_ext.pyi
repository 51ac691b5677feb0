from typing import Any

ORDER_NAMES: dict[str, int]
KERNEL_NAMES: dict[str, int]

def handler_capsule() -> Any: ...
def ffi_api_version() -> tuple[int, int]: ...
