//! Mutexes that do not turn one thread's panic into every thread's panic.
//!
//! `lock().expect(..)` panics whenever another thread panicked while holding the lock, so
//! one failing stage took the HTTP listener, the metrics and the other stages down with
//! it, and the run's real cause was buried under the cascade. Every shared value behind a
//! lock here (the rolling context, the overlay's recent events, metrics, the reload slot,
//! the vision timeline) stays a valid value after a panic mid-update: at worst one update
//! is partial. The panicking thread is reported where it is joined
//! (`PipelineError::Panic`); everyone else goes on with the data as it is.
//! A leaf module: it imports nothing of the crate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

static POISON_LOGGED: AtomicBool = AtomicBool::new(false);

pub trait LockOrRecover<T: ?Sized> {
    /// The guard, also when a thread panicked while holding the lock (logged once per
    /// process as an error: it means a bug elsewhere).
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockOrRecover<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|poisoned| {
            if !POISON_LOGGED.swap(true, Ordering::Relaxed) {
                log::error!(
                    "a thread panicked while holding a lock; going on with the value it left (its own error is reported where it ends)"
                );
            }
            poisoned.into_inner()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_poisoned_lock_hands_back_the_value_instead_of_panicking() {
        let m = Arc::new(Mutex::new(vec![1, 2]));
        let m2 = Arc::clone(&m);
        let joined = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            g.push(3);
            panic!("a stage fails while holding the lock");
        })
        .join();
        assert!(joined.is_err());
        assert!(m.is_poisoned());
        assert_eq!(*m.lock_or_recover(), vec![1, 2, 3]);
        m.lock_or_recover().push(4);
        assert_eq!(m.lock_or_recover().len(), 4);
    }
}
