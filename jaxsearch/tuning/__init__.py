"""Tuning: the kernels' thresholds and tile sizes, from the tuning caches
(`cache`, whose files `cache_io` reads and writes) and the CPU config
(`cpu_config`). The library reads them; this layer imports neither the
library nor the tools (the autotuner, which measures them, is a tool).
"""

from .cache import (
    DEFAULT_GPU_BISECT_RATIO,
    GPU_ROUTE_KERNEL,
    IMPLEMENTATION_KERNEL,
    SHIPPED_DIR,
    TUNING_DIR_ENV,
    cache_files,
    choose_cpu_kernel,
    cpu_config,
    device_kind,
    dtype_class,
    gpu_bisect_ratio,
    gpu_config,
    gpu_kernel_key,
    lookup,
    normalize_device_kind,
    resolve_cpu_config,
    tuned_gpu_config,
    tuned_gpu_implementation,
    user_cache_dir,
)
from .cache_io import (
    CACHE_VERSION,
    CPU_KERNEL,
    OP,
    CacheEntry,
    cache_file,
    load_entries,
    read_meta,
    write_cache,
)
from .cpu_config import (
    BUILT_IN_COUNT_KEYS,
    DEFAULT_CPU_CONFIG,
    MAX_THREADS,
    CpuConfig,
    built_in_cpu_config,
    cpu_config_from,
    cpu_config_override,
    use_cpu_config,
)

__all__ = [
    "BUILT_IN_COUNT_KEYS", "CACHE_VERSION", "CPU_KERNEL", "DEFAULT_CPU_CONFIG",
    "DEFAULT_GPU_BISECT_RATIO",
    "GPU_ROUTE_KERNEL", "IMPLEMENTATION_KERNEL", "MAX_THREADS",
    "OP", "SHIPPED_DIR", "TUNING_DIR_ENV", "CacheEntry", "CpuConfig", "built_in_cpu_config",
    "cache_file",
    "cache_files", "choose_cpu_kernel", "cpu_config", "cpu_config_from", "cpu_config_override",
    "device_kind", "dtype_class", "gpu_bisect_ratio", "gpu_config", "gpu_kernel_key",
    "load_entries", "lookup",
    "normalize_device_kind", "read_meta", "resolve_cpu_config", "tuned_gpu_config",
    "tuned_gpu_implementation", "use_cpu_config", "user_cache_dir", "write_cache",
]
