//! A mutex that stays usable after a thread panicked holding it.
//!
//! Every shared table in chaos and its targets only grows or is replaced
//! whole (a history, a ledger, a session map), so what a panicking thread
//! left is still a state the next reader can use; refusing it would turn one
//! failed trial into a run that cannot report.

use std::sync::{Mutex, MutexGuard};

/// The guard of `mutex`, poisoned or not.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutex_poisoned_by_a_panic_still_locks_with_what_it_held() {
        let shared = std::sync::Arc::new(Mutex::new(vec![1]));
        let held = shared.clone();
        let panicked = std::thread::spawn(move || {
            let mut guard = held.lock().unwrap();
            guard.push(2);
            panic!("a trial failed while holding the table");
        })
        .join();
        assert!(panicked.is_err());
        assert!(shared.is_poisoned());
        assert_eq!(*lock(&shared), vec![1, 2]);
    }
}
