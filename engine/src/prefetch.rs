//! A hint to the processor: load a value's cache line now, so that a use
//! a little later does not wait for memory.

/// Asks the processor to bring the cache line of `item` into its caches;
/// changes nothing else.
#[inline(always)]
pub fn prefetch<T>(item: &T) {
    // SAFETY: a prefetch reads nothing the program sees and cannot fault;
    // the pointer comes from a reference, and SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (item as *const T).cast(),
        );
    }
}
