//! The process's freed heap, given back to the system. It owns nothing else.
//!
//! glibc's allocator keeps what a burst of allocations freed (a relist's objects, decoded,
//! indexed and dropped) in its arenas, where it still counts as the process's resident memory;
//! `malloc_trim` returns the free pages. Elsewhere (musl, other systems) this does nothing.

/// Returns the allocator's free memory to the system: after a burst that freed much, not on a
/// hot path (it walks every arena).
pub fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim releases only free memory of the allocator's own arenas; it reads
    // and changes no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}
