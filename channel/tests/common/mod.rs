//! Shared test helpers: a drop-counting message type.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Counts how many values were made and how many dropped.
#[derive(Default)]
pub struct Census {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Census {
    pub fn new() -> Arc<Self> {
        Arc::new(Census::default())
    }
    pub fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// A message that reports its drop to its census; dropping twice panics.
pub struct Counted<T> {
    pub value: T,
    census: Arc<Census>,
    alive: bool,
}

impl<T> Counted<T> {
    pub fn new(value: T, census: &Arc<Census>) -> Self {
        census.made.fetch_add(1, Ordering::SeqCst);
        Counted {
            value,
            census: census.clone(),
            alive: true,
        }
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        assert!(self.alive, "message dropped twice");
        self.alive = false;
        self.census.dropped.fetch_add(1, Ordering::SeqCst);
    }
}
