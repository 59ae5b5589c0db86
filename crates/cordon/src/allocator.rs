//! How the long-lived processes (`cordon serve`, `cordon worker`) use the C allocator.
//!
//! glibc serves an allocation of 128 KiB or more with its own `mmap` and returns it to the
//! system when it is freed — until one such block is freed: it then raises that threshold to
//! the block's size (up to 32 MiB), so every later block of that size comes from the heap and
//! stays with the process after it is freed. A server that parses a 4 MiB submission once
//! keeps tens of megabytes for the rest of its life (measured: 33 → 76 MiB after 50
//! submissions of 4 MiB; with a fixed threshold, 33 → 36 MiB: BENCHMARKS.md).
//! Setting the threshold explicitly turns that adjustment off.

/// Keeps glibc's `mmap` threshold at its default (128 KiB) for the life of the process.
pub(crate) fn return_large_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes the allocator's parameters; it is called before the
        // server starts its threads, and 128 KiB is glibc's own default threshold.
        let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) };
        if set != 1 {
            eprintln!("cordon: cannot fix the allocator's mmap threshold (mallopt failed)");
        }
    }
}
